"""Prometheus metrics (the official ``prometheus_client``): a task run's, and the daemon's.

A run's metrics are read from its progress snapshots (:class:`RunMetrics` is a
:class:`wormhole.monitor.ProgressListener`): a scrape reports the latest snapshot, and the final
one, published after finalize, carries the result's counts, so the last scrape equals the task row.
The counts come from the engine's own counters, so they are exposed as a collector of the latest
values rather than incremented a second time here.

The daemon's (:class:`DaemonMetrics`) are ordinary counters and a gauge it updates as it claims,
starts and reaps tasks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from wormhole.monitor import ProgressSnapshot

RUN_STATES = ("pending", "running", "success", "partial", "failed", "interrupted")
DESTINATION_STATES = ("pending", "running", "done", "failed", "success", "rolled_back")
DEST_LABELS = ["task_id", "destination", "plugin"]


@dataclass(slots=True)
class MetricsServer:
    """The HTTP endpoint serving one registry's ``/metrics``."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(registry: CollectorRegistry, host: str, port: int) -> MetricsServer:
    """Serve ``registry`` on host:port (0: any free port); raises OSError when it cannot bind."""
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(server, thread)


def _states(name: str, doc: str, labels: list[str], values: list[str], current: str,
            states: tuple[str, ...]) -> GaugeMetricFamily:
    """One gauge per state, 1 for the current one (what prometheus_client's Enum exposes)."""
    family = GaugeMetricFamily(name, doc, labels=[*labels, "state"])
    for state in (*states, *([current] if current not in states else [])):
        family.add_metric([*values, state], 1.0 if state == current else 0.0)
    return family


class RunMetrics(Collector):
    """One task run's metrics, from its latest progress snapshot."""

    def __init__(self, task_id: int | None) -> None:
        self.task_id = task_id
        """None until the task is recorded (``run FILE`` binds its port first): nothing to report yet."""
        self.state = "pending"
        self._snapshot: ProgressSnapshot | None = None
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        self._snapshot = snapshot  # one reference swap: a scrape sees one whole snapshot
        self.state = snapshot.state

    def collect(self) -> Iterator[Metric]:
        if self.task_id is None:
            return
        task = str(self.task_id)
        yield _states("wormhole_run_state", "The run's state: 1 for the current one.", ["task_id"], [task],
                      self.state, RUN_STATES)
        snap = self._snapshot
        if snap is None:
            return
        read = CounterMetricFamily("wormhole_rows_read", "Rows read from the source.", labels=["task_id"])
        read.add_metric([task], snap.rows_read)
        yield read
        if snap.estimated_rows is not None:
            yield _gauge("wormhole_rows_estimated", "The source's estimate of its rows.", task, snap.estimated_rows)
        yield from self._destinations(snap, task)

    @staticmethod
    def _destinations(snap: ProgressSnapshot, task: str) -> Iterator[Metric]:
        written = CounterMetricFamily("wormhole_rows_written", "Rows written per destination.", labels=DEST_LABELS)
        rejected = CounterMetricFamily("wormhole_rows_rejected", "Rows rejected per destination.", labels=DEST_LABELS)
        nbytes = CounterMetricFamily("wormhole_bytes_written", "Bytes written per destination (estimated).",
                                     labels=DEST_LABELS)
        queued = GaugeMetricFamily("wormhole_queue_rows", "Rows waiting in a destination's queue.",
                                   labels=DEST_LABELS)
        fill = GaugeMetricFamily("wormhole_queue_fill_ratio", "A destination's queued rows over its queue's "
                                 "capacity.", labels=DEST_LABELS)
        for d in snap.destinations:
            labels = [task, d.id, d.plugin]
            written.add_metric(labels, d.written)
            rejected.add_metric(labels, d.rejected)
            nbytes.add_metric(labels, d.bytes)
            queued.add_metric(labels, d.queued_rows or 0)
            fill.add_metric(labels, d.queue_fill or 0.0)
            yield _states("wormhole_destination_state", "A destination's state: 1 for the current one.",
                          DEST_LABELS, labels, d.state, DESTINATION_STATES)
        yield from (written, rejected, nbytes, queued, fill)


def _gauge(name: str, doc: str, task: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["task_id"])
    family.add_metric([task], value)
    return family


class DaemonMetrics:
    """``wormhole daemon``'s own: tasks claimed, running, and finished by status."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.claimed = Counter("wormhole_daemon_tasks_claimed", "Tasks this daemon claimed.",
                               registry=self.registry)
        self.running = Gauge("wormhole_daemon_tasks_running", "Tasks running now.", registry=self.registry)
        self.finished = Counter("wormhole_daemon_tasks_finished", "Tasks whose process ended, by status.",
                                labelnames=["status"], registry=self.registry)


EXIT_STATUS = {0: "success", 201: "success", 202: "partial", 203: "failed", 204: "failed", 205: "not_run"}


def finished_status(exit_code: int, *, interrupted: bool) -> str:
    """A child's exit code as a task status (``crashed``: killed, or an exit code of no status)."""
    if interrupted and exit_code == 203:
        return "interrupted"
    return EXIT_STATUS.get(exit_code, "crashed")

"""MonitorManager: the polling loop over the read and write sides, and the progress lines.

The monitor knows the sides only through two small protocols (:class:`ReadSide`, :class:`WriteSide`),
so it drives the ReaderManager and WriterManager in local mode and a finished Spark read with its
destination jobs alike, without importing either. Counts come from :class:`wormhole.counters.Counters`.

Observers (a live display, a metrics endpoint) see the run through one seam: a :class:`ProgressListener`
gets a frozen :class:`ProgressSnapshot` about twice a second while the task runs and once more, marked
``final``, after the destinations were committed or rolled back, with the counts of the result.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from wormhole.config import MonitorConf
from wormhole.counters import Counters
from wormhole.errors import TaskAborted
from wormhole.log import Logger

ReadState = Literal["running", "done", "failed"]

PUBLISH_EVERY_S = 0.5
"""How often listeners get a snapshot (a live display wants more than the log's one line per 5 s)."""


@dataclass(frozen=True, slots=True)
class DestinationProgress:
    id: str
    plugin: str
    state: str
    """pending, running, done or failed while the task runs; the outcome (success, failed,
    rolled_back) in the final snapshot."""
    written: int
    rejected: int
    bytes: int
    rows_per_s: float
    """Rows written per second since the run started."""
    queued_rows: int | None = None
    """Rows waiting in the destination's queue (local mode, while it runs)."""
    queue_fill: float | None = None
    """``queued_rows`` over the queue's capacity (it may pass 1: the read array is not bounded)."""
    tasks_done: int | None = None
    tasks: int | None = None
    """Spark: tasks done and known of the destination's job."""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The execution's own keys, as the ``monitor.progress`` line carries them."""


@dataclass(frozen=True, slots=True)
class ProgressSnapshot:
    task_id: int
    source: str
    """The source's plugin."""
    state: str
    """``running``, then the run's status (success, partial, failed, interrupted) in the final one."""
    final: bool
    rows_read: int
    rows_per_s: float
    estimated_rows: int | None
    percent: float | None
    """Rows read of the estimate, when the source gave one (at most 100)."""
    eta_s: float | None
    elapsed_s: float
    destinations: tuple[DestinationProgress, ...]
    tables: Mapping[str, Any] | None = None
    """A database task: ``done`` and ``total`` tables and the tables ``in_flight`` (None for one table)."""


class ProgressListener(Protocol):
    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        """Called on the monitor's thread: return quickly, never block the run."""


@dataclass(frozen=True, slots=True)
class RunNames:
    """What names a run in its snapshots (the monitor sees destinations only by id)."""

    task_id: int = 0
    source: str = ""
    plugins: Mapping[str, str] = field(default_factory=dict)
    """Destination id -> plugin."""
    queue_rows: int | None = None
    """A destination queue's capacity in rows (local mode)."""


class ReadSide(Protocol):
    """What the monitor sees of the read side (the ReaderManager, or a Spark read already done)."""

    stop: threading.Event
    error: BaseException | None

    @property
    def rows_sent(self) -> int:
        """Rows sent to every destination so far."""

    def poll(self) -> ReadState: ...

    def close_input(self) -> None:
        """Every row is read: close the input of every destination's queue."""


class WriteSide(Protocol):
    """What the monitor sees of the write side (the WriterManager)."""

    def poll(self) -> None: ...

    def all_failed(self) -> bool: ...

    def all_finished(self) -> bool: ...

    def states(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class Watch:
    """What one watch needs besides the sides: the stop request and the checks made on every tick."""

    stop: threading.Event
    stop_reason: Callable[[], str | None]
    source_over_limit: Callable[[], str | None]
    progress: Callable[[str], dict[str, Any]]
    """Extra progress keys of a running destination (queued rows, Spark tasks done)."""


def _refused_by_every_queue(exc: BaseException | None) -> bool:
    """A reader stopped because every destination's queue was stopped: not a read failure. Each
    of those destinations is failing (a stopped queue always leads there), so keep polling."""
    return isinstance(exc, TaskAborted) and exc.reason == "no_destination"


class MonitorManager:
    def __init__(self, conf: MonitorConf, counters: Counters, log: Logger, *, names: RunNames | None = None,
                 listeners: Sequence[ProgressListener] = ()) -> None:
        self._conf = conf
        self._counters = counters
        self._log = log
        self._names = names or RunNames()
        self._listeners = list(listeners)
        self._next_publish = 0.0
        self._started = time.monotonic()
        # Set when a pool thread ends or a stop is requested, so the loop reacts at once instead of
        # finishing its sleep (that sleep was a fifth of a second on every short task).
        self.wake = threading.Event()

    def notify(self, *_: Any) -> None:
        self.wake.set()

    @property
    def elapsed_s(self) -> float:
        return round(time.monotonic() - self._started, 3)

    def watch(self, reads: ReadSide, writes: WriteSide, watch: Watch) -> str | None:
        """Poll both sides until the task is done; return why it must abort, or None.

        A finished read side closes the input of every queue; a failed destination is closed by
        the WriterManager so it never blocks the readers; when every destination has failed,
        reading stops.
        """
        checks = 0
        input_closed = False
        while True:
            if watch.stop.is_set():
                return watch.stop_reason() or "stopped"
            state = reads.poll()
            if state == "failed" and not writes.all_failed() and not _refused_by_every_queue(reads.error):
                return f"read side failed: {reads.error}"
            over = watch.source_over_limit()
            if over:
                return over
            writes.poll()
            if writes.all_failed():
                reads.stop.set()
                return None
            if state == "done" and not input_closed:
                reads.close_input()
                input_closed = True
                self._log.info("reader.finished", rows=self._counters.rows_read, elapsed_s=self.elapsed_s)
            if input_closed and writes.all_finished():
                return None
            checks += 1
            self._tick(checks, writes, watch.progress)
            self.wake.wait(self._conf.interval_s)
            self.wake.clear()

    def _tick(self, checks: int, writes: WriteSide, progress: Callable[[str], dict[str, Any]]) -> None:
        """The log line every ``report_every`` checks; a snapshot for the listeners when one is due."""
        if checks % self._conf.report_every == 0:
            self.report(writes, progress)
        elif self._listeners and time.monotonic() >= self._next_publish:
            self._publish(self.snapshot(writes.states(), progress))

    def report(self, writes: WriteSide, progress: Callable[[str], dict[str, Any]]) -> None:
        snap = self.snapshot(writes.states(), progress)
        destinations = {d.id: {"state": d.state, "written": d.written, "rejected": d.rejected, **d.extra}
                        for d in snap.destinations}
        self._log.info("monitor.progress", rows_read=snap.rows_read, rows_per_s=round(snap.rows_per_s),
                       estimated_rows=snap.estimated_rows, eta_s=snap.eta_s, elapsed_s=snap.elapsed_s,
                       destinations=destinations)
        self._publish(snap)

    def finish(self, outcomes: Mapping[str, str], status: str) -> None:
        """The final snapshot, after finalize: every destination's outcome and the result's counts."""
        if self._listeners:
            self._publish(self.snapshot(outcomes, lambda _: {}, final=status))

    def snapshot(self, states: Mapping[str, str], progress: Callable[[str], dict[str, Any]], *,
                 final: str | None = None) -> ProgressSnapshot:
        """The run now; ``progress`` adds the execution's keys of a running destination."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rows, estimated = self._counters.rows_read, self._counters.estimated_rows
        eta = round(max(estimated - rows, 0) / (rows / elapsed), 1) if estimated and rows else None
        percent = round(min(100.0, 100.0 * rows / estimated), 1) if estimated else None
        destinations = tuple(self._destination(dest_id, state, progress(dest_id) if state == "running" else {},
                                               elapsed) for dest_id, state in states.items())
        return ProgressSnapshot(task_id=self._names.task_id, source=self._names.source, state=final or "running",
                                final=final is not None, rows_read=rows, rows_per_s=rows / elapsed,
                                estimated_rows=estimated, percent=percent, eta_s=eta, elapsed_s=round(elapsed, 1),
                                destinations=destinations)

    def _destination(self, dest_id: str, state: str, extra: dict[str, Any], elapsed: float) -> DestinationProgress:
        totals = self._counters.totals(dest_id)
        written = int(extra.get("written", totals.written))  # Spark: its accumulators' count
        queued = extra.get("queued_rows")
        capacity = self._names.queue_rows
        return DestinationProgress(
            id=dest_id, plugin=self._names.plugins.get(dest_id, ""), state=state, written=written,
            rejected=totals.rejected, bytes=totals.bytes, rows_per_s=written / elapsed, queued_rows=queued,
            queue_fill=round(queued / capacity, 3) if queued is not None and capacity else None,
            tasks_done=extra.get("tasks_done"), tasks=extra.get("tasks"), extra=MappingProxyType(dict(extra)))

    def _publish(self, snapshot: ProgressSnapshot) -> None:
        self._next_publish = time.monotonic() + PUBLISH_EVERY_S
        for listener in list(self._listeners):
            try:
                listener.on_progress(snapshot)
            except Exception as exc:  # an observer's bug must not end the run: drop that observer
                self._listeners.remove(listener)
                self._log.warning("monitor.listener_failed", listener=type(listener).__name__, error=str(exc))

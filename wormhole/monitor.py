"""MonitorManager: per-thread counters, the polling loop over the pools, and the pure per-destination judge.

Each reader and writer thread owns one counters object and is its only writer, so counting takes
no lock; the monitor sums them (the original Wormhole's IPluginMonitor per thread). ``judge`` is a
pure function so the threshold rules are tested without threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wormhole.config import ErrorLimit, MonitorConf
from wormhole.errors import TaskAborted

if TYPE_CHECKING:
    from wormhole.exchange.storage import StorageManager
    from wormhole.reader_manager import ReaderManager
    from wormhole.writer_manager import WriterManager


@dataclass(slots=True)
class ReaderCounters:
    rows: int = 0
    splits: int = 0


@dataclass(slots=True)
class WriterCounters:
    delivered: int = 0
    written: int = 0
    rejected: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class DestinationTotals:
    delivered: int
    written: int
    rejected: int
    bytes: int


def judge(*, rows_sent: int, rows_queued: int, totals: DestinationTotals, limit: ErrorLimit) -> str | None:
    """Why a destination whose writers all finished cleanly must still fail, or None if it succeeded.

    ``rows_sent`` is what the readers sent to every destination, ``rows_queued`` what this
    destination's storage accepted. Every row must be accounted for: queued = delivered =
    written + rejected, and rejected within the record and percentage limits.
    """
    if rows_queued != rows_sent:
        return f"{rows_sent - rows_queued} of {rows_sent} rows sent never reached the destination's queue"
    if totals.delivered != rows_queued:
        return f"{rows_queued - totals.delivered} of {rows_queued} queued rows were never delivered to a writer"
    if totals.written + totals.rejected != totals.delivered:
        return (f"row accounting mismatch: delivered {totals.delivered}, written {totals.written}, "
                f"rejected {totals.rejected}")
    if limit.record is not None and totals.rejected > limit.record:
        return f"{totals.rejected} rejected rows exceed the record limit of {limit.record}"
    if limit.percentage is not None and totals.delivered:
        share = totals.rejected / totals.delivered
        if share > limit.percentage:
            return (f"{totals.rejected} rejected rows are {share:.4%} of {totals.delivered}, over the "
                    f"percentage limit of {limit.percentage:.4%}")
    return None


def _refused_by_every_queue(exc: BaseException | None) -> bool:
    """A reader stopped because every destination's queue was stopped: not a read failure. Each
    of those destinations is failing (a stopped queue always leads there), so keep polling."""
    return isinstance(exc, TaskAborted) and exc.reason == "no_destination"


class MonitorManager:
    def __init__(self, conf: MonitorConf, log: Any) -> None:
        self._conf = conf
        self._log = log
        self.reader_monitors: list[ReaderCounters] = []
        self.writer_monitors: dict[str, list[WriterCounters]] = {}
        self.estimated_rows: int | None = None
        self._started = time.monotonic()
        # Set when a pool thread ends or a stop is requested, so the loop reacts at once instead of
        # finishing its sleep (that sleep was a fifth of a second on every short task).
        self.wake = threading.Event()

    def notify(self, *_: Any) -> None:
        self.wake.set()

    def new_reader_monitor(self) -> ReaderCounters:
        counters = ReaderCounters()
        self.reader_monitors.append(counters)
        return counters

    def new_writer_monitor(self, destination: str) -> WriterCounters:
        counters = WriterCounters()
        self.writer_monitors.setdefault(destination, []).append(counters)
        return counters

    @property
    def rows_read(self) -> int:
        return sum(c.rows for c in self.reader_monitors)

    def writer_totals(self, destination: str) -> DestinationTotals:
        monitors = self.writer_monitors.get(destination, [])
        return DestinationTotals(
            delivered=sum(c.delivered for c in monitors),
            written=sum(c.written for c in monitors),
            rejected=sum(c.rejected for c in monitors),
            bytes=sum(c.bytes for c in monitors),
        )

    def watch(self, readers: ReaderManager, writers: WriterManager, storage: StorageManager,
              stop: threading.Event, stop_reason: Callable[[], str | None],
              source_over_limit: Callable[[], str | None]) -> str | None:
        """Poll the pools until the task is done; return why it must abort, or None.

        A finished read side closes the input of every queue; a failed destination is closed by
        the WriterManager so it never blocks the readers; when every destination has failed,
        reading stops.
        """
        checks = 0
        input_closed = False
        while True:
            if stop.is_set():
                return stop_reason() or "stopped"
            state = readers.poll()
            if state == "failed" and not writers.all_failed() and not _refused_by_every_queue(readers.error):
                return f"read side failed: {readers.error}"
            over = source_over_limit()
            if over:
                return over
            writers.poll()
            if writers.all_failed():
                readers.stop.set()
                return None
            if state == "done" and not input_closed:
                storage.close_input()
                input_closed = True
                self._log.info("reader.finished", rows=self.rows_read, elapsed_s=self.elapsed_s)
            if input_closed and writers.all_finished():
                return None
            checks += 1
            if checks % self._conf.report_every == 0:
                self.report(writers, storage)
            self.wake.wait(self._conf.interval_s)
            self.wake.clear()

    def watch_writers(self, writers: WriterManager, stop: threading.Event, stop_reason: Callable[[], str | None],
                      progress: Callable[[str], dict[str, Any]]) -> str | None:
        """Spark mode: the source is already read; poll the destinations' jobs until all are done.

        ``progress(destination)`` adds what the Spark status tracker knows to the progress line.
        """
        checks = 0
        while True:
            if stop.is_set():
                return stop_reason() or "stopped"
            writers.poll()
            if writers.all_finished():
                return None
            checks += 1
            if checks % self._conf.report_every == 0:
                elapsed = max(time.monotonic() - self._started, 1e-9)
                destinations = {}
                for dest_id, run in writers.destinations.items():
                    totals = self.writer_totals(dest_id)
                    destinations[dest_id] = {"state": run.state, "written": totals.written,
                                             "rejected": totals.rejected,
                                             **(progress(dest_id) if run.state == "running" else {})}
                self._log.info("monitor.progress", rows_read=self.rows_read, elapsed_s=round(elapsed, 1),
                               destinations=destinations)
            self.wake.wait(self._conf.interval_s)
            self.wake.clear()

    @property
    def elapsed_s(self) -> float:
        return round(time.monotonic() - self._started, 3)

    def report(self, writers: WriterManager, storage: StorageManager) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rows = self.rows_read
        eta = None
        if self.estimated_rows and rows:
            eta = round(max(self.estimated_rows - rows, 0) / (rows / elapsed), 1)
        destinations = {}
        for dest_id, run in writers.destinations.items():
            totals = self.writer_totals(dest_id)
            destinations[dest_id] = {"state": run.state, "written": totals.written, "rejected": totals.rejected,
                                     "queued_rows": len(storage.for_writer(dest_id).queue)}
        self._log.info("monitor.progress", rows_read=rows, rows_per_s=round(rows / elapsed),
                       estimated_rows=self.estimated_rows, eta_s=eta, elapsed_s=round(elapsed, 1),
                       destinations=destinations)

"""MonitorManager: the polling loop over the read and write sides, and the progress lines.

The monitor knows the sides only through two small protocols (:class:`ReadSide`, :class:`WriteSide`),
so it drives the ReaderManager and WriterManager in local mode and a finished Spark read with its
destination jobs alike, without importing either. Counts come from :class:`wormhole.counters.Counters`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from wormhole.config import MonitorConf
from wormhole.counters import Counters
from wormhole.errors import TaskAborted
from wormhole.log import Logger

ReadState = Literal["running", "done", "failed"]


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
    def __init__(self, conf: MonitorConf, counters: Counters, log: Logger) -> None:
        self._conf = conf
        self._counters = counters
        self._log = log
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
            if checks % self._conf.report_every == 0:
                self.report(writes, watch.progress)
            self.wake.wait(self._conf.interval_s)
            self.wake.clear()

    def report(self, writes: WriteSide, progress: Callable[[str], dict[str, Any]]) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rows, estimated = self._counters.rows_read, self._counters.estimated_rows
        eta = round(max(estimated - rows, 0) / (rows / elapsed), 1) if estimated and rows else None
        destinations = {}
        for dest_id, state in writes.states().items():
            totals = self._counters.totals(dest_id)
            destinations[dest_id] = {"state": state, "written": totals.written, "rejected": totals.rejected,
                                     **(progress(dest_id) if state == "running" else {})}
        self._log.info("monitor.progress", rows_read=rows, rows_per_s=round(rows / elapsed),
                       estimated_rows=estimated, eta_s=eta, elapsed_s=round(elapsed, 1),
                       destinations=destinations)

"""The task-wide speed limits (``settings.speed.record`` and ``settings.speed.byte``), enforced.

DataX's ``job.setting.speed.byte/record`` only picks a channel count; here they are limits. One
:class:`Throttle` holds them for the whole task and every reader asks it before handing a batch on:
the reader threads of local mode directly, Spark's executors through the driver's token server
(:mod:`wormhole.spark.throttle`), so the limit holds whatever the channel and destination counts.

Each limit keeps a virtual clock: the moment the rows (or bytes) granted so far have been paid for.
A batch moves the clock on by its cost (``rows / limit``) and waits until the clock's new time: it
pays up front, the first batch included, so n batches take at least ``total / limit`` seconds and a
reader faster than the limit is measured at the limit. The clock never lags "now" by more than the
batch's own cost, so a reader that paused gets back at most one batch of credit, while a reader
whose batches take a little time to read loses nothing to that time. Of the record and byte waits
the larger one counts, as in DataX's ``Channel.statPush``. The wait is computed under a lock and
slept outside it, on the task's stop signal, so a stop ends it at once and no reader blocks another
while it sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from wormhole.result import SpeedResult

if TYPE_CHECKING:
    from wormhole.task_spec import SpeedSpec


@dataclass(frozen=True, slots=True)
class ReadMeasure:
    """What the read side moved and how long it took, from its first batch to the end of its last
    batch's wait (``bytes`` is None where nothing estimated them: Spark mode without a limit)."""

    rows: int = 0
    bytes: int | None = 0
    seconds: float = 0.0
    waited_s: float = 0.0

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.seconds if self.seconds > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        return self.bytes / self.seconds if self.seconds > 0 and self.bytes is not None else None

    def result(self, speed: SpeedSpec) -> SpeedResult:
        """The result's ``speed`` object: the limits the task set and the rate measured."""
        rows_per_s, bytes_per_s = self.rows_per_s, self.bytes_per_s
        return SpeedResult(
            record_limit=speed.record, byte_limit=speed.byte, rows=self.rows, bytes=self.bytes,
            seconds=round(self.seconds, 3), rows_per_s=round(rows_per_s, 1) if rows_per_s is not None else None,
            bytes_per_s=round(bytes_per_s, 1) if bytes_per_s is not None else None, waited_s=round(self.waited_s, 3))


class Sent(Protocol):
    """One reader's tally (``BufferedLineExchanger``): rows and estimated bytes it sent, and the
    monotonic times of its first batch and of the end of its last batch's wait (None: no batch)."""

    @property
    def rows_sent(self) -> int: ...
    @property
    def bytes_sent(self) -> int: ...
    @property
    def first_at(self) -> float | None: ...
    @property
    def last_at(self) -> float | None: ...


def measure_senders(senders: Iterable[Sent], throttle: Throttle | None) -> ReadMeasure:
    """The read side of local mode, from its readers' own tallies (kept without a lock, so a task
    without limits pays nothing for being measured) and the throttle's waits."""
    tallies = list(senders)
    firsts = [s.first_at for s in tallies if s.first_at is not None]
    lasts = [s.last_at for s in tallies if s.last_at is not None]
    seconds = max(lasts) - min(firsts) if firsts and lasts else 0.0
    return ReadMeasure(rows=sum(s.rows_sent for s in tallies), bytes=sum(s.bytes_sent for s in tallies),
                       seconds=max(seconds, 0.0), waited_s=throttle.waited_s if throttle is not None else 0.0)


class Throttle:
    """The task's record and byte limits, shared by every reader of the task (thread-safe)."""

    def __init__(self, record: int | None = None, byte: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if record is None and byte is None:
            raise ValueError("a Throttle needs a record or a byte limit")
        if (record is not None and record <= 0) or (byte is not None and byte <= 0):
            raise ValueError("speed limits must be positive")
        self.record = record
        self.byte = byte
        self._clock = clock
        self._lock = threading.Lock()
        self._record_at: float | None = None  # the virtual clocks; None until the first batch
        self._byte_at: float | None = None
        self._rows = 0
        self._bytes = 0
        self._first: float | None = None
        self._last: float | None = None
        self._waited = 0.0

    @classmethod
    def of(cls, speed: SpeedSpec) -> Throttle | None:
        """The task's throttle, or None when it sets no limit (then nothing is paced at all)."""
        if speed.record is None and speed.byte is None:
            return None
        return cls(record=speed.record, byte=speed.byte)

    def batch_rows(self, rows: int) -> int:
        """Rows a batch may hold under the limits: at most one second of the record limit (a batch waits
        its whole cost at once, so larger ones would pace in steps of many seconds)."""
        return min(rows, max(self.record, 1)) if self.record else rows

    def batch_bytes(self, nbytes: int) -> int:
        """Bytes a batch may hold: at most one second of the byte limit."""
        return min(nbytes, max(self.byte, 1)) if self.byte else nbytes

    def acquire(self, rows: int, nbytes: int, stop: threading.Event) -> float:
        """Wait until ``rows`` rows of ``nbytes`` (estimated) bytes may move; returns the wait asked.

        A set ``stop`` ends the wait at once (the caller checks it afterwards)."""
        with self._lock:
            now = self._clock()
            if self._first is None:
                self._first = self._record_at = self._byte_at = now
            wait = 0.0
            if self.record is not None:
                self._record_at = _advance(self._record_at, now, rows / self.record)
                wait = self._record_at - now
            if self.byte is not None:
                self._byte_at = _advance(self._byte_at, now, nbytes / self.byte)
                wait = max(wait, self._byte_at - now)
            self._rows += rows
            self._bytes += nbytes
            if wait <= 0:
                self._last = now if self._last is None else max(self._last, now)
                return 0.0
        stop.wait(wait)  # outside the lock: the other readers compute their own waits meanwhile
        with self._lock:
            end = self._clock()
            self._waited += end - now
            self._last = end if self._last is None else max(self._last, end)
        return wait

    @property
    def waited_s(self) -> float:
        """Seconds the readers spent waiting, summed over them (several channels wait at once)."""
        with self._lock:
            return self._waited

    def measure(self) -> ReadMeasure:
        """Rows and bytes granted, from the first acquire to the end of the last wait."""
        with self._lock:
            seconds = self._last - self._first if self._first is not None and self._last is not None else 0.0
            return ReadMeasure(rows=self._rows, bytes=self._bytes, seconds=max(seconds, 0.0), waited_s=self._waited)


def _advance(at: float | None, now: float, cost: float) -> float:
    """A virtual clock moved on by ``cost`` seconds; it lags ``now`` by at most that cost (one
    batch of credit after a pause, so reading a batch never counts against the limit)."""
    start = now if at is None else max(at, now - cost)
    return start + cost

"""DoubleQueue: the bounded two-array buffer between reader threads and one destination's writers.

Producers append to the write array under the write lock; consumers drain the read array under
the read lock; when the read array is empty a consumer takes the write lock and swaps the arrays,
once the write array holds ``spill_rows`` rows or input is closed. Items are whole batches, so a
lock is taken per batch, never per row. The write side is bounded by rows and by bytes, which is
how a slow destination back-pressures the readers.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Literal

from wormhole.plugins.batch import Batch


@dataclass(frozen=True, slots=True)
class Parcel:
    """A batch as queued, with its size and split: the same object is queued for every destination (no
    per-destination copy)."""

    rows: Batch
    nbytes: int
    split_id: str | None = None
    """The split the rows come from (destinations whose writers make splits durable need it)."""
    control: Literal["end", "abort"] | None = None
    """A control item of ``split_id`` (no rows): the split was read whole ("end"), or its read
    failed and its rows must be discarded ("abort")."""
    reason: str | None = None
    """Why an "abort" came (the read's error)."""

    def __len__(self) -> int:
        return len(self.rows)


def control(split_id: str, kind: Literal["end", "abort"], reason: str | None = None) -> Parcel:
    return Parcel(Batch.empty(), 0, split_id, kind, reason)


class QueueClosed(Exception):
    """Raised by ``pull`` when the queue is drained and closed for input, or aborted."""


class DoubleQueue:
    """Bounded double buffer of batches.

    ``push`` returns False when the batch was not accepted (timeout, or the queue aborted);
    ``pull`` returns a batch, None on timeout, and raises ``QueueClosed`` at end of stream.
    ``close_input()`` ends the stream after what is queued; ``close()`` aborts: queued batches
    are dropped and every waiter wakes at once.
    """

    def __init__(self, capacity_rows: int, capacity_bytes: int, spill_rows: int) -> None:
        self.capacity_rows = capacity_rows
        self.capacity_bytes = capacity_bytes
        self.spill_rows = min(spill_rows, capacity_rows)
        self._write: list[Parcel] = []
        self._write_rows = 0
        self._write_bytes = 0
        self._read: deque[Parcel] = deque()
        self._write_lock = threading.Lock()
        self._not_full = threading.Condition(self._write_lock)
        self._awake = threading.Condition(self._write_lock)
        self._read_lock = threading.Lock()
        self._input_closed = False
        self._closed = False
        self._urgent = False
        """A control item waits in the write array, or a producer waits for room (the write array is full
        by bytes before it holds spill_rows rows): consumers swap without waiting for spill_rows."""
        # Counters; each is written under one lock and read without it (ints are atomic to read).
        self.rows_in = 0
        self.bytes_in = 0
        self.batches_in = 0
        self.rows_out = 0
        self.bytes_out = 0
        self.batches_out = 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def input_closed(self) -> bool:
        return self._input_closed

    def __len__(self) -> int:
        """Rows queued (both arrays); approximate while threads run."""
        return self._write_rows + sum(len(b) for b in list(self._read))

    def _full(self, batch: Parcel) -> bool:
        # An empty write array always admits one batch, so an oversized batch cannot deadlock.
        if not self._write:
            return False
        return (self._write_rows + len(batch) > self.capacity_rows
                or self._write_bytes + batch.nbytes > self.capacity_bytes)

    def push(self, batch: Parcel, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._write_lock:
            while not self._closed and not self._input_closed and self._full(batch):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                # Full with fewer than spill_rows rows (wide rows): a consumer waiting for rows would
                # never swap, and this push would never get in. Ask for the swap.
                self._urgent = True
                self._awake.notify_all()
                self._not_full.wait(remaining)
            if self._closed or self._input_closed:
                return False
            self._write.append(batch)
            self._write_rows += len(batch)
            self._write_bytes += batch.nbytes
            self.rows_in += len(batch)
            self.bytes_in += batch.nbytes
            self.batches_in += 1
            if batch.control is not None:
                self._urgent = True
            if self._write_rows >= self.spill_rows or self._urgent:
                self._awake.notify_all()
            return True

    def pull(self, timeout: float | None = None) -> Parcel | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        acquired = self._read_lock.acquire(timeout=-1 if timeout is None else max(timeout, 0))
        if not acquired:
            return None
        try:
            if self._closed:
                raise QueueClosed
            if not self._read:
                if not self._switch(deadline):
                    return None
            batch = self._read.popleft()
            self.rows_out += len(batch)
            self.bytes_out += batch.nbytes
            self.batches_out += 1
            return batch
        finally:
            self._read_lock.release()

    def _switch(self, deadline: float | None) -> bool:
        """Swap the arrays (caller holds the read lock); False on timeout."""
        with self._write_lock:
            while True:
                if self._closed:
                    raise QueueClosed
                if self._write and (self._write_rows >= self.spill_rows or self._input_closed or self._urgent):
                    self._read.extend(self._write)
                    self._urgent = False
                    self._write = []
                    self._write_rows = 0
                    self._write_bytes = 0
                    self._not_full.notify_all()
                    return True
                if self._input_closed:
                    raise QueueClosed
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._awake.wait(remaining)

    def close_input(self) -> None:
        """No more pushes; consumers drain what is queued, then see end of stream."""
        with self._write_lock:
            self._input_closed = True
            self._awake.notify_all()
            self._not_full.notify_all()

    def close(self) -> None:
        """Abort: drop queued batches and wake every waiter; pushes are refused from now on."""
        with self._write_lock:
            self._closed = True
            self._write = []
            self._write_rows = 0
            self._write_bytes = 0
            self._awake.notify_all()
            self._not_full.notify_all()
        # A consumer waiting in _switch holds the read lock; it wakes, sees _closed and leaves.
        with self._read_lock:
            self._read.clear()

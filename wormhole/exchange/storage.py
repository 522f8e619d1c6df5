"""RAMStorage and StorageManager: one bounded in-memory queue per destination, with its counters.

A RAMStorage that has failed (its destination broke, or stopped taking batches for
``push_timeout_s``) refuses and counts whatever is sent to it, so it can never stall the readers
or the other destinations.
"""

from __future__ import annotations

import threading

from wormhole.config import ExchangeConf
from wormhole.exchange.double_queue import DoubleQueue, Parcel


class RAMStorage:
    """One destination's queues: a single queue its writer threads share, or (``lanes`` > 1, for
    writers that make splits durable) one queue per writer thread, so every batch of a split reaches
    the one writer that holds the split's transaction. The capacity is shared out over the lanes."""

    def __init__(self, destination: str, conf: ExchangeConf, lanes: int = 1) -> None:
        self.destination = destination
        rows, nbytes = max(conf.queue_rows // lanes, 1), max(conf.queue_bytes // lanes, 1)
        self.lanes = [DoubleQueue(rows, nbytes, conf.spill_rows) for _ in range(lanes)]
        self.push_timeout_s = conf.push_timeout_s
        self.failure: str | None = None
        self.rows_dropped = 0
        self.rows_offered = 0
        """Rows the readers sent this destination (accepted or not): what it must account for."""
        self._lock = threading.Lock()
        self._open_splits = [0] * lanes

    @property
    def queue(self) -> DoubleQueue:
        """The first (with one lane, the only) queue."""
        return self.lanes[0]

    @property
    def rows_in(self) -> int:
        return sum(q.rows_in for q in self.lanes)

    def __len__(self) -> int:
        return sum(len(q) for q in self.lanes)

    def lane_of(self, worker: int) -> DoubleQueue:
        return self.lanes[worker % len(self.lanes)]

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def open_split(self) -> int:
        """The lane a new split's batches go to: the one with the fewest splits open, then the emptiest."""
        with self._lock:
            lane = min(range(len(self.lanes)), key=lambda i: (self._open_splits[i], len(self.lanes[i])))
            self._open_splits[lane] += 1
            return lane

    def close_split(self, lane: int) -> None:
        with self._lock:
            self._open_splits[lane] -= 1

    def push(self, batch: Parcel, lane: int = 0) -> bool:
        """Queue ``batch``; False (and counted as dropped) when the destination no longer takes rows."""
        queue = self.lanes[lane]
        with self._lock:  # several reader threads push
            self.rows_offered += len(batch)
        if self.failure is None and queue.push(batch, self.push_timeout_s):
            return True
        if self.failure is None and not queue.closed and not queue.input_closed:
            self.fail(f"destination accepted no batch for {self.push_timeout_s:g} s (its writers are stalled)")
        with self._lock:
            self.rows_dropped += len(batch)
        return False

    def fail(self, reason: str) -> None:
        """Mark the destination failed (first reason wins) and abort its queues."""
        with self._lock:
            if self.failure is None:
                self.failure = reason
        for queue in self.lanes:
            queue.close()

    def close_input(self) -> None:
        for queue in self.lanes:
            queue.close_input()


class StorageManager:
    """Holds one RAMStorage per destination, created from the task at start-up."""

    def __init__(self, destinations: list[str], conf: ExchangeConf, lanes: dict[str, int] | None = None) -> None:
        """``lanes``: queues per destination (its writer threads, when they make splits durable)."""
        self._storages = {dest: RAMStorage(dest, conf, (lanes or {}).get(dest, 1)) for dest in destinations}

    def for_reader(self) -> list[RAMStorage]:
        return list(self._storages.values())

    def for_writer(self, destination: str) -> RAMStorage:
        return self._storages[destination]

    def close_input(self) -> None:
        for storage in self._storages.values():
            storage.close_input()

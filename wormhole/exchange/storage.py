"""RAMStorage and StorageManager: one bounded in-memory queue per destination, with its counters.

A RAMStorage that has failed (its destination broke, or stopped taking batches for
``push_timeout_s``) refuses and counts whatever is sent to it, so it can never stall the readers
or the other destinations.
"""

from __future__ import annotations

import threading

from wormhole.config import ExchangeConf
from wormhole.exchange.double_queue import Batch, DoubleQueue


class RAMStorage:
    def __init__(self, destination: str, conf: ExchangeConf) -> None:
        self.destination = destination
        self.queue = DoubleQueue(conf.queue_rows, conf.queue_bytes, conf.spill_rows)
        self.push_timeout_s = conf.push_timeout_s
        self.failure: str | None = None
        self.rows_dropped = 0
        self._lock = threading.Lock()

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def push(self, batch: Batch) -> bool:
        """Queue ``batch``; False (and counted as dropped) when the destination no longer takes rows."""
        if self.failure is None and self.queue.push(batch, self.push_timeout_s):
            return True
        if self.failure is None and not self.queue.closed and not self.queue.input_closed:
            self.fail(f"destination accepted no batch for {self.push_timeout_s:g} s (its writers are stalled)")
        with self._lock:
            self.rows_dropped += len(batch)
        return False

    def fail(self, reason: str) -> None:
        """Mark the destination failed (first reason wins) and abort its queue."""
        with self._lock:
            if self.failure is None:
                self.failure = reason
        self.queue.close()

    def close_input(self) -> None:
        self.queue.close_input()


class StorageManager:
    """Holds one RAMStorage per destination, created from the task at start-up."""

    def __init__(self, destinations: list[str], conf: ExchangeConf) -> None:
        self._storages = {dest: RAMStorage(dest, conf) for dest in destinations}

    def for_reader(self) -> list[RAMStorage]:
        return list(self._storages.values())

    def for_writer(self, destination: str) -> RAMStorage:
        return self._storages[destination]

    def close_input(self) -> None:
        for storage in self._storages.values():
            storage.close_input()

"""The task database's checkpoint connection as a database task's table runs share it.

Each table run writes its plan, each split's digest (``settings.verify``) and durability and each pair's
commit to the task database, and waits for the plan, the digests and the commit rows to be there. One
connection serves them all, one call at a time (a DB-API connection is not safe across threads). A store that
can run several writes in one transaction (``run_together``: the embedded SQLite one) gets them grouped: the
writes that queued while the last group committed go in the next, each under a savepoint of its own, so a
commit (a sync of the file, 1-5 ms) is paid per group, not per row, and 200 tiny tables do not wait on 600
syncs one after another. A call still returns only once its rows are committed, and fails alone (its
savepoint rolled back) as it would alone.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

GROUPED = frozenset({"save_plan", "mark_durable", "mark_committed", "record_digest"})
"""The writes a table run's checkpoint thread makes; the rest (reads) run at once, between groups."""
MAX_GROUP = 256
"""Writes in one transaction at most."""


class _Together(Protocol):
    def run_together(self, calls: Sequence[Callable[[], None]]) -> list[BaseException | None]: ...


class SharedCheckpoints:
    """``store`` shared by the table runs' checkpoint threads: its calls serialized, its writes grouped when the
    store can (:meth:`close` once no table run writes any more)."""

    def __init__(self, store: Any) -> None:
        """``store``: the run's :class:`~wormhole.recovery.checkpoint.CheckpointStore`."""
        self._store = store
        self._lock = threading.Lock()
        together = getattr(store, "run_together", None)
        self._together: _Together | None = store if callable(together) else None  # type: ignore[assignment]
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.groups = 0
        """Transactions the grouped writes took (the log's)."""
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr
        grouped = self._together is not None and name in GROUPED

        def call(*args: Any, **kwargs: Any) -> Any:
            if grouped:
                return self._grouped(lambda: attr(*args, **kwargs))
            with self._lock:
                return attr(*args, **kwargs)
        return call

    def close(self) -> None:
        """Stop grouping (later calls run one at a time) once the queued writes are done."""
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(None)
        if thread is not None:
            thread.join()

    def _grouped(self, write: Callable[[], Any]) -> Any:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:  # after the table runs: one at a time, as any call
                return write()
            if self._thread is None:
                self._thread = threading.Thread(target=self._commit_groups, name="checkpoint-groups", daemon=True)
                self._thread.start()
            self._queue.put((write, future))  # under the lock: never after close's end mark
        return future.result()

    def _commit_groups(self) -> None:
        assert self._together is not None
        while True:
            first = self._queue.get()
            if first is None:
                return
            group = [first]
            ending = False
            while len(group) < MAX_GROUP:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    ending = True
                    break
                group.append(more)
            with self._lock:
                try:
                    outcomes = self._together.run_together([write for write, _ in group])
                except BaseException as exc:  # the commit failed: none of the group is there
                    for _, future in group:
                        future.set_exception(exc)
                else:
                    self.groups += 1
                    self.writes += len(group)
                    for (_, future), outcome in zip(group, outcomes, strict=True):
                        if outcome is None:
                            future.set_result(None)
                        else:
                            future.set_exception(outcome)
            if ending:
                return

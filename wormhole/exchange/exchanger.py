"""BufferedLineExchanger: batching between plugins and the storages, on both sides of the exchange.

On the reader side it pushes each batch a Reader yields, as one immutable :class:`Batch`, to every
destination's storage: a batch goes on as it is, cut to ``batch_rows`` and ``batch_bytes``; rows a reader
gives as tuples are buffered into batches of the source's schema (:meth:`Batch.of_rows`). On the writer side it
pulls batches from one storage until end of stream. Plugins never see queues.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from wormhole.errors import TaskAborted
from wormhole.exchange.double_queue import Parcel, QueueClosed, control
from wormhole.exchange.storage import RAMStorage
from wormhole.plugins.base import Batch, Row, Schema

if TYPE_CHECKING:
    from wormhole.exchange.throttle import Throttle


def estimate_row_bytes(row: Row) -> int:
    """Rough in-memory size of a row: enough to bound queues by bytes without per-row work."""
    size = 16
    for value in row:
        if isinstance(value, (str, bytes, bytearray)):
            size += len(value) + 8
        else:
            size += 8
    return size


class BufferedLineExchanger:
    def __init__(self, storages: Sequence[RAMStorage], batch_rows: int, stop: threading.Event,
                 throttle: Throttle | None = None, batch_bytes: int = 1 << 62, schema: Schema | None = None) -> None:
        """``throttle``: the task's speed limits, shared by every reader (None: no limit, no cost);
        ``batch_bytes``: a batch's (estimated) bytes at most, whatever its rows (one row at least);
        ``schema``: the rows' a reader gives as tuples (None: inferred from them, for tests)."""
        self._schema = schema
        self._storages = list(storages)
        # Under a speed limit a batch holds at most one second of it (a pace of 100 rows/s would otherwise
        # move in steps of batch_rows: minutes at the default).
        self._batch_rows = throttle.batch_rows(batch_rows) if throttle else batch_rows
        self._batch_bytes = throttle.batch_bytes(batch_bytes) if throttle else batch_bytes
        self._stop = stop
        self._throttle = throttle
        self._buffer: list[Row] = []
        self._split: str | None = None
        self._split_rows = 0
        self._targets: list[tuple[RAMStorage, int]] = [(st, 0) for st in self._storages]
        """Where the current split's batches go: (storage, lane)."""
        self.rows_sent = 0
        self.bytes_sent = 0
        self.first_at: float | None = None
        """When this reader's first batch came (monotonic); with ``last_at``, the task's measured rate."""
        self.last_at: float | None = None
        """When its last batch was let through (after its wait on the limits)."""

    # -- reader side ---------------------------------------------------------------------------

    def send(self, rows: Batch | Collection[Row]) -> None:
        if isinstance(rows, Batch):
            if rows.num_rows:
                self._send_whole(rows)
            return
        if not rows:
            return
        # A batch holds batch_rows rows, and fewer when they are wide: at most what batch_bytes holds
        # (one row at least), so a queue's byte bound is what bounds memory.
        first = next(iter(rows))
        limit = min(self._batch_rows, max(self._batch_bytes // max(estimate_row_bytes(first), 1), 1))
        if not self._buffer and limit // 2 <= len(rows) <= limit:
            # Already batch-sized: hand it on without copying it through the buffer.
            self._push(Batch.of_rows(rows, self._schema))
            return
        self._buffer.extend(rows)
        while len(self._buffer) >= limit:
            chunk = Batch.of_rows(self._buffer[:limit], self._schema)
            del self._buffer[:limit]
            self._push(chunk)

    def _send_whole(self, batch: Batch) -> None:
        # A batch of Arrow columns or of a source's encoding goes on as it is (no tuple is made), cut to
        # batch_rows and batch_bytes (the reader of an encoding cut it so already).
        self.flush()
        encoded = batch.encoded is not None
        per_row = max(((batch.encoded_nbytes or 0) if encoded else batch.nbytes) // len(batch), 1)
        limit = max(min(self._batch_rows, self._batch_bytes // per_row), 1)
        # An encoded batch was cut by its reader (by bytes, rows 16 times batch_rows): cut here only under a speed
        # limit, to one second of it.
        if len(batch) <= limit or (encoded and self._throttle is None):
            self._push(batch)
            return
        for start in range(0, len(batch), limit):
            self._push(batch.sliced(start, limit))

    def flush(self) -> None:
        if self._buffer:
            chunk = Batch.of_rows(self._buffer, self._schema)
            self._buffer.clear()
            self._push(chunk)

    def begin_split(self, split_id: str, destinations: Collection[str]) -> None:
        """The rows that follow are split ``split_id``'s, for ``destinations`` only; each destination
        gets them on one lane (one writer thread), chosen now."""
        self._split = split_id
        self._split_rows = 0
        self._targets = [(st, st.open_split()) for st in self._storages if st.destination in destinations]

    def end_split(self) -> None:
        """The split was read whole: its last rows, then its end marker, to each of its destinations."""
        self.flush()
        self._close_split("end")

    def abort_split(self, reason: str) -> bool:
        """The split's read broke: every destination is told to discard what it has of it. False
        when no row of the split had been sent yet (there is nothing to discard)."""
        self._buffer.clear()
        sent = self._split_rows > 0
        self._close_split("abort" if sent else None, reason)
        return sent

    def _close_split(self, kind: Literal["end", "abort"] | None, reason: str | None = None) -> None:
        assert self._split is not None
        marker = control(self._split, kind, reason) if kind is not None else None
        for storage, lane in self._targets:
            if marker is not None:
                storage.push(marker, lane)
            storage.close_split(lane)
        self._split = None
        self._targets = []

    def _push(self, rows: Batch) -> None:
        if self._stop.is_set():
            raise TaskAborted("reading stopped", reason="stopped")
        nbytes = rows.nbytes
        now = time.monotonic()
        if self.first_at is None:
            self.first_at = now
        if self._throttle is not None:
            # Before the storages: a batch waiting here holds no queue space, and every destination
            # gets it at the task's pace.
            if self._throttle.acquire(len(rows), nbytes, self._stop) > 0:
                now = time.monotonic()
            if self._stop.is_set():
                raise TaskAborted("reading stopped", reason="stopped")
        self.last_at = now
        batch = Parcel(rows, nbytes, self._split)
        accepted = False
        for storage, lane in self._targets:
            accepted = storage.push(batch, lane) or accepted
        self.rows_sent += len(rows)
        self._split_rows += len(rows)
        self.bytes_sent += nbytes
        if not accepted:
            raise TaskAborted("every destination has failed; reading stopped", reason="no_destination")

    # -- writer side ---------------------------------------------------------------------------

    @staticmethod
    def receive(storage: RAMStorage, poll_s: float = 0.2, worker: int = 0) -> Iterator[Parcel]:
        """Batches of writer ``worker``'s lane of one storage until end of stream; raises TaskAborted
        if the storage is aborted."""
        queue = storage.lane_of(worker)
        while True:
            try:
                batch = queue.pull(poll_s)
            except QueueClosed:
                if queue.closed:
                    raise TaskAborted(f"destination {storage.destination} stopped: {storage.failure}",
                                      reason="destination_stopped") from None
                return
            if batch is not None:
                yield batch

"""SplitLane: one writer thread of a destination whose writers make splits durable (SplitWriters).

The readers send every batch of one split for one destination to one lane (``RAMStorage.open_split``),
so the lane's writer holds the split's transaction or part; batches of several splits may interleave.
Per split: ``write_split`` per batch, then the reader's ``end`` control item (``end_split``: durable
together with the destination's own record, then the coordinator is told) or ``abort`` (the read broke:
``abort_split``). A split whose transaction the destination lost (``SplitLost``) is discarded and
reported to the coordinator, which has it read again for this destination; the rest of its batches in
the lane are skipped. A discarded split's counts are taken back and its rejected rows never reach the
dirty file (they are kept until the split is durable, or the lane ends without it), so the result and
the dirty file count each row once however often the split is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from wormhole.counters import WriterCounters, write_counted
from wormhole.errors import SplitLost
from wormhole.exchange.double_queue import Parcel
from wormhole.log import Logger
from wormhole.plugins.base import Batch, Rejected, SplitWriter, WriteResult
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.recovery.crash import CrashPoints
from wormhole.recovery.lease import Lease


@dataclass(eq=False)
class _OpenSplit:
    counts: WriterCounters = field(default_factory=WriterCounters)
    rejected: list[Rejected] = field(default_factory=list)
    """Rows the writer rejected, written to the dirty file once the split is durable."""


@dataclass(frozen=True, slots=True)
class LaneOf:
    """Whose lane it is: a destination's writer thread ``worker``."""

    destination: str
    plugin: str
    log: Logger
    worker: int


@dataclass(frozen=True, slots=True)
class LaneHooks:
    """What a lane reports to and asks of its destination and run."""

    reject: Callable[..., None]
    """``reject(rows, split_id=...)`` writes rejected rows to the dirty file."""
    sealed: Callable[[str, int], None]
    """Told of each split made durable (split id, rows): the destination's record of the run."""
    check_limit: Callable[[], None]
    """Raises when the destination's rejected rows exceed its record limit."""
    crash: CrashPoints
    lease: Lease | None = None
    """A split is made durable only while it is live."""


class SplitLane:
    def __init__(self, of: LaneOf, writer: SplitWriter, counters: WriterCounters, coordinator: SplitCoordinator,
                 hooks: LaneHooks) -> None:
        self.destination = of.destination
        self.plugin = of.plugin
        self.log = of.log
        self.worker = of.worker
        self.writer = writer
        self.counters = counters
        self.coordinator = coordinator
        self._reject = hooks.reject
        self._check_limit = hooks.check_limit
        self._hook = hooks.crash
        self._sealed = hooks.sealed
        self._lease = hooks.lease
        self.open: dict[str, _OpenSplit] = {}
        self.lost: set[str] = set()

    def take(self, batch: Parcel) -> None:
        split_id = batch.split_id
        assert split_id is not None  # a lane carries split-tagged batches only
        if batch.control == "abort":
            self.lost.discard(split_id)
            self.discard(split_id)
        elif split_id in self.lost:  # the rest of a split this destination already lost
            if batch.control == "end":
                self.lost.discard(split_id)
        else:
            try:
                if batch.control == "end":
                    self.end(split_id)
                else:
                    self.write(split_id, batch)
            except SplitLost as exc:
                self.log.warning("writer.split_discarded", split_id=split_id, worker=self.worker, error=str(exc))
                self.discard(split_id)
                if batch.control != "end":
                    self.lost.add(split_id)
                self.coordinator.lost(split_id, self.destination, str(exc))

    def write(self, split_id: str, batch: Parcel) -> None:
        split = self.open.setdefault(split_id, _OpenSplit())
        one = WriterCounters()  # counted into the split and the thread only once written
        rejected = write_counted(SplitTarget(self.writer, split_id), batch.rows, one, split.rejected.extend,
                                 destination=self.destination, plugin=self.plugin, nbytes=batch.nbytes)
        for into in (split.counts, self.counters):
            into.delivered += one.delivered
            into.written += one.written
            into.rejected += one.rejected
            into.bytes += one.bytes
            into.filtered += one.filtered
        if rejected:
            self._check_limit()

    def end(self, split_id: str) -> None:
        split = self.open.get(split_id) or _OpenSplit()
        rows = split.counts.written
        self._hook.reached("before_seal", self.destination, split_id)
        if self._lease is not None:
            self._lease.hold(f"split {split_id} of destination {self.destination}")
        self.writer.end_split(split_id, rows)
        self._hook.reached("after_seal", self.destination, split_id)
        self.open.pop(split_id, None)
        if split.rejected:
            self._reject(tuple(split.rejected), split_id=split_id)
        self._sealed(split_id, rows)
        self.log.debug("writer.split_sealed", split_id=split_id, rows=rows, worker=self.worker)
        self.coordinator.sealed(split_id, self.destination, rows)

    def discard(self, split_id: str) -> None:
        split = self.open.pop(split_id, None)
        if split is not None:
            self.counters.delivered -= split.counts.delivered
            self.counters.written -= split.counts.written
            self.counters.rejected -= split.counts.rejected
            self.counters.bytes -= split.counts.bytes
            self.counters.filtered -= split.counts.filtered
        self.writer.abort_split(split_id)

    def close(self) -> None:
        """The lane ends (end of stream, or its writer failed) with splits still open: they were never
        made durable, and their writes are undone; what they delivered and rejected in this run stays
        counted, and their rejected rows go to the dirty file (only a split sent again is not counted)."""
        for split_id, split in list(self.open.items()):
            del self.open[split_id]
            if split.rejected:
                self._reject(tuple(split.rejected), split_id=split_id)
            try:
                self.writer.abort_split(split_id)
            except Exception as exc:  # the destination is failing or stopping: its rollback follows
                self.log.warning("writer.split_abort_failed", split_id=split_id, error=str(exc))


class SplitTarget:
    """``write_counted``'s view of a SplitWriter writing one split."""

    def __init__(self, writer: SplitWriter, split_id: str) -> None:
        self._writer = writer
        self._split_id = split_id

    def write(self, batch: Batch) -> WriteResult:
        return self._writer.write_split(self._split_id, batch)

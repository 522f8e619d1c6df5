"""ReaderManager: the read side of a local run: reader threads that fan every batch out to the destinations.

It is made whole from what came before it: the read plan (the source's schema and splits, the plan's task
groups, :class:`ReadPlan`), the split feed (the coordinator, the transforms' placement, the encoding) and
the destinations' queues. ``start()`` starts each group's channels as reader threads; each takes splits
from the :class:`~wormhole.recovery.coordinator.SplitCoordinator` (its group's first, then the others') and
pushes every batch, once, to the storage of every destination that lacks the split; a split whose read
breaks is handed back (addSplitsBack) and read again. Preparing and splitting the source is done before,
by :func:`wormhole.source_facts.prepare_source`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from wormhole.config import EngineConf
from wormhole.counters import Counters, ReaderCounters
from wormhole.errors import DirtyLimitExceeded, ReadError, TaskAborted, WormholeError
from wormhole.exchange import BufferedLineExchanger, RAMStorage
from wormhole.exchange.throttle import ReadMeasure, Throttle, measure_senders
from wormhole.log import Logger
from wormhole.planning.assign import TaskGroup
from wormhole.planning.plan import ordered_splits
from wormhole.plugins import registry
from wormhole.plugins.base import EncodedReader, Encoding, ReadContext, Schema, Split
from wormhole.pool import joined, settled, spawn
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.task_spec import SourceSpec
from wormhole.transform.pushup import PushUp
from wormhole.transform.reader import Batches, SplitSource, transforming_reader


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What the run reads: the source, its schema, its splits and the plan's task groups."""

    source: SourceSpec
    schema: Schema
    splits: tuple[Split, ...]
    """In the order the splitter produced them."""
    groups: tuple[TaskGroup, ...]

    def ordered_splits(self) -> list[Split]:
        """The splits in the order engines that start them from one list should (Spark's partitions)."""
        return ordered_splits(self.splits, self.groups)


@dataclass(frozen=True, slots=True)
class SplitFeed:
    """What reader threads take splits from: the coordinator, and where the task's operators run."""

    coordinator: SplitCoordinator
    pushup: PushUp | None = None
    """The task's transforms and their placement, split by split (None: the task has none)."""
    encoding: Encoding | None = None
    """The source's own encoding every destination takes (the engine chose it): readers send it undecoded."""


@dataclass(frozen=True, slots=True)
class ReaderSetup:
    """What the read side of a run is made with, besides its plan and its feed."""

    conf: EngineConf
    ctx: ReadContext
    """The run's read context; its ``stop`` (the engine's) ends reading and the readers' retry waits."""
    counters: Counters
    notify: Callable[[Any], None]
    """Called with each reader thread's future once it is done (wakes the monitor)."""
    log: Logger


class ReaderManager:
    def __init__(self, read: ReadPlan, setup: ReaderSetup, feed: SplitFeed, storages: list[RAMStorage],
                 throttle: Throttle | None = None) -> None:
        """``storages``: the destinations' queues (each batch goes to those that lack its split);
        ``throttle``: the task's speed limits, pacing every batch."""
        role = registry.source(read.source.plugin)  # validated with the task
        assert isinstance(setup.ctx.stop, threading.Event)  # the engine's, so a stop ends readers' retry waits
        self._role, self._read, self._setup, self._feed = role, read, setup, feed
        self._log = setup.log.bind(plugin=read.source.plugin)
        self.stop = setup.ctx.stop
        """Set to end reading (the task stops, or every destination failed)."""
        self.error: BaseException | None = None
        self._storages = storages
        self._senders = [BufferedLineExchanger(storages, setup.ctx.batch_rows, self.stop, throttle,
                                               batch_bytes=setup.ctx.batch_bytes, schema=read.schema)
                         for group in read.groups for _ in range(group.channels)]
        self._futures: list[Future[None]] = []
        self.coordinator = feed.coordinator
        """Where the reader threads take splits from."""
        self.pushup = feed.pushup

    def start(self) -> None:
        """Start each planned group's channels: a reader thread each."""
        channels = [group.id for group in self._read.groups for _ in range(group.channels)]
        for worker, (group, sender) in enumerate(zip(channels, self._senders, strict=True)):
            future = spawn(self._run, worker, group, self._setup.counters.new_reader(), sender,
                           name=f"reader-{worker}")
            future.add_done_callback(self._setup.notify)
            self._futures.append(future)
        self._log.info("reader.started", threads=len(self._futures), task_groups=len(self._read.groups))

    def _source(self, worker: int) -> SplitSource:
        options, ctx, encoded = self._read.source.options, self._setup.ctx, self._role.encoded
        if self._feed.encoding is not None and encoded is not None:  # it has the encoding the feed names
            return _EncodedSource(encoded.reader(options, ctx), self._feed.encoding)
        reader = self._role.reader(options, ctx)
        # The task's transforms and their placement, behind the store's reader (transform/reader.py).
        return transforming_reader(reader, self.pushup, worker)

    def _run(self, worker: int, group: int, counters: ReaderCounters, sender: BufferedLineExchanger) -> None:
        source = self._source(worker)
        log = self._log.bind(worker=worker, task_group=group)
        coordinator = self._feed.coordinator
        while True:
            taken = coordinator.request(group)
            if taken is None:
                break
            split = taken.split
            if taken.planned_group != group:
                log.info("reader.split_stolen", split_id=split.id, from_group=taken.planned_group)
            rows = 0
            sender.begin_split(split.id, taken.destinations)
            try:
                for read, batch in _ended(source.read(split)):
                    rows += read
                    counters.rows += read
                    sender.send(batch)
                    if self.stop.is_set():
                        raise TaskAborted("reading stopped", reason="stopped")
                sender.end_split()
            except TaskAborted as exc:
                if not self._abandoned(exc, split.id, rows, sender, log):
                    raise
                coordinator.read_done(taken, rows)
                continue
            except DirtyLimitExceeded:
                raise
            except Exception as exc:
                if self.stop.is_set():
                    raise TaskAborted("reading stopped", reason="stopped") from exc
                # addSplitsBack: the destinations discard the split, and it is read again later.
                error = str(exc) if isinstance(exc, WormholeError) else f"{type(exc).__name__}: {exc}"
                log.warning("reader.split_failed", split_id=split.id, attempt=taken.attempt, rows=rows, error=error)
                sent = sender.abort_split(error)
                coordinator.read_failed(taken, error, sent)
                continue
            coordinator.read_done(taken, rows)
            counters.splits += 1
            log.debug("reader.split_done", split_id=split.id, rows=rows, attempt=taken.attempt)
        if coordinator.error is not None:
            raise ReadError(coordinator.error, plugin=self._read.source.plugin)

    def _abandoned(self, exc: TaskAborted, split_id: str, rows: int, sender: BufferedLineExchanger,
                   log: Logger) -> bool:
        """Every destination of this split has failed (others may be healthy): the split is done for
        nobody, and the thread goes on with the next one instead of ending unseen. False: the task stops."""
        if exc.reason != "no_destination" or self.stop.is_set():
            return False
        log.warning("reader.split_abandoned", split_id=split_id, rows=rows, error=str(exc))
        sender.abort_split(str(exc))
        return True

    @property
    def rows_sent(self) -> int:
        return sum(s.rows_sent for s in self._senders)

    def measure(self, throttle: Throttle | None) -> ReadMeasure:
        return measure_senders(self._senders, throttle)

    def close_input(self) -> None:
        for storage in self._storages:
            storage.close_input()

    def poll(self) -> Literal["running", "done", "failed"]:
        finished, exc = settled(self._futures)
        if exc is not None:
            if self.error is None:
                self._failed(exc)
            return "failed"
        if not finished:
            return "running"
        left = self.coordinator.remaining
        if left and not self.stop.is_set():
            # Never wait on a read side that has nobody left to read: the run fails, saying why.
            if self.error is None:
                self._failed(ReadError(f"every reader thread has ended, but {left} split(s) were neither read nor "
                                       f"given up; this is a wormhole bug: please report it",
                                       plugin=self._read.source.plugin))
            return "failed"
        return "done"

    def _failed(self, exc: BaseException) -> None:
        self.error = exc
        if not isinstance(exc, TaskAborted):
            self._log.error("reader.failed", error=str(exc), error_code=getattr(exc, "code", None),
                            split_id=getattr(exc, "details", {}).get("split_id"))

    def join(self, deadline: float) -> bool:
        """Wait for the reader threads until ``deadline`` (monotonic); False if some still run."""
        return joined(self._futures, deadline)


class _EncodedSource:
    """Splits read in the source's own encoding (no transform: the engine chose it for a run without)."""

    def __init__(self, reader: EncodedReader, encoding: Encoding) -> None:
        self.reader = reader
        self.encoding = encoding

    def read(self, split: Split) -> Batches:
        for batch in self.reader.read_encoded(split, self.encoding):
            yield len(batch), batch


def _ended(batches: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """``batches``, closed as soon as the loop over them ends, however: not when the exception that may
    end the reader thread is collected, since a store's read holds a connection (the mysql reader's is
    mid-result) until its generator closes."""
    try:
        yield from batches
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()

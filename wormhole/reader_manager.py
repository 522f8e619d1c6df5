"""ReaderManager: the read side: reader periphery, splitter, and the reader pool that fans batches out.

1. ``prepare()``: the reader periphery (reachability, size estimate) under a timeout; skipped,
   not fatal, when it takes too long (a failure to reach the source is fatal);
2. ``split(advice)``: the schema and the splits; must succeed within its timeout;
3. ``assign(groups)``: the planned task groups (:mod:`wormhole.planning`);
4. ``start(storages, coordinator)``: each group's channels are reader threads taking splits from the
   :class:`~wormhole.recovery.coordinator.SplitCoordinator` (their group's first, then the others') and pushing
   every batch, once, to the storage of every destination that lacks the split; a split whose read
   breaks is handed back (addSplitsBack) and read again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from wormhole.config import EngineConf, SourceSpec
from wormhole.counters import Counters, ReaderCounters
from wormhole.errors import DirtyLimitExceeded, ReadError, SplitError, TaskAborted, WormholeError
from wormhole.exchange import BufferedLineExchanger, RAMStorage
from wormhole.exchange.throttle import ReadMeasure, Throttle, measure_senders
from wormhole.log import Logger
from wormhole.planning.assign import TaskGroup, dispatch_order
from wormhole.plugins import registry
from wormhole.plugins.base import EncodedReader, Encoding, ReadContext, ReaderPeriphery, Schema, SourceInfo, Split
from wormhole.pool import run_with_timeout, spawn
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.recovery.state import RecoveryState
from wormhole.transform.pushup import PushUp
from wormhole.transform.reader import Batches, SplitSource, transforming_reader


@dataclass(frozen=True, slots=True)
class SplitFeed:
    """What reader threads take splits from: the coordinator, and where the task's operators run."""

    coordinator: SplitCoordinator
    pushup: PushUp | None = None
    encoding: Encoding | None = None
    """The source's own encoding every destination takes (the engine chose it): readers send it undecoded."""


class ReaderManager:
    def __init__(self, spec: SourceSpec, ctx: ReadContext, conf: EngineConf, counters: Counters,
                 notify: Callable[[Any], None], log: Logger, recovery: RecoveryState | None = None) -> None:
        """``recovery``: what the chain of runs holds; a resumed run reads the splits it planned instead
        of splitting the source again."""
        role = registry.get(spec.plugin).source
        assert role is not None  # validated with the task
        self._role = role
        self._plugin = spec.plugin
        self._options = spec.options
        self._ctx = ctx
        self._conf = conf
        self._counters = counters
        self._notify = notify
        self._log = log.bind(plugin=spec.plugin)
        self.schema: Schema | None = None
        self.splits: list[Split] = []
        assert isinstance(ctx.stop, threading.Event)  # the engine's, so a stop ends readers' retry waits
        self.stop = ctx.stop
        """Set to end reading (the task stops, or every destination failed)."""
        self.error: BaseException | None = None
        self.groups: tuple[TaskGroup, ...] = ()
        self._feed: SplitFeed | None = None
        self._resumed = recovery.splits if recovery is not None else None
        self._futures: list[Future[None]] = []
        self._senders: list[BufferedLineExchanger] = []
        self._storages: list[RAMStorage] = []
        self.periphery: ReaderPeriphery | None = None

    def prepare(self) -> SourceInfo | None:
        periphery: ReaderPeriphery = self._role.periphery(self._options, self._ctx)
        self.periphery = periphery
        timeout = self._conf.timeouts.reader_prepare_s
        try:
            info = run_with_timeout(periphery.prepare, timeout, "reader-prepare")
        except TimeoutError:
            self._log.warning("reader.prepare_skipped", timeout_s=timeout)
            return None
        self._counters.estimated_rows = info.estimated_rows
        self._log.info("reader.prepared", estimated_rows=info.estimated_rows, estimated_bytes=info.estimated_bytes)
        return info

    def split(self, advice: int) -> list[Split]:
        def plan() -> tuple[Schema, list[Split]]:
            schema = self._role.reader(self._options, self._ctx).schema()
            if self._resumed is not None:  # the ranges the crashed run planned (the source may have changed)
                return schema, list(self._resumed)
            return schema, self._role.splitter(self._options, self._ctx).split(advice)

        timeout = self._conf.timeouts.split_s
        try:
            self.schema, splits = run_with_timeout(plan, timeout, "reader-split")
        except TimeoutError:
            raise SplitError(f"splitting the source did not finish within {timeout:g} s") from None
        seen: set[str] = set()
        for split in splits:
            if split.id in seen:  # task groups, the board and the plan name splits by id: never merge two
                raise SplitError(f"the source has two splits named {split.id!r} (is a table listed twice?)",
                                 plugin=self._plugin, split_id=split.id)
            seen.add(split.id)
        self.splits = splits
        self._log.info("reader.split_planned", splits=len(self.splits), advice=advice,
                       columns=list(self.schema.names))
        return self.splits

    def assign(self, groups: Sequence[TaskGroup]) -> None:
        """The planned task groups (the plan's ``task_groups``)."""
        self.groups = tuple(groups)

    def ordered_splits(self) -> list[Split]:
        """The splits in the order engines that start them from one list should (Spark's partitions)."""
        by_id = {s.id: s for s in self.splits}
        return [by_id[i] for i in dispatch_order(self.groups)]

    @property
    def coordinator(self) -> SplitCoordinator | None:
        """Where the reader threads take splits from (None until they start)."""
        return self._feed.coordinator if self._feed is not None else None

    @property
    def pushup(self) -> PushUp | None:
        """The task's transforms and their placement, split by split (None: the task has none)."""
        return self._feed.pushup if self._feed is not None else None

    def start(self, storages: list[RAMStorage], feed: SplitFeed, throttle: Throttle | None = None) -> None:
        """Start each planned group's channels, taking splits from ``feed``; ``throttle`` (the
        task's speed limits) paces every batch."""
        assert self.groups, "assign() the plan's task groups first"
        self._storages = storages
        self._feed = feed
        for group in self.groups:
            for _ in range(group.channels):
                worker = len(self._futures)
                sender = BufferedLineExchanger(storages, self._ctx.batch_rows, self.stop, throttle,
                                               batch_bytes=self._ctx.batch_bytes)
                self._senders.append(sender)
                future = spawn(self._run, worker, group.id, self._counters.new_reader(), sender,
                               name=f"reader-{worker}")
                future.add_done_callback(self._notify)
                self._futures.append(future)
        self._log.info("reader.started", threads=len(self._futures), task_groups=len(self.groups))

    def encoding(self) -> Encoding | None:
        """The source's own encoding of its rows, when its store can send them undecoded (and can for
        these options)."""
        encoded = self._role.encoded
        return None if encoded is None else encoded.reader(self._options, self._ctx).encoding()

    def _source(self, worker: int) -> SplitSource:
        assert self._feed is not None
        encoded = self._role.encoded
        if self._feed.encoding is not None and encoded is not None:  # it has the encoding from encoding()
            return _EncodedSource(encoded.reader(self._options, self._ctx), self._feed.encoding)
        reader = self._role.reader(self._options, self._ctx)
        # The task's transforms and their placement, behind the store's reader (transform/reader.py).
        return transforming_reader(reader, self.pushup, worker)

    def _run(self, worker: int, group: int, counters: ReaderCounters, sender: BufferedLineExchanger) -> None:
        source = self._source(worker)
        log = self._log.bind(worker=worker, task_group=group)
        assert self._feed is not None
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
            raise ReadError(coordinator.error, plugin=self._plugin)

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
        done = 0
        for future in self._futures:
            if not future.done():
                continue
            done += 1
            exc = future.exception()
            if exc is not None:
                if self.error is None:
                    self._failed(exc)
                return "failed"
        if done < len(self._futures):
            return "running"
        left = self.coordinator.remaining if self.coordinator is not None else 0
        if left and not self.stop.is_set():
            # Never wait on a read side that has nobody left to read: the run fails, saying why.
            if self.error is None:
                self._failed(ReadError(f"every reader thread has ended, but {left} split(s) were neither read nor "
                                       f"given up; this is a wormhole bug: please report it",
                                       plugin=self._plugin))
            return "failed"
        return "done"

    def _failed(self, exc: BaseException) -> None:
        self.error = exc
        if not isinstance(exc, TaskAborted):
            self._log.error("reader.failed", error=str(exc), error_code=getattr(exc, "code", None),
                            split_id=getattr(exc, "details", {}).get("split_id"))

    def join(self, deadline: float) -> bool:
        """Wait for the reader threads until ``deadline`` (monotonic); False if some still run."""
        for future in self._futures:
            try:
                future.exception(timeout=max(deadline - time.monotonic(), 0))
            except TimeoutError:
                return False
        return True


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

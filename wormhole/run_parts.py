"""What one run is made of before it touches any store (:func:`assemble`), and what its split coordinator
reports back to (:class:`RunContext`).

The parts are complete when made: the dirty file, the queues between the sides, the counters, the
monitor, the source's read context, and what each side is made with once the plan says how.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wormhole.config import EngineConf, ErrorLimit
from wormhole.counters import Counters, naming_first, percentage_limit, record_limit
from wormhole.dirty import DirtyFile
from wormhole.errors import SplitLost
from wormhole.exchange import StorageManager
from wormhole.exchange.throttle import Throttle
from wormhole.log import Logger
from wormhole.monitor import MonitorManager, ProgressListener, RunNames
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, SourceSnapshot, SparkAccess
from wormhole.plugins.shared import RunShared
from wormhole.reader_manager import ReaderSetup
from wormhole.recovery.state import RecoveryState
from wormhole.task_spec import TaskSpec
from wormhole.transform.pushup import PushUp
from wormhole.writer_manager import WriterManager, WriterSetup


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True, slots=True)
class RunIds:
    task_id: int
    run_id: int


class SourceLimit:
    """The source's error limit, judged on the rows it rejected (the dirty file's count)."""

    def __init__(self, limit: ErrorLimit, dirty: DirtyFile) -> None:
        self._limit = limit
        self._dirty = dirty
        self.verdict = False
        """The source went over its record limit during the run (the final count is named at the end)."""

    def over(self) -> str | None:
        """Why the source's rejections are over its record limit, or None."""
        verdict = record_limit(self._dirty.count("source"), self._limit.record, source=True)
        if verdict is None:
            return None
        self.verdict = True
        return naming_first(verdict, self._dirty.first("source")).message

    def final(self, abort: str | None, rows_read: int) -> str | None:
        """Why the task aborts once every row is read: ``abort``, unless the source's limit says more."""
        if self.verdict:
            # The verdict ended the run (the monitor returns on it at once). Readers still running
            # then may have rejected more rows before they stopped: name the final count, the one
            # in the result and in the dirty file.
            return self.over() or abort
        if abort is None:
            rejected = self._dirty.count("source")
            verdict = percentage_limit(rejected, rejected + rows_read, self._limit.percentage, source=True)
            return naming_first(verdict, self._dirty.first("source")).message if verdict is not None else None
        return abort


@dataclass(frozen=True, slots=True, eq=False)
class RunParts:
    """The parts of one run, made before any store is touched."""

    dirty: DirtyFile
    storage: StorageManager
    counters: Counters
    monitor: MonitorManager
    ctx: ReadContext
    stop: threading.Event
    """The read context's stop: set to end reading (the task stops, or every destination failed)."""
    readers: ReaderSetup
    writers: WriterSetup
    throttle: Throttle | None
    """The task's speed limits (None: it sets none)."""
    source_limit: SourceLimit
    started_at: str = field(default_factory=now)
    t0: float = field(default_factory=time.monotonic)

    def reading_through(self, snapshot: SourceSnapshot) -> RunParts:
        """These parts, the source read through ``snapshot`` (its splitter, bounds and readers find it in
        their context)."""
        ctx = dataclasses.replace(self.ctx, snapshot=snapshot)
        return dataclasses.replace(self, ctx=ctx, readers=dataclasses.replace(self.readers, ctx=ctx))


def assemble(conf: EngineConf, spec: TaskSpec, ids: RunIds, log: Logger,
             listeners: Sequence[ProgressListener], spark: SparkAccess | None = None,
             shared: RunShared | None = None) -> RunParts:
    """``spark``: the run's Spark as the stores reach it through their contexts (the engine gives it);
    ``shared``: what the table runs of a database task share, as the stores reach it (None: one table)."""
    dirty = DirtyFile(Path(conf.paths.dirty_dir) / f"task-{ids.task_id}" / f"run-{ids.run_id}.jsonl")
    # A destination whose writers make splits durable gets a queue (lane) per writer thread: every
    # batch of a split reaches the one writer that holds the split's transaction.
    lanes = {d.id: d.concurrency for d in spec.destinations
             if RecoveryState.durable(registry.sink(d.plugin))}
    storage = StorageManager([d.id for d in spec.destinations], conf.exchange, lanes)
    counters = Counters()
    names = RunNames(task_id=ids.task_id, source=spec.source.plugin,
                     plugins={d.id: d.plugin for d in spec.destinations},
                     queue_rows=2 * conf.exchange.queue_rows)  # both arrays of a DoubleQueue hold rows
    monitor = MonitorManager(conf.monitor, counters, log, names=names, listeners=listeners)
    ex, stop = conf.exchange, threading.Event()
    # The source's wire text costs memory beside each batch: kept only when a destination may load it.
    keep_wire = any(registry.sink(d.plugin).uses_wire_text for d in spec.destinations)
    ctx = ReadContext(task_id=ids.task_id, run_id=ids.run_id, batch_rows=ex.batch_rows,
                      batch_bytes=ex.batch_bytes, dirty=dirty, plugin=spec.source.plugin, keep_wire=keep_wire,
                      stop=stop, spark=spark, shared=shared)
    return RunParts(
        dirty=dirty, storage=storage, counters=counters, monitor=monitor, ctx=ctx, stop=stop,
        readers=ReaderSetup(conf, ctx, counters, monitor.notify, log),
        writers=WriterSetup(spec, conf, storage, counters, monitor.notify, dirty, ids.task_id, ids.run_id, log,
                            spark=spark, shared=shared),
        throttle=Throttle.of(spec.settings.speed),
        source_limit=SourceLimit(spec.settings.error_limit or conf.error_limit, dirty))


class RunContext:
    """The split coordinator's context for this run (:class:`~wormhole.recovery.coordinator.CoordinatorContext`):
    a sealed split goes to the checkpoint, a destination lost for good fails on the write side."""

    def __init__(self, writers: WriterManager, recovery: RecoveryState, pushup: PushUp | None) -> None:
        self._writers = writers
        self._checkpointer = recovery.checkpointer
        self._pushup = pushup

    def split_sealed(self, split_id: str, destination: str, rows: int) -> None:
        if self._checkpointer is not None:
            # Each split's checkpoint names the transform placement it was read under. (With settings.verify the
            # digest of what the destination accepted of it was recorded before its commit: WriterManager.)
            placement = self._pushup.record(split_id) if self._pushup is not None else None
            self._checkpointer.sealed(split_id, destination, rows, placement)

    def destination_lost(self, destination: str, reason: str) -> None:
        self._writers.fail(destination, reason, SplitLost.code)

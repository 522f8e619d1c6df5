"""Engine: one task run, in stages that each finish with a value the next is made from.

1. the run's parts (:func:`wormhole.run_parts.assemble`), before any store is touched;
2. the source's facts (:func:`wormhole.source_facts.prepare_source`: its window, estimate, schema, splits);
3. the plan (:func:`wormhole.planning.plan.make_plan`, pure) and the execution it names;
4. the write side (:class:`~wormhole.writer_manager.WriterManager`), made once, whole;
5. the transfer: prepare the destinations, start reading and writing (the read side is made whole then,
   from the plan and the split feed), watch; then finalize and the result (:mod:`wormhole.run_report`).

The task is already validated (``TaskSpec``) when the Engine gets it. ``run()`` never raises for a
store failure: every outcome becomes a :class:`RunResult` with per-destination statuses and the
exit code of DESIGN §11. ``stop()`` (SIGTERM) makes a running ``run()`` roll back and return. The
steps are the same for both engines; where the rows move is an :class:`Execution`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from wormhole import incremental
from wormhole.config import EngineConf
from wormhole.database.snapshot import Snapshot
from wormhole.errors import ConfigError, InvalidTaskConfig
from wormhole.execution import Execution, LocalExecution
from wormhole.log import Logger
from wormhole.monitor import ProgressListener, Watch
from wormhole.planning.channels import adjust_channel_number, speed_limits
from wormhole.planning.encoded import choose_encoding, loads_source_form
from wormhole.planning.plan import Plan, make_plan
from wormhole.plugins import registry
from wormhole.plugins.base import Schema, SourceInfo
from wormhole.plugins.shared import RunShared
from wormhole.reader_manager import ReadPlan, SplitFeed
from wormhole.recovery.chain import split_prefix
from wormhole.recovery.checkpoint import CheckpointStore
from wormhole.recovery.coordinator import RetryPolicy, SplitCoordinator
from wormhole.recovery.lease import Lease
from wormhole.recovery.state import RecoveryState
from wormhole.result import (
    EXIT_BAD_TASK,
    EXIT_CLAIMED,
    EXIT_FAILED,
    EXIT_PARTIAL,
    EXIT_SUCCESS,
    EXIT_SUCCESS_WITH_REJECTS,
    RunResult,
)
from wormhole.run_parts import RunContext, RunIds, RunParts, assemble
from wormhole.run_report import Ended, Finished, run_result
from wormhole.source_facts import SourceFacts, SourceStore, prepare_source, source_window
from wormhole.spark import RunSpark
from wormhole.task_spec import TaskSpec
from wormhole.transform.pushup import PushUp, restore_placements
from wormhole.writer_manager import WriterManager, describe

__all__ = ["EXIT_BAD_TASK", "EXIT_CLAIMED", "EXIT_FAILED", "EXIT_PARTIAL", "EXIT_SUCCESS",
           "EXIT_SUCCESS_WITH_REJECTS", "Engine", "RunResult"]


class _ReadFailed(Exception):
    """The read side could not be planned or read: the task aborts with ``abort``."""

    def __init__(self, abort: str | None, error: str | None) -> None:
        super().__init__(abort)
        self.abort, self.error = abort, error


@dataclass(frozen=True, slots=True)
class _Ready:
    """The source asked, the run planned, the execution ready to read: what the transfer starts from."""

    facts: SourceFacts
    plan: Plan
    execution: Execution
    read: ReadPlan
    schema: Schema
    """What the destinations are prepared with (Spark: its read's schema)."""
    pushup: PushUp | None


@dataclass(frozen=True, slots=True)
class _Planning:
    """How far the stages before the write side got: each stage's value, None past the one that failed."""

    execution: Execution
    """The plan's execution (a local one, which moves nothing, when the run ended before the plan named one)."""
    window: incremental.Window | None = None
    facts: SourceFacts | None = None
    plan: Plan | None = None
    ready: _Ready | None = None
    ended: Ended | None = None
    """Why the stages stopped short (None: ``ready`` is set)."""


class Engine:
    def __init__(self, conf: EngineConf, spec: TaskSpec, *, task_id: int, run_id: int, log: Logger,
                 listeners: Sequence[ProgressListener] = (), checkpoints: CheckpointStore | None = None,
                 resume_from: int | None = None, lease: Lease | None = None, taskdb_id: str = "",
                 finished_runs: frozenset[int] = frozenset(), scope: str | None = None,
                 snapshot: Snapshot | None = None, shared: RunShared | None = None,
                 known: SourceInfo | None = None) -> None:
        """``listeners`` see the run's progress snapshots (a live display, a metrics endpoint).

        ``checkpoints``: where the run records its plan and each split's durability (a task-database
        connection of its own: the engine writes to it from its checkpoint thread only); None runs
        without checkpoints (``run FILE``). ``resume_from``: the run this one takes over (a crashed run
        of the same task): its planned splits are read, except those every destination already holds.
        ``lease``: the run's claim on its task; splits become durable and destinations are committed or
        rolled back only while it is live (None: nobody else can hold the task). ``taskdb_id``: the task
        database's id (destinations name their kept state by it). ``finished_runs``: runs that ended
        partial (their outcome recorded): what they committed is skipped, durable or not (a retry).
        ``scope``: this run is one table of a database task (:mod:`wormhole.database.run`): its split ids are
        ``scope#id``, so the table runs of one task run keep their checkpoint rows apart, and it resumes only
        the splits of its own scope.
        ``snapshot``: a consistent snapshot of the source opened by the caller (the table runs of a database
        task share one): the run reads through it, and neither opens nor closes it. Without it, a task with
        ``settings.snapshot: consistent`` opens its own and closes it once its reads have ended.
        ``shared``: what the table runs of a database task share (:mod:`wormhole.plugins.shared`), which the
        stores find in their contexts. ``known``: the source's estimate as the caller has it (a database task's
        catalog): the source's periphery is not asked again.
        """
        self._shared = shared
        self._known = known
        self._scope = scope
        self._finished_runs = finished_runs
        self._given_snapshot = snapshot
        self._snapshot: Snapshot | None = None
        """The snapshot the run reads through (the given one, or its own once taken)."""
        self._taskdb_id = taskdb_id
        self._lease = lease
        self._checkpoints = checkpoints
        self._resume_from = resume_from
        self._conf = conf
        self._listeners = tuple(listeners)
        self._spec = spec
        self._task_id = task_id
        self._run_id = run_id
        self._log = log
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._abandoned = False
        self._own_snapshot: Snapshot | None = None
        self._recovery = RecoveryState(run_id, run_id)
        # What stop() and release() reach from other threads, set as run() makes them.
        self._run: RunParts | None = None
        self._execution: Execution | None = None
        self._writers: WriterManager | None = None

    def abandon(self, reason: str) -> None:
        """Stop at once and leave every destination as it is, neither committed nor rolled back: another
        process took the task over and resumes this run's state (rolling it back would destroy it)."""
        self._abandoned = True
        if self._lease is not None:
            self._lease.lose()
        self.stop(reason)

    def stopped(self, wait_s: float = 0.0) -> bool:
        """Whether the run was asked to stop (waiting up to ``wait_s`` for it)."""
        return self._stop.wait(wait_s)

    def stop(self, reason: str) -> None:
        """Ask a running task to stop: reading ends, writers are released, everything rolls back."""
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stop.set()
        if self._lease is not None:
            self._lease.stop()
        run, execution = self._run, self._execution
        if run is not None:
            run.monitor.notify()
        if execution is not None:
            execution.cancel()

    def run(self) -> RunResult:
        from wormhole.spark.config import choose

        choice = choose(self._conf.spark, self._spec.settings.spark)  # --spark-master, the task's, the env's
        self._conf = dataclasses.replace(self._conf, spark=choice.conf)
        self._log.info("engine.conf_read", conf_file=choice.conf_file, spark_master=choice.conf.master,
                       spark_master_from=choice.master_from)
        recovery = self._recovery = RecoveryState.restore(
            self._checkpoints, task_id=self._task_id, run_id=self._run_id, resume_from=self._resume_from,
            finished_runs=self._finished_runs, log=self._log, stop=self._stop, lease=self._lease,
            taskdb_id=self._taskdb_id, scope=self._scope)
        run = self._run = assemble(self._conf, self._spec, RunIds(self._task_id, self._run_id), self._log,
                                   self._listeners, spark=RunSpark(self._conf.spark), shared=self._shared)
        self._log.info("task.started", source=self._spec.source.plugin,
                       destinations=[d.id for d in self._spec.destinations],
                       consistency=self._spec.settings.consistency)
        run, failed = self._snapshotted(run)
        self._run = run
        planning = self._prepare(run, failed)
        plan = planning.plan
        writers = self._writers = WriterManager(run.writers, recovery, planning.execution, started=run.t0,
                                                transforms=plan.transforms if plan is not None else None)
        try:
            ready = planning.ready
            ended = self._transfer(run, ready, writers) if ready is not None else planning.ended or Ended()
        except BaseException:  # a bug of ours: the sides still stop before it is reported
            self._shut_down(run, planning, writers, Ended())
            raise
        return self._finish(run, planning, writers, ended)

    def release(self) -> None:
        """After the run's outcome is recorded in the task database: the committed destinations drop
        their own records of the run's splits (until then, a crash resumes them as committed)."""
        writers = self._writers
        if writers is not None and not self._abandoned:
            writers.release()

    # -- before the write side: the source, the plan, the execution ----------------------------

    def _snapshotted(self, run: RunParts) -> tuple[RunParts, Ended | None]:
        """The run's parts, reading through its consistent snapshot when it has one: the one it was given, else
        its own, taken now (``settings.snapshot: consistent``); how the run ended when that could not be."""
        snapshot = self._given_snapshot
        settings = self._spec.settings
        if snapshot is None and settings.snapshot == "consistent":
            try:  # as many reader connections as the plan can give channels (it caps them at the splits)
                readers = adjust_channel_number(speed_limits(settings.speed, self._conf)).channels
            except InvalidTaskConfig:
                return run, None  # the plan says why
            try:
                with self._reading():  # a stop (SIGTERM) ends its waits: the engine's own signal
                    snapshot = Snapshot.open(self._spec.source, dataclasses.replace(run.ctx, stop=self._stop),
                                             readers=readers, lock_timeout_s=settings.snapshot_lock_timeout_s,
                                             log=self._log)
            except _ReadFailed as failed:
                return run, Ended(abort=failed.abort, read_error=failed.error)
            self._own_snapshot = snapshot
        if snapshot is None:
            return run, None
        self._snapshot = snapshot
        return run.reading_through(snapshot.source), None

    def _snapshot_described(self) -> Mapping[str, Any] | None:
        snapshot = self._snapshot
        return None if snapshot is None else snapshot.describe(resumed=self._resume_from is not None)

    def _close_snapshot(self) -> None:
        """Close the snapshot the run took itself (a given one is its opener's to close)."""
        own = self._own_snapshot
        if own is not None:
            own.close()

    def _prepare(self, run: RunParts, failed: Ended | None = None) -> _Planning:
        """The stages before the write side, each from the one before; how far they got (``failed``: the run
        ended before them)."""
        window: incremental.Window | None = None
        facts: SourceFacts | None = None
        plan: Plan | None = None
        if failed is not None:
            return _Planning(LocalExecution(run.storage, run.readers, run.throttle), ended=failed)
        try:
            with self._reading():
                window = self._window(run)
                facts = prepare_source(self._spec, run.ctx, self._conf, self._log, window=window,
                                       resumed=self._recovery.splits, known=self._known)
                if self._scope is not None and self._recovery.splits is None:
                    facts = dataclasses.replace(facts, splits=tuple(
                        dataclasses.replace(s, id=f"{split_prefix(self._scope)}{s.id}") for s in facts.splits))
                run.counters.estimated_rows = facts.estimated_rows
                plan = make_plan(self._spec, facts, self._conf, loads=self._shared is None)
                self._log.info("plan.made", **plan.to_dict())
                self._log.info("engine.chosen", engine=plan.engine, reason=plan.engine_reason)
                return self._ready(run, facts, plan)
        except InvalidTaskConfig as exc:  # transforms that do not fit the source's schema: nothing was prepared
            self._log.error("task.invalid", problems=exc.problems, error_code=exc.code)
            ended = Ended(abort=str(exc), invalid=exc)
        except _ReadFailed as read_failed:
            ended = Ended(abort=read_failed.abort, read_error=read_failed.error)
        # Ended before the plan named an execution: a local one, which moves nothing.
        execution = self._execution or LocalExecution(run.storage, run.readers, run.throttle)
        return _Planning(execution, window, facts, plan, ended=ended)

    def _window(self, run: RunParts) -> incremental.Window | None:
        """An incremental task's window: the one a resumed chain recorded, else a new one."""
        store = self._checkpoints
        return source_window(self._spec, run.ctx, self._log, recorded=self._recovery.window,
                             kept=store.watermarks if store is not None else lambda _key: {})

    def _ready(self, run: RunParts, facts: SourceFacts, plan: Plan) -> _Planning:
        """The plan recorded, its execution made and the source's read made ready."""
        read = ReadPlan(self._spec.source, facts.schema, facts.splits, plan.task_groups)
        if self._recovery.checkpointer is not None:
            self._recovery.checkpointer.save_plan(list(facts.splits), facts.window)
        execution = self._execution = self._execution_of(run, plan)
        schema = execution.prepare_source(read)
        ready = _Ready(facts, plan, execution, read, schema, self._place_transforms(facts, plan))
        return _Planning(execution, facts.window, facts, plan, ready=ready)

    def _execution_of(self, run: RunParts, plan: Plan) -> Execution:
        if plan.engine != "spark":
            return LocalExecution(run.storage, run.readers, run.throttle)
        from wormhole import spark

        if not spark.available():
            raise ConfigError("settings.engine 'spark' needs pyspark: pip install 'wormhole[spark]'")
        from wormhole.spark.runner import SparkExecution

        return SparkExecution(self._conf, run.ctx, run.dirty, run.counters, self._spec.source, self._log,
                              run.throttle, plan.transforms, self._spec.destinations)

    def _place_transforms(self, facts: SourceFacts, plan: Plan) -> PushUp | None:
        """Where the task's operators run: in Spark, as Columns on the source's DataFrame; locally, split
        by split between the source query and the reader threads."""
        transforms = plan.transforms
        if transforms is None:
            return None
        if plan.engine == "spark":  # SparkExecution applies them as Spark Columns (it got them when it was made)
            pushed = [s for s, p in self._recovery.placements.items() if p.get("pushed")]
            if pushed:
                self._log.info("pushup.not_reproduced", splits=len(pushed),
                               reason="Spark reads every split under the static placement; the output is the same")
            return None
        busy = registry.source(self._spec.source.plugin).busy_threads  # the store's function, if it has one
        probe = partial(busy, facts.periphery) if busy is not None else None
        # A resumed run re-reads each split some destination holds under the placement it was read under.
        pinned = restore_placements(transforms, dict(self._recovery.placements), self._log)
        return PushUp(transforms, self._conf.pushup, self._log, channels=plan.channels, probe=probe, pinned=pinned)

    # -- the transfer ----------------------------------------------------------------------------

    def _transfer(self, run: RunParts, ready: _Ready, writers: WriterManager) -> Ended:
        """Prepare the destinations, start reading and writing, and watch; how it ended."""
        try:
            if not self._stop.is_set():
                writers.prepare(ready.schema)
            if self._stop.is_set():
                return Ended(abort=self._stop_reason)
            if writers.all_failed():
                return Ended()
            coordinator = self._coordinate(run, ready, writers)
            if ready.pushup is not None:
                ready.pushup.start()
            try:
                with self._reading():  # choosing asks the source its columns' types: a source gone now fails the read
                    encoding = choose_encoding(SourceStore(self._spec.source, run.ctx), writers.destinations.values(),
                                               local=ready.plan.engine != "spark",
                                               transformed=ready.plan.transforms is not None, log=self._log)
                    for dest in writers.destinations.values():
                        dest.load_source_form(loads_source_form(dest, encoding, local=ready.plan.engine != "spark"))
                    reads = ready.execution.start_reads(ready.read, SplitFeed(coordinator, ready.pushup, encoding))
            except _ReadFailed as failed:
                return Ended(abort=failed.abort, read_error=failed.error, coordinator=coordinator)
            pushup = ready.pushup if ready.plan.engine != "spark" else None
            over = run.source_limit.over()  # Spark has read every row by now
            if over:
                return Ended(abort=over, coordinator=coordinator, reads=reads, pushup=pushup)
            ready.execution.start_writes(writers, coordinator)
            abort = run.monitor.watch(reads, writers, Watch(
                stop=self._stop, stop_reason=lambda: self._stop_reason, source_over_limit=run.source_limit.over,
                progress=ready.execution.progress))
            return Ended(abort=abort, coordinator=coordinator, reads=reads, pushup=pushup)
        except InvalidTaskConfig as exc:
            self._log.error("task.invalid", problems=exc.problems, error_code=exc.code)
            return Ended(abort=str(exc), invalid=exc)

    def _coordinate(self, run: RunParts, ready: _Ready, writers: WriterManager) -> SplitCoordinator:
        """The split coordinator, from what each prepared destination already holds."""
        live = [d for d in writers.destinations.values() if d.live]
        recovery = self._conf.recovery
        coordinator = SplitCoordinator(
            list(ready.facts.splits), ready.plan.task_groups, durable=[d.id for d in live if d.durable],
            fire_and_forget=[d.id for d in live if not d.durable], held={d.id: d.held for d in live},
            retry=RetryPolicy(recovery.split_retries, recovery.retry_wait_s), stop=run.stop, log=self._log,
            context=RunContext(writers, self._recovery, ready.pushup))
        stats = coordinator.stats
        if self._resume_from is not None:
            self._log.info("task.resumed", splits=stats.splits, skipped=stats.skipped, resumed=stats.resumed,
                           held={d.id: len(d.held) for d in live if d.durable},
                           not_resumable=[d.id for d in live if not d.durable])
            if self._snapshot is not None:  # what the crashed run read came from its own, older instant
                self._log.info("snapshot.new_on_resume", splits_read=stats.splits - stats.skipped,
                               splits_kept=stats.skipped, position=self._snapshot.position)
        return coordinator

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A failure planning or reading the source aborts the task (a stop is not a failure)."""
        try:
            yield
        except InvalidTaskConfig:
            raise
        except Exception as exc:
            if self._stop.is_set():
                raise _ReadFailed(self._stop_reason, None) from exc
            error = describe(exc)
            self._log.error("reader.failed", error=error, error_code=getattr(exc, "code", None))
            raise _ReadFailed(f"read side failed: {error}", error) from exc

    # -- the end -----------------------------------------------------------------------------------

    def _finish(self, run: RunParts, planning: _Planning, writers: WriterManager, ended: Ended) -> RunResult:
        """Shut the sides down, finalize the destinations, and make the result."""
        self._shut_down(run, planning, writers, ended)
        abort = run.source_limit.final(ended.abort, run.counters.rows_read)
        read_error = ended.read_error
        reads = ended.reads
        if reads is not None and reads.error is not None and read_error is None and not writers.all_failed():
            read_error = describe(reads.error)
        if self._abandoned:
            writers.abandon()
        else:
            writers.finalize(reads.rows_sent if reads is not None else 0, abort)
            # settings.verify: each destination committed now, read back
            writers.verify(planning.facts.splits if planning.facts is not None else None)
        if self._recovery.checkpointer is not None:
            self._recovery.checkpointer.close()
        run.dirty.close()
        facts = planning.facts
        result = run_result(Finished(
            spec=self._spec, ids=RunIds(self._task_id, self._run_id), parts=run, writers=writers,
            execution=planning.execution, plan=planning.plan, window=planning.window,
            splits=len(facts.splits) if facts is not None else 0, ended=ended, abort=abort, read_error=read_error,
            interrupted=self._stop_reason is not None, resume_from=self._resume_from,
            committed_by=self._recovery.committed_by, snapshot=self._snapshot_described()))
        run.monitor.finish({d.id: d.outcome or d.state for d in writers.destinations.values()}, result.run_status)
        if self._checkpoints is None:
            self.release()  # no task database: nothing resumes this run, so its records can go now
        return result

    def _shut_down(self, run: RunParts, planning: _Planning, writers: WriterManager, ended: Ended) -> None:
        run.stop.set()
        if planning.ready is not None and planning.ready.pushup is not None:
            planning.ready.pushup.stop()
        if ended.abort is not None:
            writers.abort(ended.abort)
            planning.execution.cancel()
        deadline = time.monotonic() + self._conf.timeouts.shutdown_s
        reads_joined = ended.reads.join(deadline) if ended.reads is not None else True
        if not (reads_joined and writers.join(deadline)):
            self._log.warning("engine.threads_still_running", waited_s=self._conf.timeouts.shutdown_s)
        self._close_snapshot()  # every read has ended (or was given up on): its connections can go
        writers.poll()
        planning.execution.release()

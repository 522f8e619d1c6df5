"""Engine: one task run: plan -> read side -> write side -> monitor -> finalize -> result.

The task is already validated (``TaskSpec``) when the Engine gets it. ``run()`` never raises for a
store failure: every outcome becomes a :class:`RunResult` with per-destination statuses and the
exit code of DESIGN §11. ``stop()`` (SIGTERM) makes a running ``run()`` roll back and return. The
steps are the same for both engines; where the rows move is an :class:`Execution`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import cast

from wormhole import incremental
from wormhole.config import EngineConf, ErrorLimit, TaskSpec
from wormhole.counters import Counters, naming_first, percentage_limit, record_limit
from wormhole.dirty import DirtyFile
from wormhole.errors import ConfigError, InvalidTaskConfig, SplitLost
from wormhole.exchange import StorageManager
from wormhole.exchange.throttle import ReadMeasure, Throttle
from wormhole.execution import Execution, LocalExecution
from wormhole.log import Logger
from wormhole.monitor import MonitorManager, ProgressListener, ReadSide, RunNames, Watch
from wormhole.planning.encoded import choose_encoding
from wormhole.planning.plan import Plan, make_plan
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, Schema
from wormhole.reader_manager import ReaderManager, SplitFeed
from wormhole.recovery.checkpoint import CheckpointStore
from wormhole.recovery.coordinator import CoordinatorStats, RetryPolicy, SplitCoordinator
from wormhole.recovery.lease import Lease
from wormhole.recovery.state import RecoveryState
from wormhole.result import (
    EXIT_BAD_TASK,
    EXIT_CLAIMED,
    EXIT_FAILED,
    EXIT_PARTIAL,
    EXIT_SUCCESS,
    EXIT_SUCCESS_WITH_REJECTS,
    DestinationResult,
    RunReport,
    RunResult,
    SourceResult,
    task_outcome,
)
from wormhole.transform.pushup import PushUp, restore_placements
from wormhole.transform.report import transform_report
from wormhole.writer_manager import Destination, WriterManager, WriterSetup, describe

__all__ = ["EXIT_BAD_TASK", "EXIT_CLAIMED", "EXIT_FAILED", "EXIT_PARTIAL", "EXIT_SUCCESS",
           "EXIT_SUCCESS_WITH_REJECTS", "Engine", "RunResult"]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class _RunContext:
    """The split coordinator's context for this run (:class:`~wormhole.recovery.coordinator.CoordinatorContext`):
    a sealed split goes to the checkpoint, a destination lost for good fails on the write side."""

    def __init__(self, writers: WriterManager, recovery: RecoveryState, pushup: PushUp | None) -> None:
        self._writers = writers
        self._checkpointer = recovery.checkpointer
        self._pushup = pushup

    def split_sealed(self, split_id: str, destination: str, rows: int) -> None:
        if self._checkpointer is not None:
            # Each split's checkpoint names the transform placement it was read under.
            self._checkpointer.sealed(split_id, destination, rows,
                                      self._pushup.record(split_id) if self._pushup is not None else None)

    def destination_lost(self, destination: str, reason: str) -> None:
        self._writers.fail(destination, reason, SplitLost.code)


class _ReadFailed(Exception):
    """The read side could not be planned or read: the task aborts with ``abort``."""

    def __init__(self, abort: str | None, error: str | None) -> None:
        super().__init__(abort)
        self.abort, self.error = abort, error


@dataclass(eq=False)
class _Run:
    """The parts of one run, assembled before any store is touched."""

    dirty: DirtyFile
    storage: StorageManager
    counters: Counters
    monitor: MonitorManager
    ctx: ReadContext
    readers: ReaderManager
    side: WriterSetup
    """What the write side is made with, once the plan says how (its transforms, the execution)."""
    source_limit: ErrorLimit
    plan: Plan | None = None
    throttle: Throttle | None = None
    """The task's speed limits (None: it sets none)."""
    execution: Execution | None = None
    made: WriterManager | None = None
    """The write side, made after the plan (or, when planning failed, with nothing to write)."""
    pushup: PushUp | None = None
    coordinator: SplitCoordinator | None = None
    reads: ReadSide | None = None
    source_verdict: bool = False
    """The source went over its record limit during the run (the final count is named at the end)."""
    started_at: str = field(default_factory=_now)
    t0: float = field(default_factory=time.monotonic)

    @property
    def writers(self) -> WriterManager:
        assert self.made is not None  # made by the plan step, or when it failed
        return self.made

    def source_over_limit(self) -> str | None:
        verdict = record_limit(self.dirty.count("source"), self.source_limit.record, source=True)
        if verdict is None:
            return None
        self.source_verdict = True
        return naming_first(verdict, self.dirty.first("source")).message

    @property
    def channels(self) -> int:
        return self.plan.channels if self.plan is not None else 0

    @property
    def rows_sent(self) -> int:
        """Rows the read side sent to every destination (Spark: the rows it read)."""
        return self.reads.rows_sent if self.reads is not None else 0


class Engine:
    def __init__(self, conf: EngineConf, spec: TaskSpec, *, task_id: int, run_id: int, log: Logger,
                 listeners: Sequence[ProgressListener] = (), checkpoints: CheckpointStore | None = None,
                 resume_from: int | None = None, lease: Lease | None = None, taskdb_id: str = "",
                 finished_runs: frozenset[int] = frozenset()) -> None:
        """``listeners`` see the run's progress snapshots (a live display, a metrics endpoint).

        ``checkpoints``: where the run records its plan and each split's durability (a task-database
        connection of its own: the engine writes to it from its checkpoint thread only); None runs
        without checkpoints (``run FILE``). ``resume_from``: the run this one takes over (a crashed run
        of the same task): its planned splits are read, except those every destination already holds.
        ``lease``: the run's claim on its task; splits become durable and destinations are committed or
        rolled back only while it is live (None: nobody else can hold the task). ``taskdb_id``: the task
        database's id (destinations name their kept state by it). ``finished_runs``: runs that ended
        partial (their outcome recorded): what they committed is skipped, durable or not (a retry).
        """
        self._finished_runs = finished_runs
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
        self._invalid: InvalidTaskConfig | None = None
        """The task's transforms do not fit the source's schema (exit 204)."""
        self._run: _Run | None = None
        self._recovery = RecoveryState(run_id, run_id)
        self._engine = spec.settings.engine if spec.settings.engine != "auto" else "local"
        self._engine_reason = "not chosen yet"
        self._window: incremental.Window | None = None
        """An incremental run's window, once planned."""

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
        run = self._run
        if run is not None:
            run.monitor.notify()
            if run.execution is not None:
                run.execution.cancel()

    def run(self) -> RunResult:
        from wormhole import spark
        from wormhole.spark.config import choose

        choice = choose(self._conf.spark, self._spec.settings.spark)  # --spark-master, the task's, the env's
        self._conf = dataclasses.replace(self._conf, spark=choice.conf)
        spark.configure(choice.conf, choice.describe())
        recovery = self._recovery = RecoveryState.restore(
            self._checkpoints, task_id=self._task_id, run_id=self._run_id, resume_from=self._resume_from,
            finished_runs=self._finished_runs, log=self._log, stop=self._stop, lease=self._lease,
            taskdb_id=self._taskdb_id)
        run = self._run = self._assemble(recovery)
        self._log.info("task.started", source=self._spec.source.plugin,
                       destinations=[d.id for d in self._spec.destinations],
                       consistency=self._spec.settings.consistency)
        abort, read_error = self._move_rows(run)
        abort = self._source_verdict(run, abort)
        if run.readers.error is not None and read_error is None and not run.writers.all_failed():
            read_error = describe(run.readers.error)
        if self._abandoned:
            run.writers.abandon()
        else:
            run.writers.finalize(run.rows_sent, abort)
        if recovery.checkpointer is not None:
            recovery.checkpointer.close()
        run.dirty.close()
        result = self._result(run, abort, read_error)
        run.monitor.finish({d.id: d.outcome or d.state for d in run.writers.destinations.values()},
                           result.run_status)
        if self._checkpoints is None:
            self.release()  # no task database: nothing resumes this run, so its records can go now
        return result

    def release(self) -> None:
        """After the run's outcome is recorded in the task database: the committed destinations drop
        their own records of the run's splits (until then, a crash resumes them as committed)."""
        run = self._run
        if run is not None and not self._abandoned:
            run.writers.release()

    # -- the steps -----------------------------------------------------------------------------

    def _assemble(self, recovery: RecoveryState) -> _Run:
        conf, spec = self._conf, self._spec
        dirty = DirtyFile(Path(conf.paths.dirty_dir) / f"task-{self._task_id}" / f"run-{self._run_id}.jsonl")
        # A destination whose writers make splits durable gets a queue (lane) per writer thread: every
        # batch of a split reaches the one writer that holds the split's transaction.
        lanes = {d.id: d.concurrency for d in spec.destinations
                 if RecoveryState.durable(registry.sink(d.plugin))}
        storage = StorageManager([d.id for d in spec.destinations], conf.exchange, lanes)
        counters = Counters()
        names = RunNames(task_id=self._task_id, source=spec.source.plugin,
                         plugins={d.id: d.plugin for d in spec.destinations},
                         queue_rows=2 * conf.exchange.queue_rows)  # both arrays of a DoubleQueue hold rows
        monitor = MonitorManager(conf.monitor, counters, self._log, names=names, listeners=self._listeners)
        ex = conf.exchange
        # The source's wire text costs memory beside each batch: kept only when a destination may load it.
        keep_wire = any(registry.sink(d.plugin).uses_wire_text for d in spec.destinations)
        ctx = ReadContext(task_id=self._task_id, run_id=self._run_id, batch_rows=ex.batch_rows,
                          batch_bytes=ex.batch_bytes, dirty=dirty, plugin=spec.source.plugin, keep_wire=keep_wire,
                          stop=threading.Event())
        readers = ReaderManager(spec.source, ctx, conf, counters, monitor.notify, self._log, recovery)
        side = WriterSetup(spec, conf, storage, counters, monitor.notify, dirty, self._task_id, self._run_id, self._log)
        return _Run(dirty=dirty, storage=storage, counters=counters, monitor=monitor, ctx=ctx, readers=readers,
                    side=side, source_limit=spec.settings.error_limit or conf.error_limit,
                    throttle=Throttle.of(spec.settings.speed))

    def _write_side(self, run: _Run) -> None:
        """The write side, once the plan says how it writes (or with nothing to write: planning failed)."""
        if run.made is None:
            run.made = WriterManager(run.side, self._recovery, started=run.t0, plane=run.execution,
                                     transforms=run.plan.transforms if run.plan is not None else None)

    def _move_rows(self, run: _Run) -> tuple[str | None, str | None]:
        """Every step that moves rows; (why the task aborts or None, the read side's error)."""
        abort: str | None = None
        try:
            with self._reading():
                schema = self._plan(run)
            abort = self._transfer(run, schema)
        except InvalidTaskConfig as exc:  # transforms that do not fit the source's schema: nothing was prepared
            self._invalid = exc
            abort = str(exc)
            self._log.error("task.invalid", problems=exc.problems, error_code=exc.code)
        except _ReadFailed as failed:
            abort = failed.abort
            if failed.error is not None:
                return abort, failed.error
        finally:
            self._write_side(run)
            self._shut_down(run, abort)
        return abort, None

    def _plan(self, run: _Run) -> Schema:
        """The plan (an incremental task's window, reader periphery, engine, channels, splits, task groups),
        then the execution's read plan; the writers' schema."""
        spec = self._windowed(run)
        plan = run.plan = make_plan(spec, self._conf, run.readers, self._log)
        if self._window is not None:
            plan = run.plan = dataclasses.replace(plan, incremental=self._window.describe())
        self._engine, self._engine_reason = plan.engine, plan.engine_reason
        self._log.info("engine.chosen", engine=self._engine, reason=self._engine_reason)
        run.readers.assign(plan.task_groups)
        if self._recovery.checkpointer is not None:
            self._recovery.checkpointer.save_plan(run.readers.splits, self._window)
        run.execution = self._execution(run)
        schema = run.execution.prepare_source(run.readers)
        self._write_side(run)
        run.pushup = self._place_transforms(run, plan)
        return schema

    def _windowed(self, run: _Run) -> TaskSpec:
        """The spec this run plans with: an incremental task's window as transforms (the window a resumed
        chain recorded, else a new one from the source's bounds and the kept watermarks)."""
        if self._spec.source.incremental is None:
            return self._spec
        window = self._recovery.window
        if window is None:
            store = self._checkpoints
            window = incremental.fresh_window(self._spec, run.ctx, self._task_id,
                                              store.watermarks if store is not None else lambda _key: {})
        self._window = window
        self._log.info("incremental.window", resumed=self._recovery.window is not None, **window.describe())
        return cast(TaskSpec, incremental.windowed(self._spec, window))

    def _place_transforms(self, run: _Run, plan: Plan) -> PushUp | None:
        """The destinations' chains, and where the task's operators run: in Spark, as Columns on the
        source's DataFrame; locally, split by split between the source query and the reader threads."""
        transforms = plan.transforms
        if transforms is None:
            return None
        if self._engine == "spark":  # SparkExecution applies them as Spark Columns (it got them when it was made)
            pushed = [s for s, p in self._recovery.placements.items() if p.get("pushed")]
            if pushed:
                self._log.info("pushup.not_reproduced", splits=len(pushed),
                               reason="Spark reads every split under the static placement; the output is the same")
            return None
        busy = registry.source(self._spec.source.plugin).busy_threads  # the store's function, if it has one
        periphery = run.readers.periphery
        probe = partial(busy, periphery) if busy is not None and periphery is not None else None
        # A resumed run re-reads each split some destination holds under the placement it was read under.
        pinned = restore_placements(transforms, dict(self._recovery.placements), self._log)
        return PushUp(transforms, self._conf.pushup, self._log, channels=plan.channels, probe=probe, pinned=pinned)

    def _transfer(self, run: _Run, schema: Schema) -> str | None:
        """Prepare the destinations, start reading and writing, and watch; why the task aborts, or None."""
        if not self._stop.is_set():
            run.writers.prepare(schema)
        if self._stop.is_set():
            return self._stop_reason
        if run.writers.all_failed():
            return None
        assert run.execution is not None
        coordinator = run.coordinator = self._coordinate(run)
        if run.pushup is not None:
            run.pushup.start()
        with self._reading():  # choosing asks the source its columns' types: a source gone now fails the read
            encoding = choose_encoding(run.readers, run.writers.destinations.values(), local=self._engine != "spark",
                                       transformed=run.plan is not None and run.plan.transforms is not None,
                                       log=self._log)
            run.reads = run.execution.start_reads(run.readers, SplitFeed(coordinator, run.pushup, encoding))
        over = run.source_over_limit()  # Spark has read every row by now
        if over:
            return over
        run.execution.start_writes(run.writers, coordinator)
        return run.monitor.watch(run.reads, run.writers, Watch(
            stop=self._stop, stop_reason=lambda: self._stop_reason, source_over_limit=run.source_over_limit,
            progress=run.execution.progress))

    def _coordinate(self, run: _Run) -> SplitCoordinator:
        """The split coordinator, from what each prepared destination already holds."""
        live = [d for d in run.writers.destinations.values() if d.live]
        recovery = self._conf.recovery
        coordinator = SplitCoordinator(
            run.readers.splits, run.readers.groups, durable=[d.id for d in live if d.durable],
            fire_and_forget=[d.id for d in live if not d.durable], held={d.id: d.held for d in live},
            retry=RetryPolicy(recovery.split_retries, recovery.retry_wait_s), stop=run.readers.stop, log=self._log,
            context=_RunContext(run.writers, self._recovery, run.pushup))
        stats = coordinator.stats
        if self._resume_from is not None:
            self._log.info("task.resumed", splits=stats.splits, skipped=stats.skipped, resumed=stats.resumed,
                           held={d.id: len(d.held) for d in live if d.durable},
                           not_resumable=[d.id for d in live if not d.durable])
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

    def _shut_down(self, run: _Run, abort: str | None) -> None:
        run.readers.stop.set()
        if run.pushup is not None:
            run.pushup.stop()
        if abort is not None:
            run.writers.abort(abort)
            if run.execution is not None:
                run.execution.cancel()
        deadline = time.monotonic() + self._conf.timeouts.shutdown_s
        if not (run.readers.join(deadline) and run.writers.join(deadline)):
            self._log.warning("engine.threads_still_running", waited_s=self._conf.timeouts.shutdown_s)
        run.writers.poll()
        if run.execution is not None:
            run.execution.release()

    def _source_verdict(self, run: _Run, abort: str | None) -> str | None:
        if run.source_verdict:
            # The verdict ended the run (the monitor returns on it at once). Readers still running
            # then may have rejected more rows before they stopped: name the final count, the one
            # in the result and in the dirty file.
            return run.source_over_limit() or abort
        if abort is None:
            rejected = run.dirty.count("source")
            verdict = percentage_limit(rejected, rejected + run.counters.rows_read, run.source_limit.percentage,
                                       source=True)
            return naming_first(verdict, run.dirty.first("source")).message if verdict is not None else None
        return abort

    # -- execution ----------------------------------------------------------------------------

    def _execution(self, run: _Run) -> Execution:
        if self._engine != "spark":
            return LocalExecution(run.storage, run.throttle)
        from wormhole import spark

        if not spark.available():
            raise ConfigError("settings.engine 'spark' needs pyspark: pip install 'wormhole[spark]'")
        from wormhole.spark.runner import SparkExecution

        return SparkExecution(self._conf, run.ctx, run.dirty, run.counters, self._spec.source, self._log,
                              run.throttle, run.plan.transforms if run.plan is not None else None,
                              self._spec.destinations)

    # -- the result ----------------------------------------------------------------------------

    def _result(self, run: _Run, abort: str | None, read_error: str | None) -> RunResult:
        destinations = {d.id: self._destination_result(run, d, self._recovery.committed_by)
                        for d in run.writers.destinations.values()}
        rejected = any(d.rows_rejected for d in destinations.values()) or run.dirty.count("source") > 0
        status, exit_code = task_outcome([d.status for d in destinations.values()], rejected)
        if self._invalid is not None:
            status, exit_code = "failed", self._invalid.exit_code
        errors = [f"{k}: {d.error}" for k, d in destinations.items() if d.error and d.status == "failed"]
        error = abort or ("; ".join(errors) if errors else None)
        interrupted = self._stop_reason is not None
        coordinator = run.coordinator
        stats = coordinator.stats if coordinator is not None else CoordinatorStats()
        source = SourceResult(plugin=self._spec.source.plugin, rows_read=run.counters.rows_read,
                              rows_rejected=run.dirty.count("source"), splits=len(run.readers.splits),
                              channels=run.channels, estimated_rows=run.counters.estimated_rows, error=read_error,
                              splits_skipped=stats.skipped, splits_resumed=stats.resumed,
                              splits_retried=stats.retried, rows_reread=stats.rows_reread)
        speed = (run.execution.measure() if run.execution is not None else ReadMeasure()).result(
            self._spec.settings.speed)
        report = RunReport(
            task_id=self._task_id, run_id=self._run_id, status=status, exit_code=exit_code, engine=self._engine,
            engine_reason=self._engine_reason, consistency=self._spec.settings.consistency,
            started_at=run.started_at, finished_at=_now(), duration_s=round(time.monotonic() - run.t0, 3),
            interrupted=interrupted, source=source, speed=speed, destinations=destinations, error=error,
            dirty_file=str(run.dirty.path) if run.dirty.counts else None,
            spark=run.execution.describe() if run.execution is not None else None,
            plan=run.plan.to_dict() if run.plan is not None else None, resumed_from_run=self._resume_from,
            incremental=None if self._window is None else incremental.outcome(
                self._window, {k: d.status == "success" for k, d in destinations.items()}),
            transforms=transform_report(run.writers.transforms, run.readers.pushup, run.writers.destinations.values()))
        return RunResult(report, run_status="interrupted" if interrupted else status)

    @staticmethod
    def _destination_result(run: _Run, dest: Destination, run_by: Mapping[str, int]) -> DestinationResult:
        totals = run.counters.totals(dest.id)
        end = dest.finished or time.monotonic()
        return DestinationResult(
            plugin=dest.plugin, status=dest.outcome, rows_delivered=totals.delivered, rows_written=totals.written,
            rows_rejected=totals.rejected, bytes=totals.bytes, duration_s=round(end - dest.started, 3),
            rolled_back=(dest.outcome != "success" and dest.periphery is not None and dest.rollback_error is None
                         and not dest.left),
            rollback_error=dest.rollback_error, error=dest.error, error_code=dest.error_code,
            rows_filtered=totals.filtered,
            rows_resumed=sum(dest.held.values()) if dest.committed_before is None else dest.committed_before,
            splits_resumed=len(dest.held) if dest.committed_before is None else len(run.readers.splits),
            skipped=None if dest.committed_before is None else f"committed by run {run_by.get(dest.id)}")


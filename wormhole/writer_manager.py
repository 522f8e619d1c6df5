"""WriterManager: per destination, its periphery, its own writer pool, and its commit or rollback.

For each destination, in turn:
1. ``prepare()``: the writer periphery (temporary directory, transaction, target checks) under a
   timeout; a destination that cannot prepare fails alone and its queue is closed;
2. ``start()``: ``concurrency`` writer threads pull batches from the destination's storage;
3. ``poll()`` (from the monitor loop): a failed thread fails its destination and closes its queue,
   so readers never block on it;
4. ``finalize()``: judge every destination, then commit the succeeded ones and roll back the
   others (all of them under ``all_or_nothing``, or when the read side failed).

Rejected rows and the record limit: the limit is judged on the destination's total. The writer
thread whose rejections take the total over it stops the destination's queue at once, so no
writer takes another batch; a batch another thread already holds is finished and accounted for
(those rows did reach the store). The failure is declared once every writer thread has stopped,
with the final total, so the message, ``rows_rejected`` and the dirty-file lines agree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from wormhole.config import EngineConf, ErrorLimit, TaskSpec
from wormhole.counters import Counters, WriterCounters, judge, record_limit, write_counted
from wormhole.dirty import DirtyFile
from wormhole.errors import (
    CommitError,
    DirtyLimitExceeded,
    PrepareError,
    PrepareTimeout,
    RolledBack,
    RowsUnaccounted,
    TaskAborted,
    WormholeError,
    WriteError,
    WriterStalled,
    WritersUnfinished,
)
from wormhole.exchange import BufferedLineExchanger, RAMStorage, StorageManager
from wormhole.log import Logger
from wormhole.plugins import registry
from wormhole.plugins.base import (
    DurablePeriphery,
    Schema,
    SinkRole,
    SplitWriter,
    WriteContext,
    WriterPeriphery,
)
from wormhole.pool import run_with_timeout, spawn
from wormhole.recovery.checkpoint import Checkpointer
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.recovery.crash import crash_points
from wormhole.recovery.lease import Lease
from wormhole.recovery.split_lane import SplitLane, makes_splits_durable
from wormhole.transform.chain import Chain, ChainRunner
from wormhole.transform.plan import TransformPlan
from wormhole.transform.writer import transforming

Outcome = Literal["success", "failed", "rolled_back"]


def describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, WormholeError) else f"{type(exc).__name__}: {text}"


@dataclass(eq=False)
class DestinationRun:
    id: str
    plugin: str
    options: Any
    concurrency: int
    sink: SinkRole
    storage: RAMStorage
    limit: ErrorLimit
    log: Logger
    ctx: WriteContext | None = None
    periphery: WriterPeriphery | None = None
    futures: list[Future[None]] = field(default_factory=list)
    state: Literal["pending", "running", "done", "failed"] = "pending"
    outcome: Outcome | None = None
    error: str | None = None
    error_code: str | None = None
    rollback_error: str | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    queued: int | None = None
    """Rows handed to the destination when no queue carries them (Spark mode: the source's count)."""
    over_limit_at: float | None = None
    """When a writer's rejections took the total over the record limit (monotonic), else None."""
    stop: threading.Event = field(default_factory=threading.Event)
    """The destination's stop signal (its WriteContext's): set when it fails or the task aborts."""
    durable: bool = False
    """Its writers make each split durable (SplitWriter): it resumes, and a lost split is written again."""
    held: dict[str, int] = field(default_factory=dict)
    """Splits it held durably before this run started (resumed runs): split id -> rows."""
    sealed: dict[str, int] = field(default_factory=dict)
    """Splits it made durable in this run: split id -> rows written."""
    fresh: bool = False
    """Prepared as a fresh run even when the run resumes (it is written whole: Spark's native write)."""
    on_fail: Callable[[str], None] | None = None
    """Told when the destination fails (the split coordinator stops waiting for it)."""
    left: bool = False
    """Neither committed nor rolled back: the run lost (or could not confirm) its claim on the task."""
    committed_before: int | None = None
    """A run of the chain this run resumes committed it (rows, per the checkpoint), and it keeps no record
    of its own: it is neither prepared nor written nor committed again."""
    chain: Chain | None = None
    """Its own transforms (run in its writer threads, local mode), else None."""
    runners: list[ChainRunner] = field(default_factory=list)
    """One per writer thread that ran the chain: their metrics."""

    def fail(self, reason: str, code: str = WriteError.code) -> None:
        """First failure wins; the queue is aborted so the readers never wait on this destination."""
        self.stop.set()
        if self.state != "failed":
            self.state = "failed"
            self.error = reason
            self.error_code = code
            self.finished = time.monotonic()
            self.log.error("destination.failed", error=reason, error_code=code)
        self.storage.fail(reason)
        if self.on_fail is not None:
            self.on_fail(self.id)


class WriterManager:
    def __init__(self, spec: TaskSpec, conf: EngineConf, storage: StorageManager, counters: Counters,
                 notify: Callable[[Any], None], dirty: DirtyFile, task_id: int, run_id: int, log: Logger,
                 origin_run_id: int | None = None, lease: Lease | None = None, taskdb_id: str = "") -> None:
        """``origin_run_id``: the run whose destination state this run continues (a resumed run);
        ``lease``: the run's claim on its task (None: no task database, nobody else can hold it);
        ``taskdb_id``: the task database's id, which destinations name their kept state by."""
        self._taskdb_id = taskdb_id
        self._spec = spec
        self._conf = conf
        self._counters = counters
        self._notify = notify
        self._dirty = dirty
        self._task_id = task_id
        self._run_id = run_id
        self.destinations: dict[str, DestinationRun] = {}
        self._aborting: str | None = None
        self._origin_run_id = origin_run_id
        self.coordinator: SplitCoordinator | None = None
        self.crash_hook = crash_points(log)  # a no-op unless a test installed crash points
        self.lease = lease
        self.committed_before: dict[str, int] = {}
        """Destinations a run of the resumed chain committed (the checkpoint's commit rows)."""
        self.settled: set[str] = set()
        """Destinations a run of the chain whose outcome was recorded committed (a retried partial task):
        skipped, durable or not (their own records went when that run's outcome was recorded)."""
        self.checkpointer: Checkpointer | None = None
        self.transforms: TransformPlan | None = None
        """The run's transform plan (set before ``prepare``): each destination's schema and chain."""
        for dest in spec.destinations:
            sink = registry.get(dest.plugin).sink
            assert sink is not None  # validated with the task
            self.destinations[dest.id] = DestinationRun(
                id=dest.id, plugin=dest.plugin, options=dest.options, concurrency=dest.concurrency, sink=sink,
                storage=storage.for_writer(dest.id), limit=spec.error_limit_for(dest, conf),
                log=log.bind(destination=dest.id, plugin=dest.plugin), durable=makes_splits_durable(sink))

    # -- start-up ------------------------------------------------------------------------------

    def write_whole(self, engine: str) -> None:
        """Before ``prepare``: in Spark mode a destination whose native write replaces its whole output
        is not written split by split; it starts afresh every run (a crashed run's state is a leftover)."""
        if engine != "spark":
            return
        for dest in self.destinations.values():
            if dest.durable and dest.sink.spark_replaces is not None and dest.sink.spark_replaces(dest.options):
                dest.durable = False
                dest.fresh = True

    def prepare(self, schema: Schema) -> None:
        timeout = self._conf.timeouts.writer_prepare_s
        for dest in self.destinations.values():
            if dest.id in self.committed_before and (dest.id in self.settled or not dest.durable):
                # Committed before the crash (or by the partial run a retry resumes), and nothing of its own
                # to ask: loading it again would write its rows twice (an append), so it is left as it is.
                dest.committed_before = self.committed_before[dest.id]
                dest.state = "done"
                dest.log.info("destination.committed_before", rows=dest.committed_before)
                continue
            if self.transforms is not None:
                dest.chain = self.transforms.destination_chain(dest.id)
                schema_here = dest.chain.output
            else:
                schema_here = schema
            ctx = WriteContext(task_id=self._task_id, run_id=self._run_id, destination=dest.id, schema=schema_here,
                               batch_rows=self._conf.exchange.batch_rows, concurrency=dest.concurrency,
                               plugin=dest.plugin, stop=dest.stop,
                               origin_run_id=None if dest.fresh else self._origin_run_id, taskdb_id=self._taskdb_id)
            dest.ctx = ctx
            try:
                dest.periphery = dest.sink.periphery(dest.options, ctx)
                run_with_timeout(dest.periphery.prepare, timeout, f"prepare-{dest.id}")
                if dest.durable and isinstance(dest.periphery, DurablePeriphery):
                    # The destination's own record: the truth on resume, whatever the checkpoint says.
                    dest.held = dict(dest.periphery.durable_splits())
                elif dest.durable:
                    dest.durable = False  # writers without the periphery's record cannot resume
            except TimeoutError:
                dest.fail(f"preparing the destination did not finish within {timeout:g} s", PrepareTimeout.code)
            except Exception as exc:
                dest.fail(f"prepare failed: {describe(exc)}", getattr(exc, "code", PrepareError.code))
            else:
                dest.log.info("destination.prepared", durable_splits=dest.durable,
                              **({"resumed_splits": len(dest.held)} if ctx.resuming else {}))

    def start(self) -> None:
        for dest in self.destinations.values():
            if dest.state == "failed" or dest.committed_before is not None:
                continue
            dest.state = "running"
            for worker in range(dest.concurrency):
                counters = self._counters.new_writer(dest.id)
                future = spawn(self._write, dest, worker, counters, name=f"writer-{dest.id}-{worker}")
                future.add_done_callback(self._notify)
                dest.futures.append(future)
            dest.log.info("destination.started", threads=dest.concurrency)

    def start_jobs(self, job: Callable[[DestinationRun, WriterCounters], None], rows: int) -> None:
        """Spark mode: one driver thread per destination runs ``job`` (its Spark job) over ``rows`` rows."""
        for dest in self.destinations.values():
            if dest.state == "failed" or dest.committed_before is not None:
                continue
            dest.state = "running"
            dest.queued = rows
            counters = self._counters.new_writer(dest.id)
            future = spawn(job, dest, counters, name=f"writer-{dest.id}")
            future.add_done_callback(self._notify)
            dest.futures.append(future)
            dest.log.info("destination.started", threads=1)

    def _write(self, dest: DestinationRun, worker: int, counters: WriterCounters) -> None:
        assert dest.ctx is not None  # set when the destination was prepared, before any writer starts
        writer = dest.sink.writer(dest.options, dest.ctx, dest.periphery, worker)
        if dest.chain is not None and dest.chain.ops:
            runner = dest.chain.runner()
            dest.runners.append(runner)
            writer = transforming(writer, runner)
        try:
            writer.open()  # inside the try: the contract says close() always runs, also after a failed open
            if dest.durable:
                assert isinstance(writer, SplitWriter)
                self._write_splits(dest, worker, writer, counters)
                return
            for batch in BufferedLineExchanger.receive(dest.storage, self._conf.monitor.interval_s, worker):
                if batch.control == "abort":
                    # Rows of a split whose read broke reached this destination, and it cannot
                    # discard them: re-reading the split would write them twice. Its failure alone.
                    raise WriteError(f"reading split {batch.split_id} failed ({batch.reason}) after some of its "
                                     f"rows were written here, and a {dest.plugin} destination cannot discard "
                                     f"part of a split, so it is not read again for this destination",
                                     destination=dest.id, plugin=dest.plugin)
                if batch.control is not None:
                    continue
                if write_counted(writer, batch.rows, counters, lambda bad: self._dirty.reject(dest.id, bad),
                                 destination=dest.id, plugin=dest.plugin, nbytes=batch.nbytes):
                    self._check_record_limit(dest)
            writer.flush()
        finally:
            writer.close()

    def _write_splits(self, dest: DestinationRun, worker: int, writer: SplitWriter,
                      counters: WriterCounters) -> None:
        """A SplitWriter's lane: each split's batches, then its end (made durable) or abort (discarded)."""
        assert self.coordinator is not None
        lane = SplitLane(dest.id, dest.plugin, dest.log, worker, writer, counters, self.coordinator,
                         reject=partial(self._dirty.reject, dest.id), crash_hook=self.crash_hook, sealed=dest.sealed,
                         check_limit=partial(self._check_record_limit, dest), lease=self.lease)
        try:
            for batch in BufferedLineExchanger.receive(dest.storage, self._conf.monitor.interval_s, worker):
                lane.take(batch)
        finally:
            lane.close()

    def _check_record_limit(self, dest: DestinationRun) -> None:
        # Checked while running, so a hopeless destination stops early (DataX's rule).
        limit = dest.limit.record
        rejected = self._counters.totals(dest.id).rejected
        verdict = record_limit(rejected, limit)
        if verdict is not None and limit is not None:
            if dest.over_limit_at is None:
                dest.over_limit_at = time.monotonic()
            # Stop the queue now: the other writer threads take no further batch (poll() may be a
            # monitor interval away). The message with the final total is built in poll().
            dest.storage.fail(f"over the record limit of {limit}")
            raise DirtyLimitExceeded(verdict.message, limit=limit, observed=rejected,
                                     destination=dest.id)

    def _fail_over_limit(self, dest: DestinationRun) -> None:
        """Fail ``dest`` for its record limit, naming its total now that its writers have stopped."""
        rejected = self._counters.totals(dest.id).rejected
        verdict = record_limit(rejected, dest.limit.record)
        assert verdict is not None  # only called once the total went over the limit
        dest.fail(verdict.message, verdict.code)

    # -- monitoring ----------------------------------------------------------------------------

    def poll(self) -> None:
        for dest in self.destinations.values():
            if dest.state != "running":
                continue
            if dest.over_limit_at is None and any(f.done() and isinstance(f.exception(), DirtyLimitExceeded)
                                                  for f in dest.futures):
                dest.over_limit_at = time.monotonic()  # Spark mode: the job itself raised
            if dest.over_limit_at is not None:
                # Wait for every writer thread (each finishes at most the batch it holds), so the
                # message names the final total; the queue is already stopped, so the readers do
                # not wait on this destination. A hung writer is waited for shutdown_s at most.
                waited = time.monotonic() - dest.over_limit_at
                if all(f.done() for f in dest.futures) or waited > self._conf.timeouts.shutdown_s:
                    self._fail_over_limit(dest)
                continue
            if dest.storage.failure is not None and self._aborting is None:
                dest.fail(dest.storage.failure, WriterStalled.code)
                continue
            finished = 0
            for future in dest.futures:
                if not future.done():
                    continue
                finished += 1
                exc = future.exception()
                if exc is not None and not isinstance(exc, TaskAborted):
                    dest.fail(describe(exc), getattr(exc, "code", WriteError.code))
                    break
            else:
                if finished == len(dest.futures):
                    dest.state = "done"
                    dest.finished = time.monotonic()
                    dest.log.info("destination.written", **_totals(self._counters, dest.id))

    def states(self) -> Mapping[str, str]:
        return {dest_id: dest.state for dest_id, dest in self.destinations.items()}

    def all_finished(self) -> bool:
        return all(d.state in ("done", "failed") for d in self.destinations.values())

    def all_failed(self) -> bool:
        return all(d.state == "failed" for d in self.destinations.values())

    def join(self, deadline: float) -> bool:
        """Wait for writer threads until ``deadline`` (monotonic); False if some still run."""
        for dest in self.destinations.values():
            for future in dest.futures:
                try:
                    future.exception(timeout=max(deadline - time.monotonic(), 0))
                except TimeoutError:
                    return False
        return True

    # -- the end -------------------------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Stop every destination's writers (task-level abort); healthy ones will be rolled back."""
        self._aborting = reason
        for dest in self.destinations.values():
            dest.stop.set()
            dest.storage.fail(reason)

    def abandon(self) -> None:
        """Leave every destination as it is (another process resumes it): no commit, no rollback."""
        for dest in self.destinations.values():
            self._leave(dest, "abandoned: another process took the task over and resumes it")

    @staticmethod
    def _leave(dest: DestinationRun, reason: str) -> None:
        dest.outcome = "failed"
        dest.left = True
        dest.error = dest.error or reason
        dest.log.warning("destination.abandoned", reason=reason)

    def _hold(self, dest: DestinationRun) -> bool:
        """Commit and rollback touch a destination only while the run's claim is live (the lease): once
        it is lost, or not confirmed when the run stops, the destination is left as it is for the
        process that holds the task next."""
        if self.lease is None or dest.periphery is None:
            return True
        try:
            self.lease.hold(f"destination {dest.id}")
        except TaskAborted as exc:
            self._leave(dest, str(exc))
            return False
        return True

    def release(self) -> None:
        """Once the run's outcome is recorded: each committed destination drops its own record of the
        run's splits (kept through commit, so a crash before the outcome is recorded resumes as
        committed). A failure leaves that record as a leftover, which the next run removes."""
        for dest in self.destinations.values():
            if dest.outcome != "success" or not isinstance(dest.periphery, DurablePeriphery):
                continue
            try:
                dest.periphery.release()
            except Exception as exc:
                dest.log.warning("destination.release_failed", error=describe(exc))

    def finalize(self, rows_sent: int, abort_reason: str | None) -> None:
        """Judge, then commit or roll back every destination; sets each ``outcome``."""
        for dest in self.destinations.values():
            if dest.state == "done" and abort_reason is None:
                totals = self._counters.totals(dest.id)
                if dest.durable:  # what it received of each split it sealed (checked batch by batch)
                    sent = queued = totals.delivered
                elif dest.queued is not None:  # Spark mode: the source's count
                    sent, queued = rows_sent, dest.queued
                else:
                    sent, queued = dest.storage.rows_offered, dest.storage.rows_in
                missing = self.coordinator.missing(dest.id) if self.coordinator is not None else []
                verdict = judge(rows_sent=sent, rows_queued=queued, totals=totals, limit=dest.limit)
                if missing:
                    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                    dest.fail(f"{len(missing)} split(s) never became durable here: {shown}", RowsUnaccounted.code)
                elif verdict is not None:
                    dest.fail(verdict.message, verdict.code)
            elif dest.state == "running" and dest.over_limit_at is not None:
                self._fail_over_limit(dest)  # a writer thread outlived the shutdown wait
            elif dest.state in ("pending", "running") and abort_reason is None:
                dest.fail("writers did not finish", WritersUnfinished.code)
        failed = [d.id for d in self.destinations.values() if d.state == "failed"]
        if abort_reason is None and failed and self._spec.settings.consistency == "all_or_nothing":
            abort_reason = f"destination(s) {', '.join(failed)} failed and consistency is all_or_nothing"
        for dest in self.destinations.values():
            if dest.state != "failed" and abort_reason is None:
                self.crash_hook.reached("before_commit", dest.id, None)
            if not self._hold(dest):
                continue
            if dest.committed_before is not None:
                self._settle_committed_before(dest, abort_reason)
            elif dest.state == "failed":
                self._rollback(dest, healthy_reason=None)
            elif abort_reason is not None:
                self._rollback(dest, healthy_reason=abort_reason)
            else:
                self._commit(dest)

    @staticmethod
    def _settle_committed_before(dest: DestinationRun, abort_reason: str | None) -> None:
        if abort_reason is None:
            dest.outcome = "success"
            return
        dest.outcome = "failed"
        dest.error = f"rolled back: {abort_reason}"
        dest.rollback_error = "not rolled back: an earlier run of the task committed it before it crashed"

    def _commit(self, dest: DestinationRun) -> None:
        try:
            assert dest.periphery is not None  # a destination without one failed at prepare
            dest.periphery.commit()
            if self.checkpointer is not None:
                self.checkpointer.committed(dest.id, self._counters.totals(dest.id).written)
            self.crash_hook.reached("after_commit", dest.id, None)
        except Exception as exc:
            dest.fail(f"commit failed: {describe(exc)}", getattr(exc, "code", CommitError.code))
            self._rollback(dest, healthy_reason=None)
            return
        dest.outcome = "success"
        dest.log.info("destination.committed")

    def _rollback(self, dest: DestinationRun, healthy_reason: str | None) -> None:
        if healthy_reason is not None:
            # The destination itself was fine; something else decided it must not keep its rows.
            dest.error = f"rolled back: {healthy_reason}"
            dest.error_code = RolledBack.code
        dest.outcome = "rolled_back" if healthy_reason is not None else "failed"
        if dest.periphery is None:
            return
        try:
            dest.periphery.rollback()
        except Exception as exc:
            dest.rollback_error = describe(exc)
            dest.log.error("destination.rollback_failed", error=dest.rollback_error)
        else:
            dest.log.info("destination.rolled_back", reason=dest.error)


def _totals(counters: Counters, destination: str) -> dict[str, int]:
    t = counters.totals(destination)
    return {"delivered": t.delivered, "written": t.written, "rejected": t.rejected}

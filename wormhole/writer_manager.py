"""WriterManager: per destination, its periphery, its own writer pool, and its commit or rollback.

For each destination, in turn:
1. ``prepare()``: the writer periphery (temporary directory, transaction, target checks) under a
   timeout; a destination that cannot prepare fails alone and its queue is closed;
2. ``start()``: ``concurrency`` writer threads pull batches from the destination's storage;
3. ``poll()`` (from the monitor loop): a failed thread fails its destination and closes its queue,
   so readers never block on it;
4. ``finalize()``: judge every destination, then commit the succeeded ones and roll back the
   others (all of them under ``all_or_nothing``, or when the read side failed).

Each destination is a :class:`~wormhole.destination.Destination`, whose transitions these steps call;
what the chain of runs already holds comes in the :class:`~wormhole.recovery.state.RecoveryState`.

Rejected rows and the record limit: the limit is judged on the destination's total. The writer
thread whose rejections take the total over it stops the destination's queue at once, so no
writer takes another batch; a batch another thread already holds is finished and accounted for
(those rows did reach the store). Within a batch, the writer stops at its first rejection past the
limit (``WriteContext.record_limit``; the rows it did not try are ``WriteResult.stopped``). The
failure is declared once every writer thread has stopped, with the final total, so the message,
``rows_rejected`` and the dirty-file lines agree; it ends with the first rejection's reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from wormhole.config import EngineConf
from wormhole.counters import Counters, WriterCounters, naming_first, record_limit, write_counted
from wormhole.destination import Destination, DestinationSetup, Ending, WritePlane, describe
from wormhole.dirty import DirtyFile
from wormhole.errors import DirtyLimitExceeded, TaskAborted, WriteError, WriterStalled, WritersUnfinished
from wormhole.exchange import BufferedLineExchanger, StorageManager
from wormhole.log import Logger
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, Schema, SparkAccess, Split, SplitWriter, WriteContext, WriteResult
from wormhole.plugins.shared import RunShared
from wormhole.pool import joined, settled, spawn
from wormhole.recovery.checkpoint import SplitDigest
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.recovery.crash import crash_points
from wormhole.recovery.lease import Lease
from wormhole.recovery.split_lane import LaneHooks, LaneOf, SplitLane
from wormhole.recovery.state import RecoveryState
from wormhole.task_spec import TaskSpec
from wormhole.transform.plan import TransformPlan
from wormhole.transform.writer import transforming
from wormhole.verify.checksum import CHECKSUM_VERSION, Digest
from wormhole.verify.inrun import DestinationCheck, Verification
from wormhole.verify.sent import Record, verifying

__all__ = ["Destination", "WriterManager", "WriterSetup", "describe"]


class EncodedTarget:
    """An :class:`~wormhole.plugins.writing.EncodedWriter` (a SplitWriter too, for a durable destination) as the
    engine drives any writer: each ``write``/``write_split`` is its ``write_encoded``."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def open(self) -> None:
        self._writer.open()

    def write(self, batch: Batch) -> WriteResult:
        return self._writer.write_encoded(batch)  # type: ignore[no-any-return]

    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        return self._writer.write_encoded(batch, split_id)  # type: ignore[no-any-return]

    def end_split(self, split_id: str, rows: int) -> None:
        self._writer.end_split(split_id, rows)

    def abort_split(self, split_id: str) -> None:
        self._writer.abort_split(split_id)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


@dataclass(frozen=True, slots=True)
class WriterSetup:
    """What the write side of a run is made with (besides its recovery state)."""

    spec: TaskSpec
    conf: EngineConf
    storage: StorageManager
    counters: Counters
    notify: Callable[[Any], None]
    """Called with each writer thread's future once it is done (wakes the monitor)."""
    dirty: DirtyFile
    task_id: int
    run_id: int
    log: Logger
    spark: SparkAccess | None = None
    """The run's Spark, which each destination's context gives its store."""
    shared: RunShared | None = None
    """What the table runs of a database task share, which each destination's context gives its store."""


class WriterManager:
    def __init__(self, side: WriterSetup, recovery: RecoveryState, plane: WritePlane, *,
                 transforms: TransformPlan | None = None, started: float | None = None) -> None:
        """``recovery``: what the chain of runs already holds, the checkpointer and the lease;
        ``transforms``: the run's transform plan (each destination's schema and chain); ``plane``: the
        execution, asked which destinations are written whole and what each was handed; ``started``:
        when the run started (monotonic), each destination's start."""
        self._side = side
        self._spec, self._conf, self._counters, self._dirty = side.spec, side.conf, side.counters, side.dirty
        self._recovery = recovery
        self._transforms = transforms
        self._plane = plane
        self._aborting: str | None = None
        self._coordinator: SplitCoordinator | None = None
        self._ending = Ending(recovery.lease, recovery.checkpointer, crash_points(side.log))
        self.checks: dict[str, DestinationCheck] = {}
        """``settings.verify``: each prepared destination's verification (:mod:`wormhole.verify.inrun`)."""
        self.verified: dict[str, Verification] = {}
        self.destinations: dict[str, Destination] = {}
        for dest in side.spec.destinations:
            sink = registry.get(dest.plugin).sink
            assert sink is not None  # validated with the task
            setup = DestinationSetup(id=dest.id, plugin=dest.plugin, options=dest.options,
                                     concurrency=dest.concurrency, sink=sink,
                                     limit=side.spec.error_limit_for(dest, side.conf),
                                     log=side.log.bind(destination=dest.id, plugin=dest.plugin))
            self.destinations[dest.id] = Destination(
                setup, side.storage.for_writer(dest.id), recovery,
                written_whole=self._plane.writes_whole(sink, dest.options), started=started)

    @property
    def transforms(self) -> TransformPlan | None:
        """The run's transform plan (None: the task has none)."""
        return self._transforms

    @property
    def lease(self) -> Lease | None:
        return self._recovery.lease

    # -- start-up ------------------------------------------------------------------------------

    def prepare(self, schema: Schema) -> None:
        timeout = self._conf.timeouts.writer_prepare_s
        for dest in self.destinations.values():
            if dest.skip_committed(self._recovery):
                continue
            chain = self._transforms.destination_chain(dest.id) if self._transforms is not None else None
            ctx = WriteContext(task_id=self._side.task_id, run_id=self._side.run_id, destination=dest.id,
                               schema=chain.output if chain is not None else schema,
                               batch_rows=self._conf.exchange.batch_rows, concurrency=dest.concurrency,
                               plugin=dest.plugin, stop=dest.stop, origin_run_id=self._recovery.origin_for(dest.fresh),
                               taskdb_id=self._recovery.taskdb_id, record_limit=dest.limit.record,
                               spark=self._side.spark, wire_text=self._plane.wire_text,
                               shared=self._side.shared)
            dest.prepare(ctx, chain, timeout, self._recovery)
            if self._spec.settings.verify != "off" and dest.state != "failed":
                self._plan_check(dest, ctx)

    def _plan_check(self, dest: Destination, ctx: WriteContext) -> None:
        """What verifying ``dest`` needs; an append's target read as the run found it."""
        spec = next(d for d in self._spec.destinations if d.id == dest.id)
        mode = self._spec.settings.verify
        assert mode != "off"  # asked only when the task verifies
        check = DestinationCheck(mode, self._spec, spec, dest.sink, ctx.schema,
                                 batch_rows=self._conf.exchange.batch_rows, readers=dest.concurrency, log=dest.log,
                                 ctx=ctx)
        if self._plane.name == "spark":
            check.unverified = "Spark mode does not sum what its executors write yet"
        check.read_before(ctx.resuming, dest.held, dest.stop)
        self.checks[dest.id] = check

    def start(self, coordinator: SplitCoordinator) -> None:
        """Local mode: each live destination's writer threads, taking batches from its queue."""
        self._coordinator = coordinator
        for dest in self.destinations.values():
            if not dest.live:
                continue
            futures = []
            for worker in range(dest.concurrency):
                counters = self._counters.new_writer(dest.id)
                future = spawn(self._write, dest, worker, counters, name=f"writer-{dest.id}-{worker}")
                future.add_done_callback(self._side.notify)
                futures.append(future)
            dest.start(futures)

    def start_jobs(self, job: Callable[[Destination, WriterCounters], None], coordinator: SplitCoordinator) -> None:
        """One driver thread per live destination runs ``job`` (Spark mode: its Spark job)."""
        self._coordinator = coordinator
        for dest in self.destinations.values():
            if not dest.live:
                continue
            counters = self._counters.new_writer(dest.id)
            future = spawn(job, dest, counters, name=f"writer-{dest.id}")
            future.add_done_callback(self._side.notify)
            dest.start([future])

    def _write(self, dest: Destination, worker: int, counters: WriterCounters) -> None:
        assert dest.ctx is not None  # set when the destination was prepared, before any writer starts
        facet = dest.durable_facet  # a durable destination's writers are its facet's SplitWriters
        make = facet.writer if facet is not None else dest.sink.writer
        writer: Any = make(dest.options, dest.ctx, dest.periphery, worker)  # behind its chain (transforming)
        if dest.source_form:  # chosen once for the run: every batch through the writer's write_encoded
            writer = EncodedTarget(writer)
        check = self.checks.get(dest.id)
        verified = check is not None and check.unverified is None
        writer = verifying(writer, check.sent if verified and check is not None else None,
                           self._digest_recorder(dest.id) if verified else None)
        if dest.chain is not None and dest.chain.ops:
            runner = dest.chain.runner()
            dest.runners.append(runner)
            writer = transforming(writer, runner)
        try:
            writer.open()  # inside the try: the contract says close() always runs, also after a failed open
            if dest.durable:
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

    def _write_splits(self, dest: Destination, worker: int, writer: SplitWriter,
                      counters: WriterCounters) -> None:
        """A SplitWriter's lane: each split's batches, then its end (made durable) or abort (discarded)."""
        assert self._coordinator is not None
        lane = SplitLane(LaneOf(dest.id, dest.plugin, dest.log, worker), writer, counters, self._coordinator,
                         LaneHooks(reject=partial(self._dirty.reject, dest.id), sealed=dest.sealed,
                                   check_limit=partial(self._check_record_limit, dest), crash=self._ending.crash,
                                   lease=self._recovery.lease))
        try:
            for batch in BufferedLineExchanger.receive(dest.storage, self._conf.monitor.interval_s, worker):
                lane.take(batch)
        finally:
            lane.close()

    def _check_record_limit(self, dest: Destination) -> None:
        # Checked while running, so a hopeless destination stops early (DataX's rule).
        limit = dest.limit.record
        rejected = self._counters.totals(dest.id).rejected
        verdict = record_limit(rejected, limit)
        if verdict is not None and limit is not None:
            dest.went_over_limit()
            # Stop the queue now: the other writer threads take no further batch (poll() may be a
            # monitor interval away). The message with the final total is built in poll().
            dest.storage.fail(f"over the record limit of {limit}")
            raise DirtyLimitExceeded(verdict.message, limit=limit, observed=rejected,
                                     destination=dest.id)

    def _fail_over_limit(self, dest: Destination) -> None:
        """Fail ``dest`` for its record limit, naming its total now that its writers have stopped."""
        rejected = self._counters.totals(dest.id).rejected
        verdict = record_limit(rejected, dest.limit.record)
        assert verdict is not None  # only called once the total went over the limit
        verdict = naming_first(verdict, self._dirty.first(dest.id))
        self.fail(dest.id, verdict.message, verdict.code)

    def fail(self, destination: str, reason: str, code: str = WriteError.code) -> None:
        """Fail a destination; the split coordinator waits for it no more."""
        self.destinations[destination].fail(reason, code)
        if self._coordinator is not None:
            self._coordinator.destination_failed(destination)

    # -- monitoring ----------------------------------------------------------------------------

    def poll(self) -> None:
        for dest in self.destinations.values():
            if dest.state == "running":
                self._poll_one(dest)

    def _poll_one(self, dest: Destination) -> None:
        if dest.over_limit_at is None and any(f.done() and isinstance(f.exception(), DirtyLimitExceeded)
                                              for f in dest.futures):
            dest.went_over_limit()  # Spark mode: the job itself raised
        if dest.over_limit_at is not None:
            # Wait for every writer thread (each finishes at most the batch it holds), so the
            # message names the final total; the queue is already stopped, so the readers do
            # not wait on this destination. A hung writer is waited for shutdown_s at most.
            waited = time.monotonic() - dest.over_limit_at
            if all(f.done() for f in dest.futures) or waited > self._conf.timeouts.shutdown_s:
                self._fail_over_limit(dest)
            return
        if dest.storage.failure is not None and self._aborting is None:
            self.fail(dest.id, dest.storage.failure, WriterStalled.code)
            return
        finished, exc = settled(dest.futures, ignore=TaskAborted)
        if exc is not None:
            self.fail(dest.id, describe(exc), getattr(exc, "code", WriteError.code))
        elif finished:
            dest.written(self._counters.totals(dest.id))

    def states(self) -> Mapping[str, str]:
        return {dest_id: dest.state for dest_id, dest in self.destinations.items()}

    def all_finished(self) -> bool:
        return all(d.state in ("done", "failed") for d in self.destinations.values())

    def all_failed(self) -> bool:
        return all(d.state == "failed" for d in self.destinations.values())

    def join(self, deadline: float) -> bool:
        """Wait for writer threads until ``deadline`` (monotonic); False if some still run."""
        return all(joined(dest.futures, deadline) for dest in self.destinations.values())

    # -- the end -------------------------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Stop every destination's writers (task-level abort); healthy ones will be rolled back."""
        self._aborting = reason
        for dest in self.destinations.values():
            dest.abort(reason)

    def abandon(self) -> None:
        """Leave every destination as it is (another process resumes it): no commit, no rollback."""
        for dest in self.destinations.values():
            dest.leave("abandoned: another process took the task over and resumes it")

    def release(self) -> None:
        """Once the run's outcome is recorded: each committed destination drops its own record of the
        run's splits (kept through commit, so a crash before the outcome is recorded resumes as
        committed)."""
        for dest in self.destinations.values():
            dest.release()

    def finalize(self, rows_sent: int, abort_reason: str | None) -> None:
        """Judge, then commit or roll back every destination; sets each ``outcome``."""
        for dest in self.destinations.values():
            self._judge(dest, rows_sent, abort_reason)
        failed = [d.id for d in self.destinations.values() if d.state == "failed"]
        if abort_reason is None and failed and self._spec.settings.consistency == "all_or_nothing":
            abort_reason = f"destination(s) {', '.join(failed)} failed and consistency is all_or_nothing"
        for dest in self.destinations.values():
            dest.end(abort_reason, self._ending, partial(self._written, dest.id))

    def verify(self, splits: Sequence[Split] | None = None) -> None:
        """``settings.verify``: each destination committed in this run read back and compared with what it should
        hold, all at once (:attr:`verified`); one that was not committed is not verified. ``splits``: the run's,
        by which a mismatch is located."""
        checks = {k: c for k, c in self.checks.items()
                  if self.destinations[k].outcome == "success" and self.destinations[k].committed_before is None}
        if not checks:
            return

        def one(dest_id: str) -> None:
            dest = self.destinations[dest_id]
            recorded = {s: d for (name, s), d in self._recovery.digests.items() if name == dest_id}
            try:
                found = checks[dest_id].check(dest.held, recorded, dest.stop, splits)
            except Exception as exc:  # a bug of ours must not pass as verified, nor undo the commit
                found = Verification(checks[dest_id].mode, "failed", reason=f"verifying failed: {describe(exc)}")
            self.verified[dest_id] = found
            log = dest.log.error if found.state in ("mismatch", "failed") else dest.log.info
            log("verify.checked", **found.to_dict())

        for future in [spawn(one, k, name=f"verify-{k}") for k in checks]:
            future.result()

    def _digest_recorder(self, destination: str) -> Record | None:
        """How a verified destination's split digests reach the task database: each one written, and waited for,
        before the destination commits its split, in a row that claims no durability (a resumed run verifies
        the splits it holds by them). None: the run has no task database."""
        checkpointer = self._recovery.checkpointer
        if checkpointer is None:
            return None

        def record(split_id: str, digest: Digest) -> None:
            checkpointer.digest(split_id, destination, SplitDigest(str(digest), CHECKSUM_VERSION))
        return record

    def _judge(self, dest: Destination, rows_sent: int, abort_reason: str | None) -> None:
        if dest.state == "done" and abort_reason is None and dest.committed_before is None:
            totals = self._counters.totals(dest.id)
            if dest.durable:  # what it received of each split it sealed (checked batch by batch)
                sent = queued = totals.delivered
            else:
                sent, queued = self._plane.handed(dest.storage, rows_sent)
            missing = self._coordinator.missing(dest.id) if self._coordinator is not None else []
            dest.judge(sent, queued, totals, missing, self._dirty.first(dest.id))
        elif dest.state == "running" and dest.over_limit_at is not None:
            self._fail_over_limit(dest)  # a writer thread outlived the shutdown wait
        elif dest.state in ("pending", "running") and abort_reason is None:
            self.fail(dest.id, "writers did not finish", WritersUnfinished.code)

    def _written(self, destination: str) -> int:
        return self._counters.totals(destination).written

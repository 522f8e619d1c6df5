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
    TaskAborted,
    WormholeError,
    WriteError,
    WriterStalled,
    WritersUnfinished,
)
from wormhole.exchange import BufferedLineExchanger, RAMStorage, StorageManager
from wormhole.log import Logger
from wormhole.plugins import registry
from wormhole.plugins.base import Schema, SinkRole, WriteContext, WriterPeriphery
from wormhole.pool import run_with_timeout, spawn

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


class WriterManager:
    def __init__(self, spec: TaskSpec, conf: EngineConf, storage: StorageManager, counters: Counters,
                 notify: Callable[[Any], None], dirty: DirtyFile, task_id: int, run_id: int, log: Logger) -> None:
        self._spec = spec
        self._conf = conf
        self._counters = counters
        self._notify = notify
        self._dirty = dirty
        self._task_id = task_id
        self._run_id = run_id
        self.destinations: dict[str, DestinationRun] = {}
        self._aborting: str | None = None
        for dest in spec.destinations:
            sink = registry.get(dest.plugin).sink
            assert sink is not None  # validated with the task
            self.destinations[dest.id] = DestinationRun(
                id=dest.id, plugin=dest.plugin, options=dest.options, concurrency=dest.concurrency, sink=sink,
                storage=storage.for_writer(dest.id), limit=spec.error_limit_for(dest, conf),
                log=log.bind(destination=dest.id, plugin=dest.plugin))

    # -- start-up ------------------------------------------------------------------------------

    def prepare(self, schema: Schema) -> None:
        timeout = self._conf.timeouts.writer_prepare_s
        for dest in self.destinations.values():
            ctx = WriteContext(task_id=self._task_id, run_id=self._run_id, destination=dest.id, schema=schema,
                               batch_rows=self._conf.exchange.batch_rows, concurrency=dest.concurrency,
                               plugin=dest.plugin, stop=dest.stop)
            dest.ctx = ctx
            try:
                dest.periphery = dest.sink.periphery(dest.options, ctx)
                run_with_timeout(dest.periphery.prepare, timeout, f"prepare-{dest.id}")
            except TimeoutError:
                dest.fail(f"preparing the destination did not finish within {timeout:g} s", PrepareTimeout.code)
            except Exception as exc:
                dest.fail(f"prepare failed: {describe(exc)}", getattr(exc, "code", PrepareError.code))
            else:
                dest.log.info("destination.prepared")

    def start(self) -> None:
        for dest in self.destinations.values():
            if dest.state == "failed":
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
            if dest.state == "failed":
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
        try:
            writer.open()  # inside the try: the contract says close() always runs, also after a failed open
            for batch in BufferedLineExchanger.receive(dest.storage, self._conf.monitor.interval_s):
                if write_counted(writer, batch.rows, counters, lambda bad: self._dirty.reject(dest.id, bad),
                                 destination=dest.id, plugin=dest.plugin, nbytes=batch.nbytes):
                    self._check_record_limit(dest)
            writer.flush()
        finally:
            writer.close()

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

    def finalize(self, rows_sent: int, abort_reason: str | None) -> None:
        """Judge, then commit or roll back every destination; sets each ``outcome``."""
        for dest in self.destinations.values():
            if dest.state == "done" and abort_reason is None:
                queued = dest.queued if dest.queued is not None else dest.storage.queue.rows_in
                verdict = judge(rows_sent=rows_sent, rows_queued=queued, totals=self._counters.totals(dest.id),
                                limit=dest.limit)
                if verdict is not None:
                    dest.fail(verdict.message, verdict.code)
            elif dest.state == "running" and dest.over_limit_at is not None:
                self._fail_over_limit(dest)  # a writer thread outlived the shutdown wait
            elif dest.state in ("pending", "running") and abort_reason is None:
                dest.fail("writers did not finish", WritersUnfinished.code)
        failed = [d.id for d in self.destinations.values() if d.state == "failed"]
        if abort_reason is None and failed and self._spec.settings.consistency == "all_or_nothing":
            abort_reason = f"destination(s) {', '.join(failed)} failed and consistency is all_or_nothing"
        for dest in self.destinations.values():
            if dest.state == "failed":
                self._rollback(dest, healthy_reason=None)
            elif abort_reason is not None:
                self._rollback(dest, healthy_reason=abort_reason)
            else:
                self._commit(dest)

    def _commit(self, dest: DestinationRun) -> None:
        try:
            assert dest.periphery is not None  # a destination without one failed at prepare
            dest.periphery.commit()
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

"""Destination: one destination of a run, with its states and the transitions between them.

``pending`` -> (``prepare``) -> ``running`` (``start``) -> ``done`` (``written``), or ``failed`` from any
of them (``fail``, first failure wins). At the end ``judge`` may still fail a ``done`` destination, and
then exactly one of ``commit`` (outcome ``success``), ``rollback`` (``rolled_back`` or ``failed``),
``settle`` (a run of the chain committed it before) or ``leave`` (the run lost its claim: neither
committed nor rolled back) sets its outcome; ``release`` drops its own record once the run's outcome is
recorded. The object owns its counters' verdicts and its recovery record (``held``, ``sealed``): the
write side and the Spark execution report to it through its methods, never by setting its fields.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from wormhole.config import ErrorLimit
from wormhole.counters import DestinationTotals, judge, naming_first
from wormhole.errors import (
    CommitError,
    PrepareError,
    PrepareTimeout,
    RolledBack,
    RowsUnaccounted,
    TaskAborted,
    WormholeError,
    WriteError,
)
from wormhole.exchange import RAMStorage
from wormhole.log import Logger
from wormhole.plugins.base import SinkRole, SplitWriter, WriteContext, WriterPeriphery
from wormhole.plugins.facets import DurableFacet
from wormhole.pool import run_with_timeout
from wormhole.recovery.checkpoint import Checkpointer
from wormhole.recovery.crash import CrashPoints
from wormhole.recovery.lease import Lease
from wormhole.recovery.state import RecoveryState
from wormhole.transform.chain import Chain, ChainRunner

State = Literal["pending", "running", "done", "failed"]
Outcome = Literal["success", "failed", "rolled_back"]


def describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, WormholeError) else f"{type(exc).__name__}: {text}"


class WritePlane(Protocol):
    """What the write side asks of the execution (wormhole.execution.Execution) about a destination."""

    name: str
    """``local`` or ``spark``."""
    wire_text: bool
    """The writers may get the reader's own batches, with the source's wire text (known once the source is
    prepared): local mode's threads, Spark's tasks that read the source themselves; never batches that
    crossed to Spark's JVM."""

    def writes_whole(self, sink: SinkRole[Any], options: Any) -> bool:
        """The destination is written whole, not split by split (Spark's native write that replaces its
        output): it starts afresh every run."""

    def handed(self, storage: RAMStorage, rows_sent: int) -> tuple[int, int]:
        """(rows the read side sent to the destination, rows queued for it) when it is judged."""


@dataclass(frozen=True, slots=True)
class DestinationSetup:
    """What a destination is given, fixed for the run."""

    id: str
    plugin: str
    options: Any
    concurrency: int
    sink: SinkRole[Any]
    """Its store's sink role, whose facets say what else it can do (``durable``: it resumes split by split)."""
    limit: ErrorLimit
    log: Logger


@dataclass(frozen=True, slots=True)
class Ending:
    """What the end of a destination needs: the run's claim, its checkpointer and its crash points."""

    lease: Lease | None
    checkpointer: Checkpointer | None
    crash: CrashPoints


class Destination:
    def __init__(self, setup: DestinationSetup, storage: RAMStorage, recovery: RecoveryState, *,
                 written_whole: bool = False, started: float | None = None) -> None:
        self.setup = setup
        self.id, self.plugin, self.options = setup.id, setup.plugin, setup.options
        self.concurrency, self.sink, self.limit, self.log = setup.concurrency, setup.sink, setup.limit, setup.log
        self.storage = storage
        self.started = time.monotonic() if started is None else started
        self.durable_facet: DurableFacet[Any, SplitWriter] | None = recovery.durable(
            setup.sink, written_whole=written_whole)
        """How its writers make each split durable (SplitWriters), else None."""
        self.durable = self.durable_facet is not None
        """Its writers make each split durable: it resumes, and a lost split is written again."""
        self.fresh = written_whole and recovery.durable(setup.sink) is not None
        """Prepared as a fresh run even when the run resumes (it is written whole: Spark's native write)."""
        self.committed_before: int | None = None
        """A run of the chain committed it (rows, per the checkpoint), and it keeps no record of its own:
        it is neither prepared nor written nor committed again."""
        self.state: State = "pending"
        self.outcome: Outcome | None = None
        self.error: str | None = None
        self.error_code: str | None = None
        self.rollback_error: str | None = None
        self.finished: float | None = None
        self.ctx: WriteContext | None = None
        self.periphery: WriterPeriphery | None = None
        self.futures: list[Future[None]] = []
        self.over_limit_at: float | None = None
        """When a writer's rejections took the total over the record limit (monotonic), else None."""
        self.stop = threading.Event()
        """The destination's stop signal (its WriteContext's): set when it fails or the task aborts."""
        self.held: dict[str, int] = {}
        """Splits it held durably before this run started (resumed runs): split id -> rows."""
        self._sealed: dict[str, int] = {}
        self._sealed_lock = threading.Lock()
        self.left = False
        """Neither committed nor rolled back: the run lost (or could not confirm) its claim on the task."""
        self.chain: Chain | None = None
        """Its own transforms (run in its writer threads, local mode), else None."""
        self.runners: list[ChainRunner] = []
        """One per writer thread that ran the chain: their metrics."""
        self.source_form = False
        """It loads its source's own form of each batch (chosen once per run: :func:`~wormhole.planning.encoded.
        loads_source_form`): its writers are EncodedWriters, driven through ``write_encoded``."""

    # -- prepare and write ---------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """It takes part in the run's writes (prepared, not failed, not committed before)."""
        return self.state != "failed" and self.committed_before is None

    def skip_committed(self, recovery: RecoveryState) -> bool:
        """Committed before the crash (or by the partial run a retry resumes), and nothing of its own to
        ask: loading it again would write its rows twice (an append), so it is left as it is (``done``)."""
        self.committed_before = recovery.committed_before(self.id, self.durable)
        if self.committed_before is None:
            return False
        self.state = "done"
        self.log.info("destination.committed_before", rows=self.committed_before)
        return True

    def load_source_form(self, chosen: bool) -> None:
        """Its writers load the source's own form of each batch (:attr:`source_form`), chosen once per run."""
        self.source_form = chosen

    def prepare(self, ctx: WriteContext, chain: Chain | None, timeout: float, recovery: RecoveryState) -> None:
        """The periphery (temporary directory, transaction, target checks) under ``timeout``; a durable
        destination then reads its own record of what it holds."""
        self.ctx, self.chain = ctx, chain
        try:
            self.periphery = self.sink.periphery(self.options, ctx)
            run_with_timeout(self.periphery.prepare, timeout, f"prepare-{self.id}")
            # The destination's own record: the truth on resume, whatever the checkpoint says.
            if self.durable_facet is not None:
                self.held = dict(self.durable_facet.held(self.periphery))
        except TimeoutError:
            self.fail(f"preparing the destination did not finish within {timeout:g} s", PrepareTimeout.code)
        except Exception as exc:
            self.fail(f"prepare failed: {describe(exc)}", getattr(exc, "code", PrepareError.code))
        else:
            self.log.info("destination.prepared", durable_splits=self.durable,
                          **({"resumed_splits": len(self.held)} if ctx.resuming else {}))

    def start(self, futures: list[Future[None]]) -> None:
        """Its writer threads (or Spark job) run: ``futures``."""
        self.state = "running"
        self.futures.extend(futures)
        self.log.info("destination.started", threads=len(futures))

    def sealed(self, split_id: str, rows: int) -> None:
        """A split became durable here in this run (a writer lane, or Spark's partitions or driver)."""
        with self._sealed_lock:
            self._sealed[split_id] = rows

    def sealed_splits(self) -> dict[str, int]:
        with self._sealed_lock:
            return dict(self._sealed)

    def went_over_limit(self) -> None:
        """A writer's rejections took the total over the record limit: its queue stops now."""
        if self.over_limit_at is None:
            self.over_limit_at = time.monotonic()

    def written(self, totals: DestinationTotals) -> None:
        """Every writer thread finished."""
        self.state = "done"
        self.finished = time.monotonic()
        self.log.info("destination.written", delivered=totals.delivered, written=totals.written,
                      rejected=totals.rejected)

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

    def abort(self, reason: str) -> None:
        """The task aborts: its writers stop (a healthy destination is rolled back at the end)."""
        self.stop.set()
        self.storage.fail(reason)

    # -- the end -------------------------------------------------------------------------------

    def judge(self, sent: int, queued: int, totals: DestinationTotals, missing: list[str],
              first_rejection: str | None = None) -> None:
        """A written destination fails when a split it lacks never became durable, or its counts say so
        (over a limit: naming ``first_rejection``, the first rejected row's reason)."""
        verdict = judge(rows_sent=sent, rows_queued=queued, totals=totals, limit=self.limit)
        if verdict is not None:
            verdict = naming_first(verdict, first_rejection)
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            self.fail(f"{len(missing)} split(s) never became durable here: {shown}", RowsUnaccounted.code)
        elif verdict is not None:
            self.fail(verdict.message, verdict.code)

    def end(self, abort_reason: str | None, ending: Ending, written: Callable[[], int]) -> None:
        """Commit, roll back or settle it (``written``: its rows written, for the commit row)."""
        if self.state != "failed" and abort_reason is None:
            ending.crash.reached("before_commit", self.id, None)
        if not self._hold(ending.lease):
            return
        if self.committed_before is not None:
            self._settle(abort_reason)
        elif self.state == "failed":
            self.rollback(healthy_reason=None)
        elif abort_reason is not None:
            self.rollback(healthy_reason=abort_reason)
        else:
            self.commit(ending, written)

    def _hold(self, lease: Lease | None) -> bool:
        """Commit and rollback touch a destination only while the run's claim is live (the lease): once
        it is lost, or not confirmed when the run stops, the destination is left as it is for the
        process that holds the task next."""
        if lease is None or self.periphery is None:
            return True
        try:
            lease.hold(f"destination {self.id}")
        except TaskAborted as exc:
            self.leave(str(exc))
            return False
        return True

    def _settle(self, abort_reason: str | None) -> None:
        if abort_reason is None:
            self.outcome = "success"
            return
        self.outcome = "failed"
        self.error = f"rolled back: {abort_reason}"
        self.rollback_error = "not rolled back: an earlier run of the task committed it before it crashed"

    def commit(self, ending: Ending, written: Callable[[], int]) -> None:
        try:
            assert self.periphery is not None  # a destination without one failed at prepare
            self.periphery.commit()
            if ending.checkpointer is not None:
                ending.checkpointer.committed(self.id, written())
            ending.crash.reached("after_commit", self.id, None)
        except Exception as exc:
            self.fail(f"commit failed: {describe(exc)}", getattr(exc, "code", CommitError.code))
            self.rollback(healthy_reason=None)
            return
        self.outcome = "success"
        self.log.info("destination.committed")

    def rollback(self, healthy_reason: str | None) -> None:
        if healthy_reason is not None:
            # The destination itself was fine; something else decided it must not keep its rows.
            self.error = f"rolled back: {healthy_reason}"
            self.error_code = RolledBack.code
        self.outcome = "rolled_back" if healthy_reason is not None else "failed"
        if self.periphery is None:
            return
        try:
            self.periphery.rollback()
        except Exception as exc:
            self.rollback_error = describe(exc)
            self.log.error("destination.rollback_failed", error=self.rollback_error)
        else:
            self.log.info("destination.rolled_back", reason=self.error)

    def leave(self, reason: str) -> None:
        """Neither commit nor roll back: another process holds (or may hold) the task and resumes it."""
        self.outcome = "failed"
        self.left = True
        self.error = self.error or reason
        self.log.warning("destination.abandoned", reason=reason)

    def release(self) -> None:
        """Once the run's outcome is recorded, a committed destination drops its own record of the run's
        splits; a failure leaves that record as a leftover, which the next run removes."""
        if self.outcome != "success" or self.setup.sink.durable is None:
            return
        try:
            self.setup.sink.durable.release(self.periphery)
        except Exception as exc:
            self.log.warning("destination.release_failed", error=describe(exc))

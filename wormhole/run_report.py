"""A run's result, made from what each of its stages finished with (:func:`run_result`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wormhole import incremental
from wormhole.errors import InvalidTaskConfig
from wormhole.execution import Execution, Reads
from wormhole.planning.plan import Plan
from wormhole.recovery.coordinator import CoordinatorStats, SplitCoordinator
from wormhole.result import DestinationResult, RunReport, RunResult, SourceResult, TaskStatus, task_outcome
from wormhole.run_parts import RunIds, RunParts, now
from wormhole.task_spec import TaskSpec
from wormhole.transform.pushup import PushUp
from wormhole.transform.report import transform_report
from wormhole.writer_manager import Destination, WriterManager


@dataclass(frozen=True, slots=True, kw_only=True)
class Ended:
    """How moving the rows ended: why the task aborts (None: it did not), the read side's error, and
    what the stages that ran made (None: the run ended before that stage)."""

    abort: str | None = None
    """Why the task aborts (None: it did not)."""
    read_error: str | None = None
    """Why the read side failed (None: it did not, or the failure was a stop)."""
    invalid: InvalidTaskConfig | None = None
    """The task's transforms do not fit the source's schema (exit 204)."""
    coordinator: SplitCoordinator | None = None
    reads: Reads | None = None
    """The read side, once it started (what the end waits for and asks its error)."""
    pushup: PushUp | None = None
    """The transforms' placement the reader threads ran under (None: no local read started, or no transforms)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finished:
    """Everything a run's result is made from."""

    spec: TaskSpec
    ids: RunIds
    parts: RunParts
    writers: WriterManager
    execution: Execution
    """The plan's execution (a local one that moved nothing when the run ended before the plan)."""
    plan: Plan | None
    """None: the run ended before it planned."""
    window: incremental.Window | None
    """An incremental run's window (None: the task is not incremental, or it ended before)."""
    splits: int
    """The splits the run planned (0: it did not get that far)."""
    ended: Ended
    abort: str | None
    read_error: str | None
    interrupted: bool
    resume_from: int | None
    committed_by: Mapping[str, int]
    """Destination -> the run of the chain that committed it (resumed runs)."""
    snapshot: Mapping[str, Any] | None = None
    """The consistent snapshot the run read through, described (None: it read without one)."""


def run_result(run: Finished) -> RunResult:
    spec, parts, writers, ended, plan = run.spec, run.parts, run.writers, run.ended, run.plan
    destinations = {d.id: _destination_result(run, d) for d in writers.destinations.values()}
    status, exit_code, error = _outcome(run, destinations)
    stats = ended.coordinator.stats if ended.coordinator is not None else CoordinatorStats()
    source = SourceResult(plugin=spec.source.plugin, rows_read=parts.counters.rows_read,
                          rows_rejected=parts.dirty.count("source"), splits=run.splits,
                          channels=plan.channels if plan is not None else 0,
                          estimated_rows=parts.counters.estimated_rows, error=run.read_error,
                          splits_skipped=stats.skipped, splits_resumed=stats.resumed,
                          splits_retried=stats.retried, rows_reread=stats.rows_reread)
    engine, reason = (plan.engine, plan.engine_reason) if plan is not None else (
        spec.settings.engine if spec.settings.engine != "auto" else "local", "not chosen yet")
    report = RunReport(
        task_id=run.ids.task_id, run_id=run.ids.run_id, status=status, exit_code=exit_code, engine=engine,
        engine_reason=reason, consistency=spec.settings.consistency,
        started_at=parts.started_at, finished_at=now(), duration_s=round(time.monotonic() - parts.t0, 3),
        interrupted=run.interrupted, source=source, speed=run.execution.measure().result(spec.settings.speed),
        destinations=destinations, error=error, dirty_file=str(parts.dirty.path) if parts.dirty.counts else None,
        spark=run.execution.describe(), plan=plan.to_dict() if plan is not None else None,
        resumed_from_run=run.resume_from,
        incremental=None if run.window is None else incremental.outcome(
            run.window, {k: d.status == "success" for k, d in destinations.items()}),
        transforms=transform_report(writers.transforms, ended.pushup, writers.destinations.values()),
        snapshot=run.snapshot)
    return RunResult(report, run_status="interrupted" if run.interrupted else status)


def _outcome(run: Finished, destinations: Mapping[str, DestinationResult]) -> tuple[TaskStatus, int, str | None]:
    """The task's status, exit code and error from its destinations' outcomes and verifications."""
    rejected = any(d.rows_rejected for d in destinations.values()) or run.parts.dirty.count("source") > 0
    unverified = {k: v for k, v in run.writers.verified.items() if v.state in ("mismatch", "failed")}
    status, exit_code = task_outcome([d.status for d in destinations.values()], rejected, bool(unverified))
    if run.ended.invalid is not None:
        status, exit_code = "failed", run.ended.invalid.exit_code
    errors = [f"{k}: {d.error}" for k, d in destinations.items() if d.error and d.status == "failed"]
    errors += [f"{k}: verify {v.mode} {v.state} (its rows stay committed): {v.reason}" for k, v in unverified.items()]
    return status, exit_code, run.abort or ("; ".join(errors) if errors else None)


def _destination_result(run: Finished, dest: Destination) -> DestinationResult:
    totals = run.parts.counters.totals(dest.id)
    end = dest.finished or time.monotonic()
    return DestinationResult(
        plugin=dest.plugin, status=dest.outcome, rows_delivered=totals.delivered, rows_written=totals.written,
        rows_rejected=totals.rejected, bytes=totals.bytes, duration_s=round(end - dest.started, 3),
        rolled_back=(dest.outcome != "success" and dest.periphery is not None and dest.rollback_error is None
                     and not dest.left),
        rollback_error=dest.rollback_error, error=dest.error, error_code=dest.error_code,
        rows_filtered=totals.filtered,
        rows_resumed=sum(dest.held.values()) if dest.committed_before is None else dest.committed_before,
        splits_resumed=len(dest.held) if dest.committed_before is None else run.splits,
        skipped=None if dest.committed_before is None else f"committed by run {run.committed_by.get(dest.id)}",
        verify=_verification(run, dest))


def _verification(run: Finished, dest: Destination) -> Mapping[str, Any] | None:
    """``settings.verify``: the destination's verification, or why it has none."""
    mode = run.spec.settings.verify
    if mode == "off":
        return None
    found = run.writers.verified.get(dest.id)
    if found is not None:
        return found.to_dict()
    why = ("an earlier run of the task committed it" if dest.committed_before is not None
           else "it was not committed" if dest.outcome != "success" else "it was not prepared for verifying")
    return {"mode": mode, "state": "not_verified", "reason": why}

"""A database task's result, from its table runs' results: one destination entry per (table, destination)
pair, the source's and the speed's figures summed, and a ``database`` section per table."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wormhole.database.expand import DatabasePlan, TableJob, pair_id
from wormhole.result import (
    EXIT_FAILED,
    DestinationResult,
    RunReport,
    RunResult,
    SourceResult,
    SpeedResult,
    TaskStatus,
    task_outcome,
)
from wormhole.run_parts import now
from wormhole.task_spec import TaskSpec


@dataclass(slots=True)
class TableOutcome:
    """What became of one table: its table run's result, and what happened around it."""

    job: TableJob
    result: RunResult | None = None
    pairs: dict[str, DestinationResult] = field(default_factory=dict)
    """Pair id -> its outcome where the table run did not give one (the DDL failed, the table never ran)."""
    ddl: dict[str, str] = field(default_factory=dict)
    """Destination id -> what its DDL did (created, exists, indexes ...)."""

    def all_pairs(self) -> dict[str, DestinationResult]:
        """Every pair outcome of the table: the table run's, overridden by what happened around it. A pair
        the table run undid without a reason of its own (the read failed) gets the table run's."""
        found: dict[str, DestinationResult] = {}
        if self.result is not None:
            why = self.result.report.error
            for pid, pair in self.result.report.destinations.items():
                if pair.status != "success" and pair.error is None and why:
                    pair = dataclasses.replace(pair, error=why)
                found[pid] = pair
        found.update(self.pairs)
        return found


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    spec: TaskSpec
    task_id: int
    run_id: int
    t0: float
    started_at: str
    stop_reason: str | None
    resume_from: int | None
    snapshot: Mapping[str, Any] | None = None


def pair_failed(plugin: str, error: str | None, *, status: str | None = "failed") -> DestinationResult:
    return DestinationResult(plugin=plugin, status=status, rows_delivered=0, rows_written=0, rows_rejected=0,
                             bytes=0, duration_s=0.0, rolled_back=False, rollback_error=None, error=error,
                             error_code=None)


NOT_RUN = pair_failed("", None, status=None)
"""A pair whose table never ran (the task stopped, or ended before)."""


def database_result(run: RunFacts, plan: DatabasePlan | None, outcomes: Sequence[TableOutcome], *,
                    error: str | None = None, exit_code: int | None = None, read_error: str | None = None) -> RunResult:
    spec = run.spec
    pairs = _pairs(spec, outcomes)
    reports = [o.result.report for o in outcomes if o.result is not None]
    status, code = _outcome(pairs, reports, ended=exit_code is not None or read_error is not None or not outcomes,
                            exit_code=exit_code)
    failures = [f"{k}: {p.error}" for k, p in pairs.items() if p.error and p.status != "success"]
    failures += [f"{k}: verify {v['mode']} {v['state']} (its rows stay committed): {v.get('reason')}"
                 for k, v in _unverified(pairs).items()]
    error = error or ("; ".join(failures) if failures else None) or run.stop_reason
    seconds = round(time.monotonic() - run.t0, 3)
    report = RunReport(
        task_id=run.task_id, run_id=run.run_id, status=status, exit_code=code, engine="local",
        engine_reason="a database task runs its tables in local mode", consistency=spec.settings.consistency,
        started_at=run.started_at, finished_at=now(), duration_s=seconds, interrupted=run.stop_reason is not None,
        source=_source(spec, plan, reports, read_error), speed=_speed(spec, reports, seconds),
        destinations=pairs, error=error, dirty_file=next((r.dirty_file for r in reports if r.dirty_file), None),
        plan=plan.to_dict() if plan is not None else None, resumed_from_run=run.resume_from,
        database=_section(spec, plan, outcomes), snapshot=run.snapshot)
    return RunResult(report, run_status="interrupted" if run.stop_reason is not None else status)


def _outcome(pairs: dict[str, DestinationResult], reports: Sequence[RunReport], *, ended: bool,
             exit_code: int | None) -> tuple[TaskStatus, int]:
    """The task's status and exit code: from every pair's, unless the task ended before its tables ran."""
    if ended:
        return "failed", exit_code if exit_code is not None else EXIT_FAILED
    rejected = any(p.rows_rejected for p in pairs.values()) or any(r.source.rows_rejected for r in reports)
    return task_outcome([p.status for p in pairs.values()], rejected, bool(_unverified(pairs)))


def _unverified(pairs: Mapping[str, DestinationResult]) -> dict[str, Mapping[str, Any]]:
    """``settings.verify``: the committed pairs whose verification failed."""
    return {k: p.verify for k, p in pairs.items() if p.verify and p.verify.get("state") in ("mismatch", "failed")}


def _pairs(spec: TaskSpec, outcomes: Sequence[TableOutcome]) -> dict[str, DestinationResult]:
    out: dict[str, DestinationResult] = {}
    for outcome in outcomes:
        found = outcome.all_pairs()
        for d in spec.destinations:
            pid = pair_id(d.id, outcome.job.ref)
            out[pid] = found.get(pid) or pair_failed(d.plugin, None, status=None)
    return out


def _source(spec: TaskSpec, plan: DatabasePlan | None, reports: Sequence[RunReport],
            read_error: str | None) -> SourceResult:
    errors = [r.source.error for r in reports if r.source.error]
    return SourceResult(
        plugin=spec.source.plugin, rows_read=sum(r.source.rows_read for r in reports),
        rows_rejected=sum(r.source.rows_rejected for r in reports), splits=sum(r.source.splits for r in reports),
        channels=plan.channels if plan is not None else 0,
        estimated_rows=sum(j.listed.estimated_rows for j in plan.jobs) if plan is not None else None,
        error=read_error or ("; ".join(errors) if errors else None),
        splits_skipped=sum(r.source.splits_skipped for r in reports),
        splits_resumed=sum(r.source.splits_resumed for r in reports),
        splits_retried=sum(r.source.splits_retried for r in reports),
        rows_reread=sum(r.source.rows_reread for r in reports))


def _speed(spec: TaskSpec, reports: Sequence[RunReport], seconds: float) -> SpeedResult:
    rows = sum(r.source.rows_read for r in reports)
    counted = [r.speed.bytes for r in reports]
    total = None if any(b is None for b in counted) else sum(b or 0 for b in counted)
    return SpeedResult(
        record_limit=spec.settings.speed.record, byte_limit=spec.settings.speed.byte, rows=rows, bytes=total,
        seconds=seconds, rows_per_s=round(rows / seconds, 1) if seconds > 0 else None,
        bytes_per_s=round(total / seconds, 1) if total is not None and seconds > 0 else None,
        waited_s=round(sum(r.speed.waited_s for r in reports), 3))


def _section(spec: TaskSpec, plan: DatabasePlan | None, outcomes: Sequence[TableOutcome]) -> dict[str, Any]:
    tables: list[dict[str, Any]] = []
    for outcome in outcomes:
        job, found = outcome.job, outcome.all_pairs()
        report = outcome.result.report if outcome.result is not None else None
        per_destination = {}
        for d in spec.destinations:
            pair = found.get(pair_id(d.id, job.ref)) or NOT_RUN
            per_destination[d.id] = {"target": job.targets[d.id], "status": pair.status,
                                     "rows_written": pair.rows_written, "ddl": outcome.ddl.get(d.id)}
        entry = {"table": job.ref.key, "estimated_rows": job.listed.estimated_rows,
                 "rows_read": report.source.rows_read if report is not None else 0,
                 "splits": report.source.splits if report is not None else 0,
                 "destinations": per_destination}
        if report is not None and report.incremental is not None:
            entry["incremental"] = report.incremental  # the table's window, its pairs' watermarks
        tables.append(entry)
    done = sum(1 for t in tables if all(p["status"] == "success" for p in t["destinations"].values()))
    section = {"tables": len(tables), "tables_done": done, "channels": plan.channels if plan is not None else 0,
               "table_results": tables}
    if plan is not None and plan.skipped:
        section["skipped"] = dict(plan.skipped)
    return section

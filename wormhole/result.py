"""The result of a run as a typed model, serialised once into the JSON stored on the task row.

The key names and their order are the documented result format (docs/manual/results.md, "Logs and
results"): change them only together with that page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

EXIT_SUCCESS = 0
EXIT_SUCCESS_WITH_REJECTS = 201
EXIT_PARTIAL = 202
EXIT_FAILED = 203
EXIT_BAD_TASK = 204
EXIT_CLAIMED = 205

TaskStatus = Literal["success", "partial", "failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationResult:
    plugin: str
    status: str | None
    """success, failed (it failed itself) or rolled_back (undone because of others or the task)."""
    rows_delivered: int
    rows_written: int
    rows_rejected: int
    bytes: int
    duration_s: float
    rolled_back: bool
    rollback_error: str | None
    error: str | None
    error_code: str | None
    rows_resumed: int = 0
    """Rows of the splits it already held durably when this (resumed) run started: not written again."""
    splits_resumed: int = 0
    """Splits it already held durably when this run started."""
    rows_filtered: int = 0
    """Rows its own transforms dropped (delivered = written + rejected + filtered)."""
    skipped: str | None = None
    """Why it was not written in this run (an earlier run of the task committed it), else None."""
    verify: Mapping[str, Any] | None = None
    """``settings.verify``: its target read back after the commit against what it was sent
    (:class:`~wormhole.verify.inrun.Verification`); None when the task does not verify."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceResult:
    plugin: str
    rows_read: int
    rows_rejected: int
    splits: int
    channels: int
    estimated_rows: int | None
    error: str | None
    splits_skipped: int = 0
    """Splits not read at all: every destination already held them (a resumed run)."""
    splits_resumed: int = 0
    """Splits read again only for the destinations that lacked them (a resumed run)."""
    splits_retried: int = 0
    """Re-reads of a split in this run, after a reader's or a destination's failure."""
    rows_reread: int = 0
    """Rows read by those re-reads (``rows_read`` includes them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedResult:
    """The task's speed limits and the rate the read side moved at (docs/manual/tasks.md, "Speed limits")."""

    record_limit: int | None
    """``settings.speed.record`` (rows/s for the whole task), None when unset."""
    byte_limit: int | None
    """``settings.speed.byte`` (estimated bytes/s for the whole task), None when unset."""
    rows: int
    bytes: int | None
    """Estimated as the exchange does; None where nothing estimated them (Spark without a limit)."""
    seconds: float
    """From the first batch read to the end of the last batch's wait."""
    rows_per_s: float | None
    bytes_per_s: float | None
    waited_s: float
    """Time the readers waited on the limits, summed over them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    task_id: int
    run_id: int
    status: TaskStatus
    exit_code: int
    engine: str
    engine_reason: str
    consistency: str
    started_at: str
    finished_at: str
    duration_s: float
    interrupted: bool
    source: SourceResult
    speed: SpeedResult
    destinations: Mapping[str, DestinationResult]
    dirty_file: str | None
    spark: Mapping[str, Any] | None = None
    """Spark mode only: master, start-up cost, version, partitions (absent from the JSON otherwise)."""
    plan: Mapping[str, Any] | None = None
    """How the run was planned (``wormhole plan``'s JSON); null when planning did not finish."""
    resumed_from_run: int | None = None
    """The crashed run this run took over and resumed, else null."""
    transforms: Mapping[str, Any] | None = None
    """Tasks with transforms: the chains, each operator's metrics, and the plan each split ran under."""
    incremental: Mapping[str, Any] | None = None
    """Incremental tasks: the window read, and per destination the watermark it started from and has now."""
    database: Mapping[str, Any] | None = None
    """Database tasks: the tables, each (table, destination) outcome, the DDL run (docs/manual/databases.md)."""
    snapshot: Mapping[str, Any] | None = None
    """``settings.snapshot: consistent``: the snapshot every reader read at, and its ``position`` in the source's
    change history (binlog file/pos, GTID, PostgreSQL LSN): where a change stream starts (absent otherwise)."""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("spark", "transforms", "incremental", "database", "snapshot") and value is None:
                continue
            if f.name == "destinations":  # ``verify`` only where the task verifies
                value = {k: {n: x for n, x in dataclasses.asdict(v).items() if n != "verify" or x is not None}
                         for k, v in value.items()}
            elif dataclasses.is_dataclass(value):
                value = dataclasses.asdict(value)  # type: ignore[arg-type]
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out


def task_outcome(statuses: list[str | None], any_rejected: bool, unverified: bool = False) -> tuple[TaskStatus, int]:
    """The task status and exit code from its destinations' outcomes (docs/manual/results.md, "Exit codes");
    ``unverified``: a committed destination failed its verification (``settings.verify``): partial at best."""
    if statuses and all(s == "success" for s in statuses) and not unverified:
        return "success", EXIT_SUCCESS_WITH_REJECTS if any_rejected else EXIT_SUCCESS
    if "success" in statuses:
        return "partial", EXIT_PARTIAL
    return "failed", EXIT_FAILED


@dataclass(frozen=True, slots=True)
class RunResult:
    """What ``Engine.run`` returns: the report and its JSON form (built once, when first asked for)."""

    report: RunReport
    run_status: str
    """The run row's status: the task status, or ``interrupted`` after a signal."""
    _result: dict[str, Any] | None = field(init=False, default=None, compare=False, repr=False)

    @property
    def result(self) -> dict[str, Any]:
        """The report's JSON form, built when first asked for (a database task's table runs are reported from
        their reports: a dict apiece, deep-copied, was a share of a tiny table's time)."""
        if self._result is None:
            object.__setattr__(self, "_result", self.report.to_dict())
        assert self._result is not None
        return self._result

    @property
    def status(self) -> TaskStatus:
        return self.report.status

    @property
    def exit_code(self) -> int:
        return self.report.exit_code

    @property
    def error(self) -> str | None:
        return self.report.error


def verify_summary(result: Mapping[str, Any]) -> str | None:
    """``settings.verify`` of a stored result in words: ``verified 3/3 destinations`` (and which failed their
    verification or were not verified); None when the run did not verify."""
    states = {k: v["verify"]["state"] for k, v in (result.get("destinations") or {}).items()
              if isinstance(v, Mapping) and isinstance(v.get("verify"), Mapping)}
    if not states:
        return None
    done = sum(s == "verified" for s in states.values())
    out = f"verified {done}/{len(states)} destinations"
    failed = [k for k, s in states.items() if s in ("mismatch", "failed")]
    unverified = [k for k, s in states.items() if s == "not_verified"]
    if failed:
        out += f"; failed: {', '.join(failed)}"
    if unverified:
        out += f"; not verified: {', '.join(unverified)}"
    return out

"""What people do through the console, recorded with who did it (``wormhole_action``), the cancel requests a
running task's heartbeat looks for, a running task's latest progress, and the daemons' heartbeat rows.

A cancel is a row, not a signal: the console may run on another machine than the task (a daemon's child, a
``wormhole --task-id N`` by hand), and every running task already writes its heartbeat to this database. The
row names the claim it was made against (``claimed_by``), so it stops that run only: a retry or a takeover
runs under a new claim and is not cancelled by an old request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from wormhole.taskdb.schema import (
    ACTION_TABLE,
    CHECKPOINT_TABLE,
    CLAIMED_BY_MAX,
    DAEMON_TABLE,
    ERROR_MAX,
    LEGACY_KIND,
    NAME_MAX,
    RUN_TABLE,
    TASK_TABLE,
)
from wormhole.taskdb.sql import SqlStoreBase, clip, format_ts, parse_ts, utcnow

ACTIONS: tuple[str, ...] = ("submit", "retry", "cancel", "pause", "resume")
"""The actions the console records."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRecord:
    """One row of ``wormhole_action``; timestamps are naive UTC."""

    id: int
    task_id: int | None
    run_id: int | None
    action: str
    actor: str
    claimed_by: str | None
    """The claim a cancel was made against (the run it stops)."""
    detail: str | None
    created_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonRecord:
    """One row of ``wormhole_daemon``: a daemon and its last heartbeat."""

    id: int
    host: str
    pid: int
    started_at: datetime | None
    heartbeat_at: datetime | None
    running_tasks: int
    status: str


class ActionsMixin(SqlStoreBase):
    """The console's methods of :class:`~wormhole.taskdb.base.SqlTaskStore`."""

    action_ddl: ClassVar[tuple[str, ...]] = ()
    _actions_ready = False

    def record_action(self, action: str, actor: str, *, task_id: int | None = None, run_id: int | None = None,
                      claimed_by: str | None = None, detail: str | None = None) -> int:
        """Record that ``actor`` did ``action`` (one of :data:`ACTIONS`); the row's id."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        self._ensure_actions()
        res = self._run(f"record the action {action}",
                        f"INSERT INTO {ACTION_TABLE} (task_id, run_id, action, actor, claimed_by, detail, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (task_id, run_id, action, clip(actor, NAME_MAX), clip(claimed_by, CLAIMED_BY_MAX),
                         clip(detail, ERROR_MAX), format_ts(utcnow())))
        return int(res.lastrowid or 0)

    def _ensure_actions(self) -> None:
        # A database from before the console: made here as ``db init`` would (CREATE ... IF NOT EXISTS).
        if not self._actions_ready:
            for statement in self.action_ddl:
                self._run("create the action table", statement)
            self._actions_ready = True

    def actions(self, task_id: int | None = None, limit: int = 100) -> list[ActionRecord]:
        """The latest actions, newest first (of one task with ``task_id``); none on a database without them."""
        where, params = ("WHERE task_id = ? ", [task_id]) if task_id is not None else ("", [])
        rows = self._optional_rows(
            "read the actions", f"SELECT id, task_id, run_id, action, actor, claimed_by, detail, created_at FROM"
            f" {ACTION_TABLE} {where}ORDER BY id DESC LIMIT ?", [*params, limit])
        return self._records(_action_record, rows)

    def request_cancel(self, task_id: int, actor: str) -> ActionRecord | None:
        """Ask the run holding the task's claim to stop (the heartbeat of that run sees it within
        ``claim.heartbeat_s`` and stops as on SIGTERM); None when the task is not running."""
        self._ensure_actions()
        with self._atomic(f"cancel task {task_id}"):
            rows = self._execute(f"SELECT claimed_by FROM {TASK_TABLE} WHERE id = ? AND status = ?",
                                 (task_id, "running")).rows
            if not rows or rows[0][0] is None:
                return None
            claimed_by = str(rows[0][0])
            run = self._execute(f"SELECT MAX(id) FROM {RUN_TABLE} WHERE task_id = ? AND claimed_by = ?",
                                (task_id, claimed_by)).rows
            run_id = int(run[0][0]) if run and run[0][0] is not None else None
            now = utcnow()
            res = self._execute(f"INSERT INTO {ACTION_TABLE} (task_id, run_id, action, actor, claimed_by, created_at)"
                                " VALUES (?, ?, ?, ?, ?, ?)",
                                (task_id, run_id, "cancel", clip(actor, NAME_MAX), claimed_by, format_ts(now)))
        return ActionRecord(id=int(res.lastrowid or 0), task_id=task_id, run_id=run_id, action="cancel", actor=actor,
                            claimed_by=claimed_by, detail=None, created_at=now)

    def cancel_requested(self, task_id: int, claimed_by: str) -> str | None:
        """Who asked the run under ``claimed_by`` to stop, or None (also on a database without actions)."""
        rows = self._optional_rows(
            f"look for a cancel of task {task_id}",
            f"SELECT actor FROM {ACTION_TABLE} WHERE task_id = ? AND action = ? AND claimed_by = ? ORDER BY id LIMIT 1",
            (task_id, "cancel", clip(claimed_by, CLAIMED_BY_MAX)))
        return str(rows[0][0]) if rows else None

    def daemons(self, limit: int = 50) -> list[DaemonRecord]:
        """The daemons that registered, the latest first, with their last heartbeat."""
        res = self._run("read the daemons", f"SELECT id, host, pid, started_at, heartbeat_at, running_tasks, status"
                                            f" FROM {DAEMON_TABLE} ORDER BY id DESC LIMIT ?", (limit,))
        return self._records(_daemon_record, res.rows)

    def checkpoint_times(self, run_id: int) -> list[tuple[str, str, str, int | None, datetime | None]]:
        """(kind, split, destination, rows, recorded_at) of run ``run_id``'s checkpoint rows, in the order
        recorded: when each split was planned, held durably by each destination, and each commit."""
        kind = f"COALESCE({self._optional(CHECKPOINT_TABLE, 'kind')}, {LEGACY_KIND})"
        res = self._run(f"read the checkpoint times of run {run_id}",
                        f"SELECT {kind}, split_id, destination, `rows`, recorded_at FROM {CHECKPOINT_TABLE}"
                        " WHERE run_id = ? ORDER BY id", (run_id,))
        return self._records(lambda r: (str(r[0]), str(r[1] or ""), str(r[2] or ""),
                                        None if r[3] is None else int(r[3]), parse_ts(r[4])), res.rows)

    def progress_column(self) -> str:
        """``progress`` where the task table has it, else ``NULL`` (a database ``db init`` has not upgraded)."""
        return self._optional(TASK_TABLE, "progress")

    def _optional_rows(self, doing: str, sql: str, params: Any) -> list[tuple[Any, ...]]:
        with self._guard(doing):
            try:
                return self._execute(sql, params).rows
            except self.driver_errors as exc:
                if self._is_missing_table(exc):
                    return []
                raise


def _action_record(row: Any) -> ActionRecord:
    return ActionRecord(id=int(row[0]), task_id=None if row[1] is None else int(row[1]),
                        run_id=None if row[2] is None else int(row[2]), action=str(row[3]), actor=str(row[4]),
                        claimed_by=row[5], detail=row[6], created_at=parse_ts(row[7]))


def _daemon_record(row: Any) -> DaemonRecord:
    return DaemonRecord(id=int(row[0]), host=str(row[1]), pid=int(row[2]), started_at=parse_ts(row[3]),
                        heartbeat_at=parse_ts(row[4]), running_tasks=int(row[5] or 0), status=str(row[6]))

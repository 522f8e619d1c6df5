"""Claiming a task and keeping the claim: claim, heartbeats, take-over of a stale claim, adopt, release,
and the daemon's own heartbeat row.

The half of the store that decides who runs a task; every decision is one conditional UPDATE (or one
transaction), so the database picks the single winner among concurrent processes.
"""

from __future__ import annotations

from datetime import timedelta

from wormhole.errors import TaskDbError
from wormhole.recovery.checkpoint import CRASHED
from wormhole.taskdb.schema import CLAIMED_BY_MAX, DAEMON_TABLE, ERROR_MAX, RUN_TABLE, TASK_TABLE
from wormhole.taskdb.sql import SqlStoreBase, clip, format_ts, parse_ts, utcnow


class ClaimsMixin(SqlStoreBase):
    """The claim and heartbeat methods of :class:`~wormhole.taskdb.base.SqlTaskStore`."""

    def claim(self, task_id: int, claimed_by: str) -> bool:
        # One conditional UPDATE: the database decides the single winner, whatever the number of claimers.
        now = format_ts(utcnow())
        res = self._run(
            f"claim task {task_id}",
            f"UPDATE {TASK_TABLE} SET status = ?, attempts = attempts + 1, started_at = ?, heartbeat_at = ?,"
            " claimed_by = ?, finished_at = NULL, result = NULL, error = NULL WHERE id = ? AND status = ?",
            ("running", now, now, clip(claimed_by, CLAIMED_BY_MAX), task_id, "pending"),
        )
        return res.rowcount == 1

    def beat(self, task_id: int, claimed_by: str, progress: str | None = None) -> bool:
        """Show that the process holding the claim is alive; False when the claim is no longer ours
        (the task was taken over, reset or finished by someone else). ``progress``: the run's latest
        progress as JSON, written in the same statement (where ``db init`` added its column)."""
        extra, values = "", [format_ts(utcnow())]
        if progress is not None and self._optional(TASK_TABLE, "progress") != "NULL":
            extra, values = ", progress = ?", [*values, progress]
        res = self._run(
            f"write the heartbeat of task {task_id}",
            f"UPDATE {TASK_TABLE} SET heartbeat_at = ?{extra} WHERE id = ? AND status = ? AND claimed_by = ?",
            (*values, task_id, "running", clip(claimed_by, CLAIMED_BY_MAX)),
        )
        return res.rowcount == 1

    def take_over(self, task_id: int, claimed_by: str, stale_s: float) -> int | None:
        """Claim a running task whose heartbeat is older than ``stale_s`` (or was never written).

        One conditional UPDATE decides the single winner among concurrent callers; a fresh heartbeat
        is never taken. The winner's transaction also ends the task's runs still 'running' as
        'crashed'. Returns the id of the task's latest run (the run to resume from; 0 when the task
        never got as far as a run), or None when the task was not taken.
        """
        if not stale_s >= 0:
            raise ValueError(f"stale_s must be a non-negative number of seconds, got {stale_s!r}")
        now = utcnow()
        # Computed here and bound: SQLite keeps text, MySQL DATETIME(3); both compare this form in order.
        cutoff = format_ts(now - timedelta(seconds=stale_s))
        claimed_by = clip(claimed_by, CLAIMED_BY_MAX) or ""
        with self._atomic(f"take over task {task_id}"):
            res = self._execute(
                f"UPDATE {TASK_TABLE} SET claimed_by = ?, heartbeat_at = ?, attempts = attempts + 1"
                " WHERE id = ? AND status = ? AND (heartbeat_at IS NULL OR heartbeat_at < ?)",
                (claimed_by, format_ts(now), task_id, "running", cutoff),
            )
            if res.rowcount != 1:
                return None
            self._execute(
                f"UPDATE {RUN_TABLE} SET status = ?, finished_at = ?, error = ? WHERE task_id = ? AND status = ?",
                (CRASHED, format_ts(now), f"the process stopped heartbeating; taken over by {claimed_by}",
                 task_id, "running"),
            )
            latest = self._execute(f"SELECT MAX(id) FROM {RUN_TABLE} WHERE task_id = ?", (task_id,)).rows
            return int(latest[0][0]) if latest and latest[0][0] is not None else 0

    def stale(self, limit: int, stale_s: float) -> list[int]:
        """Ids of running tasks whose heartbeat is older than ``stale_s``, in the order pending ones run
        (higher priority first, then oldest). A task without a heartbeat (claimed by a version that did
        not write one) is not among them: only an explicit ``wormhole --task-id N`` takes that over."""
        cutoff = format_ts(utcnow() - timedelta(seconds=stale_s))
        res = self._run("look for stale tasks",
                        f"SELECT id FROM {TASK_TABLE} WHERE status = ? AND heartbeat_at IS NOT NULL"
                        " AND heartbeat_at < ? ORDER BY priority DESC, id ASC LIMIT ?", ("running", cutoff, limit))
        return [int(row[0]) for row in res.rows]

    def heartbeat_age(self, task_id: int) -> float | None:
        """Seconds since the task's last heartbeat; None if it has none (or there is no such task)."""
        res = self._run(f"read the heartbeat of task {task_id}",
                        f"SELECT heartbeat_at FROM {TASK_TABLE} WHERE id = ?", (task_id,))
        stamps = self._records(lambda row: parse_ts(row[0]), res.rows[:1])
        if not stamps or stamps[0] is None:
            return None
        return max(0.0, (utcnow() - stamps[0]).total_seconds())

    def adopt(self, task_id: int, claimed_by: str) -> bool:
        """Take over a claim made under ``claimed_by`` (the daemon's hand-over to its child process).

        Conditional like ``claim``: False when the task is no longer running under that claim.
        """
        res = self._run(
            f"adopt the claim of task {task_id}",
            f"UPDATE {TASK_TABLE} SET claimed_by = ? WHERE id = ? AND status = ? AND claimed_by = ?",
            (claimed_by, task_id, "running", claimed_by),
        )
        return res.rowcount == 1

    def release(self, task_id: int, claimed_by: str, *, exit_code: int, error: str,
                run_status: str = "failed") -> str | None:
        """Settle a claim whose process ended without recording the task; the task's new status or None.

        No run started under the claim: the task was never run, so it is pending again. A run started:
        the task is failed (a recurring one scheduled again, for the same tick) and the run ends
        ``run_status``, both with ``error``. A task no longer running under the claim is left alone.
        """
        now = format_ts(utcnow())
        # A recurring task keeps its schedule: it waits again for the tick of the run that ended here, due
        # at once, so the next claim resumes (a crashed run) or redoes (an interrupted one) that tick.
        recurring = self._schedule_of(task_id) is not None
        with self._atomic(f"release the claim of task {task_id}"):
            started = self._execute(f"SELECT id FROM {RUN_TABLE} WHERE task_id = ? AND claimed_by = ?",
                                    (task_id, claimed_by)).rows
            mine = "WHERE id = ? AND status = ? AND claimed_by = ?"
            if not started:
                waiting = "scheduled" if recurring else "pending"
                res = self._execute(
                    f"UPDATE {TASK_TABLE} SET status = ?, claimed_by = NULL, started_at = NULL,"
                    f" attempts = attempts - 1 {mine}", (waiting, task_id, "running", claimed_by))
                return waiting if res.rowcount == 1 else None
            error = clip(error, ERROR_MAX) or ""
            status = "scheduled" if recurring else "failed"
            again = ", next_run_at = COALESCE(tick_at, next_run_at)" if recurring else ""
            res = self._execute(f"UPDATE {TASK_TABLE} SET status = ?, finished_at = ?, error = ?{again} {mine}",
                                (status, now, error, task_id, "running", claimed_by))
            self._execute(f"UPDATE {RUN_TABLE} SET status = ?, finished_at = ?, exit_code = ?, error = ?"
                          " WHERE task_id = ? AND claimed_by = ? AND status = ?",
                          (run_status, now, exit_code, error, task_id, claimed_by, "running"))
            return status if res.rowcount == 1 else None

    def register_daemon(self, host: str, pid: int) -> int:
        """Insert this daemon's heartbeat row; its id."""
        now = format_ts(utcnow())
        res = self._run("register the daemon",
                        f"INSERT INTO {DAEMON_TABLE} (host, pid, started_at, heartbeat_at, running_tasks, status)"
                        " VALUES (?, ?, ?, ?, ?, ?)", (clip(host, CLAIMED_BY_MAX), pid, now, now, 0, "running"))
        if res.lastrowid is None:
            raise TaskDbError(f"task database {self.url}: register_daemon returned no id", url=self.url)
        return int(res.lastrowid)

    def heartbeat(self, daemon_id: int, *, running_tasks: int, status: str) -> None:
        self._run("write the daemon heartbeat",
                  f"UPDATE {DAEMON_TABLE} SET heartbeat_at = ?, running_tasks = ?, status = ? WHERE id = ?",
                  (format_ts(utcnow()), running_tasks, status, daemon_id))

"""A recurring task's rows: the daemon finds the tasks whose tick has come and claims one for its tick;
``task pause|resume`` stop and restart a schedule (see :mod:`wormhole.schedule`)."""

from __future__ import annotations

from datetime import datetime

from wormhole.taskdb.schema import CLAIMED_BY_MAX, TASK_TABLE
from wormhole.taskdb.sql import SqlStoreBase, clip, format_ts, parse_ts, utcnow

_DUE = "status = ? AND paused = 0 AND next_run_at IS NOT NULL AND next_run_at <= ?"


class SchedulesMixin(SqlStoreBase):
    """The recurring tasks' methods of :class:`~wormhole.taskdb.base.SqlTaskStore`."""

    def due(self, limit: int) -> list[tuple[int, str, datetime, datetime | None]]:
        """(id, cron expression, the tick it waits for, the tick of its last run) of the scheduled, not
        paused tasks whose tick has come, the longest waiting first."""
        if self._optional(TASK_TABLE, "paused") == "NULL":
            return []  # a database from before recurring tasks has none
        res = self._run("look for due recurring tasks",
                        f"SELECT id, schedule, next_run_at, tick_at FROM {TASK_TABLE} WHERE {_DUE}"
                        " ORDER BY next_run_at ASC, priority DESC, id ASC LIMIT ?",
                        ("scheduled", format_ts(utcnow()), limit))
        return self._records(lambda r: (int(r[0]), str(r[1]), parse_ts(r[2]) or utcnow(), parse_ts(r[3])), res.rows)

    def claim_tick(self, task_id: int, claimed_by: str, tick: datetime) -> bool:
        """Claim a due recurring task for ``tick`` (``${tick_ts}`` of its run). One conditional UPDATE, like
        ``claim``: a task already running (or paused meanwhile) is not claimed, so two runs never overlap."""
        now = format_ts(utcnow())
        res = self._run(
            f"claim task {task_id} for its tick",
            f"UPDATE {TASK_TABLE} SET status = ?, attempts = attempts + 1, started_at = ?, heartbeat_at = ?,"
            f" claimed_by = ?, finished_at = NULL, tick_at = ? WHERE id = ? AND {_DUE}",
            ("running", now, now, clip(claimed_by, CLAIMED_BY_MAX), format_ts(tick), task_id, "scheduled", now),
        )
        return res.rowcount == 1

    def set_paused(self, task_id: int, paused: bool, next_run_at: datetime | None = None) -> bool:
        """Pause or resume a recurring task (False: no such recurring task). ``next_run_at``, on resume:
        the tick it waits for from now (ticks passed while it was paused are not run)."""
        self._add_optional(TASK_TABLE, "paused")
        sql = f"UPDATE {TASK_TABLE} SET paused = ?"
        params: list[object] = [1 if paused else 0]
        if next_run_at is not None:
            # Only a waiting task: a running one has its next tick set when its run ends.
            sql += ", next_run_at = CASE WHEN status = ? THEN ? ELSE next_run_at END"
            params += ["scheduled", format_ts(next_run_at)]
        res = self._run(f"{'pause' if paused else 'resume'} task {task_id}",
                        sql + " WHERE id = ? AND schedule IS NOT NULL", (*params, task_id))
        return res.rowcount == 1

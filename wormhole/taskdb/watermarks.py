"""Incremental tasks' watermarks (``wormhole_watermark``): read when a run is planned, advanced with each
destination's commit row, in the same transaction (see :mod:`wormhole.incremental`); and the lock that
keeps two runs of one state key from overlapping (``wormhole_state_lock``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from wormhole.recovery.checkpoint import RowKind, WatermarkWrite
from wormhole.taskdb.checkpoints import CheckpointsMixin
from wormhole.taskdb.schema import CLAIMED_BY_MAX, NO_SPLIT, STATE_LOCK_TABLE, TASK_TABLE, WATERMARK_TABLE
from wormhole.taskdb.sql import clip, format_ts, utcnow


@dataclass(frozen=True, slots=True)
class StateHolder:
    """The run that holds a state key."""

    task_id: int
    run_id: int
    claimed_by: str


class WatermarksMixin(CheckpointsMixin):
    """The watermark methods of :class:`~wormhole.taskdb.base.SqlTaskStore`."""

    watermark_ddl: ClassVar[str] = ""
    state_lock_ddl: ClassVar[str] = ""
    _state_lock_ready = False

    def watermarks(self, state_key: str) -> dict[str, tuple[str | None, int]]:
        """Destination -> (its watermark as JSON text, the run that set it) under ``state_key``; none on a
        database that never kept one."""
        sql = f"SELECT destination, value, run_id FROM {WATERMARK_TABLE} WHERE state_key = ?"
        with self._guard(f"read the watermarks of {state_key!r}"):
            try:
                rows = self._execute(sql, (state_key,)).rows
            except self.driver_errors as exc:
                if self._is_missing_table(exc):
                    return {}
                raise
        return dict(self._records(lambda r: (str(r[0]), (None if r[1] is None else str(r[1]), int(r[2]))), rows))

    def mark_committed(self, task_id: int, run_id: int, origin_run_id: int, destination: str, rows: int,
                       watermark: WatermarkWrite | None = None) -> None:
        """The destination's commit row and, for an incremental task, its new watermark: both or neither."""
        self._kinds_ready()
        row = self._destination_row(task_id, run_id, origin_run_id, NO_SPLIT, destination, rows, None,
                                    RowKind.COMMITTED)
        if watermark is None:
            self._run(f"record the commit of {destination!r}", self._checkpoint_insert, row)
            return
        self._run("create the watermark table", self.watermark_ddl)  # a database from before watermarks
        now = format_ts(utcnow())
        with self._atomic(f"record the commit of {destination!r} and its watermark"):
            self._execute(self._checkpoint_insert, row)
            self._execute(f"DELETE FROM {WATERMARK_TABLE} WHERE state_key = ? AND destination = ?",
                          (watermark.state_key, destination))
            self._execute(f"INSERT INTO {WATERMARK_TABLE} (state_key, destination, value, task_id, run_id, updated_at)"
                          " VALUES (?, ?, ?, ?, ?, ?)", (watermark.state_key, destination, watermark.value, task_id,
                                                          run_id, now))

    def lock_state(self, state_key: str, task_id: int, run_id: int, claimed_by: str,
                   stale_s: float) -> StateHolder | None:
        """Take ``state_key`` for run ``run_id`` of task ``task_id`` (running under ``claimed_by``, whose
        heartbeat this writes); None when taken (or already ours), else the run that holds it. A holder whose
        task no longer runs under its claim, or whose heartbeat is older than ``stale_s`` (its process died),
        holds it no longer."""
        claimed_by = clip(claimed_by, CLAIMED_BY_MAX) or ""
        if not self._state_lock_ready:  # a database from before the lock: made on first use, as db init would
            self._run("create the state lock table", self.state_lock_ddl)
            self._state_lock_ready = True
        now = utcnow()
        cutoff = format_ts(now - timedelta(seconds=stale_s))
        with self._atomic(f"lock the state key {state_key!r}"):
            # Our heartbeat now: a holder is judged by it, and the heartbeat thread's first beat may be a while
            # off (the claim's own stamp is the daemon's, from before this process started).
            self._execute(f"UPDATE {TASK_TABLE} SET heartbeat_at = ? WHERE id = ? AND status = ? AND claimed_by = ?",
                          (format_ts(now), task_id, "running", claimed_by))
            self._execute(f"DELETE FROM {STATE_LOCK_TABLE} WHERE state_key = ? AND NOT EXISTS (SELECT 1 FROM"
                          f" {TASK_TABLE} t WHERE t.id = {STATE_LOCK_TABLE}.task_id AND t.status = ? AND"
                          f" t.claimed_by = {STATE_LOCK_TABLE}.claimed_by AND t.heartbeat_at >= ?)",
                          (state_key, "running", cutoff))
            self._execute(f"{self.insert_ignore} INTO {STATE_LOCK_TABLE} (state_key, task_id, run_id, claimed_by,"
                          " acquired_at) VALUES (?, ?, ?, ?, ?)",
                          (state_key, task_id, run_id, claimed_by, format_ts(now)))
            rows = self._execute(f"SELECT task_id, run_id, claimed_by FROM {STATE_LOCK_TABLE} WHERE state_key = ?",
                                 (state_key,)).rows
        holders = self._records(lambda r: StateHolder(int(r[0]), int(r[1]), str(r[2])), rows)
        if not holders or (holders[0].task_id, holders[0].claimed_by) == (task_id, claimed_by):
            return None
        return holders[0]

    def unlock_state(self, state_key: str, task_id: int, claimed_by: str) -> None:
        """Give ``state_key`` up (a no-op when the task no longer holds it under ``claimed_by``)."""
        self._run(f"unlock the state key {state_key!r}",
                  f"DELETE FROM {STATE_LOCK_TABLE} WHERE state_key = ? AND task_id = ? AND claimed_by = ?",
                  (state_key, task_id, clip(claimed_by, CLAIMED_BY_MAX) or ""))

"""Incremental tasks' watermarks (``wormhole_watermark``): read when a run is planned, advanced with each
destination's commit row, in the same transaction (see :mod:`wormhole.incremental`)."""

from __future__ import annotations

from typing import ClassVar

from wormhole.recovery.checkpoint import COMMITTED, WatermarkWrite
from wormhole.taskdb.checkpoints import CheckpointsMixin, checked
from wormhole.taskdb.schema import DESTINATION_MAX, WATERMARK_TABLE
from wormhole.taskdb.sql import format_ts, utcnow


class WatermarksMixin(CheckpointsMixin):
    """The watermark methods of :class:`~wormhole.taskdb.base.SqlTaskStore`."""

    watermark_ddl: ClassVar[str] = ""

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
        if watermark is None:
            self.mark_durable(task_id, run_id, origin_run_id, COMMITTED, destination, rows)
            return
        destination = checked(destination, DESTINATION_MAX, "destination")
        self._run("create the watermark table", self.watermark_ddl)  # a database from before watermarks
        now = format_ts(utcnow())
        with self._atomic(f"record the commit of {destination!r} and its watermark"):
            self._execute(self._checkpoint_insert, (task_id, run_id, origin_run_id, COMMITTED, destination, rows,
                                                    None, now))
            self._execute(f"DELETE FROM {WATERMARK_TABLE} WHERE state_key = ? AND destination = ?",
                          (watermark.state_key, destination))
            self._execute(f"INSERT INTO {WATERMARK_TABLE} (state_key, destination, value, task_id, run_id, updated_at)"
                          " VALUES (?, ?, ?, ?, ?, ?)", (watermark.state_key, destination, watermark.value, task_id,
                                                          run_id, now))

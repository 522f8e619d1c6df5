"""The store's checkpoint rows (``wormhole_checkpoint``): the :class:`~wormhole.recovery.checkpoint.CheckpointStore`
half of :class:`~wormhole.taskdb.base.SqlTaskStore`.

Apart from the task rows because it serves a different reader: the resume logic of
``wormhole/checkpoint.py``, not the CLI or the daemon.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from typing import Any

from wormhole.recovery.checkpoint import PLAN_ROW, WINDOW_ROW, CheckpointRow
from wormhole.taskdb.schema import CHECKPOINT_TABLE, DESTINATION_MAX, RUN_TABLE, SPLIT_ID_MAX
from wormhole.taskdb.sql import SqlStoreBase, format_ts, utcnow

# `rows` is a reserved word on MySQL 8; SQLite accepts the backquotes too.
_CHECKPOINT_COLUMNS = "split_id, destination, origin_run_id, `rows`, payload"


class CheckpointsMixin(SqlStoreBase):
    """The checkpoint methods of :class:`~wormhole.taskdb.base.SqlTaskStore`."""

    def save_plan(self, task_id: int, run_id: int, origin_run_id: int,
                  splits: Sequence[tuple[str, str]], window: str | None = None) -> None:
        """Record the plan rows ``(split_id, payload)`` of run ``run_id`` in one transaction, with an
        incremental task's window (a row of its own); a split already recorded for the run is kept as it is."""
        now = format_ts(utcnow())
        rows = [(task_id, run_id, origin_run_id, checked(split_id, SPLIT_ID_MAX, "split id"), PLAN_ROW, None,
                 payload, now) for split_id, payload in splits]
        if window is not None:
            rows.append((task_id, run_id, origin_run_id, "", WINDOW_ROW, None, window, now))
        with self._atomic(f"save the plan of run {run_id}"):
            for row in rows:
                self._execute(self._checkpoint_insert, row)

    def mark_durable(self, task_id: int, run_id: int, origin_run_id: int, split_id: str, destination: str,
                     rows: int, payload: str | None = None) -> None:
        """Record that ``destination`` holds ``split_id`` durably; a second call is a no-op."""
        if destination == PLAN_ROW:
            raise ValueError("destination must name a destination ('' is the split's plan row)")
        self._run(f"checkpoint split {split_id!r} of run {run_id}", self._checkpoint_insert,
                  (task_id, run_id, origin_run_id, checked(split_id, SPLIT_ID_MAX, "split id"),
                   checked(destination, DESTINATION_MAX, "destination"), rows, payload, format_ts(utcnow())))

    def checkpoint(self, run_id: int) -> builtins.list[CheckpointRow]:
        """Every checkpoint row of run ``run_id``: plan rows first, each kind in the order recorded."""
        res = self._run(f"read the checkpoint of run {run_id}",
                        f"SELECT {_CHECKPOINT_COLUMNS} FROM {CHECKPOINT_TABLE} WHERE run_id = ?"
                        " ORDER BY CASE WHEN destination = ? THEN 0 ELSE 1 END, id", (run_id, PLAN_ROW))
        return self._records(_checkpoint_row, res.rows)

    def resumed_from(self, run_id: int) -> int | None:
        """The run that run ``run_id`` resumed (its ``resumed_from``), else None."""
        res = self._run(f"read what run {run_id} resumed", f"SELECT resumed_from FROM {RUN_TABLE} WHERE id = ?",
                        (run_id,))
        return int(res.rows[0][0]) if res.rows and res.rows[0][0] is not None else None

    def delete_checkpoints(self, task_id: int, keep_runs: Collection[int] = ()) -> int:
        """Remove the checkpoint rows of the task's runs but ``keep_runs``; how many rows went."""
        where, params = "task_id = ?", [task_id, *keep_runs]
        if keep_runs:
            where += f" AND run_id NOT IN ({', '.join('?' * len(keep_runs))})"
        res = self._run(f"delete the checkpoints of task {task_id}",
                        f"DELETE FROM {CHECKPOINT_TABLE} WHERE {where}", params)
        return res.rowcount

    @property
    def _checkpoint_insert(self) -> str:
        return (f"{self.insert_ignore} INTO {CHECKPOINT_TABLE} (task_id, run_id, origin_run_id, split_id, destination,"
                " `rows`, payload, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


def _checkpoint_row(row: Sequence[Any]) -> CheckpointRow:
    return CheckpointRow(split_id=row[0], destination=row[1], origin_run_id=int(row[2]),
                         rows=None if row[3] is None else int(row[3]), payload=row[4])


def checked(value: str, limit: int, what: str) -> str:
    # Never clipped: two ids that share a prefix would become one checkpoint row.
    if len(value) > limit:
        raise ValueError(f"{what} {value[:40]!r}... is longer than {limit} characters")
    return value

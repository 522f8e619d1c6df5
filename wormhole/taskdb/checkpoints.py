"""The store's checkpoint rows (``wormhole_checkpoint``) and split digests (``wormhole_split_digest``): the
:class:`~wormhole.recovery.checkpoint.CheckpointStore` half of :class:`~wormhole.taskdb.base.SqlTaskStore`.

Apart from the task rows because it serves a different reader: the resume logic of
``wormhole/checkpoint.py``, not the CLI or the daemon.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

from wormhole.recovery.checkpoint import CheckpointRow, RowKind, SplitDigest
from wormhole.taskdb.schema import (
    CHECKPOINT_TABLE,
    DESTINATION_MAX,
    DIGEST_TABLE,
    KIND_MIGRATION,
    LEGACY_KIND,
    NO_SPLIT,
    PLAN_DESTINATION,
    RUN_TABLE,
    SPLIT_ID_MAX,
    WINDOW_DESTINATION,
)
from wormhole.taskdb.sql import SqlStoreBase, format_ts, utcnow

# `rows` is a reserved word on MySQL 8; SQLite accepts the backquotes too.
_CHECKPOINT_COLUMNS = "split_id, destination, origin_run_id, `rows`, payload"
_KIND = "kind"


class CheckpointsMixin(SqlStoreBase):
    """The checkpoint methods of :class:`~wormhole.taskdb.base.SqlTaskStore`."""

    digest_ddl: ClassVar[str] = ""

    def save_plan(self, task_id: int, run_id: int, origin_run_id: int,
                  splits: Sequence[tuple[str, str]], window: str | None = None, scope: str = "") -> None:
        """Record the plan rows ``(split_id, payload)`` of run ``run_id`` in one transaction, with an
        incremental task's window (a row of its own, whose split id is ``scope``: a database task's table, one
        window each); a split already recorded for the run is kept as it is."""
        self._kinds_ready()  # before the transaction: an ALTER TABLE would commit it on MySQL
        now = format_ts(utcnow())
        rows = [(task_id, run_id, origin_run_id, checked(split_id, SPLIT_ID_MAX, "split id"), PLAN_DESTINATION, None,
                 payload, now, RowKind.PLAN.value) for split_id, payload in splits]
        if window is not None:
            rows.append((task_id, run_id, origin_run_id, checked(scope, SPLIT_ID_MAX, "split id") or NO_SPLIT,
                         WINDOW_DESTINATION, None, window, now,
                         RowKind.WINDOW.value))
        with self._atomic(f"save the plan of run {run_id}"):
            for row in rows:
                self._execute(self._checkpoint_insert, row)

    def mark_durable(self, task_id: int, run_id: int, origin_run_id: int, split_id: str, destination: str,
                     rows: int, payload: str | None = None) -> None:
        """Record that ``destination`` holds ``split_id`` durably; a second call is a no-op."""
        self._kinds_ready()
        self._run(f"checkpoint split {split_id!r} of run {run_id}", self._checkpoint_insert,
                  self._destination_row(task_id, run_id, origin_run_id, checked(split_id, SPLIT_ID_MAX, "split id"),
                                        destination, rows, payload, RowKind.DURABLE))

    def record_digest(self, task_id: int, run_id: int, origin_run_id: int, split_id: str, destination: str,
                      digest: SplitDigest) -> None:
        """Record the digest of what ``destination`` accepted of ``split_id``, replacing an earlier attempt's (one
        statement: ``REPLACE`` is the same in both dialects). A database from before the table gets it, as
        ``db init`` would."""
        values = (task_id, origin_run_id, checked(split_id, SPLIT_ID_MAX, "split id"),
                  checked(destination, DESTINATION_MAX, "destination"), run_id, digest.digest,
                  digest.checksum_version, format_ts(utcnow()))
        sql = (f"REPLACE INTO {DIGEST_TABLE} (task_id, origin_run_id, split_id, destination, run_id, digest,"
               " checksum_version, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        with self._guard(f"record the digest of split {split_id!r} of run {run_id}"):
            try:
                self._execute(sql, values)
            except self.driver_errors as exc:
                if not self._is_missing_table(exc):
                    raise
                self._execute(self.digest_ddl, ())
                self._execute(sql, values)

    def split_digests(self, task_id: int, origin_run_id: int) -> dict[tuple[str, str], SplitDigest]:
        """(destination, split) -> the digest recorded for it in the runs of origin ``origin_run_id``."""
        sql = (f"SELECT destination, split_id, digest, checksum_version FROM {DIGEST_TABLE}"
               " WHERE task_id = ? AND origin_run_id = ?")
        with self._guard(f"read the split digests of run {origin_run_id}"):
            try:
                rows = self._execute(sql, (task_id, origin_run_id)).rows
            except self.driver_errors as exc:
                if self._is_missing_table(exc):
                    return {}
                raise
        return dict(self._records(lambda r: ((str(r[0]), str(r[1])), SplitDigest(str(r[2]), int(r[3]))), rows))

    def checkpoint(self, run_id: int) -> builtins.list[CheckpointRow]:
        """Every checkpoint row of run ``run_id``: plan rows first, each kind in the order recorded."""
        # A row without a kind was written before it (or by an older version since): its sentinels say.
        kind = f"COALESCE({self._optional(CHECKPOINT_TABLE, _KIND)}, {LEGACY_KIND})"
        res = self._run(f"read the checkpoint of run {run_id}",
                        f"SELECT {_CHECKPOINT_COLUMNS}, {kind} FROM {CHECKPOINT_TABLE} WHERE run_id = ?"
                        f" ORDER BY CASE WHEN {kind} = ? THEN 0 ELSE 1 END, id", (run_id, RowKind.PLAN.value))
        return self._records(_checkpoint_row, res.rows)

    def resumed_from(self, run_id: int) -> int | None:
        """The run that run ``run_id`` resumed (its ``resumed_from``), else None."""
        res = self._run(f"read what run {run_id} resumed", f"SELECT resumed_from FROM {RUN_TABLE} WHERE id = ?",
                        (run_id,))
        return int(res.rows[0][0]) if res.rows and res.rows[0][0] is not None else None

    def delete_checkpoints(self, task_id: int, keep_runs: Collection[int] = ()) -> int:
        """Remove the checkpoint rows of the task's runs but ``keep_runs``, and the split digests of the runs
        whose origin is not one of them; how many rows went."""
        keep = f" NOT IN ({', '.join('?' * len(keep_runs))})" if keep_runs else ""
        params = [task_id, *keep_runs]
        res = self._run(f"delete the checkpoints of task {task_id}",
                        f"DELETE FROM {CHECKPOINT_TABLE} WHERE task_id = ?{f' AND run_id{keep}' if keep else ''}",
                        params)
        with self._guard(f"delete the split digests of task {task_id}"):
            try:
                digests = self._execute(f"DELETE FROM {DIGEST_TABLE} WHERE task_id = ?"
                                        f"{f' AND origin_run_id{keep}' if keep else ''}", params).rowcount
            except self.driver_errors as exc:
                if not self._is_missing_table(exc):
                    raise
                digests = 0
        return res.rowcount + digests

    def migrate_checkpoint_kinds(self) -> None:
        """Give the checkpoint rows written before ``kind`` theirs (``db init`` runs it after adding the
        column; a no-op once every row has one)."""
        self._run("give the checkpoint rows their kinds", KIND_MIGRATION)

    def _kinds_ready(self) -> None:
        """Before a checkpoint row is written: on a database from before ``kind``, add the column and give the
        rows there their kinds, as ``db init`` would (an interrupted run of the older version still resumes)."""
        if self._optional(CHECKPOINT_TABLE, _KIND) != "NULL":
            return
        self._add_optional(CHECKPOINT_TABLE, _KIND)
        self.migrate_checkpoint_kinds()

    @staticmethod
    def _destination_row(task_id: int, run_id: int, origin_run_id: int, split_id: str, destination: str, rows: int,
                         payload: str | None, kind: RowKind) -> tuple[Any, ...]:
        """The values of a durable or commit row (:meth:`_checkpoint_insert`)."""
        if not destination or destination == WINDOW_DESTINATION:
            raise ValueError(f"destination must name a destination, not {destination!r} (a plan or window row's)")
        return (task_id, run_id, origin_run_id, split_id, checked(destination, DESTINATION_MAX, "destination"), rows,
                payload, format_ts(utcnow()), kind.value)

    @property
    def _checkpoint_insert(self) -> str:
        return (f"{self.insert_ignore} INTO {CHECKPOINT_TABLE} (task_id, run_id, origin_run_id, split_id, destination,"
                " `rows`, payload, recorded_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _checkpoint_row(row: Sequence[Any]) -> CheckpointRow:
    kind = RowKind(row[5])
    # A window row's split id is its scope (a database task's table), '' when the run has one window.
    scoped = kind in (RowKind.PLAN, RowKind.DURABLE) or (kind == RowKind.WINDOW and row[0])
    return CheckpointRow(kind=kind, split_id=row[0] if scoped else None,
                         destination=row[1] if kind in (RowKind.DURABLE, RowKind.COMMITTED) else None,
                         origin_run_id=int(row[2]), rows=None if row[3] is None else int(row[3]), payload=row[4])


def checked(value: str, limit: int, what: str) -> str:
    # Never clipped: two ids that share a prefix would become one checkpoint row.
    if len(value) > limit:
        raise ValueError(f"{what} {value[:40]!r}... is longer than {limit} characters")
    return value

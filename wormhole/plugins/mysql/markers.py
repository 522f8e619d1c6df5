"""The split markers of mysql destinations: the table that says which splits a destination holds.

``wormhole_splits`` lives in the destination's database. A writer inserts a split's marker row in
the split's own transaction, so the split's rows and its marker commit together or not at all: on
resume the markers of ``ctx.state_run`` are exactly the splits the destination holds.

Besides the splits' markers, the destination keeps a row of its own (``split_id`` ``''``,
:data:`PREPARED`; ``rows``: the target's row count before the load, when it was measured) whose
``phase`` says how far the load got: ``prepared`` (a resumed run neither truncates again nor loses the
count ``verify`` compares with), ``swapping`` and ``swapped`` (a staging load's commit around its
RENAME), ``committed``. Commit keeps the markers and sets ``committed``, so a crash after a
destination's commit (before the task's outcome is recorded) is resumed without writing it again;
``release`` deletes the rows once the outcome is recorded, and rollback deletes them too.

Rows are keyed by the task database too (``taskdb``: the id ``db init`` stored in it,
``ctx.taskdb_id``): two deployments each with a task 1 writing one table keep apart, and a marker of
another task database is never taken for this run's own (nor removed as a leftover).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pymysql

from wormhole.errors import PrepareError, StorageError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.mysql.connection import describe, error_code, fetch_all, fetch_one
from wormhole.plugins.mysql.staging import COMMITTED, PREPARED_PHASE, SWAPPED, SWAPPING, TargetSql

TABLE = "wormhole_splits"
PREPARED = ""
"""The ``split_id`` of the row prepare writes (no splitter names a split with the empty string)."""

NO_SUCH_TABLE = 1146
DUPLICATE_COLUMN = 1060
NO_SUCH_COLUMN = 1054
_KEY = "taskdb = %s AND task_id = %s AND state_run = %s AND destination = %s"

__all__ = ["COMMITTED", "PREPARED", "PREPARED_PHASE", "SWAPPED", "SWAPPING", "SplitMarkers"]

DDL = ("CREATE TABLE IF NOT EXISTS {table} (taskdb VARCHAR(32) NOT NULL DEFAULT '', task_id BIGINT NOT NULL, "
       "state_run BIGINT NOT NULL, destination VARCHAR(64) NOT NULL, split_id VARCHAR(255) NOT NULL, "
       "`rows` BIGINT NULL, phase VARCHAR(16) NULL, done_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
       "PRIMARY KEY (taskdb, task_id, state_run, destination, split_id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
       "COMMENT='wormhole: splits each destination holds durably'")
UPGRADE = ("ALTER TABLE {table} ADD COLUMN taskdb VARCHAR(32) NOT NULL DEFAULT '' FIRST, DROP PRIMARY KEY, "
           "ADD PRIMARY KEY (taskdb, task_id, state_run, destination, split_id)")
"""A table made by an older version lacks ``taskdb``: its rows keep ``''`` (no task database's)."""


@dataclass(frozen=True, slots=True)
class SplitMarkers:
    """The marker rows of one destination (task, destination) in ``wormhole_splits``."""

    sql: TargetSql
    ctx: WriteContext

    @property
    def table(self) -> str:
        return self.sql.ref(TABLE)

    @property
    def insert_sql(self) -> str:
        """The marker INSERT a writer runs in the split's transaction: args ``(split_id, rows)``."""
        return (f"INSERT INTO {self.table} (taskdb, task_id, state_run, destination, split_id, `rows`) "
                f"VALUES ({_literal(self.ctx.taskdb_id)}, {int(self.ctx.task_id)}, {int(self.ctx.state_run)}, "
                f"%s, %s, %s)")

    def _key(self) -> tuple[Any, ...]:
        return (self.ctx.taskdb_id, self.ctx.task_id, self.ctx.state_run, self.ctx.destination)

    def _where(self, conn: pymysql.Connection) -> str:
        """The WHERE of this destination's rows of its state run, as literals (for ``TargetSql.run``)."""
        return (f"taskdb = {conn.escape(self.ctx.taskdb_id)} AND task_id = {int(self.ctx.task_id)} AND state_run = "
                f"{int(self.ctx.state_run)} AND destination = {conn.escape(self.ctx.destination)}")

    def ensure(self, conn: pymysql.Connection) -> None:
        # Looked up first: CREATE ... IF NOT EXISTS needs the CREATE privilege even when the table is
        # there, and a user without it may write into a table an admin created once.
        columns = {str(c[0]).lower() for c in fetch_all(
            conn, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (self.sql.endpoint.database, TABLE))}
        if "taskdb" in columns:
            return
        if columns:
            self._upgrade(conn)
            return
        try:
            with conn.cursor() as cur:
                cur.execute(DDL.format(table=self.table))
        except pymysql.err.MySQLError as exc:
            raise self.sql.error(PrepareError, f"the split markers table {self.table} cannot be created on "
                                               f"{self.sql.endpoint.mark}: {describe(exc)}; it needs the CREATE "
                                               f"privilege on {self.sql.endpoint.database!r} (or create it once: "
                                               f"{DDL.format(table=self.table)})") from exc

    def _upgrade(self, conn: pymysql.Connection) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute(UPGRADE.format(table=self.table))
        except pymysql.err.MySQLError as exc:
            if error_code(exc) == DUPLICATE_COLUMN:
                return  # another run upgraded it meanwhile
            raise self.sql.error(PrepareError, f"the split markers table {self.table} on {self.sql.endpoint.mark} "
                                               f"was made by an older wormhole and cannot be upgraded: "
                                               f"{describe(exc)}; it needs the ALTER privilege (or run once: "
                                               f"{UPGRADE.format(table=self.table)})") from exc

    def phase(self, conn: pymysql.Connection) -> tuple[str | None, int | None]:
        """How far this state run's load got (None: its prepare never finished), and the row count
        prepare recorded."""
        found = fetch_one(conn, f"SELECT phase, `rows` FROM {self.table} WHERE {_KEY} AND split_id = %s",
                          (*self._key(), PREPARED))
        if found is None:
            return None, None
        return str(found[0] or PREPARED_PHASE), None if found[1] is None else int(found[1])

    def record_prepared(self, conn: pymysql.Connection, rows_before: int | None) -> None:
        with conn.cursor() as cur:
            cur.execute(f"REPLACE INTO {self.table} (taskdb, task_id, state_run, destination, split_id, `rows`, "
                        f"phase) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        (*self._key(), PREPARED, rows_before, PREPARED_PHASE))

    def set_phase(self, conn: pymysql.Connection, phase: str, error: type[StorageError]) -> None:
        """Record the load's phase (autocommit: it must be durable before the step it announces)."""
        self.sql.run(conn, f"UPDATE {self.table} SET phase = {conn.escape(phase)} WHERE {self._where(conn)} "
                           f"AND split_id = {conn.escape(PREPARED)}",
                     f"recording the load's phase ({phase}) in {self.table}", error)

    def durable(self, conn: pymysql.Connection) -> dict[str, int]:
        rows = fetch_all(conn, f"SELECT split_id, `rows` FROM {self.table} WHERE {_KEY} AND split_id <> %s",
                         (*self._key(), PREPARED))
        return {str(split_id): int(n or 0) for split_id, n in rows}

    def rows_of(self, conn: pymysql.Connection, split_id: str) -> int:
        """The rows the marker of ``split_id`` records (0 when there is none)."""
        found = fetch_one(conn, f"SELECT `rows` FROM {self.table} WHERE {_KEY} AND split_id = %s",
                          (*self._key(), split_id))
        return int(found[0] or 0) if found is not None else 0

    def has(self, conn: pymysql.Connection, split_id: str) -> bool:
        return fetch_one(conn, f"SELECT 1 FROM {self.table} WHERE {_KEY} AND split_id = %s",
                         (*self._key(), split_id)) is not None

    def forget(self, conn: pymysql.Connection, what: str, error: type[StorageError]) -> None:
        """Delete this destination's rows of its state run (after commit or rollback)."""
        self.sql.run(conn, f"DELETE FROM {self.table} WHERE {self._where(conn)}", what, error)

    def other_runs(self, conn: pymysql.Connection, keep_run: int | None) -> dict[int, int]:
        """state run -> split markers of this task database's task and destination, for every state run
        but ``keep_run``."""
        try:
            rows = fetch_all(conn, f"SELECT state_run, SUM(split_id <> %s) FROM {self.table} WHERE taskdb = %s AND "
                                   f"task_id = %s AND destination = %s GROUP BY state_run ORDER BY state_run",
                             (PREPARED, self.ctx.taskdb_id, self.ctx.task_id, self.ctx.destination))
        except pymysql.err.MySQLError as exc:
            if error_code(exc) in (NO_SUCH_TABLE, NO_SUCH_COLUMN):
                return {}  # no run ever prepared a destination here (or only runs of a version before taskdb)
            raise
        return {int(run): int(n or 0) for run, n in rows if keep_run is None or int(run) != keep_run}

    def drop_run(self, conn: pymysql.Connection, state_run: int, error: type[StorageError]) -> None:
        self.sql.run(conn, f"DELETE FROM {self.table} WHERE taskdb = {conn.escape(self.ctx.taskdb_id)} AND task_id = "
                           f"{int(self.ctx.task_id)} AND state_run = {int(state_run)} AND destination = "
                           f"{conn.escape(self.ctx.destination)}",
                     "removing leftover split markers", error)


def _literal(text: str) -> str:
    """A task database id as an SQL literal (ids are hex digits: nothing to escape, checked anyway)."""
    if not all(c.isalnum() or c in "-_" for c in text):
        raise ValueError(f"a task database id holds only letters, digits, - and _: {text!r}")
    return f"'{text}'"

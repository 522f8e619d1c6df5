"""The split markers of postgres destinations: the table that says which splits a destination holds.

``wormhole_splits`` lives in the destination's schema, with the columns and meaning of the mysql store's
(:mod:`wormhole.plugins.mysql.markers`): a writer inserts a split's marker row in the split's own
transaction, so the split's rows and its marker commit together or not at all, and on resume the markers
of ``ctx.state_run`` are exactly the splits the destination holds.

The destination's own row (``split_id`` ``''``) records how far the load got: ``prepared`` (written in
the transaction that TRUNCATEs or creates the staging table, with the target's row count before an
append), then ``committed``, set in the commit's own transaction. DDL is transactional in PostgreSQL, so
a staging swap, ``post_sql`` and ``committed`` commit together: there is no phase in between to resume
from. ``release`` deletes the rows once the task's outcome is recorded, and rollback deletes them too.

Rows are keyed by the task database too (``taskdb``), so two deployments each with a task 1 writing one
table keep apart, and a marker of another task database is never taken for this run's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from wormhole.errors import PrepareError, StorageError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.postgres.connection import describe
from wormhole.plugins.postgres.staging import TargetSql
from wormhole.plugins.sql import quote

TABLE = "wormhole_splits"
PREPARED = ""
"""The ``split_id`` of the row prepare writes (no splitter names a split with the empty string)."""
PREPARED_PHASE, COMMITTED = "prepared", "committed"

_KEY = "taskdb = %s AND task_id = %s AND state_run = %s AND destination = %s"

DDL = ("CREATE TABLE IF NOT EXISTS {table} (taskdb varchar(32) NOT NULL DEFAULT '', task_id bigint NOT NULL, "
       "state_run bigint NOT NULL, destination varchar(64) NOT NULL, split_id varchar(255) NOT NULL, "
       "\"rows\" bigint NULL, phase varchar(16) NULL, done_at timestamptz NOT NULL DEFAULT now(), "
       "PRIMARY KEY (taskdb, task_id, state_run, destination, split_id))")


def fetch_all(conn: psycopg.Connection[Any], sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, args).fetchall())


def fetch_one(conn: psycopg.Connection[Any], sql: str, args: Any = None) -> tuple[Any, ...] | None:
    return conn.execute(sql, args).fetchone()


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
        """The marker INSERT a writer runs in the split's transaction: args :meth:`insert_args`."""
        return (f"INSERT INTO {self.table} (taskdb, task_id, state_run, destination, split_id, \"rows\") "
                f"VALUES (%s, %s, %s, %s, %s, %s)")

    def insert_args(self, split_id: str, rows: int) -> tuple[Any, ...]:
        return (*self._key(), split_id, rows)

    def _key(self) -> tuple[Any, ...]:
        return (self.ctx.taskdb_id, self.ctx.task_id, self.ctx.state_run, self.ctx.destination)

    def exists(self, conn: psycopg.Connection[Any]) -> bool:
        return fetch_one(conn, "SELECT to_regclass(%s)", (self.table,)) != (None,)

    def ensure(self, conn: psycopg.Connection[Any]) -> None:
        # Looked up first: CREATE ... IF NOT EXISTS needs the CREATE privilege on the schema even when the
        # table is there, and a user without it may write into a table an admin created once.
        if self.exists(conn):
            return
        try:
            conn.execute(DDL.format(table=self.table))
        except psycopg.errors.UniqueViolation:
            return  # another destination created it at the same moment (pg_type's unique name)
        except psycopg.errors.InvalidSchemaName as exc:  # no privilege nor CREATE TABLE can help: name it
            raise self.sql.error(PrepareError, f"schema {self.sql.schema!r} does not exist on "
                                               f"{self.sql.endpoint.mark} (params.schema of destination "
                                               f"{self.ctx.destination!r}): create it (CREATE SCHEMA "
                                               f"{quote(self.sql.schema)}) or name an existing one") from exc
        except psycopg.Error as exc:
            raise self.sql.error(PrepareError, f"the split markers table {self.table} cannot be created on "
                                               f"{self.sql.endpoint.mark}: {describe(exc)}; it needs the CREATE "
                                               f"privilege on schema {self.sql.schema!r} (or create it once: "
                                               f"{DDL.format(table=self.table)})") from exc

    def phase(self, conn: psycopg.Connection[Any]) -> tuple[str | None, int | None]:
        """How far this state run's load got (None: its prepare never finished), and the row count
        prepare recorded."""
        found = fetch_one(conn, f"SELECT phase, \"rows\" FROM {self.table} WHERE {_KEY} AND split_id = %s",
                          (*self._key(), PREPARED))
        if found is None:
            return None, None
        return str(found[0] or PREPARED_PHASE), None if found[1] is None else int(found[1])

    def record_prepared(self, conn: psycopg.Connection[Any], rows_before: int | None) -> None:
        conn.execute(f"INSERT INTO {self.table} (taskdb, task_id, state_run, destination, split_id, \"rows\", "
                     f"phase) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (taskdb, task_id, state_run, "
                     f"destination, split_id) DO UPDATE SET \"rows\" = EXCLUDED.\"rows\", phase = EXCLUDED.phase",
                     (*self._key(), PREPARED, rows_before, PREPARED_PHASE))

    def set_phase(self, conn: psycopg.Connection[Any], phase: str) -> None:
        conn.execute(f"UPDATE {self.table} SET phase = %s WHERE {_KEY} AND split_id = %s",
                     (phase, *self._key(), PREPARED))

    def durable(self, conn: psycopg.Connection[Any]) -> dict[str, int]:
        rows = fetch_all(conn, f"SELECT split_id, \"rows\" FROM {self.table} WHERE {_KEY} AND split_id <> %s",
                         (*self._key(), PREPARED))
        return {str(split_id): int(n or 0) for split_id, n in rows}

    def rows_of(self, conn: psycopg.Connection[Any], split_id: str) -> int:
        """The rows the marker of ``split_id`` records (0 when there is none)."""
        found = fetch_one(conn, f"SELECT \"rows\" FROM {self.table} WHERE {_KEY} AND split_id = %s",
                          (*self._key(), split_id))
        return int(found[0] or 0) if found is not None else 0

    def has(self, conn: psycopg.Connection[Any], split_id: str) -> bool:
        return fetch_one(conn, f"SELECT 1 FROM {self.table} WHERE {_KEY} AND split_id = %s",
                         (*self._key(), split_id)) is not None

    def forget(self, conn: psycopg.Connection[Any]) -> None:
        """Delete this destination's rows of its state run (after commit or rollback)."""
        conn.execute(f"DELETE FROM {self.table} WHERE {_KEY}", self._key())

    def forget_or_fail(self, conn: psycopg.Connection[Any], what: str, error: type[StorageError]) -> None:
        try:
            self.forget(conn)
        except psycopg.Error as exc:
            raise self.sql.error(error, f"{what} in {self.table} failed on {self.sql.endpoint.mark}: "
                                        f"{describe(exc)}") from exc

    def other_runs(self, conn: psycopg.Connection[Any], keep_run: int | None) -> dict[int, int]:
        """state run -> split markers of this task database's task and destination, for every state run
        but ``keep_run``."""
        if not self.exists(conn):
            return {}  # no run ever prepared a destination in this schema
        rows = fetch_all(conn, f"SELECT state_run, count(*) FILTER (WHERE split_id <> %s) FROM {self.table} "
                               f"WHERE taskdb = %s AND task_id = %s AND destination = %s GROUP BY state_run "
                               f"ORDER BY state_run",
                         (PREPARED, self.ctx.taskdb_id, self.ctx.task_id, self.ctx.destination))
        return {int(run): int(n or 0) for run, n in rows if keep_run is None or int(run) != keep_run}

    def drop_run(self, conn: psycopg.Connection[Any], state_run: int) -> None:
        conn.execute(f"DELETE FROM {self.table} WHERE taskdb = %s AND task_id = %s AND state_run = %s AND "
                     f"destination = %s", (self.ctx.taskdb_id, self.ctx.task_id, state_run, self.ctx.destination))

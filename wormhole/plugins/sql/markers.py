"""The split markers of SQL destinations: the table that says which splits a destination holds.

``wormhole_splits`` lives in the destination's namespace (database or schema). A writer inserts a split's
marker row in the split's own transaction, so the split's rows and its marker commit together or not at
all: on resume the markers of ``ctx.state_run`` are exactly the splits the destination holds.

Besides the splits' markers, the destination keeps a row of its own (``split_id`` ``''``,
:data:`PREPARED`; ``rows``: the target's row count before the load, when it was measured) whose ``phase``
says how far the load got: ``prepared`` (a resumed run neither truncates again nor loses the count
``verify`` compares with), ``swapping`` and ``swapped`` (a staging swap that is not transactional, as
MySQL's RENAME, recorded around it), ``committed``. Commit keeps the markers and sets ``committed``, so a
crash after a destination's commit (before the task's outcome is recorded) is resumed without writing it
again; ``release`` deletes the rows once the outcome is recorded, and rollback deletes them too.

Rows are keyed by the task database too (``taskdb``: the id ``db init`` stored in it, ``ctx.taskdb_id``):
two deployments each with a task 1 writing one table keep apart, and a marker of another task database is
never taken for this run's own (nor removed as a leftover).

The methods run on the caller's connection: in its transaction when it has one open, else each on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wormhole.errors import PrepareError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.sql.target import TargetSql, fetch_all, fetch_one

TABLE = "wormhole_splits"
PREPARED = ""
"""The ``split_id`` of the row prepare writes (no splitter names a split with the empty string)."""
PREPARED_PHASE, SWAPPING, SWAPPED, COMMITTED = "prepared", "swapping", "swapped", "committed"
"""The phases of a load, kept in the destination's own row."""

_KEY = "taskdb = %s AND task_id = %s AND state_run = %s AND destination = %s"
FORGET_AT_ONCE = 500
"""Destinations whose markers one DELETE of :meth:`SplitMarkers.forget_all` removes."""


@dataclass(frozen=True, slots=True)
class SplitMarkers:
    """The marker rows of one destination (task, destination) in ``wormhole_splits``."""

    sql: TargetSql
    ctx: WriteContext

    @property
    def table(self) -> str:
        return self.sql.ref(TABLE)

    @property
    def _rows(self) -> str:
        return self.sql.dialect.quote("rows")

    @property
    def insert_sql(self) -> str:
        """The marker INSERT a writer runs in the split's transaction: args :meth:`insert_args`."""
        return (f"INSERT INTO {self.table} (taskdb, task_id, state_run, destination, split_id, {self._rows}) "
                f"VALUES (%s, %s, %s, %s, %s, %s)")

    def insert_args(self, split_id: str, rows: int) -> tuple[Any, ...]:
        return (*self._key(), split_id, rows)

    def _key(self) -> tuple[Any, ...]:
        return (self.ctx.taskdb_id, self.ctx.task_id, self.ctx.state_run, self.ctx.destination)

    def columns(self, conn: Any) -> set[str]:
        """The table's columns (empty when there is no table yet)."""
        return self.sql.dialect.marker_columns(conn, self.sql.namespace, TABLE)

    def _current_key(self) -> tuple[Any, ...]:
        return ("markers", self.sql.dialect.name, self.sql.endpoint, self.sql.namespace)

    def current(self, conn: Any) -> bool:
        """The table is there with this version's columns: asked once per server and namespace in a database
        task (its table runs share the answer, ``ctx.shared``), else each time."""
        shared = self.ctx.shared
        if shared is not None and shared.get(self._current_key()):
            return True
        found = "taskdb" in self.columns(conn)
        if found and shared is not None:
            shared.put(self._current_key(), True)
        return found

    def ensure(self, conn: Any) -> None:
        """The table made ready for this version's rows: once per server and namespace in a database task
        (the first table's run checks or creates it, the others wait for it and take its answer)."""
        shared = self.ctx.shared
        if shared is None:
            self._ensure(conn)
        else:
            shared.once(self._current_key(), lambda: self._ensure(conn))

    def _ensure(self, conn: Any) -> bool:
        """Whether the table is current once made ready."""
        # Looked up first: CREATE ... IF NOT EXISTS needs the CREATE privilege even when the table is
        # there, and a user without it may write into a table an admin created once.
        columns = self.columns(conn)
        if "taskdb" in columns:
            return True
        dialect, sql = self.sql.dialect, self.sql
        ddl = (dialect.markers_upgrade if columns and dialect.markers_upgrade else dialect.markers_ddl).format(
            table=self.table)
        if columns and dialect.markers_upgrade is None:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute(ddl)
        except dialect.db_error as exc:
            if dialect.created_meanwhile(exc):
                return True  # another run did it at the same moment
            if dialect.missing_namespace(exc):  # no privilege nor CREATE TABLE can help: name it
                raise sql.error(PrepareError, f"{dialect.namespace_kind} {sql.namespace!r} does not exist on "
                                              f"{sql.endpoint.mark} (params.{dialect.namespace_kind} of destination "
                                              f"{self.ctx.destination!r}): create it (CREATE "
                                              f"{dialect.namespace_kind.upper()} {dialect.quote(sql.namespace)}) "
                                              f"or name an existing one") from exc
            what = f"on {sql.endpoint.mark} was made by an older wormhole and cannot be upgraded" if columns else \
                f"cannot be created on {sql.endpoint.mark}"
            raise sql.error(PrepareError, f"the split markers table {self.table} {what}: {dialect.describe(exc)}; it "
                                          f"needs the {'ALTER' if columns else 'CREATE'} privilege on "
                                          f"{dialect.namespace_kind} {sql.namespace!r} (or run once: {ddl})") from exc
        return True

    def phase(self, conn: Any) -> tuple[str | None, int | None]:
        """How far this state run's load got (None: its prepare never finished), and the row count
        prepare recorded."""
        found = fetch_one(conn, f"SELECT phase, {self._rows} FROM {self.table} WHERE {_KEY} AND split_id = %s",
                          (*self._key(), PREPARED))
        if found is None:
            return None, None
        return str(found[0] or PREPARED_PHASE), None if found[1] is None else int(found[1])

    def record_prepared(self, conn: Any, rows_before: int | None) -> None:
        with conn.cursor() as cur:
            cur.execute(self.sql.dialect.upsert_prepared_sql(self.table),
                        (*self._key(), PREPARED, rows_before, PREPARED_PHASE))

    def set_phase(self, conn: Any, phase: str) -> None:
        """Record the load's phase (in the caller's transaction, or durable before the step it announces)."""
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {self.table} SET phase = %s WHERE {_KEY} AND split_id = %s",
                        (phase, *self._key(), PREPARED))

    def durable(self, conn: Any) -> dict[str, int]:
        rows = fetch_all(conn, f"SELECT split_id, {self._rows} FROM {self.table} WHERE {_KEY} AND split_id <> %s",
                         (*self._key(), PREPARED))
        return {str(split_id): int(n or 0) for split_id, n in rows}

    def rows_of(self, conn: Any, split_id: str) -> int:
        """The rows the marker of ``split_id`` records (0 when there is none)."""
        found = fetch_one(conn, f"SELECT {self._rows} FROM {self.table} WHERE {_KEY} AND split_id = %s",
                          (*self._key(), split_id))
        return int(found[0] or 0) if found is not None else 0

    def has(self, conn: Any, split_id: str) -> bool:
        return fetch_one(conn, f"SELECT 1 FROM {self.table} WHERE {_KEY} AND split_id = %s",
                         (*self._key(), split_id)) is not None

    def forget(self, conn: Any) -> None:
        """Delete this destination's rows of its state run (after commit or rollback)."""
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {self.table} WHERE {_KEY}", self._key())

    def release_group(self) -> tuple[Any, ...]:
        """What markers of several destinations must share to be deleted by one :meth:`forget_all`: their table
        and their key but the destination."""
        return (self._current_key(), *self._key()[:3])

    def forget_all(self, conn: Any, destinations: Sequence[str]) -> None:
        """:meth:`forget` of every destination of ``destinations`` whose markers share this one's
        :meth:`release_group` (a database task's pairs), a few hundred per statement."""
        for first in range(0, len(destinations), FORGET_AT_ONCE):
            chunk = destinations[first:first + FORGET_AT_ONCE]
            marks = ", ".join(["%s"] * len(chunk))
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM {self.table} WHERE taskdb = %s AND task_id = %s AND state_run = %s "
                            f"AND destination IN ({marks})", (*self._key()[:3], *chunk))

    def other_runs(self, conn: Any, keep_run: int | None) -> dict[int, int]:
        """state run -> split markers of this task database's task and destination, for every state run
        but ``keep_run``."""
        if not self.current(conn):
            return {}  # no run ever prepared a destination here (or only runs of a version before taskdb)
        shared = self.ctx.shared
        rows: Sequence[tuple[Any, ...]]
        if shared is None:
            rows = fetch_all(conn, f"SELECT state_run, SUM(CASE WHEN split_id <> %s THEN 1 ELSE 0 END) FROM "
                                   f"{self.table} WHERE taskdb = %s AND task_id = %s AND destination = %s "
                                   f"GROUP BY state_run ORDER BY state_run",
                             (PREPARED, self.ctx.taskdb_id, self.ctx.task_id, self.ctx.destination))
        else:  # a database task asks once for all its pairs in this namespace: earlier runs' markers are there now
            rows = shared.once(("marker-runs", self.sql.dialect.name, self.sql.endpoint, self.sql.namespace,
                                self.ctx.taskdb_id, self.ctx.task_id),
                               lambda: self._runs_by_destination(conn)).get(self.ctx.destination, ())
        return {int(run): int(n or 0) for run, n in rows if keep_run is None or int(run) != keep_run}

    def _runs_by_destination(self, conn: Any) -> dict[str, tuple[tuple[Any, Any], ...]]:
        """destination -> (state run, split markers) of every destination of this task database's task."""
        found: dict[str, list[tuple[Any, Any]]] = {}
        for destination, run, n in fetch_all(
                conn, f"SELECT destination, state_run, SUM(CASE WHEN split_id <> %s THEN 1 ELSE 0 END) FROM "
                      f"{self.table} WHERE taskdb = %s AND task_id = %s GROUP BY destination, state_run "
                      f"ORDER BY destination, state_run", (PREPARED, self.ctx.taskdb_id, self.ctx.task_id)):
            found.setdefault(str(destination), []).append((run, n))
        return {d: tuple(rows) for d, rows in found.items()}

    def drop_run(self, conn: Any, state_run: int) -> None:
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {self.table} WHERE taskdb = %s AND task_id = %s AND state_run = %s AND "
                        f"destination = %s", (self.ctx.taskdb_id, self.ctx.task_id, state_run, self.ctx.destination))

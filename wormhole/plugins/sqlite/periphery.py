"""The sqlite store's peripheries: the source's rows estimated; the destination's rows staged in its file,
split by split, loaded at commit.

The reader periphery estimates the rows cheaply (:class:`SqliteReaderPeriphery`). The writer periphery
opens the connection and ``BEGIN IMMEDIATE`` (taking the file's write lock up front). Rows go into a
staging table in the same file, ``_wh_stage_<task>_<state run>_<destination>``, with the written columns
(the target's declared types) and ``_wh_split``, the split each row belongs to. The writers
(:mod:`.writer`) stage the rows; ``end_split`` inserts the split's row into the marker table
``_wh_splits`` and COMMITs the shared transaction (then begins the next): the split's rows and its
marker are durable together. Rows of other splits committed with it carry no marker yet, so a resumed
run deletes them and ``durable_splits`` is read from the markers. The final ``commit`` is one
transaction: the target is created when asked (never before, so a rolled-back run leaves no table), the
staging rows are inserted in their order with the mode's verb, the staging table is dropped and a
committed row joins the markers, which stay until ``release`` (the task's outcome recorded): a run
resuming after a crash in between finds the load committed and does not load it again. ``rollback``
drops the staging table and markers and leaves the target as it was. The staging table's and markers'
own SQL (names, resume, leftovers) is in ``staging.py``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal

from wormhole.errors import (
    CommitError,
    PeripheryError,
    PrepareError,
    ReadError,
    RollbackError,
    StorageError,
    WriteError,
)
from wormhole.plugins.base import (
    ReadContext,
    SourceInfo,
    WriteContext,
)
from wormhole.plugins.sql import quote
from wormhole.plugins.sqlite.affinity import AffinityGuard
from wormhole.plugins.sqlite.connection import PLUGIN_NAME, connect_readonly, table_columns
from wormhole.plugins.sqlite.dialect import SQLITE
from wormhole.plugins.sqlite.options import SqliteReaderOptions, SqliteWriterOptions
from wormhole.plugins.sqlite.reader import resolve_schema
from wormhole.plugins.sqlite.staging import (
    SPLIT_COLUMN,
    MarkerKey,
    Owner,
    clean,
    clean_file,
    committed,
    drop_stage,
    ensure_markers,
    file_leftovers,
    find_leftovers,
    forget_run,
    has_markers,
    has_table,
    mark_committed,
    markers_of,
    resume_stage,
    stage_name,
    unique_keys,
)

ROW_ERRORS = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError, sqlite3.ProgrammingError,
              UnicodeEncodeError, OverflowError, ValueError, TypeError)
"""Errors that belong to a row (a constraint, a value SQLite cannot bind), not to the database.
Any other sqlite3.Error (disk full, I/O error, read-only, locked) means the destination is broken."""


class SqliteWriterPeriphery:
    """Holds the destination's connection, its open transaction and the lock writers share."""

    def __init__(self, options: SqliteWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        self.path = os.path.abspath(options.path)
        self.lock = threading.Lock()
        self.conn: sqlite3.Connection | None = None
        self.sql = ""
        """The batch statement tried on the target (and undone); empty when the target is created at commit."""
        self.stage_sql = ""
        self.columns: tuple[str, ...] = ()
        self.stage = stage_name(self._marker_key())
        self.broken: str | None = None
        """Why the transaction cannot be committed any more (set by a writer that hit a database error)."""
        self._created_file = False
        self._create_target = False
        self._merge_sql = ""
        self._durable: dict[str, int] = {}
        self.guard: AffinityGuard | None = None
        """The target's columns whose declared affinity would change a value (a table the user made)."""
        self._committed_before = False
        """Resuming: the crashed run committed this load (its outcome was not recorded): nothing to do."""

    def _error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def _marker_key(self) -> MarkerKey:
        return self.ctx.taskdb_id, self.ctx.task_id, self.ctx.state_run, self.ctx.destination

    @property
    def _owner(self) -> Owner:
        return self.ctx.taskdb_id, self.ctx.task_id

    # -- prepare --------------------------------------------------------------------------------

    def prepare(self) -> None:
        if self.conn is not None:
            return
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)  # as a file destination does
        except OSError as exc:
            raise self._error(PrepareError, f"cannot create the directory of {self.path}: {exc}") from exc
        existed = os.path.lexists(self.path)
        try:
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._error(PrepareError, f"cannot open sqlite database {self.path}: {exc}") from exc
        self.conn = conn
        self._created_file = not existed
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._prepare_table(conn)
            self._prepare_stage(conn)
        except PrepareError:
            self._abandon()
            raise
        except sqlite3.Error as exc:
            self._abandon()
            raise self._error(PrepareError, f"cannot prepare table {self.options.table} in {self.path}: "
                                            f"{exc}") from exc

    def _abandon(self) -> None:
        try:
            self.rollback()
        except RollbackError:
            pass  # the prepare error is the one to report

    def _prepare_table(self, conn: sqlite3.Connection) -> None:
        opts = self.options
        schema = self.ctx.schema
        columns = opts.columns if opts.columns is not None else schema.names
        if len(columns) != len(schema):
            raise self._error(PrepareError, f"columns names {len(columns)} column(s) but the source has "
                                            f"{len(schema)}: {', '.join(schema.names)}")
        lowered = {c.lower() for c in columns}
        if opts.key is not None:
            missing = [k for k in opts.key if k.lower() not in lowered]
            if missing:
                raise self._error(PrepareError, f"key column {', '.join(missing)} is not among the written "
                                                f"columns {', '.join(columns)}")
        self.columns = tuple(columns)
        found = table_columns(conn, opts.table)
        if not found:
            if not opts.create:
                raise self._error(PrepareError, f"table {opts.table} does not exist in {self.path}")
            self._create_target = True  # at commit, in the commit's transaction
            self._merge_sql = self._insert_sql(columns, self._select_staged())
            return
        declared = {name.lower(): decl for name, decl in found}
        unknown = [c for c in columns if c.lower() not in declared]
        if unknown:
            raise self._error(PrepareError, f"table {opts.table} in {self.path} has no column "
                                            f"{', '.join(unknown)}")
        self.guard = AffinityGuard.of(schema, columns, declared)
        self.sql = self._insert_sql(columns, f"VALUES ({', '.join('?' * len(columns))})")
        # Compile the statements now, so a bad upsert key (no matching UNIQUE index) fails prepare.
        conn.execute("EXPLAIN " + self.sql, (None,) * len(columns)).fetchall()
        self._merge_sql = self._insert_sql(columns, self._select_staged())

    def _select_staged(self) -> str:
        # WHERE true: SQLite needs it to parse an upsert clause after a SELECT.
        return (f"SELECT {', '.join(quote(c) for c in self.columns)} FROM {quote(self.stage)} "
                f"WHERE true ORDER BY rowid")

    def _stage_sql(self, conn: sqlite3.Connection) -> str:
        """The staging table's DDL: the written columns as the target declares them (so values get the
        target's affinities), the split column, and in insert mode the target's unique keys."""
        opts = self.options
        if self._create_target:
            defs = SQLITE.column_defs(self.columns, self.ctx.schema)
            keys = [tuple(opts.key)] if opts.key is not None else []
        else:
            declared = {name.lower(): decl for name, decl in table_columns(conn, opts.table)}
            defs = [f"{quote(c)} {declared[c.lower()]}".rstrip() for c in self.columns]
            keys = unique_keys(conn, opts.table, self.columns)
        defs.append(f"{quote(SPLIT_COLUMN)} TEXT")
        if opts.write_mode == "insert":
            # replace and upsert must stage every row: the merge settles their keys in order.
            defs += [f"UNIQUE ({', '.join(quote(k) for k in key)})" for key in keys]
        return f"CREATE TABLE {quote(self.stage)} ({', '.join(defs)})"

    def _prepare_stage(self, conn: sqlite3.Connection) -> None:
        key = self._marker_key()
        ensure_markers(conn)  # an older version's table gains its taskdb column before anything reads it
        for removed in clean(conn, self.path, self._owner, self.ctx.state_run):  # other runs' leftovers
            self.ctx.log.info("sqlite.leftover_removed", leftover=removed)
        if not self.ctx.resuming:
            forget_run(conn, self.stage, key)
        elif committed(conn, key):
            self._committed_before = True
            self._durable = markers_of(conn, key)
            self.ctx.log.info("sqlite.committed_before", state_run=self.ctx.state_run,
                              durable_splits=len(self._durable))
            return
        ensure_markers(conn)
        if has_table(conn, self.stage):
            self._durable = resume_stage(conn, self.stage, key)
            self.ctx.log.info("sqlite.resumed", table=self.stage, durable_splits=len(self._durable))
        else:
            conn.execute(self._stage_sql(conn))
        self.stage_sql = (f"INSERT INTO {quote(self.stage)} ({', '.join(quote(c) for c in self.columns)}, "
                          f"{quote(SPLIT_COLUMN)}) VALUES ({', '.join('?' * (len(self.columns) + 1))})")
        if not self._create_target:
            conn.execute("EXPLAIN " + self._merge_sql).fetchall()

    def count_rows(self) -> int:
        """The rows the table holds now (``settings.verify: count``)."""
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
            try:
                return int(conn.execute(f"SELECT COUNT(*) FROM {quote(self.options.table)}").fetchone()[0])
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise self._error(WriteError, f"counting the rows of {self.options.table} in {self.path} failed: "
                                          f"{exc}") from exc

    def delete_keys(self, columns: Sequence[str], keys: Sequence[tuple[object, ...]]) -> int:
        """Delete the table's rows holding each key, in one transaction (``wormhole verify --repair``): the rows
        deleted. The values are bound as the reader gave them back (a decimal as its text)."""
        where = " AND ".join(f"{quote(c)} = ?" for c in columns)
        statement = f"DELETE FROM {quote(self.options.table)} WHERE {where}"
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._error(WriteError, f"cannot open sqlite database {self.path}: {exc}") from exc
        deleted = 0
        try:
            conn.execute("BEGIN IMMEDIATE")
            for key in keys:
                deleted += conn.execute(statement, tuple(str(v) if isinstance(v, Decimal) else v
                                                         for v in key)).rowcount
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(WriteError, f"deleting rows of {self.options.table} in {self.path} failed: "
                                          f"{exc}") from exc
        finally:
            conn.close()  # an uncommitted transaction is rolled back with it
        return deleted

    def durable_splits(self) -> Mapping[str, int]:
        return dict(self._durable)

    def _insert_sql(self, columns: Sequence[str], source: str) -> str:
        opts = self.options
        return SQLITE.write_sql(opts.table, columns, source, opts.write_mode, opts.key)

    # -- leftovers ------------------------------------------------------------------------------

    def leftovers(self, keep_run: int | None) -> list[str]:
        if self.conn is not None:
            with self.lock:
                return [d for d, _, _ in find_leftovers(self.conn, self.path, self._owner, keep_run)]
        return file_leftovers(self.path, self._owner, keep_run)

    def clean_leftovers(self, keep_run: int | None) -> list[str]:
        if self.conn is not None:
            with self.lock:  # inside the destination's transaction: it commits with the next split
                return clean(self.conn, self.path, self._owner, keep_run)
        removed = clean_file(self.path, self._owner, keep_run)
        for description in removed:
            self.ctx.log.info("sqlite.leftover_removed", leftover=description)
        return removed

    # -- commit / rollback ----------------------------------------------------------------------

    def commit(self) -> None:
        with self.lock:
            conn = self.conn
            if conn is None:
                return  # committed already (or never prepared: nothing to make visible)
            if self.broken is not None:
                raise self._error(CommitError, f"cannot commit {self.path}: {self.broken}")
            try:
                if not self._committed_before:
                    if self._create_target and not table_columns(conn, self.options.table):
                        conn.execute(SQLITE.create_table_sql(self.options.table, self.columns, self.ctx.schema,
                                                            self.options.key))
                    merged = conn.execute(self._merge_sql).rowcount
                    mark_committed(conn, self.stage, self._marker_key(), merged)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                # The transaction may still be open: rollback() ends it.
                raise self._error(CommitError, f"cannot commit {self.path}: {exc}") from exc
            self.conn = None
        conn.close()

    def release(self) -> None:
        """The task's outcome is recorded: the markers of this load are not needed to resume any more."""
        if not os.path.isfile(self.path):
            return
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            self._drop_committed_stage(conn)
        except sqlite3.Error as exc:
            raise self._error(PeripheryError, f"cannot delete the split markers in {self.path}: {exc}") from exc
        finally:
            conn.close()

    def rollback(self) -> None:
        conn = self.conn
        if conn is None:
            return
        if self._committed_before:
            with self.lock:
                try:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                finally:
                    conn.close()
                    self.conn = None
            raise self._error(RollbackError, f"not rolled back: run {self.ctx.state_run} committed the load into "
                                             f"{self.options.table} in {self.path} before it crashed")
        conn.interrupt()  # a writer stuck in a long statement stops instead of holding the lock
        error: sqlite3.Error | None = None
        with self.lock:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if not self._created_file:
                    self._drop_committed_stage(conn)
            except sqlite3.Error as exc:
                error = exc
            finally:
                conn.close()
                self.conn = None
        if self._created_file:
            # This run created the file, so all it holds is this run's: remove it with its journal, even
            # when the ROLLBACK failed (a full disk leaves pages and a hot journal behind).
            self._created_file = False
            for suffix in ("", "-journal", "-wal", "-shm"):
                try:
                    os.remove(self.path + suffix)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    error = error or sqlite3.OperationalError(f"cannot remove {self.path + suffix}: {exc}")
        if error is not None:
            raise self._error(RollbackError, f"cannot roll back {self.path}: {error}") from error

    def _drop_committed_stage(self, conn: sqlite3.Connection) -> None:
        """In a transaction of its own: the staging table and our markers, what ended splits (and the final
        commit) committed; nothing is written when there are none, so a file that existed empty stays empty."""
        marked = has_markers(conn, self._marker_key())
        if not marked and not has_table(conn, self.stage):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            drop_stage(conn, self.stage, self._marker_key())
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


class SqliteReaderPeriphery:
    """Estimates rows cheaply.

    Without ``where``: ``MAX(rowid)``, one b-tree descent (exact unless rows were deleted); a
    ``WITHOUT ROWID`` table or a view falls back to ``COUNT(*)``. With ``where``: ``COUNT(*)`` of the
    selection, bounded by the engine's periphery timeout.
    """

    def __init__(self, options: SqliteReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def prepare(self) -> SourceInfo:
        opts = self.options
        conn = connect_readonly(opts.path, ReadError)
        try:
            resolve_schema(conn, opts, ReadError)
            table = quote(opts.read_table)
            if opts.where is None:
                try:
                    (rows,) = conn.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()
                except sqlite3.OperationalError:
                    (rows,) = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
            else:
                (rows,) = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE ({opts.where})").fetchone()
        except sqlite3.Error as exc:
            raise ReadError(f"cannot count the rows of {opts.table} in {opts.path}: {exc}",
                            plugin=PLUGIN_NAME) from exc
        finally:
            conn.close()
        return SourceInfo(estimated_rows=int(rows or 0))

"""The sqlite store's sink role: one write transaction per destination, shared by its writer threads.

The periphery opens the connection and ``BEGIN IMMEDIATE`` (taking the file's write lock up
front), creates the table inside that transaction when asked, and COMMITs or ROLLBACKs at the end,
so a rolled back run leaves neither rows nor a created table. Writers take turns on the connection
under one lock (SQLite has one writer per file). Each batch runs in a savepoint; a row-level
failure rolls the savepoint back and replays the batch row by row to reject only the bad rows.

Note: SQLite itself stores a float NaN as NULL (sqlite3_bind_double); that is not checked per value.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from wormhole.errors import CommitError, PrepareError, RollbackError, StorageError, WriteError
from wormhole.plugins.base import Row, WriteContext, WriteResult
from wormhole.plugins.sql import VALUE_ERRORS, batch_then_rows, quote, rows_one_by_one
from wormhole.plugins.sqlite.connection import PLUGIN_NAME, table_columns
from wormhole.plugins.sqlite.options import SqliteWriterOptions
from wormhole.plugins.sqlite.types import DECLARED_TYPES, WRITE_CONVERTERS

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
        self.columns: tuple[str, ...] = ()
        self.broken: str | None = None
        """Why the transaction cannot be committed any more (set by a writer that hit a database error)."""
        self._created_file = False

    def _error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

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
        found = table_columns(conn, opts.table)
        if not found:
            if not opts.create:
                raise self._error(PrepareError, f"table {opts.table} does not exist in {self.path}")
            conn.execute(self._create_sql(columns))
            found = table_columns(conn, opts.table)
        existing = {name.lower() for name, _ in found}
        unknown = [c for c in columns if c.lower() not in existing]
        if unknown:
            raise self._error(PrepareError, f"table {opts.table} in {self.path} has no column "
                                            f"{', '.join(unknown)}")
        self.columns = tuple(columns)
        self.sql = self._insert_sql(columns)
        # Compile the statement now, so a bad upsert key (no matching UNIQUE index) fails prepare.
        conn.execute("EXPLAIN " + self.sql, (None,) * len(columns)).fetchall()

    def _create_sql(self, columns: Sequence[str]) -> str:
        defs = [f"{quote(name)} {DECLARED_TYPES[col.type]}{'' if col.nullable else ' NOT NULL'}"
                for name, col in zip(columns, self.ctx.schema.columns, strict=True)]
        if self.options.key is not None:
            defs.append(f"PRIMARY KEY ({', '.join(quote(k) for k in self.options.key)})")
        return f"CREATE TABLE {quote(self.options.table)} ({', '.join(defs)})"

    def _insert_sql(self, columns: Sequence[str]) -> str:
        opts = self.options
        verb = "INSERT OR REPLACE" if opts.write_mode == "replace" else "INSERT"
        sql = (f"{verb} INTO {quote(opts.table)} ({', '.join(quote(c) for c in columns)}) "
               f"VALUES ({', '.join('?' * len(columns))})")
        if opts.write_mode == "upsert":
            assert opts.key is not None  # check() requires it
            keys = {k.lower() for k in opts.key}
            updates = [f"{quote(c)} = excluded.{quote(c)}" for c in columns if c.lower() not in keys]
            action = f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
            sql += f" ON CONFLICT ({', '.join(quote(k) for k in opts.key)}) {action}"
        return sql

    # -- commit / rollback ----------------------------------------------------------------------

    def commit(self) -> None:
        with self.lock:
            conn = self.conn
            if conn is None:
                return  # committed already (or never prepared: nothing to make visible)
            if self.broken is not None:
                raise self._error(CommitError, f"cannot commit {self.path}: {self.broken}")
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                # The transaction may still be open: rollback() ends it.
                raise self._error(CommitError, f"cannot commit {self.path}: {exc}") from exc
            self.conn = None
        conn.close()

    def rollback(self) -> None:
        conn = self.conn
        if conn is None:
            return
        conn.interrupt()  # a writer stuck in a long statement stops instead of holding the lock
        error: sqlite3.Error | None = None
        with self.lock:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
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


class SqliteWriter:
    """Converts batches and inserts them on the periphery's shared connection."""

    def __init__(self, options: SqliteWriterOptions, ctx: WriteContext, periphery: SqliteWriterPeriphery,
                 worker: int) -> None:
        self.options = options
        self.ctx = ctx
        self.periphery = periphery
        self.worker = worker
        self._fns = [(i, WRITE_CONVERTERS[c.type]) for i, c in enumerate(ctx.schema.columns)
                     if c.type in WRITE_CONVERTERS]

    def _error(self, message: str) -> WriteError:
        return WriteError(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def open(self) -> None:
        if self.periphery.conn is None:
            raise self._error(f"{self.periphery.path} is not prepared for writing")

    def _convert(self, rows: Sequence[Row]) -> Sequence[Sequence[Any]]:
        if not self._fns:
            return rows
        cols: list[Sequence[Any]] = list(zip(*rows, strict=True))
        for i, fn in self._fns:
            cols[i] = [None if v is None else fn(v) for v in cols[i]]
        return list(zip(*cols, strict=True))

    def write(self, rows: Sequence[Row]) -> WriteResult:
        if not rows:
            return WriteResult(written=0)
        try:
            params: Sequence[Sequence[Any]] | None = self._convert(rows)
        except VALUE_ERRORS:
            params = None  # some value is bad: the row-by-row pass finds which
        with self.periphery.lock:
            conn = self._connection()
            batch = None if params is None else (lambda: self._batch(conn, params))
            return batch_then_rows(rows, batch, lambda todo: self._row_by_row(conn, todo))

    def _batch(self, conn: sqlite3.Connection, params: Sequence[Sequence[Any]]) -> bool:
        """The batch in one savepoint; False (and the savepoint undone) when a row is at fault."""
        try:
            conn.execute("SAVEPOINT wh_batch")
            conn.executemany(self.periphery.sql, params)
            conn.execute("RELEASE wh_batch")
            return True
        except ROW_ERRORS:
            self._undo_batch(conn)
            return False
        except sqlite3.Error as exc:
            raise self._broken(conn, exc) from exc

    def _connection(self) -> sqlite3.Connection:
        p = self.periphery
        if p.broken is not None:
            raise self._error(f"cannot write {p.path}: {p.broken}")
        conn = p.conn
        if conn is None:
            raise self._error(f"{p.path} is not prepared for writing (or already committed or rolled back)")
        if not conn.in_transaction:
            # SQLite ended the transaction itself (after disk full, say): writing now would autocommit.
            p.broken = "SQLite rolled back the transaction"
            raise self._error(f"cannot write {p.path}: {p.broken}")
        return conn

    def _undo_batch(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK TO wh_batch")
            conn.execute("RELEASE wh_batch")
        except sqlite3.Error as exc:
            raise self._broken(conn, exc) from exc

    def _broken(self, conn: sqlite3.Connection, exc: sqlite3.Error) -> WriteError:
        p = self.periphery
        p.broken = f"{type(exc).__name__}: {exc}"
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK TO wh_batch")
        except sqlite3.Error:
            pass  # best effort: the destination is failing and will be rolled back as a whole
        return self._error(f"cannot write {p.path}: {p.broken}")

    def _row_by_row(self, conn: sqlite3.Connection, rows: Sequence[Row]) -> WriteResult:
        # A failing single statement aborts only itself in SQLite, so no savepoint per row is needed.
        return rows_one_by_one(rows, lambda row: self._write_row(conn, row))

    def _write_row(self, conn: sqlite3.Connection, row: Row) -> str | None:
        try:
            conn.execute(self.periphery.sql, self._convert((row,))[0])
        except VALUE_ERRORS + ROW_ERRORS as exc:
            return f"{type(exc).__name__}: {exc}"
        except sqlite3.Error as exc:
            raise self._broken(conn, exc) from exc
        return None

    def flush(self) -> None:
        """Nothing to do: rows become durable when the periphery commits the transaction."""

    def close(self) -> None:
        """Nothing to do: the connection belongs to the periphery."""

"""The mysql store's sink role: a periphery that prepares, commits or rolls back the load, and writers.

Loads (``load``):
- ``append``: rows are committed batch by batch into the target; rollback runs ``rollback_sql``,
  or, without it, fails plainly (the rows stay and the result says so);
- ``truncate``: ``TRUNCATE TABLE`` in prepare, then as append;
- ``staging``: rows go to ``CREATE TABLE <staging> LIKE <target>``; commit swaps it in with one
  ``RENAME TABLE target TO old, staging TO target`` (atomic: a reader sees the old table or the
  new one, never a half-loaded one), then runs ``post_sql`` and drops the old table; if post_sql
  fails the swap is undone. Rollback drops the staging table and leaves the target untouched.
  wormhole never drops a table it did not create: the staging table it creates carries the comment
  ``wormhole:task=<id>,run=<id>,dest=<id>``; at prepare, an existing table by the staging name is
  dropped only when it carries that marker for the same task and destination (the leftover of a
  crashed run), and any other existing table fails the destination and stays as it is. Commit and
  rollback drop only the staging table this run created and the old table this run renamed.

Writers (one connection each) cut a batch into pieces of ``batch_size`` rows, each in its own
transaction, sent as one ``LOAD DATA LOCAL INFILE`` from an in-memory file or one multi-row INSERT.
Every MySQL destination of a run encodes a batch alike, so the encoded piece is shared through the
batch's memo and built once. A piece that fails on a row's value (or that LOAD DATA, which turns
errors into warnings with LOCAL, did not load exactly) is rolled back and replayed row by row, so
only the bad rows are rejected, each with MySQL's own error text. Transient errors (lock wait
timeout, deadlock, lost connection) retry the piece on a fresh transaction, with backoff, a bounded
number of times; a connection lost while COMMIT was in flight is not retried, because whether the
piece was committed is unknown.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pymysql
import structlog

from wormhole.errors import CommitError, PrepareError, RollbackError, WriteError
from wormhole.plugins.base import Rejected, Row, ShippedWithoutLock, WriteContext, WriteResult, batch_memo
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    Endpoint,
    close_quietly,
    connect,
    describe,
    error_code,
    fetch_all,
    fetch_one,
    is_row_error,
    is_transient,
)
from wormhole.plugins.mysql.options import MAX_IDENTIFIER, MysqlWriterOptions, quote
from wormhole.plugins.mysql.types import load_payload, sql_values

T = TypeVar("T")
log = structlog.get_logger("wormhole.mysql")

_LOAD_INFO = re.compile(r"Records:\s*(\d+)\s+Deleted:\s*(\d+)\s+Skipped:\s*(\d+)\s+Warnings:\s*(\d+)")
_BINARY_TYPES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
_ENCODE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, UnicodeEncodeError, RecursionError)


def _endpoint(options: MysqlWriterOptions) -> Endpoint:
    return Endpoint(options.host, options.port, options.user, options.password, options.password_env,
                    options.database)


def _derived_name(table: str, suffix: str) -> str:
    return table[: MAX_IDENTIFIER - len(suffix)] + suffix


_MARKER = re.compile(r"wormhole:task=(\d+),run=(\d+),dest=(\S+)")


def staging_marker(task_id: int, run_id: int, destination: str) -> str:
    """The table comment of a staging table wormhole created (destination ids hold no comma or space)."""
    return f"wormhole:task={task_id},run={run_id},dest={destination}"


def parse_marker(comment: str) -> tuple[int, int, str] | None:
    """``(task, run, destination)`` of a staging marker, or None when the comment is not one."""
    found = _MARKER.fullmatch(comment.strip())
    return None if found is None else (int(found[1]), int(found[2]), found[3])


class MysqlWriterPeriphery(ShippedWithoutLock):
    """Prepares the target (pre_sql, truncate or staging table), and commits or rolls back the load."""

    def __init__(self, options: MysqlWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        self.endpoint = _endpoint(options)
        self.lock = threading.Lock()
        self.columns: tuple[str, ...] = ()
        self.write_table = options.table
        """Where writers put rows: the target, or the staging table."""
        self.staging: str | None = None
        self.old_table: str | None = None
        self.staging_created = False
        """This run created the staging table: only then may commit or rollback drop it."""
        self.target_comment = ""
        """The target's own table comment, given back to the staging table before the swap."""
        self.swapped = False
        self.method = "insert"
        self.load_sql = ""
        self.insert_prefix = ""
        self.insert_suffix = ""
        self.max_packet = 16 << 20
        self.rows_before: int | None = None
        self.rows_written = 0
        self.truncated = False
        self.prepared = False
        self.finished = False
        self.broken: str | None = None
        """Why the load cannot be committed (set by a writer whose piece failed for good)."""

    @property
    def target(self) -> str:
        return f"{quote(self.endpoint.database)}.{quote(self.options.table)}"

    def table_ref(self, name: str) -> str:
        return f"{quote(self.endpoint.database)}.{quote(name)}"

    def _error(self, cls: type[Exception], message: str) -> Exception:
        return cls(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def connect(self, error: type[Exception]) -> pymysql.Connection:
        return connect(self.endpoint, error, timeout=self.options.connect_timeout_s,  # type: ignore[arg-type]
                       strict=self.options.strict, destination=self.ctx.destination)

    def add_written(self, rows: int) -> None:
        with self.lock:
            self.rows_written += rows

    # -- prepare --------------------------------------------------------------------------------

    def prepare(self) -> None:
        if self.prepared:
            return
        conn = self.connect(PrepareError)
        try:
            self._prepare(conn)
        except pymysql.err.MySQLError as exc:
            raise self._error(PrepareError, f"preparing {self.target} on {self.endpoint.mark} failed: "
                                            f"{describe(exc)}") from exc
        finally:
            close_quietly(conn)
        self.prepared = True

    def _prepare(self, conn: pymysql.Connection) -> None:
        opts, schema = self.options, self.ctx.schema
        found = fetch_all(conn, "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                                "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (self.endpoint.database, opts.table))
        if not found:
            raise self._error(PrepareError, f"table {self.target} does not exist on {self.endpoint.mark}")
        columns = opts.columns if opts.columns is not None else schema.names
        if len(columns) != len(schema):
            raise self._error(PrepareError, f"columns names {len(columns)} column(s) but the source has {len(schema)}: "
                                            f"{', '.join(schema.names)}")
        types = {str(name).lower(): str(dt).lower() for name, dt in found}
        unknown = [c for c in columns if c.lower() not in types]
        if unknown:
            raise self._error(PrepareError, f"table {self.target} has no column {', '.join(unknown)}")
        self.columns = tuple(columns)
        self.max_packet = int(fetch_one(conn, "SELECT @@max_allowed_packet")[0])
        self.method = self._choose_method(conn)
        for statement in opts.pre_sql:
            self._run(conn, statement, "pre_sql", PrepareError)
        if opts.load == "truncate":
            self._run(conn, f"TRUNCATE TABLE {self.target}", "truncate", PrepareError)
            self.truncated = True
        elif opts.load == "staging":
            self._prepare_staging(conn)
        if opts.verify == "count" and opts.load == "append":
            self.rows_before = int(fetch_one(conn, f"SELECT COUNT(*) FROM {self.target}")[0])
        self._build_sql([types[c.lower()] for c in columns])

    def _table_comment(self, conn: pymysql.Connection, name: str) -> str | None:
        """The comment of table ``name`` (a view's is 'VIEW'), or None when there is no such table."""
        found = fetch_one(conn, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                                "AND TABLE_NAME = %s", (self.endpoint.database, name))
        return None if found is None else str(found[0] or "")

    def _prepare_staging(self, conn: pymysql.Connection) -> None:
        opts, ctx = self.options, self.ctx
        self.staging = opts.staging_table or _derived_name(opts.table, f"__wh{ctx.task_id}_{ctx.run_id}")
        self.old_table = _derived_name(opts.table, f"__whold{ctx.task_id}_{ctx.run_id}")
        self.target_comment = self._table_comment(conn, opts.table) or ""
        where = (f"params.staging_table of destination {ctx.destination!r}" if opts.staging_table else
                 f"the default staging name of destination {ctx.destination!r}, derived from params.table; "
                 f"params.staging_table can name another")
        comment = self._table_comment(conn, self.staging)
        if comment is not None:
            marker = parse_marker(comment)
            if marker is None or marker[0] != ctx.task_id or marker[2] != ctx.destination:
                # A user's table (or another task's or destination's staging table): never ours to drop.
                whose = ("it carries no wormhole staging marker" if marker is None else
                         f"it is the staging table of task {marker[0]}, destination {marker[2]!r}")
                raise self._error(PrepareError, f"staging table {self.table_ref(self.staging)} ({where}) already "
                                                f"exists on {self.endpoint.mark} and {whose}; it is left untouched: "
                                                f"drop or rename it, or choose another staging_table")
            # Ours, left by a run of this task and destination that never finished: reclaim it.
            self._run(conn, f"DROP TABLE {self.table_ref(self.staging)}", "dropping a leftover staging table",
                      PrepareError)
            log.info("writer.staging_reclaimed", destination=ctx.destination, task_id=ctx.task_id, run_id=ctx.run_id,
                     table=self.staging, left_by_run=marker[1])
        if self._table_comment(conn, self.old_table) is not None:
            raise self._error(PrepareError, f"table {self.table_ref(self.old_table)} already exists on "
                                            f"{self.endpoint.mark}; the staging swap renames the target to that "
                                            f"name, so it is left untouched and nothing is loaded: drop or rename it")
        self._run(conn, f"CREATE TABLE {self.table_ref(self.staging)} LIKE {self.target}", "staging", PrepareError)
        self.staging_created = True
        self._run(conn, f"ALTER TABLE {self.table_ref(self.staging)} COMMENT = "
                        f"{conn.escape(staging_marker(ctx.task_id, ctx.run_id, ctx.destination))}",
                  "marking the staging table", PrepareError)
        self.write_table = self.staging

    def _choose_method(self, conn: pymysql.Connection) -> str:
        opts = self.options
        if opts.method == "insert" or (opts.method == "auto" and opts.write_mode == "upsert"):
            return "insert"
        allowed = bool(int(fetch_one(conn, "SELECT @@GLOBAL.local_infile")[0]))
        if allowed:
            return "load_data"
        if opts.method == "load_data":
            raise self._error(PrepareError, f"method 'load_data' needs local_infile, which {self.endpoint.mark} "
                                            f"has switched off (use method 'insert' or 'auto')")
        return "insert"

    def _build_sql(self, target_types: list[str]) -> None:
        opts = self.options
        table = self.table_ref(self.write_table)
        cols = ", ".join(quote(c) for c in self.columns)
        verb = "REPLACE" if opts.write_mode == "replace" else "INSERT"
        self.insert_prefix = f"{verb} INTO {table} ({cols}) VALUES "
        if opts.write_mode == "upsert":
            updates = ", ".join(f"{quote(c)} = VALUES({quote(c)})" for c in self.columns)
            self.insert_suffix = f" ON DUPLICATE KEY UPDATE {updates}"
        # LOAD DATA takes bytes as hex through a variable (a raw byte could end a field or line),
        # and BIT and YEAR columns through a CAST to a number: a loaded field is text, which BIT
        # would take byte by byte and YEAR would read '0' as 2000 where the number 0 is 0000.
        targets, sets = [], []
        for i, (name, column) in enumerate(zip(self.columns, self.ctx.schema.columns, strict=True)):
            numeric = target_types[i] in ("bit", "year") and column.type != "bytes"
            if column.type == "bytes" or numeric:
                var = f"@wh{i}"
                targets.append(var)
                expr = f"UNHEX({var})" if column.type == "bytes" else f"CAST({var} AS UNSIGNED)"
                sets.append(f"{quote(name)} = {expr}")
            else:
                targets.append(quote(name))
        replace = " REPLACE" if opts.write_mode == "replace" else ""
        marker = "\x00wh-file\x00"
        sql = (f"LOAD DATA LOCAL INFILE {marker}{replace} INTO TABLE {table} CHARACTER SET utf8mb4 "
               f"FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' "
               f"({', '.join(targets)})" + (f" SET {', '.join(sets)}" if sets else ""))
        # The file name is bound by the driver, which formats with %: a % in a name must stay literal.
        self.load_sql = sql.replace("%", "%%").replace(marker, "%s")

    def _run(self, conn: pymysql.Connection, statement: str, what: str, error: type[Exception]) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
            conn.commit()
        except pymysql.err.MySQLError as exc:
            raise self._error(error, f"{what} failed on {self.endpoint.mark}: {describe(exc)} "
                                     f"(statement: {statement[:200]})") from exc

    # -- commit / rollback ----------------------------------------------------------------------

    def commit(self) -> None:
        if self.finished:
            return
        if self.broken is not None:
            raise self._error(CommitError, f"cannot commit {self.target}: {self.broken}")
        conn = self.connect(CommitError)
        try:
            if self.options.verify == "count":
                self._verify(conn)
            if self.staging is not None:
                self._swap(conn)
            for statement in self.options.post_sql:
                self._run(conn, statement, "post_sql", CommitError)
            if self.swapped and self.old_table is not None:
                self._run(conn, f"DROP TABLE IF EXISTS {self.table_ref(self.old_table)}", "dropping the old table",
                          CommitError)
        finally:
            close_quietly(conn)
        self.finished = True

    def _verify(self, conn: pymysql.Connection) -> None:
        table = self.table_ref(self.write_table)
        found = int(fetch_one(conn, f"SELECT COUNT(*) FROM {table}")[0])
        expected = self.rows_written + (self.rows_before or 0)
        if found != expected:
            raise self._error(CommitError, f"verify count: {table} holds {found} rows, expected {expected} "
                                           f"({self.rows_written} written)")

    def _swap(self, conn: pymysql.Connection) -> None:
        assert self.staging is not None and self.old_table is not None
        # The marker is for wormhole's own bookkeeping: the table swapped in keeps the target's comment.
        self._run(conn, f"ALTER TABLE {self.table_ref(self.staging)} COMMENT = {conn.escape(self.target_comment)}",
                  "restoring the table comment", CommitError)
        self._run(conn, f"RENAME TABLE {self.target} TO {self.table_ref(self.old_table)}, "
                        f"{self.table_ref(self.staging)} TO {self.target}", "swapping in the staging table",
                  CommitError)
        self.swapped = True

    def rollback(self) -> None:
        if self.finished:
            return
        opts = self.options
        if opts.load == "staging":
            if not self.staging_created:
                self.finished = True
                return  # this run never created it: a table by that name is not ours to drop
            conn = self.connect(RollbackError)
            try:
                if self.swapped:  # post_sql failed after the swap: put the old table back first
                    assert self.old_table is not None
                    self._run(conn, f"RENAME TABLE {self.target} TO {self.table_ref(self.staging)}, "
                                    f"{self.table_ref(self.old_table)} TO {self.target}", "swapping back",
                              RollbackError)
                    self.swapped = False
                assert self.staging is not None
                self._run(conn, f"DROP TABLE IF EXISTS {self.table_ref(self.staging)}", "dropping the staging table",
                          RollbackError)
            finally:
                close_quietly(conn)
            self.finished = True
            return
        if not self.prepared and not self.truncated:
            self.finished = True
            return  # prepare failed before any row could be written: nothing to undo
        if opts.rollback_sql:
            conn = self.connect(RollbackError)
            try:
                for statement in opts.rollback_sql:
                    self._run(conn, statement, "rollback_sql", RollbackError)
            finally:
                close_quietly(conn)
            self.finished = True
            return
        self.finished = True
        if self.rows_written or self.truncated:
            what = []
            if self.truncated:
                what.append(f"{self.target} was truncated (its earlier rows are gone)")
            if self.rows_written:
                what.append(f"{self.rows_written} rows committed to {self.target} stay there")
            raise self._error(RollbackError, f"not rolled back: load is '{opts.load}' without rollback_sql: "
                                             f"{'; '.join(what)}")


class MysqlWriter:
    """One connection; each piece of ``batch_size`` rows is one transaction."""

    def __init__(self, options: MysqlWriterOptions, ctx: WriteContext, periphery: MysqlWriterPeriphery,
                 worker: int) -> None:
        self.options = options
        self.ctx = ctx
        self.periphery = periphery
        self.worker = worker
        self.types = [c.type for c in ctx.schema.columns]
        self.conn: pymysql.Connection | None = None
        self._file: int | None = None
        self._file_path = ""

    def _error(self, message: str) -> WriteError:
        return WriteError(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self) -> None:
        p = self.periphery
        if not p.prepared or p.finished:
            raise self._error(f"{p.target} is not prepared for writing")
        self.conn = self._connect()
        if p.method == "load_data":
            self._open_buffer()

    def _connect(self) -> pymysql.Connection:
        return connect(self.periphery.endpoint, WriteError, timeout=self.options.connect_timeout_s,
                       strict=self.options.strict, autocommit=False, local_infile=True,
                       destination=self.ctx.destination)

    def _open_buffer(self) -> None:
        # An in-memory file the driver opens by name: the batch never touches a disk.
        if hasattr(os, "memfd_create"):
            self._file = os.memfd_create("wormhole-load", os.MFD_CLOEXEC)
            self._file_path = f"/proc/self/fd/{self._file}"
        else:  # pragma: no cover - not Linux
            fd, self._file_path = tempfile.mkstemp(prefix="wormhole-load-")
            self._file = fd

    def flush(self) -> None:
        """Nothing buffered: every piece is committed before ``write`` returns."""

    def close(self) -> None:
        close_quietly(self.conn)
        self.conn = None
        if self._file is not None:
            os.close(self._file)
            if not self._file_path.startswith("/proc/"):
                os.unlink(self._file_path)
            self._file = None

    # -- writing --------------------------------------------------------------------------------

    def write(self, rows: Sequence[Row]) -> WriteResult:
        size = self.options.batch_size
        written = 0
        rejected: list[Rejected] = []
        for start in range(0, len(rows), size):
            piece = rows[start:start + size]
            try:
                n, bad = self._write_piece(rows, start, piece)
            except WriteError as exc:
                exc.details["written_before_failure"] = written  # pieces of this batch already committed
                raise
            written += n
            rejected.extend(bad)
        return WriteResult(written=written, rejected=tuple(rejected))

    def _write_piece(self, batch: Sequence[Row], start: int, piece: Sequence[Row]) -> tuple[int, list[Rejected]]:
        p = self.periphery
        if p.broken is not None:
            raise self._error(f"cannot write {p.target}: {p.broken}")
        encoded = self._encode(batch, start, piece)
        if encoded is not None:
            ok = self._with_retry(lambda: self._bulk(piece, encoded))
            if ok:
                p.add_written(len(piece))
                return len(piece), []
        written, rejected = self._with_retry(lambda: self._row_by_row(piece))
        p.add_written(written)
        return written, rejected

    def _encode(self, batch: Sequence[Row], start: int, piece: Sequence[Row]) -> bytes | list[str] | None:
        method = self.periphery.method
        memo = batch_memo(batch)
        key = ("mysql", method, start, len(piece))
        if memo is not None:
            found = memo.get(key)
            if found is not None:
                return found if found is not _UNENCODABLE else None
        try:
            encoded: Any = load_payload(self.types, piece) if method == "load_data" else sql_values(self.types, piece)
        except _ENCODE_ERRORS:
            encoded = None  # some value cannot be written: the row-by-row pass finds which
        if memo is not None:
            memo[key] = _UNENCODABLE if encoded is None else encoded
        return encoded

    def _bulk(self, piece: Sequence[Row], encoded: bytes | list[str]) -> bool:
        """One transaction for the whole piece; False when some row's value is at fault."""
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                if isinstance(encoded, bytes):
                    assert self._file is not None
                    os.ftruncate(self._file, 0)
                    os.pwrite(self._file, encoded, 0)
                    cur.execute(self.periphery.load_sql, (self._file_path,))
                    if not self._loaded_exactly(cur, len(piece)):
                        conn.rollback()
                        return False
                else:
                    for statement in self._insert_statements(encoded):
                        cur.execute(statement)
        except pymysql.err.MySQLError as exc:
            if is_row_error(exc):
                self._rollback_quietly()
                return False
            raise
        self._commit()
        return True

    def _loaded_exactly(self, cur: Any, expected: int) -> bool:
        # With LOCAL, MySQL turns bad values and duplicate keys into warnings and skips or mangles
        # rows instead of failing; anything but an exact, clean load is replayed row by row.
        result = cur._result
        message = getattr(result, "message", b"") or b""
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        info = _LOAD_INFO.search(message)
        if info is None:
            return False
        records, _deleted, skipped, warnings = (int(g) for g in info.groups())
        return records == expected and skipped == 0 and warnings == 0

    def _insert_statements(self, values: list[str]) -> list[str]:
        p = self.periphery
        budget = int(p.max_packet * 0.9) - len(p.insert_prefix) - len(p.insert_suffix)
        statements, current, size = [], [], 0
        for v in values:
            if current and size + len(v) + 1 > budget:
                statements.append(p.insert_prefix + ",".join(current) + p.insert_suffix)
                current, size = [], 0
            current.append(v)
            size += len(v) + 1
        if current:
            statements.append(p.insert_prefix + ",".join(current) + p.insert_suffix)
        return statements

    def _row_by_row(self, piece: Sequence[Row]) -> tuple[int, list[Rejected]]:
        """The piece as single-row statements in one transaction; bad rows are rejected with
        MySQL's reason (a failing statement undoes only itself)."""
        p = self.periphery
        conn = self._connection()
        rejected: list[Rejected] = []
        with conn.cursor() as cur:
            for row in piece:
                try:
                    (values,) = sql_values(self.types, (row,))
                    values.encode("utf-8")  # a lone surrogate fails here, as the row's fault
                except _ENCODE_ERRORS as exc:
                    rejected.append(Rejected(row, f"{type(exc).__name__}: {exc}"))
                    continue
                try:
                    cur.execute(p.insert_prefix + values + p.insert_suffix)
                except pymysql.err.MySQLError as exc:
                    if not is_row_error(exc):
                        raise
                    rejected.append(Rejected(row, describe(exc)))
        self._commit()
        return len(piece) - len(rejected), rejected

    def _connection(self) -> pymysql.Connection:
        if self.conn is None:
            self.conn = self._connect()
        return self.conn

    def _commit(self) -> None:
        conn = self._connection()
        try:
            conn.commit()
        except pymysql.err.MySQLError as exc:
            # Lost while waiting for COMMIT's answer: the server may or may not have committed. A
            # failure to send it (2006), or an error answer, means it did not: that piece is retried.
            if error_code(exc) in (2013, 2055):
                raise _CommitUnknown(describe(exc)) from exc
            raise

    def _rollback_quietly(self) -> None:
        if self.conn is None:
            return
        try:
            self.conn.rollback()
        except pymysql.err.MySQLError:
            self._drop_connection()

    def _drop_connection(self) -> None:
        close_quietly(self.conn)
        self.conn = None

    def _with_retry(self, attempt: Callable[[], T]) -> T:
        tries = 0
        wait = self.options.retry_wait_s
        while True:
            try:
                return attempt()
            except _CommitUnknown as exc:
                self._fail(f"the connection was lost while a batch was being committed, so whether its rows are "
                           f"in {self.periphery.target} is unknown: {exc}")
            except pymysql.err.MySQLError as exc:
                if not is_transient(exc):
                    self._fail(f"writing {self.periphery.target} failed: {describe(exc)}")
                tries += 1
                if tries > self.options.retries:
                    self._fail(f"writing {self.periphery.target} failed after {tries} attempt(s): {describe(exc)}")
                # The piece's transaction is gone (rolled back or with the connection): redo it whole.
                log.warning("writer.retry", destination=self.ctx.destination, task_id=self.ctx.task_id,
                            run_id=self.ctx.run_id, worker=self.worker, attempt=tries, wait_s=round(wait, 3),
                            error=describe(exc))
                self._rollback_quietly()
                if error_code(exc) not in (1205, 1213):
                    self._drop_connection()
                time.sleep(min(wait, 30.0))
                wait *= 2

    def _fail(self, reason: str) -> Any:
        self._rollback_quietly()
        self.periphery.broken = reason
        raise self._error(reason)


class _CommitUnknown(Exception):
    """COMMIT was sent and the connection died before its answer."""


_UNENCODABLE = object()
"""Memo marker: this piece has a value that cannot be encoded (each destination then goes row by row)."""

"""The mysql store's writers: one connection each, every piece of ``batch_size`` rows one transaction.

A writer cuts a batch into pieces of ``batch_size`` rows, each in its own transaction, sent as one
``LOAD DATA LOCAL INFILE`` from an in-memory file or one multi-row INSERT. Every MySQL destination of
a run encodes a batch alike, so the encoded piece is shared through the batch's memo and built once.
A piece that fails on a row's value (or that LOAD DATA, which turns errors into warnings with LOCAL,
did not load exactly) is rolled back and replayed row by row (:func:`wormhole.plugins.sql.batch_then_rows`),
so only the bad rows are rejected, each with MySQL's own error text.

Transient errors (lock wait timeout, deadlock, lost connection) become ``TransientWriteError`` here,
at the store boundary, and :func:`wormhole.retry.policy` retries the piece on a fresh transaction,
with backoff, ``retries`` times; the waits end at once when the task stops. A connection lost while
COMMIT was in flight is not retried, because whether the piece was committed is unknown.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import pymysql

from wormhole.errors import TransientWriteError, WriteError
from wormhole.plugins.base import Rejected, Row, WriteContext, WriteResult, batch_memo
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    close_quietly,
    describe,
    error_code,
    is_row_error,
    is_transient,
)
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.mysql.periphery import MysqlWriterPeriphery
from wormhole.plugins.mysql.types import load_payload, sql_values
from wormhole.plugins.sql import VALUE_ERRORS, batch_then_rows, rows_one_by_one
from wormhole.retry import policy

T = TypeVar("T")

_LOAD_INFO = re.compile(r"Records:\s*(\d+)\s+Deleted:\s*(\d+)\s+Skipped:\s*(\d+)\s+Warnings:\s*(\d+)")
_KEEPS_CONNECTION = (1205, 1213)
"""Lock wait timeout and deadlock roll back the transaction, not the session: the connection is kept."""


class MysqlWriter:
    """One connection; each piece of ``batch_size`` rows is one transaction."""

    def __init__(self, options: MysqlWriterOptions, ctx: WriteContext, periphery: MysqlWriterPeriphery,
                 worker: int) -> None:
        self.options = options
        self.ctx = ctx
        self.periphery = periphery
        self.worker = worker
        self.types = [c.type for c in ctx.schema.columns]
        self.log = ctx.log.bind(worker=worker)
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
        return self.periphery.connect(WriteError, autocommit=False, local_infile=True, log=self.log)

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
        bulk = None if encoded is None else (lambda: self._retrying(lambda: self._bulk(piece, encoded)))
        result = batch_then_rows(piece, bulk, lambda rows: self._retrying(lambda: self._row_by_row(rows)))
        p.add_written(result.written)
        return result.written, list(result.rejected)

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
        except VALUE_ERRORS:
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
        statements: list[str] = []
        current: list[str] = []
        size = 0
        for v in values:
            if current and size + len(v) + 1 > budget:
                statements.append(p.insert_prefix + ",".join(current) + p.insert_suffix)
                current, size = [], 0
            current.append(v)
            size += len(v) + 1
        if current:
            statements.append(p.insert_prefix + ",".join(current) + p.insert_suffix)
        return statements

    def _row_by_row(self, piece: Sequence[Row]) -> WriteResult:
        """The piece as single-row statements in one transaction; bad rows are rejected with
        MySQL's reason (a failing statement undoes only itself)."""
        with self._connection().cursor() as cur:
            result = rows_one_by_one(piece, lambda row: self._insert_row(cur, row))
        self._commit()
        return result

    def _insert_row(self, cur: Any, row: Row) -> str | None:
        """None when ``row`` is in; else why it was rejected."""
        p = self.periphery
        try:
            (values,) = sql_values(self.types, (row,))
            values.encode("utf-8")  # a lone surrogate fails here, as the row's fault
        except VALUE_ERRORS as exc:
            return f"{type(exc).__name__}: {exc}"
        try:
            cur.execute(p.insert_prefix + values + p.insert_suffix)
        except pymysql.err.MySQLError as exc:
            if not is_row_error(exc):
                raise
            return describe(exc)
        return None

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
                raise _Broken(f"the connection was lost while a batch was being committed, so whether its rows "
                              f"are in {self.periphery.target} is unknown: {describe(exc)}") from exc
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

    def _retrying(self, step: Callable[[], T]) -> T:
        """``step`` (one transaction of a piece), retried on transient errors by the one retry policy;
        when it fails for good the destination is broken (its load cannot be committed)."""
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            try:
                return step()
            except pymysql.err.MySQLError as exc:
                raise self._classify(exc) from exc

        retrying = policy(attempts=self.options.retries + 1, wait_s=self.options.retry_wait_s, max_wait_s=30.0,
                          stop=self.ctx.stop, log=self.log, event="writer.retry")
        try:
            return retrying(attempt)
        except TransientWriteError as exc:
            stopping = " (the task is stopping)" if self.ctx.stop.is_set() else ""
            self._fail(f"writing {self.periphery.target} failed after {attempts} attempt(s){stopping}: {exc}")
        except _Broken as exc:
            self._fail(str(exc))

    def _classify(self, exc: pymysql.err.MySQLError) -> Exception:
        """The store boundary: a transient MySQL error becomes ``TransientWriteError`` (retryable),
        any other breaks the destination."""
        if not is_transient(exc):
            return _Broken(f"writing {self.periphery.target} failed: {describe(exc)}")
        # The piece's transaction is gone (rolled back, or with the connection): it is redone whole.
        self._rollback_quietly()
        if error_code(exc) not in _KEEPS_CONNECTION:
            self._drop_connection()
        return TransientWriteError(describe(exc), destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def _fail(self, reason: str) -> NoReturn:
        self._rollback_quietly()
        self.periphery.broken = reason
        raise self._error(reason)


class _Broken(Exception):
    """A piece failed in a way no retry can mend (or COMMIT's outcome is unknown): the load is broken."""


_UNENCODABLE = object()
"""Memo marker: this piece has a value that cannot be encoded (each destination then goes row by row)."""

"""The mysql store's writers: every piece of ``batch_size`` rows one transaction, or one split one transaction.

A writer cuts a batch into pieces of ``batch_size`` rows, each in its own transaction, sent as one
``LOAD DATA LOCAL INFILE`` from an in-memory file or one multi-row INSERT. The LOAD DATA text of a batch
that has Arrow columns is made from them, without Python per value (:mod:`.encoding`, :mod:`.arrow_load`). Every
MySQL destination of a run encodes a batch alike, so the encoded piece is shared through the batch's
memo and built once.
A piece that fails on a row's value (or that LOAD DATA, which turns errors into warnings with LOCAL,
did not load exactly) is rolled back and replayed row by row (from the batch's tuples, made then if it
came as Arrow columns), so only the bad rows are rejected, each with MySQL's own error text.

Transient errors (lock wait timeout, deadlock, lost connection) become ``TransientWriteError`` here,
at the store boundary, and :func:`wormhole.retry.policy` retries the piece on a fresh transaction,
with backoff, ``retries`` times; the waits end at once when the task stops. A connection lost while
COMMIT was in flight is not retried, because whether the piece was committed is unknown.

As a :class:`~wormhole.plugins.base.SplitWriter` (``write_split``/``end_split``/``abort_split``) a writer
keeps one transaction per open split, on a connection of its own (opened on the split's first
batch, reused from a small free list after a commit). Each piece runs under a SAVEPOINT, so a bad
row or a lock wait timeout undoes that piece only; ``end_split`` inserts the split's marker row
(:mod:`.markers`) and commits: the rows and the record that they are in are one transaction. An
error that takes the split's transaction with it (deadlock, lost connection) raises ``SplitLost``:
the split is written again from its start. When the connection is lost while COMMIT was in flight,
the writer waits until the server has finished with the old session and looks for the marker: found,
the split is durable; missing, it is lost. So each split is committed exactly once.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import pyarrow as pa
import pymysql

from wormhole.errors import SplitLost, TransientWriteError, WriteError
from wormhole.plugins.base import Rejected, Row, WriteContext, WriteResult
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    abandon,
    close_quietly,
    describe,
    error_code,
    is_row_error,
    is_transient,
    wait_session_ended,
)
from wormhole.plugins.mysql.encoding import Encoded, PieceEncoder
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.mysql.periphery import MysqlWriterPeriphery
from wormhole.plugins.mysql.types import sql_values
from wormhole.plugins.sql import VALUE_ERRORS, rows_one_by_one
from wormhole.retry import policy

T = TypeVar("T")

_LOAD_INFO = re.compile(r"Records:\s*(\d+)\s+Deleted:\s*(\d+)\s+Skipped:\s*(\d+)\s+Warnings:\s*(\d+)")
_KEEPS_CONNECTION = (1205, 1213)
"""Lock wait timeout and deadlock roll back the transaction, not the session: the connection is kept."""
_LOCK_WAIT_TIMEOUT = 1205
"""Undoes only the statement (unless innodb_rollback_on_timeout): a split's piece retries from its savepoint."""
_COMMIT_UNKNOWN = (2013, 2055)
"""Lost while waiting for COMMIT's answer: whether the server committed is unknown."""
_DUPLICATE_KEY = 1062
_SAVEPOINT = "wh_piece"
_FREE_CONNECTIONS = 2
"""Connections kept for the next splits after a commit; more open splits open more."""
_SETTLE_WAIT_S = 30.0
"""How long a lost COMMIT's outcome is waited for (its old session ending on the server)."""


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
        self.encoder: PieceEncoder | None = None
        self._from_wire = False
        """Some batch was loaded from its wire text (logged once, ``writer.load_from_wire``)."""
        self.conn: pymysql.Connection | None = None
        self._file: int | None = None
        self._file_path = ""
        self._splits: dict[str, pymysql.Connection] = {}
        """The open splits' transactions, each on its own connection."""
        self._split_written: dict[str, int] = {}
        self._free: list[pymysql.Connection] = []

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
        # Splits still open are not committed: closing their connections rolls them back.
        for conn in [*self._splits.values(), *self._free]:
            close_quietly(conn)
        self._splits.clear()
        self._split_written.clear()
        self._free.clear()
        close_quietly(self.conn)
        self.conn = None
        if self._file is not None:
            os.close(self._file)
            if not self._file_path.startswith("/proc/"):
                os.unlink(self._file_path)
            self._file = None

    # -- writing --------------------------------------------------------------------------------

    def write(self, rows: Sequence[Row]) -> WriteResult:
        return self._write(rows, None)

    def write_split(self, split_id: str, rows: Sequence[Row]) -> WriteResult:
        """Write a batch of ``split_id`` inside the split's transaction (not durable until ``end_split``)."""
        result = self._write(rows, split_id)
        self._split_written[split_id] = self._split_written.get(split_id, 0) + result.written
        return result

    def _write(self, rows: Sequence[Row], split_id: str | None) -> WriteResult:
        size = self.options.batch_size
        if self.encoder is None:
            self.encoder = PieceEncoder(self.ctx.schema, self.periphery.method, self.periphery.wire)
        form = self.encoder.form(rows)
        wire = self.encoder.wire_text(rows, form)
        if wire is not None and not self._from_wire:
            self._from_wire = True
            self.log.info("writer.load_from_wire", columns=[c.name for c, w in zip(self.ctx.schema.columns, wire,
                                                                                   strict=True) if w is not None])
        written = 0
        rejected: list[Rejected] = []
        for start in range(0, len(rows), size):
            try:
                n, bad = self._write_piece(rows, form, wire, start, min(size, len(rows) - start), split_id)
            except WriteError as exc:
                if split_id is None:
                    exc.details["written_before_failure"] = written  # pieces of this batch already committed
                raise
            written += n
            rejected.extend(bad)
        return WriteResult(written=written, rejected=tuple(rejected))

    def _write_piece(self, batch: Sequence[Row], form: pa.RecordBatch | None, wire: Sequence[pa.Array | None] | None,
                     start: int, size: int, split_id: str | None) -> tuple[int, list[Rejected]]:
        """Rows ``start`` to ``start + size`` of ``batch`` at once; when some row's value fails that (or
        cannot be encoded), the piece again row by row, so only the bad rows are rejected."""
        p = self.periphery
        if p.broken is not None:
            raise self._error(f"cannot write {p.target}: {p.broken}")
        assert self.encoder is not None
        encoded = self.encoder.encode(batch, form, start, size, wire)
        if encoded is not None and self._retrying(split_id, lambda: self._bulk(size, encoded, split_id)):
            result = WriteResult(written=size)
        else:  # the piece's tuples: the batch's own, made from its Arrow form only now if it came as columns
            piece = batch[start:start + size]
            result = self._retrying(split_id, lambda: self._row_by_row(piece, split_id))
        if split_id is None:
            p.add_written(result.written)  # committed; a split's rows count once the split is
        return result.written, list(result.rejected)

    def _bulk(self, rows: int, encoded: Encoded, split_id: str | None) -> bool:
        """The whole piece at once (its own transaction, or a savepoint of the split's); False when
        some row's value is at fault (the piece is undone)."""
        conn = self._connection(split_id)
        try:
            with conn.cursor() as cur:
                if split_id is not None:
                    cur.execute(f"SAVEPOINT {_SAVEPOINT}")
                if not isinstance(encoded, list):  # a LOAD DATA payload
                    assert self._file is not None
                    os.ftruncate(self._file, 0)
                    os.pwrite(self._file, encoded, 0)
                    cur.execute(self.periphery.load_sql, (self._file_path,))
                    if not self._loaded_exactly(cur, rows):
                        self._undo_piece(conn, split_id)
                        return False
                else:
                    for statement in self._insert_statements(encoded):
                        cur.execute(statement)
        except pymysql.err.MySQLError as exc:
            if is_row_error(exc):
                if split_id is None:
                    self._rollback_quietly()
                else:
                    self._undo_piece(conn, split_id)
                return False
            raise
        if split_id is None:
            self._commit()
        return True

    def _undo_piece(self, conn: pymysql.Connection, split_id: str | None) -> None:
        if split_id is None:
            conn.rollback()
            return
        with conn.cursor() as cur:
            cur.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")  # raises when the split's transaction is gone

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

    def _row_by_row(self, piece: Sequence[Row], split_id: str | None) -> WriteResult:
        """The piece as single-row statements (one transaction, or in the split's after a savepoint);
        bad rows are rejected with MySQL's reason (a failing statement undoes only itself)."""
        with self._connection(split_id).cursor() as cur:
            if split_id is not None:
                cur.execute(f"SAVEPOINT {_SAVEPOINT}")
            result = rows_one_by_one(piece, lambda row: self._insert_row(cur, row))
        if split_id is None:
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

    def _connection(self, split_id: str | None = None) -> pymysql.Connection:
        if split_id is not None:
            conn = self._splits.get(split_id)
            if conn is None:
                conn = self._splits[split_id] = self._split_connection()
            return conn
        if self.conn is None:
            self.conn = self._connect()
        return self.conn

    def _split_connection(self) -> pymysql.Connection:
        """A connection for a split's transaction: a free one (the plain-write one first), or a new one."""
        if self._free:
            return self._free.pop()
        if self.conn is not None:
            conn, self.conn = self.conn, None
            return conn
        return self._connect()

    def _commit(self) -> None:
        conn = self._connection()
        try:
            conn.commit()
        except pymysql.err.MySQLError as exc:
            # Lost while waiting for COMMIT's answer: the server may or may not have committed. A
            # failure to send it (2006), or an error answer, means it did not: that piece is retried.
            if error_code(exc) in _COMMIT_UNKNOWN:
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

    def _retrying(self, split_id: str | None, step: Callable[[], T]) -> T:
        """``step`` (a piece's statements), retried on transient errors by the one retry policy; when
        it fails for good the destination is broken (its load cannot be committed). In a split, only
        what undoes the piece alone is retried; losing the split's transaction raises ``SplitLost``."""
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            try:
                return step()
            except pymysql.err.MySQLError as exc:
                raise self._classify(exc, split_id) from exc

        retrying = policy(attempts=self.options.retries + 1, wait_s=self.options.retry_wait_s, max_wait_s=30.0,
                          stop=self.ctx.stop, log=self.log, event="writer.retry")
        try:
            return retrying(attempt)
        except TransientWriteError as exc:
            stopping = " (the task is stopping)" if self.ctx.stop.is_set() else ""
            self._fail(f"writing {self.periphery.target} failed after {attempts} attempt(s){stopping}: {exc}",
                       split_id)
        except _Broken as exc:
            self._fail(str(exc), split_id)

    def _classify(self, exc: pymysql.err.MySQLError, split_id: str | None) -> Exception:
        """The store boundary: a transient MySQL error becomes ``TransientWriteError`` (retryable),
        or ``SplitLost`` when it took a split's transaction; any other breaks the destination."""
        if not is_transient(exc):
            return _Broken(f"writing {self.periphery.target} failed: {describe(exc)}")
        if split_id is not None:
            return self._split_error(exc, split_id)
        # The piece's transaction is gone (rolled back, or with the connection): it is redone whole.
        self._rollback_quietly()
        if error_code(exc) not in _KEEPS_CONNECTION:
            self._drop_connection()
        return TransientWriteError(describe(exc), destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def _split_error(self, exc: pymysql.err.MySQLError, split_id: str) -> Exception:
        conn = self._splits[split_id]
        if error_code(exc) == _LOCK_WAIT_TIMEOUT:
            try:
                self._undo_piece(conn, split_id)
            except pymysql.err.MySQLError:
                pass  # the savepoint went with the transaction (innodb_rollback_on_timeout): lost
            else:
                return TransientWriteError(describe(exc), destination=self.ctx.destination, plugin=PLUGIN_NAME)
        return self._lose(split_id, f"split {split_id!r} lost its transaction on {self.periphery.target}: "
                                    f"{describe(exc)}")

    def _lose(self, split_id: str, reason: str) -> SplitLost:
        """Forget the split (its connection closed, so nothing of it can commit) and say it is lost."""
        close_quietly(self._splits.pop(split_id, None))
        self._split_written.pop(split_id, None)
        self.log.warning("writer.split_lost", split_id=split_id, reason=reason)
        return SplitLost(reason, split_id=split_id, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def _fail(self, reason: str, split_id: str | None = None) -> NoReturn:
        if split_id is None:
            self._rollback_quietly()
        else:
            close_quietly(self._splits.pop(split_id, None))
            self._split_written.pop(split_id, None)
        self.periphery.broken = reason
        raise self._error(reason)

    # -- splits ---------------------------------------------------------------------------------

    def end_split(self, split_id: str, rows: int) -> None:
        """Insert the split's marker and commit: its rows and the marker are one transaction."""
        p = self.periphery
        if p.broken is not None:
            raise self._error(f"cannot write {p.target}: {p.broken}")
        conn = self._connection(split_id)  # a split without rows still gets its marker
        try:
            with conn.cursor() as cur:
                cur.execute(p.markers.insert_sql, (self.ctx.destination, split_id, rows))
        except pymysql.err.MySQLError as exc:
            if is_transient(exc):
                raise self._lose(split_id, f"split {split_id!r} lost its transaction on {p.target}: "
                                           f"{describe(exc)}") from exc
            if error_code(exc) == _DUPLICATE_KEY:
                self._already_durable(split_id, conn)
                return
            self._fail(f"recording split {split_id!r} in {p.markers.table} failed: {describe(exc)}", split_id)
        try:
            conn.commit()
        except pymysql.err.MySQLError as exc:
            if error_code(exc) in _COMMIT_UNKNOWN or isinstance(exc, pymysql.err.InterfaceError):
                self._settle(split_id, conn, exc)
            elif is_transient(exc):  # not sent (2006) or refused: the transaction did not commit
                raise self._lose(split_id, f"committing split {split_id!r} to {p.target} failed: "
                                           f"{describe(exc)}") from exc
            else:
                self._fail(f"committing split {split_id!r} to {p.target} failed: {describe(exc)}", split_id)
        else:
            self._splits.pop(split_id, None)
            self._release(conn)
        p.add_written(self._split_written.pop(split_id, 0), split_id)
        self.log.debug("writer.split_committed", split_id=split_id, rows=rows)

    def _already_durable(self, split_id: str, conn: pymysql.Connection) -> None:
        """The split's marker is there already: another attempt made it durable (a Spark task run twice, or
        a process whose claim was taken over finishing the split first). Ours is rolled back: it lands once."""
        p = self.periphery
        self._splits.pop(split_id, None)
        self._split_written.pop(split_id, None)
        try:
            conn.rollback()
            rows = p.markers.rows_of(conn, split_id)
        except pymysql.err.MySQLError as exc:
            close_quietly(conn)
            raise self._lose(split_id, f"split {split_id!r} was already recorded in {p.markers.table}, and "
                                       f"reading that record failed: {describe(exc)}") from exc
        self._release(conn)
        p.add_written(rows, split_id)  # its rows are in the table (once): verify counts them
        self.log.warning("writer.split_already_durable", split_id=split_id)

    def _settle(self, split_id: str, conn: pymysql.Connection, exc: pymysql.err.MySQLError) -> None:
        """COMMIT was sent but its answer lost: wait until the server is done with that session, then
        the split's marker says whether it committed. Returns when it did; raises ``SplitLost`` when not."""
        p = self.periphery
        thread = conn.thread_id()
        self._splits.pop(split_id, None)
        abandon(conn)
        try:
            check = p.connect(WriteError, log=self.log)
        except WriteError as error:
            self._fail(f"the connection was lost while split {split_id!r} was being committed ({describe(exc)}) "
                       f"and the server cannot be asked whether it was: {error}", split_id)
        try:
            wait_session_ended(check, thread, self.ctx.stop, _SETTLE_WAIT_S)
            durable = p.markers.has(check, split_id)
        except (pymysql.err.MySQLError, TimeoutError) as error:
            self._fail(f"the connection was lost while split {split_id!r} was being committed ({describe(exc)}) "
                       f"and its outcome cannot be settled: {error}", split_id)
        finally:
            close_quietly(check)
        self.log.warning("writer.commit_settled", split_id=split_id, durable=durable, error=describe(exc))
        if not durable:
            raise self._lose(split_id, f"the connection was lost while split {split_id!r} was being committed "
                                       f"and it did not commit: {describe(exc)}") from exc

    def _release(self, conn: pymysql.Connection) -> None:
        if len(self._free) < _FREE_CONNECTIONS:
            self._free.append(conn)
        else:
            close_quietly(conn)

    def abort_split(self, split_id: str) -> None:
        """Roll back what this writer holds of the split; a split it does not know is a no-op."""
        self._split_written.pop(split_id, None)
        conn = self._splits.pop(split_id, None)
        if conn is None:
            return
        try:
            conn.rollback()
        except pymysql.err.MySQLError:
            close_quietly(conn)  # a dead connection rolled back with the session
        else:
            self._release(conn)
        self.log.info("writer.split_aborted", split_id=split_id)


class _Broken(Exception):
    """A piece failed in a way no retry can mend (or COMMIT's outcome is unknown): the load is broken."""


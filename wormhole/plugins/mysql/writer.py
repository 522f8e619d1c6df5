"""The mysql store's writers: every piece of ``batch_size`` rows one transaction, or one split one transaction.

A writer cuts a batch into pieces of ``batch_size`` rows, each in its own transaction, sent as one
``LOAD DATA LOCAL INFILE`` from an in-memory file or one multi-row INSERT, both encoded from the batch's
Arrow form without Python per value (:mod:`.encoding`, :mod:`.arrow_load`). Every MySQL destination of a
run encodes a batch alike, so the encoded piece is shared through the batch's memo and built once.
A piece that fails on a row's value (or that LOAD DATA, which turns errors into warnings with LOCAL,
did not load exactly) is rolled back and replayed row by row, one INSERT of the row's literals each (a
row whose value has no literal is refused with the reason), so only the bad rows are rejected, each with
MySQL's own error text; a refused row is reported with its values (:func:`rows_of`).

Transient errors (lock wait timeout, deadlock, lost connection) become ``TransientWriteError`` here,
at the store boundary, and :func:`wormhole.retry.policy` retries the piece on a fresh transaction,
with backoff, ``retries`` times; the waits end at once when the task stops. A connection lost while
COMMIT was in flight is not retried, because whether the piece was committed is unknown.

As a :class:`~wormhole.plugins.base.SplitWriter` a writer keeps one transaction per open split
(:mod:`wormhole.plugins.split_transactions`, with the SQL kit's part in :mod:`wormhole.plugins.sql.writer`);
each piece runs under a SAVEPOINT, so a bad row or a lock wait timeout undoes that piece only.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pymysql

from wormhole.errors import WriteError
from wormhole.plugins.base import Batch, Rejected, WriteContext, WriteResult, rows_of
from wormhole.plugins.mysql.arrow_load import sql_literals
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    describe,
    error_code,
    is_row_error,
)
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.mysql.encoding import Encoded, PieceEncoder
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.mysql.periphery import MysqlWriterPeriphery
from wormhole.plugins.split_transactions import Broken
from wormhole.plugins.sql import VALUE_ERRORS, room_left, rows_one_by_one
from wormhole.plugins.sql.writer import SAVEPOINT, SqlWriter

_LOAD_INFO = re.compile(r"Records:\s*(\d+)\s+Deleted:\s*(\d+)\s+Skipped:\s*(\d+)\s+Warnings:\s*(\d+)")
_KEEPS_CONNECTION = (1205, 1213)
"""Lock wait timeout and deadlock roll back the transaction, not the session: the connection is kept."""
_LOCK_WAIT_TIMEOUT = 1205
"""Undoes only the statement (unless innodb_rollback_on_timeout): a split's piece retries from its savepoint."""
_COMMIT_UNKNOWN = (2013, 2055)
"""Lost while waiting for COMMIT's answer: whether the server committed is unknown."""


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


@dataclass(frozen=True, slots=True)
class _Refused:
    """A row with a value that has no literal (or that MySQL would change): why, naming the column."""

    reason: str


class MysqlWriter(SqlWriter[pymysql.Connection]):
    """One connection; each piece of ``batch_size`` rows is one transaction."""

    plugin = PLUGIN_NAME
    dialect = MYSQL
    db_error = pymysql.err.MySQLError
    periphery: MysqlWriterPeriphery
    options: MysqlWriterOptions

    def __init__(self, options: MysqlWriterOptions, ctx: WriteContext, periphery: MysqlWriterPeriphery,
                 worker: int) -> None:
        super().__init__(options, ctx, periphery, worker)
        self.encoder: PieceEncoder | None = None
        self._from_wire = False
        """Some batch was loaded from its wire text (logged once, ``writer.load_from_wire``)."""
        self._file: int | None = None
        self._file_path = ""

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self) -> None:
        super().open()
        self.conn = self._connect()
        if self.periphery.method == "load_data":
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

    def close(self) -> None:
        self._close_connections()
        if self._file is not None:
            os.close(self._file)
            if not self._file_path.startswith("/proc/"):
                os.unlink(self._file_path)
            self._file = None

    # -- writing --------------------------------------------------------------------------------

    def write(self, batch: Batch) -> WriteResult:
        return self._write(batch, None)

    def write_encoded(self, batch: Batch, split_id: str | None = None) -> WriteResult:
        """:class:`~wormhole.plugins.writing.EncodedWriter`: the columns whose target declares the source's own
        type load the batch's wire text, when it carries some (:mod:`.passthrough`)."""
        return self._write_as(batch, split_id, batch.wire)

    def _write(self, rows: Batch, split_id: str | None, source: Any = None) -> WriteResult:
        size = self.options.batch_size
        if self.encoder is None:
            self.encoder = PieceEncoder(self.ctx.schema, self.periphery.method, self.periphery.wire,
                                        self.periphery.narrowing)
        wire = self.encoder.wire_text(source)
        if wire is not None and not self._from_wire:
            self._from_wire = True
            self.log.info("writer.load_from_wire", columns=[c.name for c, w in zip(self.ctx.schema.columns, wire,
                                                                                   strict=True) if w is not None])
        written = 0
        rejected: list[Rejected] = []
        for start in range(0, len(rows), size):
            room = room_left(self.ctx.record_limit, len(rejected))
            try:
                n, bad = self._write_piece(rows, wire, start, min(size, len(rows) - start), split_id, room)
            except WriteError as exc:
                if split_id is None:
                    exc.details["written_before_failure"] = written  # pieces of this batch already committed
                raise
            written += n
            rejected.extend(bad)
            if room is not None and len(bad) > room:  # over the record limit: the destination fails
                break
        return WriteResult(written=written, rejected=tuple(rejected), stopped=len(rows) - written - len(rejected))

    def _write_piece(self, batch: Batch, wire: Sequence[pa.Array | None] | None, start: int, size: int,
                     split_id: str | None, room: int | None) -> tuple[int, list[Rejected]]:
        """Rows ``start`` to ``start + size`` of ``batch`` at once; when some row's value fails that (or
        cannot be encoded), the piece again row by row, so only the bad rows are rejected (until more than
        ``room`` are: the rest is not tried)."""
        p = self.periphery
        self._check_not_broken()
        assert self.encoder is not None
        encoded = self.encoder.encode(batch, start, size, wire)
        longest = max(map(len, encoded), default=0) if isinstance(encoded, list) else 0
        if 4 * longest >= p.max_packet and any(map(self._over_packet, encoded or ())):
            encoded = None  # a row no INSERT can hold: row by row, where it is rejected alone
        if encoded is not None and self._retrying(split_id, lambda: self._bulk(size, encoded, split_id)):
            result = WriteResult(written=size)
        else:
            piece = Batch.of_arrow(batch.arrow_form.slice(start, size))
            result = self._retrying(split_id, lambda: self._row_by_row(piece, split_id, room))
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
                    cur.execute(f"SAVEPOINT {SAVEPOINT}")
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
            cur.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")  # raises when the split's transaction is gone

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

    def _over_packet(self, values: str) -> int:
        """The bytes of the INSERT of one row of ``values`` (its packet: one byte more) when they exceed the
        server's max_allowed_packet, else 0; measured only for a row that might (4 bytes a character at most)."""
        p = self.periphery
        if 4 * (len(values) + len(p.insert_prefix) + len(p.insert_suffix)) < p.max_packet:
            return 0
        parts = (p.insert_prefix, values, p.insert_suffix)
        size = 1 + sum(len(t) if t.isascii() else len(t.encode("utf-8")) for t in parts)
        return size if size > p.max_packet else 0

    def _insert_statements(self, values: list[str]) -> list[str]:
        p = self.periphery
        budget = int(p.max_packet * 0.9) - len(p.insert_prefix.encode()) - len(p.insert_suffix.encode())
        statements: list[str] = []
        current: list[str] = [p.insert_prefix]
        size = 0
        for v in values:
            n = len(v) + 1 if v.isascii() else len(v.encode("utf-8")) + 1  # the packet's bytes, not characters
            if size and size + n > budget:
                current[-1] = p.insert_suffix
                statements.append("".join(current))
                current, size = [p.insert_prefix], 0
            current += (v, ",")
            size += n
        if size:
            current[-1] = p.insert_suffix
            statements.append("".join(current))  # one join: a wide row's text is copied once, not twice
        return statements

    def _row_by_row(self, piece: Batch, split_id: str | None, room: int | None) -> WriteResult:
        """The piece as single-row INSERTs (one transaction, or in the split's after a savepoint); bad rows
        are rejected with MySQL's reason (a failing statement undoes only itself)."""
        values = iter(self._row_literals(piece.arrow_form))  # taken in the rows' order, one per row tried
        with self._connection(split_id).cursor() as cur:
            if split_id is not None:
                cur.execute(f"SAVEPOINT {SAVEPOINT}")
            result = rows_one_by_one(rows_of(piece), lambda _row: self._insert_row(cur, next(values)), room)
        if split_id is None:
            self._commit()
        return result

    def _row_literals(self, form: pa.RecordBatch) -> list[str | _Refused]:
        """Each row's ``(lit,...)``, or why it has none: a column that fails as a whole is encoded value by
        value, so only the rows holding a value MySQL cannot take (or would round) are refused, each with
        the reason naming its column."""
        assert self.encoder is not None
        targets, names = self.encoder.targets, self.periphery.columns
        columns: list[list[str | _Refused]] = []
        for i in range(form.num_columns):
            try:
                columns.append(sql_literals(form, i, targets[i]).to_pylist())
            except (pa.ArrowException, *VALUE_ERRORS):
                column: list[str | _Refused] = []
                for r in range(form.num_rows):
                    try:
                        column.append(sql_literals(form.slice(r, 1), i, targets[i])[0].as_py())
                    except (pa.ArrowException, *VALUE_ERRORS) as exc:
                        column.append(_Refused(f"{type(exc).__name__}: column {names[i]}: {exc}"))
                columns.append(column)
        return [next((v for v in row if isinstance(v, _Refused)), None) or "(" + ",".join(row) + ")"  # type: ignore[arg-type]
                for row in zip(*columns, strict=True)] if columns else []

    def _insert_row(self, cur: Any, values: str | _Refused) -> str | None:
        """None when the row (its literals ``values``) is in; else why it was rejected."""
        p = self.periphery
        if isinstance(values, _Refused):
            return values.reason
        try:
            values.encode("utf-8")  # a lone surrogate fails here, as the row's fault
        except VALUE_ERRORS as exc:
            return f"{type(exc).__name__}: {exc}"
        # The server refuses a statement over its max_allowed_packet (and may drop the connection): such a
        # row can never be written by INSERT, whatever the retries.
        if size := self._over_packet(values):
            return (f"the row's INSERT is {_mib(size)}, over the destination's max_allowed_packet of "
                    f"{_mib(p.max_packet)} ({p.max_packet} bytes): raise it on the server to write this row")
        try:
            cur.execute(p.insert_prefix + values + p.insert_suffix)
        except pymysql.err.MySQLError as exc:
            if not is_row_error(exc):
                raise
            return describe(exc)
        return None

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
                raise Broken(f"the connection was lost while a batch was being committed, so whether its rows "
                             f"are in {self.periphery.target} is unknown: {describe(exc)}") from exc
            raise

    def _after_transient(self, exc: Exception) -> None:
        if error_code(exc) not in _KEEPS_CONNECTION:  # the piece's transaction went with the connection
            self._drop_connection()

    def _piece_undoable(self, exc: Exception, conn: pymysql.Connection) -> bool:
        """A lock wait timeout undoes only the statement (unless innodb_rollback_on_timeout)."""
        return error_code(exc) == _LOCK_WAIT_TIMEOUT

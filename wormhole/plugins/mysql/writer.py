"""The mysql store's writers: pieces of ``batch_size`` rows, each one ``LOAD DATA LOCAL INFILE`` from an
in-memory file or multi-row INSERTs, encoded once per run from the batch's Arrow form (:mod:`.encoding`). A
piece that fails on a row's value, or that LOAD DATA did not load exactly (LOCAL turns errors into
warnings), is undone and replayed row by row, so only the bad rows are rejected, with MySQL's own text
(docs/manual/mysql.md, *Writing*); the splits' transactions and retries are
:mod:`wormhole.plugins.split_transactions` with the SQL kit's part (:mod:`wormhole.plugins.sql.writer`)."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pymysql

from wormhole.errors import WriteError
from wormhole.plugins.base import Batch, Rejected, WriteContext, WriteResult, rows_of
from wormhole.plugins.mysql.arrow_load import sql_literals
from wormhole.plugins.mysql.connection import NO_ANSWER, describe, error_code, is_row_error
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.mysql.encoding import Encoded, PieceEncoder
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.mysql.periphery import MysqlWriterPeriphery
from wormhole.plugins.sql import VALUE_ERRORS, rows_one_by_one
from wormhole.plugins.sql.writer import SAVEPOINT, SqlWriter

_LOAD_INFO = re.compile(r"Records:\s*(\d+)\s+Deleted:\s*(\d+)\s+Skipped:\s*(\d+)\s+Warnings:\s*(\d+)")
_KEEPS_CONNECTION = (1205, 1213)
"""Lock wait timeout and deadlock roll back the transaction, not the session: the connection is kept."""
_LOCK_WAIT_TIMEOUT = 1205
"""Undoes only the statement (unless innodb_rollback_on_timeout): a split's piece retries from its savepoint."""


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


@dataclass(frozen=True, slots=True)
class _Refused:
    """A row with a value that has no literal (or that MySQL would change): why, naming the column."""

    reason: str


class MysqlWriter(SqlWriter[pymysql.Connection]):
    """One connection; each piece of ``batch_size`` rows is one transaction."""

    dialect = MYSQL
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
        # In a database task, a connection another table's writer left idle on this server (ctx.shared).
        shared = self.ctx.shared
        conn = shared.lend(self._shared_key()) if shared is not None and self.periphery.lends() else None
        return conn if conn is not None else self.periphery.connect(WriteError, autocommit=False, local_infile=True,
                                                                     log=self.log)

    def _give_back(self, conn: pymysql.Connection) -> bool:
        shared = self.ctx.shared
        if shared is None or not self.periphery.lends() or not MYSQL.idle(conn, autocommit=False):
            return False
        shared.keep(self._shared_key(), conn, MYSQL.close_quietly)
        return True

    def _shared_key(self) -> tuple[object, ...]:
        return ("writer", MYSQL.name, self.periphery.endpoint, tuple(sorted(self.periphery.session_settings().items())))

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

    def write_encoded(self, batch: Batch, split_id: str | None = None) -> WriteResult:
        """:class:`~wormhole.plugins.writing.EncodedWriter`: the columns whose target declares the source's own
        type load the batch's wire text, when it carries some (:mod:`.passthrough`)."""
        return self._write_as(batch, split_id, batch.wire)

    def _pieces(self, batch: Batch, source: Any) -> tuple[list[tuple[Any, int]], list[Rejected]]:
        if self.encoder is None:
            self.encoder = PieceEncoder(self.ctx.schema, self.periphery.method, self.periphery.wire,
                                        self.periphery.narrowing)
        wire = self.encoder.wire_text(source)
        if wire is not None and not self._from_wire:
            self._from_wire = True
            self.log.info("writer.load_from_wire", columns=[c.name for c, w in zip(self.ctx.schema.columns, wire,
                                                                                   strict=True) if w is not None])
        return [((batch, wire), len(batch))], []

    def _write_piece(self, piece: Any, start: int, end: int, split_id: str | None,
                     room: int | None) -> tuple[int, list[Rejected]]:
        """Rows ``start`` to ``end`` of the batch at once; when some row's value fails that (or cannot be
        encoded), again row by row, so only the bad rows are rejected (until more than ``room`` are)."""
        (batch, wire), size = piece, end - start
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
            part = Batch.of_arrow(batch.arrow_form.slice(start, size))
            result = self._retrying(split_id, lambda: self._row_by_row(part, split_id, room))
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

    def _commit_lost(self, exc: Exception) -> bool:
        # A failure to send COMMIT (2006), or an error answer, means it did not commit: that piece is retried.
        return error_code(exc) in NO_ANSWER

    def _after_transient(self, exc: Exception) -> None:
        if error_code(exc) not in _KEEPS_CONNECTION:  # the piece's transaction went with the connection
            self._drop_connection()

    def _piece_undoable(self, exc: Exception, conn: pymysql.Connection) -> bool:
        """A lock wait timeout undoes only the statement (unless innodb_rollback_on_timeout)."""
        return error_code(exc) == _LOCK_WAIT_TIMEOUT

"""The postgres store's writers: COPY FROM STDIN in text format, a piece of ``batch_size`` rows at a time.

A batch is encoded from its Arrow form, column-wise (:mod:`.encoding`; an exact column value by value). Before
any COPY, rows PostgreSQL cannot take are rejected with a reason naming the column: a MySQL zero date kept as
text in a date column, a value with no COPY text, a string holding NUL.

A COPY stops at the first row PostgreSQL refuses (SQLSTATE class 22, data exception, or 23, integrity
violation): each COPY runs under a savepoint, rolled back then; the error's context names the line, so
the rows before it are COPY'd again, the bad row is rejected with PostgreSQL's own text and the COPY goes
on after it. Where no line is named (an upsert's INSERT ... SELECT refused a row), the rows are cut in
halves, each COPY'd alone, until the bad rows are single. All of it is inside the piece's transaction
(plain writes: one per piece) or the split's. Once the batch's rejected rows go over the destination's
record limit (``WriteContext.record_limit``) the piece is undone and the batch stops there: every row
bad would otherwise cost a COPY each, of all the rows after it, for a destination that fails anyway.

``write_mode: upsert``: each piece is COPY'd into a temporary table of the session (:data:`.UPSERT_TABLE`),
then ``INSERT INTO target SELECT ... ON CONFLICT (key) DO UPDATE``, in the same transaction.

Transient errors (deadlock, serialization failure, lock not available, lost connection) become
``TransientWriteError`` at the store boundary and :func:`wormhole.retry.policy` retries the piece,
``retries`` times with backoff: a plain write on a fresh transaction; a split's piece from its savepoint
while the session lives, and when the session is gone the split is lost (``SplitLost``: the engine writes
it again from its start; with ``retries: 0`` the destination fails instead). The split lifecycle is
:mod:`wormhole.plugins.split_transactions`, with the SQL kit's part in :mod:`wormhole.plugins.sql.writer`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import psycopg
import pyarrow as pa

from wormhole.errors import WriteError
from wormhole.plugins.base import Rejected, Row, WriteContext, WriteResult
from wormhole.plugins.batch import BadValues, Batch, EncodedRows, rows_from_arrow, rows_of
from wormhole.plugins.postgres.binary import BinaryPiece, NotBinary
from wormhole.plugins.postgres.connection import (
    PLUGIN_NAME,
    close_quietly,
    copy_line,
    describe,
    is_row_error,
    reason_of,
    sqlstate,
)
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.postgres.encoding import ArrowPiece, array_literals, field_text, nul_rows
from wormhole.plugins.postgres.options import PostgresWriterOptions
from wormhole.plugins.postgres.passthrough import EncodedPiece
from wormhole.plugins.postgres.periphery import PostgresWriterPeriphery
from wormhole.plugins.split_transactions import Broken
from wormhole.plugins.sql import room_left
from wormhole.plugins.sql.narrowing import as_integers, refused_rows
from wormhole.plugins.sql.writer import SAVEPOINT, SqlWriter

_BINARY_FORMAT = "22P03"
"""Binary COPY data not in the column type's form: not a row's fault (the rows' types are not the columns')."""
_CARDINALITY = "21000"
"""ON CONFLICT DO UPDATE meeting one key twice in one statement: rows of the batch, found by halving."""
_ENCODE_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError)
AnyPiece = ArrowPiece | BinaryPiece | EncodedPiece


class PostgresWriter(SqlWriter[psycopg.Connection[Any]]):
    """Plain writes: each piece of ``batch_size`` rows one transaction. Splits: one transaction each."""

    plugin = PLUGIN_NAME
    dialect = POSTGRES
    db_error = psycopg.Error
    lost_fails_without_retries = True
    periphery: PostgresWriterPeriphery
    options: PostgresWriterOptions

    def __init__(self, options: PostgresWriterOptions, ctx: WriteContext, periphery: PostgresWriterPeriphery,
                 worker: int) -> None:
        super().__init__(options, ctx, periphery, worker)
        self._said_text = False
        self._said_encoded = False

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        self._close_connections()

    # -- writing --------------------------------------------------------------------------------

    def write(self, batch: Batch) -> WriteResult:
        return self._write(batch, None)

    def write_encoded(self, batch: Batch, split_id: str | None = None) -> WriteResult:
        """:class:`~wormhole.plugins.writing.EncodedWriter`: the source's binary rows as they are, when the batch
        came so (the engine chose the encoding: :mod:`.passthrough`)."""
        return self._write_as(batch, split_id, batch.encoded)

    def _write(self, rows: Batch, split_id: str | None, source: Any = None) -> WriteResult:
        p = self.periphery
        self._check_not_broken()
        pieces, rejected = self._pieces(rows, source)
        written = 0
        size = self.options.batch_size

        def stopped() -> WriteResult:  # over the record limit: the destination fails, so the rest is not tried
            return WriteResult(written=written, rejected=tuple(rejected), stopped=len(rows) - written - len(rejected))

        for piece in pieces:
            for start in range(0, piece.num_rows, size):
                end = min(start + size, piece.num_rows)
                room = room_left(self.ctx.record_limit, len(rejected))
                if room is not None and room < 0:
                    return stopped()
                try:
                    bad = self._retrying(split_id, partial(self._piece, piece, start, end, split_id, room))
                except WriteError as exc:
                    if split_id is None:
                        exc.details["written_before_failure"] = written  # pieces of this batch already committed
                    raise
                rejected.extend(bad)
                if room is not None and len(bad) > room:  # the piece stopped at its first row past the limit
                    return stopped()  # (and was undone: nothing of it is written)
                if split_id is None:
                    p.add_written(end - start - len(bad))  # committed; a split's rows count once the split is
                written += end - start - len(bad)
        return WriteResult(written=written, rejected=tuple(rejected))

    def _pieces(self, rows: Batch, encoded: EncodedRows | None) -> tuple[list[AnyPiece], list[Rejected]]:
        """What the batch is loaded as: the source's binary rows as they are (``encoded``, :mod:`.passthrough`),
        or pieces encoded from its values, less the rows refused on the way."""
        if encoded is not None and self.periphery.takes_encoding(encoded.encoding):
            if not self._said_encoded:  # once: the batches load as the source sent them
                self._said_encoded = True
                self.log.info("writer.load_encoded", format=encoded.encoding.format)
            return [EncodedPiece(encoded)], []
        batch, rejected = self._form(rows)
        return [self._arrow_piece(batch, rejected)], rejected

    def _form(self, batch: Batch) -> tuple[pa.RecordBatch, list[Rejected]]:
        """The batch's Arrow columns less the rows PostgreSQL cannot take (rejected, with the reason). A column
        whose Arrow type does not hold some value stays an exact column, written value by value (:func:`field_text`)."""
        schema = self.ctx.schema
        rejected: list[Rejected] = []
        try:
            form = batch.arrow(schema)
        except BadValues as exc:
            tuples = rows_of(batch)
            unfit = {i: why for i in sorted(exc.bad) if (why := self._unfit(tuples[i])) is not None}
            rejected.extend(Rejected(tuples[i], why) for i, why in unfit.items())
            form = batch.without(set(unfit)).arrow_form
        if form.num_columns != len(schema):
            raise self._error(f"a batch of {form.num_columns} columns for a schema of {len(schema)}")
        form = self._array_input(form)
        narrowing = self.periphery.narrowing  # values PostgreSQL would round into the target's narrower type
        bad = {**refused_rows(form, narrowing), **nul_rows(form)}
        if bad:
            rejected.extend(Rejected(rows_from_arrow(form.slice(i, 1))[0], reason) for i, reason in sorted(bad.items()))
            form = form.filter(pa.array([i not in bad for i in range(form.num_rows)], pa.bool_()))
        return as_integers(form, narrowing), rejected

    def _array_input(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch with its text (json, string) for array columns as array literals: plain strings, as a
        refused row shows them."""
        columns = [i for i in self.periphery.array_columns if pa.types.is_string(batch.schema.field(i).type)]
        if not columns:
            return batch
        arrays, fields = list(batch.columns), list(batch.schema)
        for i in columns:
            arrays[i] = array_literals(arrays[i])
            fields[i] = pa.field(fields[i].name, pa.string(), fields[i].nullable)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def _unfit(self, row: Row) -> str | None:
        """Why a row PostgreSQL cannot take is refused before any COPY, when it is for a zero date."""
        for column, value in zip(self.ctx.schema.columns, row, strict=True):
            if isinstance(value, str) and column.type in ("date", "datetime"):
                return (f"column {column.name}: {value!r} (a MySQL zero or partial date kept as text) has no "
                        f"PostgreSQL {'date' if column.type == 'date' else 'timestamp'} value")
        return None

    def _arrow_piece(self, batch: pa.RecordBatch, rejected: list[Rejected]) -> AnyPiece:
        """The batch in binary when the destination writes binary and the batch has that form, else text."""
        kinds = self.periphery.binary_kinds
        if kinds is not None and batch.num_rows:
            try:
                return BinaryPiece(batch, kinds)
            except (NotBinary, *_ENCODE_ERRORS) as exc:  # said once a writer (info), then at debug
                (self.log.debug if self._said_text else self.log.info)("writer.text_batch", reason=str(exc))
                self._said_text = True
        return self._encoded(batch, rejected)

    def _encoded(self, batch: pa.RecordBatch, rejected: list[Rejected]) -> ArrowPiece:
        """Each column's COPY text; when some value has none (a date beyond the years 1-9999), the rows
        holding one are found row by row and rejected."""
        arrays = self.periphery.array_columns
        try:
            return ArrowPiece(batch, [field_text(batch, i, i in arrays) for i in range(batch.num_columns)])
        except _ENCODE_ERRORS:
            pass
        bad: dict[int, str] = {}
        for r in range(batch.num_rows):
            for i, field in enumerate(batch.schema):
                try:
                    field_text(batch.slice(r, 1), i, i in arrays)
                except _ENCODE_ERRORS as exc:
                    bad[r] = f"column {field.name}: {type(exc).__name__}: {exc}"
                    break
        if not bad:  # the column fails whole but no row alone: a fault of the encoder, not of a row
            raise self._error(f"a batch for {self.periphery.target} cannot be encoded for COPY")
        rejected.extend(Rejected(rows_from_arrow(batch.slice(r, 1))[0], reason) for r, reason in bad.items())
        return self._encoded(batch.filter(pa.array([r not in bad for r in range(batch.num_rows)], pa.bool_())),
                             rejected)

    def _piece(self, piece: AnyPiece, start: int, end: int, split_id: str | None,
               room: int | None = None) -> list[Rejected]:
        """Rows ``start`` to ``end`` of ``piece`` (its own transaction, or a savepoint of the split's); the
        rows PostgreSQL refused, with its reasons. More than ``room`` refused: the piece stops there and is
        undone (the record limit is exceeded, so the destination fails; a COPY per bad row would only cost
        time), and only its rejected rows are returned."""
        conn = self._connection(split_id)
        rejected: list[Rejected] = []
        conn.execute(f"SAVEPOINT {SAVEPOINT}")
        if self._load(conn, piece, start, end, rejected, room):
            conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            if split_id is None:
                self._commit(conn)  # nothing of the piece: ends its transaction
            return rejected
        if split_id is None:
            self._commit(conn)
        else:
            conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
        return rejected

    def _load(self, conn: psycopg.Connection[Any], piece: AnyPiece, start: int, end: int,
              rejected: list[Rejected], room: int | None = None) -> bool:
        """COPY rows ``start`` to ``end``; a row PostgreSQL refuses is rejected and the others loaded. True
        when more than ``room`` rows are rejected: it stopped there."""
        while start < end:
            if room is not None and len(rejected) > room:
                return True
            try:
                self._copy(conn, piece, start, end)
                return False
            except psycopg.Error as exc:
                if not (is_row_error(exc) or sqlstate(exc) == _CARDINALITY):
                    raise
                if piece.binary and sqlstate(exc) == _BINARY_FORMAT:  # every row would be refused, one COPY each
                    raise Broken(f"{self.periphery.target} refused binary COPY rows as malformed, so their column "
                                 f"types are not its own (did a source or target column's type change during "
                                 f"the run?): {describe(exc)}") from exc
                conn.execute("ROLLBACK TO SAVEPOINT wh_try")
                where = copy_line(exc)
                if end - start == 1:
                    rejected.append(Rejected(piece.row(start), reason_of(exc)))
                    return room is not None and len(rejected) > room
                if where is not None and where[0] <= end - start:
                    bad = start + where[0] - 1
                    if self._load(conn, piece, start, bad, rejected, room):
                        return True
                    rejected.append(Rejected(piece.row(bad), reason_of(exc)))
                    start = bad + 1
                else:  # no line named: halves, until the bad rows are single
                    middle = (start + end) // 2
                    if self._load(conn, piece, start, middle, rejected, room):
                        return True
                    start = middle
        return room is not None and len(rejected) > room

    def _copy(self, conn: psycopg.Connection[Any], piece: AnyPiece, start: int, end: int) -> None:
        p = self.periphery
        with conn.cursor() as cur:
            cur.execute("SAVEPOINT wh_try")
            for statement in p.upsert_sql:
                cur.execute(statement)
            with cur.copy(p.copy_binary_sql if piece.binary else p.copy_sql) as copy:
                for part in piece.parts(start, end):
                    copy.write(memoryview(part))
            if p.insert_sql:
                cur.execute(p.insert_sql)
            cur.execute("RELEASE SAVEPOINT wh_try")

    def _connect(self) -> psycopg.Connection[Any]:
        conn = self.periphery.connect(WriteError, log=self.log)
        try:
            for statement in self.periphery.session_sql:  # committed: no rollback of a piece can drop it
                conn.execute(statement)
            conn.autocommit = False
        except psycopg.Error as exc:
            close_quietly(conn)
            raise self._error(f"preparing a session on {self.periphery.target} failed: {describe(exc)}") from exc
        return conn

    def _commit(self, conn: psycopg.Connection[Any]) -> None:
        try:
            conn.commit()
        except psycopg.OperationalError as exc:
            # Lost while waiting for COMMIT's answer: the server may or may not have committed.
            raise Broken(f"the connection was lost while a batch was being committed, so whether its rows are "
                         f"in {self.periphery.target} is unknown: {describe(exc)}") from exc

    def _piece_undoable(self, exc: Exception, conn: psycopg.Connection[Any]) -> bool:
        return not conn.broken and not conn.closed

    def _reusable(self, conn: psycopg.Connection[Any]) -> bool:
        return not conn.broken

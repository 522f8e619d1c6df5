"""The postgres store's writers: COPY FROM STDIN, binary (:mod:`.binary`) or text (:mod:`.encoding`), a piece of
``batch_size`` rows at a time under a savepoint (an upsert through a temporary table, :data:`.UPSERT_TABLE`).
A refused row is found by the line its error names (else by halving) and rejected alone, up to the record
limit (docs/manual/postgres.md, *Rejected rows*); the splits' transactions and retries are
:mod:`wormhole.plugins.split_transactions` with the SQL kit's part (:mod:`wormhole.plugins.sql.writer`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import psycopg
import pyarrow as pa

from wormhole.errors import WriteError
from wormhole.plugins.base import Rejected, Row, WriteContext, WriteResult
from wormhole.plugins.batch import BadValues, Batch, EncodedRows, rows_from_arrow, rows_of
from wormhole.plugins.postgres.binary import BinaryPiece, NotBinary
from wormhole.plugins.postgres.connection import copy_line, describe, is_row_error, reason_of, sqlstate
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.postgres.encoding import ArrowPiece, array_literals, field_text, nul_rows
from wormhole.plugins.postgres.options import PostgresWriterOptions
from wormhole.plugins.postgres.passthrough import EncodedPiece
from wormhole.plugins.postgres.periphery import PostgresWriterPeriphery
from wormhole.plugins.split_transactions import Broken
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

    dialect = POSTGRES
    lost_fails_without_retries = True
    periphery: PostgresWriterPeriphery
    options: PostgresWriterOptions

    def __init__(self, options: PostgresWriterOptions, ctx: WriteContext, periphery: PostgresWriterPeriphery,
                 worker: int) -> None:
        super().__init__(options, ctx, periphery, worker)
        self._said_text = False
        self._said_encoded = False

    # -- writing --------------------------------------------------------------------------------

    def write_encoded(self, batch: Batch, split_id: str | None = None) -> WriteResult:
        """:class:`~wormhole.plugins.writing.EncodedWriter`: the source's binary rows as they are, when the batch
        came so (the engine chose the encoding: :mod:`.passthrough`)."""
        return self._write_as(batch, split_id, batch.encoded)

    def _pieces(self, batch: Batch, encoded: EncodedRows | None) -> tuple[list[tuple[Any, int]], list[Rejected]]:
        """What the batch is loaded as: the source's binary rows as they are (``encoded``, :mod:`.passthrough`),
        or a piece encoded from its values, less the rows refused on the way."""
        self._check_not_broken()
        if encoded is not None and self.periphery.takes_encoding(encoded.encoding):
            if not self._said_encoded:  # once: the batches load as the source sent them
                self._said_encoded = True
                self.log.info("writer.load_encoded", format=encoded.encoding.format)
            return [(EncodedPiece(encoded), len(encoded.ends))], []
        form, rejected = self._form(batch)
        piece = self._arrow_piece(form, rejected)
        return [(piece, piece.num_rows)], rejected

    def _write_piece(self, piece: Any, start: int, end: int, split_id: str | None,
                     room: int | None) -> tuple[int, list[Rejected]]:
        bad = self._retrying(split_id, partial(self._piece, piece, start, end, split_id, room))
        return end - start - len(bad), bad

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
        shared = self.ctx.shared
        if shared is not None and self._lends():  # a session another table's writer left idle on this server
            lent = shared.lend(self._shared_key())
            if lent is not None:
                return lent  # type: ignore[no-any-return]
        conn = self.periphery.connect(WriteError, log=self.log)
        try:
            for statement in self.periphery.session_sql:  # committed: no rollback of a piece can drop it
                conn.execute(statement)
            conn.autocommit = False
        except psycopg.Error as exc:
            POSTGRES.close_quietly(conn)
            raise self._error(f"preparing a session on {self.periphery.target} failed: {describe(exc)}") from exc
        return conn

    def _give_back(self, conn: psycopg.Connection[Any]) -> bool:
        shared = self.ctx.shared
        if shared is None or not self._lends() or not POSTGRES.idle(conn, autocommit=False):
            return False
        shared.keep(self._shared_key(), conn, POSTGRES.close_quietly)
        return True

    def _lends(self) -> bool:
        """A session whose set-up is its table's own (an upsert's temporary table) is never lent."""
        return not self.periphery.session_sql and self.periphery.lends()

    def _shared_key(self) -> tuple[object, ...]:
        p = self.periphery
        return ("writer", POSTGRES.name, p.endpoint, tuple(sorted(p.session_settings().items())))

    def _commit_lost(self, exc: Exception) -> bool:
        return isinstance(exc, psycopg.OperationalError)

    def _piece_undoable(self, exc: Exception, conn: psycopg.Connection[Any]) -> bool:
        return not conn.broken and not conn.closed

    def _reusable(self, conn: psycopg.Connection[Any]) -> bool:
        return not conn.broken

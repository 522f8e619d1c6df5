"""The postgres store's reader: each split streamed with ``COPY (SELECT ...) TO STDOUT WITH (FORMAT csv)`` and
parsed into Arrow batches by pyarrow's CSV reader (why CSV: docs/decisions.md). A batch whose text does not
all parse as its columns' types (``infinity``, a BC date) is parsed again as text and converted column by
column; a value with no form rejects its row, or becomes NULL under ``special_dates: null``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Context, Decimal, InvalidOperation
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from wormhole.errors import ReadError, SplitError
from wormhole.plugins.base import Column, Encoding, ReadContext, Rejected, Row, Schema, Split
from wormhole.plugins.batch import Batch, arrow_field, arrow_type, decimal_shape, exact_field
from wormhole.plugins.postgres.catalog import KIND_TYPES, ColumnInfo, as_read, relation
from wormhole.plugins.postgres.connection import PLUGIN_NAME
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.postgres.passthrough import ENCODED_ROWS_FACTOR, RowDecoder, read_rows, source_encoding
from wormhole.plugins.postgres.splitter import encoded_sql
from wormhole.plugins.sql.reader import SqlReader
from wormhole.plugins.sql.snapshot import of
from wormhole.plugins.sql.source_options import QuerySource, Shard, SqlSource

_FAILED = (pa.ArrowException, ValueError, ArithmeticError, TypeError, InvalidOperation)
_PARSE = pcsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False)
_TEMPORAL = ("date", "datetime")


class PostgresReader(SqlReader):
    """Streams the rows of each split (one connection per split, closed after it; with a consistent snapshot,
    the connection imports it first)."""

    DIALECT = POSTGRES
    ESCAPED = True  # psycopg formats every split's statement (the splitter doubles its %)

    def __init__(self, options: SqlSource, ctx: ReadContext) -> None:
        super().__init__(options, ctx)
        self._infos: list[ColumnInfo] = []

    def _describe(self) -> Schema:
        source = self.source
        infos = self.first_columns()
        if not isinstance(source, QuerySource):
            self._infos = infos
        # special_dates: null makes NULLs of a NOT NULL date column's infinities.
        nulled = ("date", "datetime", "timestamptz") if source.dates == "null" else ()
        # native: an array of a built-in type keeps its declaration for a postgres create_table (:mod:`.ddl`).
        return Schema(tuple(Column(c.name, KIND_TYPES[c.kind], c.nullable or c.kind in nulled,  # type: ignore[arg-type]
                                   precision=c.precision, scale=c.scale, as_read=as_read(c),
                                   native=c.type_name if c.element else None)
                            for c in infos))

    def encoding(self) -> Encoding | None:
        """Binary COPY rows, undecoded (:mod:`.passthrough`), for tables whose columns all have such a form and
        declare the same types in every shard (the splitter compares kinds only: ``integer`` and ``bigint``
        are both ints, but not the same binary rows)."""
        self.schema()
        encoding = source_encoding(self._infos, self.source.dates)
        if encoding is None or isinstance(self.source, QuerySource) or len(self._tables()) == 1:
            return encoding
        for shard, table in self._tables()[1:]:
            conn = POSTGRES.connect(self.source, shard.endpoint, SplitError, self.ctx)
            try:
                infos = POSTGRES.choose_columns(POSTGRES.describe_table(conn, shard, table),
                                                self.source.selection.columns, shard, table)
            finally:
                POSTGRES.close_quietly(conn)
            if tuple(c.type_name for c in infos) != encoding.columns:
                self.ctx.log.info("reader.types_differ", table=f"{shard.endpoint.mark}/{relation(shard.schema, table)}",
                                  types=[c.type_name for c in infos], first=list(encoding.columns))
                return None
        return encoding

    def _tables(self) -> list[tuple[Shard, str]]:
        return [(shard, table) for shard in self.source.shards for table in shard.tables]

    def read_encoded(self, split: Split, encoding: Encoding) -> Iterator[Batch]:
        shard = self.source.shards[split.params["shard"]]
        self.schema()
        if tuple(c.name for c in self._infos) != tuple(split.params["columns"]):
            raise ReadError(f"split {split.id} reads columns {list(split.params['columns'])}, the table now has "
                            f"{[c.name for c in self._infos]}", plugin=PLUGIN_NAME, split_id=split.id)
        log = self.ctx.log.bind(split_id=split.id)
        with self._session(shard, log) as conn, self.reading(split):  # a COPY stopped early ends with its session
            args = tuple(split.params["args"])
            copy_sql = f"COPY ({self._encoded_sql(split)}) TO STDOUT (FORMAT binary)"
            query = psycopg.ClientCursor(conn).mogrify(copy_sql, args) if args else copy_sql.replace("%%", "%")
            # Cut by bytes: its rows are not values, so the per-row cost batch_rows bounds is not there
            # (16 times as many rows per batch: 4 MiB of COPY a batch with the defaults).
            limits = (ENCODED_ROWS_FACTOR * self.ctx.batch_rows, self.ctx.batch_bytes)
            yield from read_rows(conn, query.encode(), encoding, RowDecoder(conn, self._infos), limits,
                                 self.ctx.stop, split.id)

    @contextmanager
    def _session(self, shard: Shard, log: Any) -> Iterator[psycopg.Connection[Any]]:
        """A split's connection, closed after it: inside the run's consistent snapshot when it has one."""
        snapshot = of(self.ctx)
        if snapshot is not None:
            with snapshot.reading(shard.endpoint, self.ctx, log) as lease:
                yield lease.conn
            return
        conn = POSTGRES.connect(self.source, shard.endpoint, ReadError, self.ctx, log=log)
        try:
            yield conn
        finally:
            POSTGRES.close_quietly(conn)

    def _encoded_sql(self, split: Split) -> str:
        """The split's query with its arrays selected as they are (the values read takes their ``to_json``)."""
        sql: str = split.params["sql"]
        if all(c.kind != "array" for c in self._infos):
            return sql
        found = encoded_sql(sql, self._infos, split.params.get("relation", ""))
        if found is None:
            raise ReadError(f"split {split.id} reads no table's columns as they are: {sql}", plugin=PLUGIN_NAME,
                            split_id=split.id)
        return found

    def read(self, split: Split) -> Iterator[Batch | Sequence[Row]]:
        shard = self.source.shards[split.params["shard"]]
        sql, args, kinds, names, pushed = self.split_query(split)
        decoder = CsvDecoder(self.split_columns(names, kinds, pushed), self.source.dates)
        log = self.ctx.log.bind(split_id=split.id)
        finished = False
        try:
            with self._session(shard, log) as conn, self.reading(split):
                yield from self._stream(conn, f"COPY ({sql}) TO STDOUT WITH (FORMAT csv)", args, decoder, split)
            finished = True
        finally:
            # After an early stop (a stopping task closes the generator) psycopg has already cancelled the
            # COPY on the server; the connection is closed either way, one per split.
            if not finished:
                log.debug("reader.copy_abandoned")

    def _stream(self, conn: psycopg.Connection[Any], copy_sql: str, args: tuple[Any, ...], decoder: CsvDecoder,
                split: Split) -> Iterator[Batch | Sequence[Row]]:
        limit_rows, limit_bytes = self.ctx.batch_rows, self.ctx.batch_bytes
        buf, count = bytearray(), 0
        if not args:  # psycopg formats (and reads %% as %) only when there are values to bind
            copy_sql = copy_sql.replace("%%", "%")
        with conn.cursor() as cur, cur.copy(copy_sql, args or None) as copy:
            for chunk in copy:  # one row per message
                buf += chunk
                count += 1
                if count >= limit_rows or len(buf) >= limit_bytes:
                    yield from self.batch(split, *decoder.decode(bytes(buf), count))
                    buf, count = bytearray(), 0
        if count:
            yield from self.batch(split, *decoder.decode(bytes(buf), count))


def _csv_type(column: Column) -> pa.DataType:
    """The type the CSV reader parses a column's text as (bytes come as ``\\x`` hex text, JSON and a
    free-scale numeric as text)."""
    if column.type in ("bytes", "json") or _free_scale(column):
        return pa.string()
    return arrow_type(column)


def _free_scale(column: Column) -> bool:
    """A ``numeric`` of no declared precision and scale: each value has a scale of its own (1.50 is not 1.5),
    and no decimal type holds them all (1E-1000, 1E+130000, NaN)."""
    return column.type == "decimal" and column.precision is None


def _field(column: Column) -> pa.Field:
    """A column's field in the reader's batches: a free-scale numeric is an exact column of each value's own
    text (which ``Decimal`` reads back exactly, NaN and Infinity included); the others their Arrow type."""
    return exact_field(column) if _free_scale(column) else arrow_field(column)


class CsvDecoder:
    """A batch of COPY CSV text as Arrow columns of ``columns``."""

    def __init__(self, columns: tuple[Column, ...], special_dates: str) -> None:
        self.columns = columns
        self.special_dates = special_dates
        self.names = [f"c{i}" for i in range(len(columns))]
        self.schema = pa.schema([_field(c) for c in columns])
        self.typed = self._options({n: _csv_type(c) for n, c in zip(self.names, columns, strict=True)})
        self.text = self._options({n: pa.string() for n in self.names})

    @staticmethod
    def _options(types: dict[str, pa.DataType]) -> pcsv.ConvertOptions:
        return pcsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True,
                                   quoted_strings_can_be_null=False, true_values=["t"], false_values=["f"],
                                   timestamp_parsers=[pcsv.ISO8601])

    def _read(self, data: bytes, options: pcsv.ConvertOptions) -> pa.Table:
        read = pcsv.ReadOptions(column_names=self.names, use_threads=False, block_size=max(len(data) + 1, 1 << 20))
        return pcsv.read_csv(pa.py_buffer(data), read_options=read, parse_options=_PARSE, convert_options=options)

    def decode(self, data: bytes, count: int) -> tuple[Batch | None, list[Rejected]]:
        if not self.columns:  # a projection of no columns: COPY sends an empty line per row
            return Batch([()] * count), []
        try:
            table = self._read(data, self.typed)
            arrays = [self._finish(col, table.column(i).combine_chunks()) for i, col in enumerate(self.columns)]
        except _FAILED:
            return self._slow(data)
        return Batch.of_arrow(pa.RecordBatch.from_arrays(arrays, schema=self.schema)), []

    @staticmethod
    def _finish(column: Column, arr: pa.Array) -> pa.Array:
        if column.type == "bytes":
            return _unhex(arr)
        if _free_scale(column):
            return arr.cast(pa.binary())  # PostgreSQL's text of the value, as it is
        return arr

    def _slow(self, data: bytes) -> tuple[Batch | None, list[Rejected]]:
        """Every column as text, converted one by one; rows with a value that has no form are rejected."""
        table = self._read(data, self.text)
        texts = [table.column(i).combine_chunks() for i in range(len(self.columns))]
        bad: dict[int, str] = {}
        arrays = [self._convert(col, arr, bad) for col, arr in zip(self.columns, texts, strict=True)]
        rejected = [Rejected(tuple(t[i].as_py() for t in texts), reason) for i, reason in sorted(bad.items())]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if bad:
            keep = pa.array([i not in bad for i in range(batch.num_rows)])
            batch = batch.filter(keep)
        return Batch.of_arrow(batch), rejected

    def _convert(self, column: Column, text: pa.Array, bad: dict[int, str]) -> pa.Array:
        try:
            if column.type in ("string", "json"):
                return text
            if _free_scale(column):
                return self._finish(column, text)
            if column.type == "bool":
                return pc.equal(text, "t")
            return self._finish(column, pc.cast(text, arrow_type(column)) if column.type != "bytes" else text)
        except _FAILED:
            pass
        parse = _PARSERS[column.type]
        values: list[Any] = []
        for i, t in enumerate(text.to_pylist()):
            value = None
            if t is not None:
                try:
                    value = parse(t, column)
                except _FAILED:
                    if column.type in _TEMPORAL and self.special_dates == "null":
                        value = None
                    else:
                        bad.setdefault(i, f"column {column.name}: {t!r} has no {column.type} value in wormhole"
                                          + (" (special_dates: reject)" if column.type in _TEMPORAL else ""))
            values.append(value)
        return pa.array(values, arrow_type(column))


def _unhex(arr: pa.Array) -> pa.Array:
    # bytea prints as \x and two hex digits a byte (bytea_output = hex, the default since 9.0).
    return pa.array([None if v is None else bytes.fromhex(v[2:]) for v in arr.to_pylist()], pa.binary())


def _decimal(text: str, column: Column) -> Decimal:
    value = Decimal(text)
    precision, scale = decimal_shape(column)
    if not value.is_finite() or value != value.quantize(Decimal(1).scaleb(-scale), context=_WIDE) \
            or abs(value) >= Decimal(10) ** (precision - scale):
        raise ValueError(f"{text} does not fit decimal({precision}, {scale}) exactly")
    return value


_WIDE = Context(prec=200)


def _bytes(text: str, column: Column) -> bytes:
    return bytes.fromhex(text[2:])


_PARSERS: dict[str, Callable[[str, Column], Any]] = {
    "int": lambda t, c: int(t), "float": lambda t, c: float(t), "decimal": _decimal,
    "date": lambda t, c: date.fromisoformat(t), "datetime": lambda t, c: datetime.fromisoformat(t),
    "bytes": _bytes}
"""How one value's text becomes its Python value when its batch's column did not convert at once."""

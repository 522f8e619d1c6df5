"""The row conversions at the Python/JVM boundary (the type mapping itself is the stores' Spark kit's,
:mod:`wormhole.plugins.spark_kit`).

The mapping is the one the file store's parquet writer uses in local mode
(:func:`wormhole.plugins.values.arrow_types`: decimal(38,18), naive microsecond timestamps, JSON as
its text), so a destination holds the same values whichever engine wrote it. Values Spark would
silently alter (a decimal beyond 38 digits or 18 decimals, an integer beyond 64 bits) are rejected as
dirty rows at the source instead.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from wormhole.plugins.base import Batch, Column, Rejected, Row, Schema
from wormhole.plugins.batch import arrow_schema
from wormhole.plugins.values import arrow_types, json_dumps, json_loads, json_text

TRANSPORT_ARROW: dict[str, pa.DataType] = {**arrow_types(pa), "decimal": pa.string()}
"""How rows read by a store's row reader travel as Arrow (:data:`~wormhole.plugins.spark_kit.TRANSPORT_SPARK`)."""


def _naive_utc(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    return v


_SCALE = Decimal(1).scaleb(-18)


def _decimal_text(v: Any) -> str:
    # Checked here because Parquet, Hive and local mode's writers hold decimal(38,18): a value that
    # does not fit is the row's fault, never silently rounded later.
    d = v if isinstance(v, Decimal) else Decimal(v)
    if not d.is_finite() or d.adjusted() >= 20 or d != d.quantize(_SCALE, context=_CONTEXT):
        raise ValueError(f"decimal {v} does not fit decimal(38,18)")
    return str(d)


_CONTEXT = Context(prec=60)
_PREPARE: dict[str, Callable[[Any], Any]] = {"datetime": _naive_utc, "json": json_text, "decimal": _decimal_text}


def _exact_date_text(v: Any) -> str:
    return v if type(v) is str else v.isoformat()  # a zero date kept as text travels as it came


def _exact_datetime_text(v: Any) -> str:
    if type(v) is str:
        return v
    if type(v) is dt.date:
        return v.isoformat()
    return _naive_utc(v).isoformat(" ")  # MySQL reads the text back; ' ' as it writes it itself


def _exact_decimal_text(v: Any) -> str:
    return format(v if isinstance(v, Decimal) else Decimal(v), "f")  # never an exponent, every digit


def _exact_json_text(v: Any) -> str:
    # Always the value's JSON, a str included ('"a"'): json_text would take a str as JSON text
    # already, and a MySQL writer stores a JSON string value quoted.
    return json_dumps(v)


_TO_EXACT: dict[str, Callable[[Any], str]] = {"int": int.__repr__, "decimal": _exact_decimal_text,
                                              "date": _exact_date_text, "datetime": _exact_datetime_text,
                                              "json": _exact_json_text}
_ARROW_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError, ArithmeticError)


@dataclass(frozen=True)
class _ArrowLayout:
    """How a schema's rows travel as Arrow: each column's name and Arrow type, and the conversions of the
    columns whose values Arrow takes in another form (JSON and decimal text, the ``exact`` columns' text)."""

    names: list[str]
    types: list[pa.DataType]
    schema: pa.Schema
    prepare: list[tuple[int, Callable[[Any], Any]]]

    @classmethod
    def of(cls, schema: Schema, exact: frozenset[str]) -> _ArrowLayout:
        types = [pa.string() if c.name in exact else TRANSPORT_ARROW[c.type] for c in schema.columns]
        return cls([c.name for c in schema.columns], types,
                   pa.schema([pa.field(c.name, t, c.nullable) for c, t in zip(schema.columns, types)]),
                   [(i, _TO_EXACT[c.type] if c.name in exact else _PREPARE[c.type])
                    for i, c in enumerate(schema.columns) if c.name in exact or c.type in _PREPARE])

    def columns(self, batch: Sequence[Row]) -> list[list[Any]]:
        """The rows column-wise, each value in the form Arrow takes."""
        columns = [list(col) for col in zip(*batch)]
        for i, fn in self.prepare:
            columns[i] = [None if v is None else fn(v) for v in columns[i]]
        return columns

    def record_batch(self, columns: list[list[Any]]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(columns, self.types)],
                                          schema=self.schema)


def to_arrow_batches(schema: Schema, batches: Iterable[Sequence[Row]], reject: Callable[[list[Rejected]], None],
                     exact: frozenset[str] = frozenset()) -> Iterator[pa.RecordBatch]:
    """Record batches of the rows, column-wise; a row Arrow cannot hold exactly (an integer beyond
    64 bits, a decimal beyond 38 digits or 18 decimals, a lone surrogate) goes to ``reject``.
    The ``exact`` columns travel as their exact text and are never rejected."""
    layout = _ArrowLayout.of(schema, exact)
    for batch in batches:
        if not batch:
            continue
        columns = layout.columns(batch)
        try:
            record_batch = layout.record_batch(columns)
        except _ARROW_ERRORS:
            record_batch = _without_bad_rows(layout, batch, columns, reject)
        if record_batch is not None:
            yield record_batch


def _without_bad_rows(layout: _ArrowLayout, batch: Sequence[Row], columns: list[list[Any]],
                      reject: Callable[[list[Rejected]], None]) -> pa.RecordBatch | None:
    """The batch without the rows Arrow refuses, which go to ``reject``; None when no row is left."""
    failed: dict[int, str] = {}
    for i, t in enumerate(layout.types):
        _find_bad(columns[i], t, 0, len(batch), failed, layout.names[i])
    bad = [Rejected(tuple(batch[r]), f"cannot be carried by Spark: {why}") for r, why in sorted(failed.items())]
    if bad:
        reject(bad)
    good = [r for r in range(len(batch)) if r not in failed]
    return layout.record_batch([[column[r] for r in good] for column in columns]) if good else None


def _find_bad(values: list[Any], dtype: pa.DataType, lo: int, hi: int, failed: dict[int, str], name: str) -> None:
    """Indexes in [lo, hi) whose value Arrow refuses, by halving: a few bad values in a big batch
    cost a few dozen conversions, not one per row."""
    try:
        pa.array(values[lo:hi], type=dtype)
        return
    except _ARROW_ERRORS as exc:
        if hi - lo == 1:
            failed.setdefault(lo, f"column {name}: {type(exc).__name__}: {exc}")
            return
    mid = (lo + hi) // 2
    _find_bad(values, dtype, lo, mid, failed, name)
    _find_bad(values, dtype, mid, hi, failed, name)


def rows_from_arrow(schema: Schema, batch: pa.RecordBatch) -> list[Row]:
    """Wormhole rows from a record batch (JSON, decimal and exact text back to values)."""
    columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
    for i, c in enumerate(schema.columns):
        if c.type in _FROM_TEXT:
            columns[i] = list(map(_FROM_TEXT[c.type], columns[i]))
        elif c.type in _FROM_EXACT and pa.types.is_string(batch.schema.field(i).type):
            columns[i] = list(map(_FROM_EXACT[c.type], columns[i]))
    return list(zip(*columns)) if columns else [() for _ in range(batch.num_rows)]


_OWN_FORM = frozenset({"int", "float", "decimal", "string", "bytes", "bool", "date", "datetime"})
"""Logical types whose column Spark may carry in a form Arrow casts to the column's own exactly (a
narrower integer, a float, a decimal of another shape, a timestamp's or date's exact text): JSON
travels as text a writer must parse, so it takes the rows."""
_FROM_TEXT_CAST = frozenset({"int", "date", "datetime"})
"""Exact-text columns whose text Arrow parses as Python would (:data:`_FROM_EXACT`), failing where it does not."""


def _own_form(column: Column, array: pa.Array, want: pa.DataType) -> pa.Array | None:
    """The column in its own Arrow form, or None when only the rows path converts it exactly: a safe
    cast (no value changed, truncated or out of range, else the cast fails and the batch takes the
    rows, which reject such a value as local mode would), never a cast from text but of an exact-text
    int, date or datetime (a zero date fails to parse and keeps its text on the rows path)."""
    have = array.type
    if have.equals(want):
        return array
    if pa.types.is_string(have) or pa.types.is_large_string(have):
        if column.type == "string":
            return array.cast(want)
        if column.type not in _FROM_TEXT_CAST:
            return None
    try:
        return array.cast(want, safe=True)
    except _ARROW_ERRORS:
        return None


def writer_batch(schema: Schema, batch: pa.RecordBatch) -> Batch:
    """A partition's record batch as the batch a writer takes: its columns cast to each column's own
    Arrow form where Arrow does that exactly (no tuple is made: :func:`_own_form`), else its rows (text
    back to values, :func:`rows_from_arrow`)."""
    target = arrow_schema(schema)
    if batch.num_columns == len(target):
        arrays: list[pa.Array] = []
        for c, array, want in zip(schema.columns, batch.columns, target, strict=True):
            own = _own_form(c, array, want.type) if c.type in _OWN_FORM else None
            if own is None:
                break
            arrays.append(own)
        else:
            return Batch.of_arrow(pa.RecordBatch.from_arrays(arrays, schema=target))
    return Batch.of_rows(rows_from_arrow(schema, batch), schema)


def _from_json(v: Any) -> Any:
    return json_loads(v) if isinstance(v, str) else v


def _from_decimal_text(v: Any) -> Any:
    return Decimal(v) if isinstance(v, str) else v


_FROM_TEXT: dict[str, Callable[[Any], Any]] = {"json": _from_json, "decimal": _from_decimal_text}
"""What travels in Spark as text, back to the value (JSON values, exact decimals)."""


def _from_int_text(v: Any) -> Any:
    return int(v) if isinstance(v, str) else v


def _from_iso_text(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if not isinstance(v, str):
            return v
        try:
            return parse(v)
        except ValueError:
            return v  # a zero date: its text, as the reader kept it

    return convert


_FROM_EXACT: dict[str, Callable[[Any], Any]] = {"int": _from_int_text, "date": _from_iso_text(dt.date.fromisoformat),
                                                "datetime": _from_iso_text(dt.datetime.fromisoformat)}
"""Columns carried as exact text (a string where the logical type is not), back to the value."""


def from_spark_rows(schema: Schema, rows: Iterator[Any], batch_rows: int,
                    exact: frozenset[str] = frozenset()) -> Iterator[list[Row]]:
    """Batches of wormhole rows from Spark Rows: JSON and exact text back to values, bytearray to bytes."""
    by_type: dict[str, Callable[[Any], Any]] = {**_FROM_TEXT, "bytes": bytes}
    fixes = [(i, _FROM_EXACT[c.type] if c.name in exact and c.type in _FROM_EXACT else by_type[c.type])
             for i, c in enumerate(schema.columns)
             if c.type in by_type or (c.name in exact and c.type in _FROM_EXACT)]
    batch: list[Row] = []
    for r in rows:
        if fixes:
            values = list(r)
            for i, fn in fixes:
                if values[i] is not None:
                    values[i] = fn(values[i])
            batch.append(tuple(values))
        else:
            batch.append(tuple(r))
        if len(batch) >= batch_rows:
            yield batch
            batch = []
    if batch:
        yield batch



def naive_timestamps(frame: DataFrame) -> DataFrame:
    """Zoned timestamps (a Hive TIMESTAMP) as naive UTC ones, so row writers get what local mode gives."""
    if not any(isinstance(f.dataType, T.TimestampType) for f in frame.schema.fields):
        return frame
    return frame.select([F.col(f"`{f.name}`").cast(T.TimestampNTZType()).alias(f.name)
                         if isinstance(f.dataType, T.TimestampType) else F.col(f"`{f.name}`")
                         for f in frame.schema.fields])


def as_read(column: Column, read: Column) -> Column:
    """A native read's column with the nullability the reader says, and its declaration when the types agree."""
    if column.type != read.type:
        return dataclasses.replace(column, nullable=read.nullable)
    return dataclasses.replace(column, nullable=read.nullable, precision=read.precision, scale=read.scale,
                               native=read.native)

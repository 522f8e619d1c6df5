"""Logical types <-> Spark SQL types, and the row conversions at the Python/JVM boundary.

The mapping is the one the file store's parquet writer uses in local mode (decimal(38,18),
naive microsecond timestamps, JSON as its text), so a destination holds the same values whichever
engine wrote it. Values Spark would silently alter (a decimal beyond 38 digits or 18 decimals, an
integer beyond 64 bits) are rejected as dirty rows at the source instead.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

from wormhole.plugins.base import Column, Rejected, Row, Schema
from wormhole.plugins.file.writer import arrow_types, json_text

DECIMAL = T.DecimalType(38, 18)

TO_SPARK: dict[str, T.DataType] = {
    "int": T.LongType(), "float": T.DoubleType(), "decimal": DECIMAL, "string": T.StringType(),
    "bytes": T.BinaryType(), "bool": T.BooleanType(), "date": T.DateType(), "datetime": T.TimestampNTZType(),
    "json": T.StringType(),
}


TRANSPORT_SPARK: dict[str, T.DataType] = {**TO_SPARK, "decimal": T.StringType()}
TRANSPORT_ARROW: dict[str, pa.DataType] = {**arrow_types(pa), "decimal": pa.string()}
"""How rows read by a store's row reader travel in Spark: decimals as their exact text, so a row
writer gets back the value with its own scale (1.50 stays 1.50, not 1.500000000000000000); native
writes cast them to decimal(38,18) like every other writer of Parquet."""


def spark_schema(schema: Schema, transport: bool = False) -> T.StructType:
    types = TRANSPORT_SPARK if transport else TO_SPARK
    return T.StructType([T.StructField(c.name, types[c.type], c.nullable) for c in schema.columns])


def logical_type(dtype: T.DataType) -> str:
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int"
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        return "float"
    if isinstance(dtype, T.DecimalType):
        return "decimal"
    if isinstance(dtype, (T.StringType, T.VarcharType, T.CharType)):
        return "string"
    if isinstance(dtype, T.BinaryType):
        return "bytes"
    if isinstance(dtype, T.BooleanType):
        return "bool"
    if isinstance(dtype, T.DateType):
        return "date"
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return "datetime"
    return "json"  # arrays, maps, structs: carried as JSON values


def logical_schema(struct: T.StructType) -> Schema:
    return Schema(tuple(Column(f.name, logical_type(f.dataType), f.nullable) for f in struct.fields))  # type: ignore[arg-type]


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
_ARROW_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError, ArithmeticError)


def to_arrow_batches(schema: Schema, batches: Iterable[Sequence[Row]],
                     reject: Callable[[list[Rejected]], None]) -> Iterator[pa.RecordBatch]:
    """Record batches of the rows, column-wise; a row Arrow cannot hold exactly (an integer beyond
    64 bits, a decimal beyond 38 digits or 18 decimals, a lone surrogate) goes to ``reject``."""
    types = [TRANSPORT_ARROW[c.type] for c in schema.columns]
    arrow_schema = pa.schema([pa.field(c.name, t, c.nullable) for c, t in zip(schema.columns, types)])
    prepare = [(i, _PREPARE[c.type]) for i, c in enumerate(schema.columns) if c.type in _PREPARE]
    for batch in batches:
        if not batch:
            continue
        columns = [list(col) for col in zip(*batch)]
        for i, fn in prepare:
            columns[i] = [None if v is None else fn(v) for v in columns[i]]
        try:
            yield pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(columns, types)],
                                             schema=arrow_schema)
            continue
        except _ARROW_ERRORS:
            pass
        failed: dict[int, str] = {}
        for i, t in enumerate(types):
            _find_bad(columns[i], t, 0, len(batch), failed, schema.columns[i].name)
        bad = [Rejected(tuple(batch[r]), f"cannot be carried by Spark: {why}") for r, why in sorted(failed.items())]
        if bad:
            reject(bad)
        good = [r for r in range(len(batch)) if r not in failed]
        if good:
            yield pa.RecordBatch.from_arrays(
                [pa.array([columns[i][r] for r in good], type=t) for i, t in enumerate(types)], schema=arrow_schema)


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
    """Wormhole rows from a record batch (JSON and decimal text back to values)."""
    columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
    for i, c in enumerate(schema.columns):
        if c.type in _FROM_TEXT:
            columns[i] = list(map(_FROM_TEXT[c.type], columns[i]))
    return list(zip(*columns)) if columns else [() for _ in range(batch.num_rows)]


def _from_json(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def _from_decimal_text(v: Any) -> Any:
    return Decimal(v) if isinstance(v, str) else v


_FROM_TEXT: dict[str, Callable[[Any], Any]] = {"json": _from_json, "decimal": _from_decimal_text}
"""What travels in Spark as text, back to the value (JSON values, exact decimals)."""


def from_spark_rows(schema: Schema, rows: Iterator[Any], batch_rows: int) -> Iterator[list[Row]]:
    """Batches of wormhole rows from Spark Rows: JSON text back to values, bytearray to bytes."""
    by_type: dict[str, Callable[[Any], Any]] = {**_FROM_TEXT, "bytes": bytes}
    fixes = [(i, by_type[c.type]) for i, c in enumerate(schema.columns) if c.type in by_type]
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

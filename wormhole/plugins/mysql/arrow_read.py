"""The mysql reader's batches as Arrow columns: each column of raw text-protocol values becomes an array of its
Arrow type by vectorised casts. A column whose cast fails (a zero date, bytes that are not UTF-8) is
converted value by value: a value that does not convert rejects its row, a zero date follows ``zero_dates``,
and a value Arrow cannot hold in the column's type goes on in an exact column."""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins import arrow_parse
from wormhole.plugins.base import Rejected
from wormhole.plugins.batch import Batch, arrow_schema, arrow_type, decimal_shape, exact_column
from wormhole.plugins.mysql.types import READ_CONVERTERS, ZeroDate
from wormhole.plugins.schema import Column, Schema
from wormhole.plugins.values import json_column, json_parse

_FAILED = (pa.ArrowException, ValueError, ArithmeticError, UnicodeDecodeError, TypeError)
"""What a cast (or a Python conversion) of a value that has no form in the column's type raises."""


class _Unfit(ValueError):
    """A column's values parse but some fall outside what the Python value of its type can hold."""


def _binary(values: Sequence[Any] | pa.Array) -> pa.Array:
    # The column stream's columns are Arrow already; pymysql's own path gives lists of bytes.
    return values if isinstance(values, pa.Array) else pa.array(values, pa.binary())


def _ascii(values: Sequence[Any]) -> pa.Array:
    # Numbers and dates are ASCII: their parsers refuse any other byte, so no UTF-8 check is needed first.
    return _binary(values).view(pa.string())


def _dates(values: Sequence[Any], column: Column) -> pa.Array:
    return arrow_parse.dates(_ascii(values), column)  # Arrow holds years 0 and beyond 9999: read as zero dates


def _datetimes(values: Sequence[Any], column: Column) -> pa.Array:
    return arrow_parse.datetimes(_ascii(values), column)


def _decimals(values: Sequence[Any], column: Column) -> pa.Array:
    text = _ascii(values)
    _, scale = decimal_shape(column)
    # The cast would pad a shorter fraction (1.5 as 1.50): the reader gives every value as the server wrote it.
    point = pc.find_substring(text, ".")
    expected = pc.subtract(pc.binary_length(text), scale + 1) if scale else pa.scalar(-1, pa.int32())
    if not pc.all(pc.equal(point, expected)).as_py():
        raise _Unfit("a decimal whose digits after the point are not the column's scale")
    return pc.cast(text, arrow_type(column))


_BYTE_MASKS = (0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF)


def _bits(values: Sequence[Any], column: Column) -> pa.Array:
    # BIT(n) comes as ceil(n/8) big-endian bytes: left-padded to 8 they are a uint64 in network order.
    raw = _binary(values)
    widths = pc.binary_length(raw)
    if (pc.max(widths).as_py() or 0) > 8:
        raise _Unfit("a BIT value longer than 8 bytes")
    padding = pc.binary_repeat(pa.scalar(b"\x00", pa.binary()), pc.subtract(8, widths))
    fixed = pc.binary_join_element_wise(padding, raw, pa.scalar(b"", pa.binary())).cast(pa.binary(8))
    word = pa.Array.from_buffers(pa.uint64(), len(fixed), fixed.buffers()[:2], offset=fixed.offset)
    if sys.byteorder == "little":
        for shift, mask in zip((8, 16, 32), _BYTE_MASKS, strict=True):
            m = pa.scalar(mask, pa.uint64())
            word = pc.bit_wise_or(pc.shift_left(pc.bit_wise_and(word, m), shift),
                                  pc.bit_wise_and(pc.shift_right(word, shift), m))
    return pc.cast(word, arrow_type(column))  # checked: a BIT(64) beyond int64 fails here


def _texts(values: Sequence[Any], column: Column) -> pa.Array:
    return _binary(values).cast(pa.string())  # checked: bytes that are not UTF-8 fail here


def _json(values: Sequence[Any], column: Column) -> pa.Array:
    texts = _texts(values, column)
    # Parsed once here so a text that is not JSON rejects its row as it always did (tuples parse it again).
    deque(map(json.loads, (v for v in texts.to_pylist() if v is not None)), maxlen=0)
    return texts


def _parsed(target: Callable[[Column], pa.DataType]) -> Callable[[Sequence[Any], Column], pa.Array]:
    return lambda values, column: pc.cast(_ascii(values), target(column))


_NOT_TEXT = frozenset({"bit", "float32"})
"""Kinds whose wire bytes are not the value's text a column of its declared type reads back: BIT comes as
raw bytes, FLOAT as the text of ``CAST(col AS DOUBLE)``. A shard declaring such a column under a name
another shard declares otherwise must not pass its bytes on as that other type's text."""

_FAST: dict[str, Callable[[Sequence[Any], Column], pa.Array]] = {
    "int": _parsed(arrow_type), "uint64": _parsed(arrow_type), "float": _parsed(arrow_type),
    "float32": _parsed(arrow_type), "decimal": _decimals, "bit": _bits, "date": _dates, "datetime": _datetimes,
    "string": _texts, "json": _json, "bytes": lambda values, column: _binary(values),
}
"""kind -> one raw column as the Arrow array of its column's type (raises when a value does not cast)."""


def convert_slowly(kind: str, values: Sequence[Any], index: int, zero_dates: str) -> tuple[list[Any], dict[int, str]]:
    """One column value by value, as the reader always converted a column that failed whole: the values
    (None where a value does not convert) and the rows that do not, with the reason."""
    fn = READ_CONVERTERS[kind]
    out: list[Any] = []
    bad: dict[int, str] = {}
    for r, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(fn(v))
        except ZeroDate as exc:
            if zero_dates == "keep":
                out.append(str(exc))
            else:
                out.append(None)
                if zero_dates == "reject":
                    bad[r] = f"column {index}: zero date {exc} has no value (zero_dates is 'reject')"
        except (ValueError, ArithmeticError, UnicodeDecodeError) as exc:
            bad[r] = f"column {index}: cannot read {v[:40]!r} as {kind}: {exc}"
            out.append(None)
    return out, bad


def _python(kind: str, arr: pa.Array) -> list[Any]:
    """An Arrow column as the reader's Python values (a json column's text parsed)."""
    values = arr.to_pylist()
    if kind == "json":
        present = [v for v in values if v is not None]
        parsed = iter(json_column(map(json_parse, present)))
        values = [None if v is None else next(parsed) for v in values]
    return values


class _Column:
    """One column of a batch: its Arrow array, or its Python values when Arrow cannot hold one of them."""

    __slots__ = ("arrow", "kind", "python", "wire")

    def __init__(self, kind: str, arrow: pa.Array | None, python: list[Any] | None,
                 wire: pa.Array | None = None) -> None:
        self.kind, self.arrow, self.python = kind, arrow, python
        self.wire = wire
        """The wire text the Arrow array was cast from whole (the fast path): each value is its text's."""

    def values(self, rows: Sequence[int] | None = None) -> list[Any]:
        if self.python is not None:
            return self.python if rows is None else [self.python[r] for r in rows]
        assert self.arrow is not None
        return _python(self.kind, self.arrow if rows is None else self.arrow.take(pa.array(rows, pa.int64())))


class BatchDecoder:
    """Turns the raw columns of one read (its columns and their kinds, as the split selects them) into
    the batches the reader yields."""

    def __init__(self, columns: Sequence[Column], kinds: Sequence[str], zero_dates: str,
                 keep_wire: bool = False) -> None:
        self.keep_wire = keep_wire
        """Keep each fast-cast column's wire text beside the batch (``Batch.wire``, for passthrough)."""
        self.columns = tuple(columns)
        self.kinds = tuple(kinds)
        self.zero_dates = zero_dates
        self.schema = arrow_schema(Schema(self.columns))

    def decode(self, raw: Sequence[list[Any] | pa.Array]) -> tuple[Batch, list[Rejected]]:
        """The batch (Arrow columns, an exact one where a value has no Arrow form in its type) less the rows
        whose values do not convert, and those rows with their reasons."""
        bad: dict[int, str] = {}
        columns = [self._column(i, values, bad) for i, values in enumerate(raw)]
        rejected: list[Rejected] = []
        if bad:
            rows = sorted(bad)
            cells = [c.values(rows) for c in columns]
            rejected = [Rejected(row, bad[r]) for r, row in zip(rows, zip(*cells, strict=True), strict=True)]
        if any(c.arrow is None for c in columns):
            return self._exact(columns, bad), rejected
        batch = pa.RecordBatch.from_arrays([c.arrow for c in columns], schema=self.schema)
        wire = [c.wire for c in columns]
        if bad:
            keep = pa.array([r not in bad for r in range(batch.num_rows)], pa.bool_())
            batch = batch.filter(keep)
            wire = [None if w is None else w.filter(keep) for w in wire]
        return Batch.of_arrow(batch, wire if any(w is not None for w in wire) else None), rejected

    def _exact(self, columns: list[_Column], bad: dict[int, str]) -> Batch:
        """A batch with a column Arrow cannot hold in its type: that column exact, the others as they are."""
        n = len(columns[0].python) if columns[0].python is not None else len(columns[0].arrow or ())
        keep = [r for r in range(n) if r not in bad] if bad else None
        arrays: list[pa.Array] = []
        fields: list[pa.Field] = []
        for i, c in enumerate(columns):
            if c.arrow is not None:
                arrays.append(c.arrow if keep is None else c.arrow.take(pa.array(keep, pa.int64())))
                fields.append(self.schema.field(i))
            else:
                array, field = exact_column(self.columns[i], c.values(keep))
                arrays.append(array)
                fields.append(field)
        return Batch.of_arrow(pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)))

    def _column(self, index: int, values: list[Any] | pa.Array, bad: dict[int, str]) -> _Column:
        kind, column = self.kinds[index], self.columns[index]
        try:
            # The wire text goes along (pymysql's own path gives lists: none) when it is the value's own text
            # (not BIT's raw bytes, not FLOAT's DOUBLE text), for passthrough
            keep = self.keep_wire and kind not in _NOT_TEXT and isinstance(values, pa.Array)
            return _Column(kind, _FAST[kind](values, column), None, values if keep else None)
        except _FAILED:
            pass
        if isinstance(values, pa.Array):
            values = values.to_pylist()
        python, failed = convert_slowly(kind, values, index, self.zero_dates)
        for r, reason in failed.items():
            bad.setdefault(r, reason)  # the first column's reason, as the reader always gave
        return _Column(kind, _arrow_of(kind, column, values, python, failed), python)


def _arrow_of(kind: str, column: Column, raw: Sequence[Any], python: list[Any],
              failed: dict[int, str]) -> pa.Array | None:
    """A column converted value by value as Arrow, or None when a value has no Arrow form in its type."""
    try:
        if kind == "json":  # the server's text, as the fast path keeps it
            return _texts([None if r in failed else v for r, v in enumerate(raw)], column)
        target = arrow_type(column)
        if kind == "decimal":
            _, scale = decimal_shape(column)
            if any(v.as_tuple().exponent != -scale for v in python if isinstance(v, Decimal)):
                return None  # Arrow would pad or round it to the column's scale
        return pa.array(python, target, from_pandas=False)
    except _FAILED:
        return None


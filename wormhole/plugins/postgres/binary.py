"""A batch as PostgreSQL's COPY binary format, column-wise with numpy (no Python per value). Chosen at prepare
when every target column's type is one this module encodes (:func:`binary_kinds`); a batch whose columns
have no binary form here (:class:`NotBinary`) goes as text, so PostgreSQL rejects exactly the rows it would.
Each column's fields (int32 length, big-endian bytes) are made column-wise, then one join makes the rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.batch import free_scale, has_exact, rows_from_arrow
from wormhole.plugins.schema import Row

HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"
_HEADER = np.frombuffer(HEADER, np.uint8)
_TRAILER = np.frombuffer(TRAILER, np.uint8)

_INT_RANGES = {"int2": (-(1 << 15), (1 << 15) - 1), "int4": (-(1 << 31), (1 << 31) - 1),
               "int8": (-(1 << 63), (1 << 63) - 1)}
_WIDTH = {"int2": ">i2", "int4": ">i4", "int8": ">i8", "float8": ">f8", "bool": "u1", "date": ">i4",
          "timestamp": ">i8", "timestamptz": ">i8"}
SUPPORTED: dict[str, frozenset[str]] = {
    "int": frozenset({"int2", "int4", "int8", "bool"}),
    "float": frozenset({"float8"}),
    "bool": frozenset({"bool"}),
    "date": frozenset({"date"}),
    "datetime": frozenset({"timestamp"}),
    "string": frozenset({"text", "varchar", "bpchar", "json", "jsonb"}),
    "json": frozenset({"text", "varchar", "bpchar", "json", "jsonb"}),
    "bytes": frozenset({"bytea"}),
    "decimal": frozenset({"numeric"}),
}
"""Source logical type -> the target types (pg_type.typname) whose binary form is made from it."""

_EPOCH_DAYS = 10957  # 1970-01-01 -> 2000-01-01, PostgreSQL's epoch
_EPOCH_US = _EPOCH_DAYS * 86_400_000_000
_DAYS = (-719162, 2932896)  # 0001-01-01 and 9999-12-31 in days since 1970: the text path's range
_US = (_DAYS[0] * 86_400_000_000, (_DAYS[1] + 1) * 86_400_000_000 - 1)
_UNIT_US = {"s": 1_000_000, "ms": 1000, "us": 1}
_MAX_DECIMAL_PRECISION = 18


class NotBinary(Exception):
    """This batch's columns have no binary form here (the text path takes it)."""


def binary_kinds(logical: Sequence[str], typnames: Sequence[str]) -> tuple[str, ...] | None:
    """The target types when binary COPY can write every column, else None (text)."""
    if len(logical) != len(typnames) or not logical:
        return None
    if all(t in SUPPORTED.get(kind, ()) for kind, t in zip(logical, typnames, strict=True)):
        return tuple(typnames)
    return None


def _valid(values: pa.Array) -> np.ndarray:
    return np.ones(len(values), bool) if values.null_count == 0 else \
        pc.is_valid(values).to_numpy(zero_copy_only=False)


def _range(values: pa.Array, low: int, high: int) -> None:
    if values.null_count == len(values):
        return
    found = pc.min_max(values)
    if found["min"].as_py() < low or found["max"].as_py() > high:
        raise NotBinary("a value beyond the target's range")


def _fixed(values: pa.Array, kind: str) -> np.ndarray:
    """A fixed-width column as (rows, width) big-endian bytes (NULL slots hold anything)."""
    t = values.type
    if kind in _INT_RANGES:
        if not pa.types.is_integer(t):
            raise NotBinary(f"{t} for {kind}")
        _range(values, *_INT_RANGES[kind])
        ints = pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        return ints.astype(_WIDTH[kind])
    if kind == "float8":
        if not pa.types.is_floating(t):
            raise NotBinary(f"{t} for {kind}")
        return pc.fill_null(pc.cast(values, pa.float64()), 0.0).to_numpy(zero_copy_only=False).astype(">f8")
    if kind == "bool":
        if pa.types.is_integer(t):  # MySQL's TINYINT(1): 0 and 1 only, as boolean's text input takes them
            _range(values, 0, 1)
            return pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype("u1")
        if not pa.types.is_boolean(t):
            raise NotBinary(f"{t} for {kind}")
        return pc.fill_null(values, False).to_numpy(zero_copy_only=False).astype("u1")
    if kind == "date":
        if not pa.types.is_date32(t):
            raise NotBinary(f"{t} for {kind}")
        days = pc.cast(values, pa.int32())
        _range(days, *_DAYS)
        return (pc.fill_null(days, 0).to_numpy(zero_copy_only=False).astype(np.int64) - _EPOCH_DAYS).astype(">i4")
    if not pa.types.is_timestamp(t) or t.unit not in _UNIT_US:  # ns: the text path says which are inexact
        raise NotBinary(f"{t} for {kind}")
    us = pc.multiply_checked(pc.cast(values, pa.int64()), pa.scalar(_UNIT_US[t.unit], pa.int64()))
    _range(us, *_US)
    return (pc.fill_null(us, 0).to_numpy(zero_copy_only=False) - _EPOCH_US).astype(">i8")


def _numeric(values: pa.Array, field: pa.Field) -> np.ndarray:
    """Decimals (precision <= 18) as numeric_recv's form, a fixed number of base-10000 groups for every row
    (numeric_recv drops leading and trailing zero groups): a (rows, width) byte array."""
    t = values.type
    if not pa.types.is_decimal128(t) or t.precision > _MAX_DECIMAL_PRECISION or free_scale(field) or t.scale < 0:
        raise NotBinary(f"{t} for numeric")
    words = np.frombuffer(values.buffers()[1], dtype="<i8")[2 * values.offset:2 * (values.offset + len(values))]
    unscaled = words[0::2].copy()  # the low word holds the whole value when precision <= 18
    scale = int(t.scale)
    magnitude = np.abs(unscaled)
    ip, fp = np.divmod(magnitude, np.int64(10) ** scale)
    n_int = -(-(int(t.precision) - scale) // 4)
    n_frac = -(-scale // 4)
    groups: list[np.ndarray] = []
    for k in range(n_int - 1, -1, -1):  # the integer part, most significant group first
        groups.append((ip // np.int64(10) ** (4 * k)) % 10000)
    for k in range(1, n_frac + 1):  # the fraction: the k-th group after the point
        shift = scale - 4 * k
        groups.append((fp // np.int64(10) ** shift) % 10000 if shift >= 0 else
                      (fp % np.int64(10) ** (scale - 4 * (k - 1))) * np.int64(10) ** (-shift))
    n = len(values)
    head = np.empty((n, 4), ">i2")
    head[:, 0] = n_int + n_frac
    head[:, 1] = n_int - 1
    head[:, 2] = np.where(unscaled < 0, 0x4000, 0)
    head[:, 3] = scale
    digits = np.stack(groups, axis=1).astype(">i2") if groups else np.empty((n, 0), ">i2")
    return np.concatenate([head.view(np.uint8).reshape(n, 8), digits.view(np.uint8).reshape(n, -1)], axis=1)


def _bytes(value: bytes) -> pa.Scalar:
    return pa.scalar(value, pa.large_binary())


_NOTHING = _bytes(b"")


def _as_binary(rows: np.ndarray) -> pa.Array:
    """A (rows, width) byte array as an Arrow binary array of one value a row (its bytes not copied)."""
    n, width = rows.shape
    offsets = np.arange(n + 1, dtype=np.int64) * width
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                        pa.py_buffer(np.ascontiguousarray(rows))])


def _field(values: pa.Array, kind: str, field: pa.Field) -> pa.Array:
    """One column's fields: per row the int32 length (-1: NULL) and the value's bytes."""
    n = len(values)
    valid = _valid(values)
    if kind in _WIDTH or kind == "numeric":
        body = _numeric(values, field) if kind == "numeric" else _fixed(values, kind).view(np.uint8).reshape(n, -1)
        rows = np.empty((n, 4 + body.shape[1]), np.uint8)
        rows[:, :4] = np.full(n, body.shape[1], ">i4").view(np.uint8).reshape(n, 4)
        rows[:, 4:] = body
        fields = _as_binary(rows)
    else:
        t = values.type
        wanted = pa.types.is_binary(t) or pa.types.is_large_binary(t) if kind == "bytea" else \
            pa.types.is_string(t) or pa.types.is_large_string(t)
        if not wanted:
            raise NotBinary(f"{t} for {kind}")
        data = pc.fill_null(pc.cast(values, pa.large_binary()), b"")
        sizes = pc.binary_length(data).to_numpy(zero_copy_only=False) + (kind == "jsonb")  # jsonb: version 1
        lengths = _as_binary(sizes.astype(">i4").view(np.uint8).reshape(n, 4))
        fields = pc.binary_join_element_wise(lengths, _bytes(b"\x01"), data, _NOTHING) if kind == "jsonb" else \
            pc.binary_join_element_wise(lengths, data, _NOTHING)
    if valid.all():
        return fields
    return pc.if_else(pa.array(valid), fields, _bytes(b"\xff\xff\xff\xff"))


def binary_rows(batch: pa.RecordBatch, kinds: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The batch as one COPY binary stream (header, rows, trailer) and where each row starts in it (n + 1
    offsets, the last where the trailer starts); NotBinary when a column has no binary form here. Each
    column's fields are made column-wise, then Arrow joins each row's (in C, as the text path joins its)."""
    if has_exact(batch):
        raise NotBinary("a column holds values its Arrow type cannot (an exact column): written as text")
    n = batch.num_rows
    fields = [_field(batch.column(i), kind, batch.schema.field(i)) for i, kind in enumerate(kinds)]
    count = np.full(n, len(kinds), ">i2").view(np.uint8).reshape(n, 2)
    rows = pc.binary_join_element_wise(_as_binary(count), *fields, _NOTHING)
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64)[rows.offset:rows.offset + n + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    body = np.frombuffer(rows.buffers()[2], dtype=np.uint8)[first:last] if last > first else np.empty(0, np.uint8)
    return np.concatenate((_HEADER, body, _TRAILER)), offsets - first + len(HEADER)


class BinaryPiece:
    """Rows of a batch as Arrow, encoded once in COPY binary form; a slice of rows is a slice of the bytes."""

    binary = True

    def __init__(self, batch: pa.RecordBatch, kinds: Sequence[str]) -> None:
        self.batch = batch
        self.stream, self.offsets = binary_rows(batch, kinds)

    @property
    def num_rows(self) -> int:
        return int(self.batch.num_rows)

    def payload(self, start: int, end: int) -> pa.Buffer:
        if start == 0 and end == self.num_rows:  # the whole batch: its stream as made, not copied
            return pa.py_buffer(self.stream)
        rows = self.stream[int(self.offsets[start]):int(self.offsets[end])]
        return pa.py_buffer(np.concatenate((_HEADER, rows, _TRAILER)))

    def parts(self, start: int, end: int) -> tuple[Any, ...]:
        return (self.payload(start, end),)

    def row(self, index: int) -> Row:
        return rows_from_arrow(self.batch.slice(index, 1))[0]

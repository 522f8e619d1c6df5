"""The text of Arrow values as the row writers write them, made column-wise by pyarrow compute: Python's
``repr`` of a float, a decimal's plain notation (:func:`~wormhole.plugins.values.plain_decimal`),
``isoformat`` of dates and datetimes, ``true``/``false``, base64 of bytes, the canonical text of JSON.

Shared by the stores that write text (the file store's csv and jsonl, sqlite's bound values). Arrow's
own casts print the same digits, but not always in the same form: the few values whose text Arrow does
not make as Python does are formatted in Python, only those; bytes (base64: no compute kernel) and json
(its canonical text needs parsing) value by value. :class:`NotExact`: a column these functions cannot
render as the row writer would (a date beyond Python's years); the caller writes that batch's rows.
"""

from __future__ import annotations

import binascii
import itertools
from collections.abc import Callable
from functools import cache
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.batch import Batch, free_scale
from wormhole.plugins.values import json_loads, plain_decimal

Text: TypeAlias = pa.Array
"""A column's field text: a string array, null where the value is NULL."""


def own_arrow(batch: Batch) -> pa.RecordBatch | None:
    """The Arrow form of a batch that came as Arrow columns (``Batch.of_arrow``), else None.

    Only such a batch is encoded column-wise: one that came as tuples may have been given an Arrow form by
    another destination (``Batch.arrow``), whose values are not always the tuples' (a decimal takes its
    column's scale, 1.5 in an int column becomes 1), while the text of a batch born Arrow is the text of
    its tuples either way (:attr:`Batch.native_arrow`).
    """
    return batch.native_arrow


def own_text_arrow(rows: Batch) -> pa.RecordBatch | None:
    """:func:`own_arrow`, for writers of text: None too when a decimal column has no declared scale (its Arrow
    form pads every value to scale 18; the batch's tuples give each value its own smallest scale)."""
    batch = own_arrow(rows)
    if batch is None or any(free_scale(f) for f in batch.schema):
        return None
    return batch


class NotExact(Exception):
    """The batch holds a value whose text these encoders do not make exactly as the row encoder does."""


def patched(text: Text, need: Any, values: pa.Array, fmt: Callable[[Any], str]) -> Text:
    """``text`` with the values where ``need`` is true formatted by ``fmt`` in Python (only those)."""
    need = pc.fill_null(need, False)
    if not pc.any(need).as_py():
        return text
    fixed = [fmt(v) for v in pc.filter(values, need).to_pylist()]
    return pc.replace_with_mask(text, need, pa.array(fixed, pa.string()))


_OFFSET_MAX = 2**31 - 1
"""The largest offset of a string array's data."""


def suffixed(text: Text, mask: np.ndarray, suffix: bytes) -> Text:
    """``text`` with ``suffix`` after each value where ``mask`` is true: the data joined once around
    those values and the offsets moved by numpy (``replace_with_mask`` rebuilds every value)."""
    validity, offsets, data = text.buffers()
    n, first = len(text), text.offset
    old = np.frombuffer(offsets, np.int32, n + 1, 4 * first)
    moved = np.zeros(first + n + 1, np.int64)
    np.cumsum(mask, out=moved[first + 1:])
    moved[first:] = moved[first:] * len(suffix) + old - old[0]
    if moved[-1] > _OFFSET_MAX:  # beyond a string array: the caller writes the batch's rows
        raise NotExact("the text is too long for one string array")
    view = memoryview(data if data is not None else b"")
    bounds = [int(old[0]), *old[1:][mask].tolist(), int(old[-1])]
    grown = suffix.join([view[start:end] for start, end in itertools.pairwise(bounds)])
    return pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(moved.astype(np.int32)), pa.py_buffer(grown)],
                                 text.null_count, first)


def float_text(values: pa.Array) -> Text:
    """``repr`` of each float. Arrow prints the same shortest digits, positionally where 1e-7 <= |x| < 1e10
    (Python: 1e-4 <= |x| < 1e16): inside both ranges (and for zero) its text is Python's, plus ``.0`` for a
    whole number; the rest (few in most data) go through ``repr``. Decided by numeric tests only (numpy's,
    a batch's few microseconds each), and by the column's smallest and largest magnitude alone when every
    value is inside (the common case)."""
    text = pc.cast(values, pa.string())
    number = values.to_numpy(zero_copy_only=False)  # a NULL as NaN
    magnitude = np.abs(number)
    # fmin/fmax skip NaN, whose text Arrow writes as Python does (nan, whatever its sign); all NaN: -inf
    low, high = np.fmin.reduce(magnitude, initial=np.inf), np.fmax.reduce(magnitude, initial=-np.inf)
    inside = bool(high == -np.inf or (low >= 1e-4 and high < 1e10))
    with np.errstate(invalid="ignore"):  # a signalling NaN's payload
        whole = np.trunc(number) == number  # NaN (and NULL) false
    shared = None if inside else ((magnitude >= 1e-4) & (magnitude < 1e10)) | (magnitude == 0)
    mask = whole if shared is None else whole & shared
    text = suffixed(text, mask, b".0") if mask.any() else text
    if shared is None:
        return text
    other = ~shared if not values.null_count else ~shared & values.is_valid().to_numpy(zero_copy_only=False)
    return patched(text, pa.array(other), values, repr)


def decimal_text(values: pa.Array) -> Text:
    """Plain notation (:func:`plain_decimal`): Arrow's text but where it writes an exponent (0E-18)."""
    text = pc.cast(values, pa.string())
    return patched(text, pc.match_substring(text, "E"), values, plain_decimal)


PYTHON_RANGE = {"datetime": (-62_135_596_800_000_000, 253_402_300_799_999_999), "date": (-719_162, 2_932_896)}
"""Microseconds (days) since the epoch of 0001-01-01 and 9999-12-31 (23:59:59.999999): what Python holds."""


def in_python_range(values: pa.Array, kind: str) -> bool:
    """Whether every date32 (``kind`` date) or timestamp[us] (datetime) value has a Python form."""
    if len(values) == values.null_count:
        return True
    span = pc.min_max(values.view(pa.int32() if kind == "date" else pa.int64()))
    low, high = PYTHON_RANGE[kind]
    return bool(span["min"].as_py() >= low and span["max"].as_py() <= high)


def date_text(values: pa.Array) -> Text:
    if not in_python_range(values, "date"):
        raise NotExact("a date beyond the years 1-9999")
    return pc.cast(values, pa.string())


def datetime_text(values: pa.Array, sep: str) -> Text:
    """``datetime.isoformat(sep)``: no fraction when the microseconds are zero."""
    if not in_python_range(values, "datetime"):
        raise NotExact("a datetime beyond the years 1-9999")
    text = pc.cast(values, pa.string())  # "YYYY-MM-DD HH:MM:SS.ffffff"
    text = pc.if_else(pc.ends_with(text, ".000000"), pc.utf8_slice_codeunits(text, 0, 19), text)
    if sep != " ":
        text = pc.replace_substring(text, " ", sep, max_replacements=1)
    return text


def bool_text(values: pa.Array) -> Text:
    return pc.if_else(values, "true", "false")


def base64_text(values: pa.Array) -> Text:
    return pa.array([None if v is None else binascii.b2a_base64(v, newline=False).decode("ascii")
                     for v in values.to_pylist()], pa.string())


def json_values(values: pa.Array, encode: Callable[[Any], str]) -> Text:
    """Each JSON text parsed and encoded again: the text the row encoders write of the parsed value."""
    return pa.array([None if v is None else encode(json_loads(v)) for v in values.to_pylist()], pa.string())


def value_offsets(values: pa.Array) -> pa.Array:
    """A string or binary array's value offsets (len + 1 of them, from its slice's start)."""
    return pa.Array.from_buffers(pa.int32(), len(values) + 1, [None, values.buffers()[1]], offset=values.offset)


@cache
def _hex_digits() -> pa.Array:
    """Byte value -> its two hex digits: a ``take`` by the bytes themselves writes a whole column's hex.
    Made on first use: Arrow's first array costs a process about 50 MiB, which a run of tuples never pays."""
    return pa.array([b"%02x" % i for i in range(256)], pa.binary(2))


def hex_text(values: pa.Array) -> pa.Array:
    """Binary values as lowercase hex text (``bytes.hex``), nulls kept."""
    offsets = value_offsets(values)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    data = values.buffers()[2]
    if data is None or last == first:
        digits = pa.py_buffer(b"")
    else:
        octets = pa.Array.from_buffers(pa.uint8(), last - first, [None, data], offset=first)
        digits = pc.take(_hex_digits(), octets).buffers()[1]
    hex_offsets = pc.multiply(pc.subtract(offsets, pa.scalar(first, offsets.type)), pa.scalar(2, offsets.type))
    text = pa.StringArray.from_buffers(len(values), hex_offsets.buffers()[1], digits)
    return pc.if_else(values.is_null(), pa.scalar(None, pa.string()), text)

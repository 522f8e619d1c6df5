"""The text of a bulk load, column-wise with Arrow compute: what MySQL's LOAD DATA and PostgreSQL's COPY
text format share (fields separated by tabs, rows ended by newlines, backslash escapes, ``\\N`` for NULL).
Each store's encoder makes its columns' fields (:mod:`wormhole.plugins.mysql.arrow_load`,
:mod:`wormhole.plugins.postgres.encoding`) and joins them here into one buffer, with no Python per value."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.arrow_text import NotExact, datetime_text, value_offsets

NULL = "\\N"

Encoders = Mapping[str, Callable[[pa.Array], pa.Array]]
"""A store's fields of each kind of Arrow column (:func:`kind_of`), NULL aside."""


def kind_of(kind: pa.DataType) -> str | None:
    """``string`` (text and json), ``binary``, ``float``, ``decimal``, ``bool``, ``timestamp``, ``date`` or
    ``int``: what a bulk-load encoder tells apart; None for another type."""
    checks = (("string", pa.types.is_string), ("string", pa.types.is_large_string), ("binary", pa.types.is_binary),
              ("binary", pa.types.is_large_binary), ("float", pa.types.is_floating), ("decimal", pa.types.is_decimal),
              ("bool", pa.types.is_boolean), ("timestamp", pa.types.is_timestamp), ("date", pa.types.is_date32),
              ("int", pa.types.is_integer))
    return next((name for name, check in checks if check(kind)), None)


def column_fields(values: pa.Array, encoders: Encoders, load: str) -> pa.Array:
    """One column as a load's fields: each value by the store's encoder of its kind, ``\\N`` for NULL."""
    kind = kind_of(values.type)
    encode = None if kind is None else encoders.get(kind)
    if encode is None:
        raise TypeError(f"no {load} text for Arrow type {values.type}")
    return pc.fill_null(encode(values), NULL)


def timestamp_fields(values: pa.Array, sep: str) -> pa.Array:
    """Timestamps as ``isoformat(sep)`` writes them (no fraction when it is zero); ValueError for one with none."""
    if values.type != pa.timestamp("us"):
        values = pc.cast(values, pa.timestamp("us"))
    try:
        return datetime_text(values, sep)
    except NotExact as exc:
        raise ValueError(str(exc)) from None


def value_bytes(values: pa.Array) -> bytes:
    """The bytes of a string or binary array's values (its slice's only)."""
    offsets = value_offsets(values)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    data = values.buffers()[2]
    return b"" if data is None or last == first else data.slice(first, last - first).to_pybytes()


def escaped(text: pa.Array, escapes: Sequence[tuple[str, str]]) -> pa.Array:
    """``escapes`` (special character, its escape; backslash first) applied to a string column. One C search
    per special character over the column's bytes (memchr, far quicker than a pass of Arrow's substring
    kernels); only the characters present cost a replacing pass."""
    data = value_bytes(text)
    for special, escape in escapes:
        if data.find(special.encode()) >= 0:
            text = pc.replace_substring(text, special, escape)
    return text


def tab_lines(fields: Sequence[pa.Array]) -> pa.Buffer:
    """Columns of fields (strings, made for the load) as one buffer of lines: tab between fields, a
    newline after each row. The result is the joined column's value buffer (no copy of the rows' text)."""
    fields = list(fields)
    fields[-1] = pc.binary_join_element_wise(fields[-1], "\n", "")  # the row's end
    lines = pc.binary_join_element_wise(*fields, "\t") if len(fields) > 1 else fields[-1]
    offsets = value_offsets(lines)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    data = lines.buffers()[2]
    if data is None:
        return pa.py_buffer(b"")
    return data.slice(first, last - first)

"""A record batch as MySQL load text, column-wise with Arrow compute: a LOAD DATA LOCAL INFILE payload, or one
SQL literal list per row (multi-row INSERT, and the row-by-row pass). Each column is cast to text by Arrow
and rewritten where Arrow's text differs from Python's (:mod:`wormhole.plugins.arrow_text`); an exact column
(a zero date's text, an int beyond 64 bits) is written from its values (:func:`_value_text`), and a column
with wire text (:mod:`.passthrough`) from that.

MySQL changes a value its column cannot hold with a note only (no warning, no error, even in strict mode): it
rounds a decimal beyond its DECIMAL's scale, a fraction into an integer column, a fractional second into a
DATETIME of fewer digits, a double into FLOAT. A column whose values may not fit its target column
(:class:`~wormhole.plugins.sql.narrowing.Narrowing`: decided once per column at prepare, scanned only when the
batch's Arrow type can exceed the target's) refuses such a value (ValueError), so its row is refused."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.arrow_form import LOGICAL_KEY, column_values, exact_codec, free_scale
from wormhole.plugins.arrow_text import decimal_text, float_text, hex_text
from wormhole.plugins.sql.bulk_text import NULL, Encoders, escaped, kind_of, tab_lines, timestamp_fields
from wormhole.plugins.sql.narrowing import Narrowing, check_column
from wormhole.plugins.values import json_dumps

_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))
"""What LOAD DATA's default ``ESCAPED BY '\\\\'`` reads back, backslash first."""
_SQL_ESCAPES = (("\\", "\\\\"), ("\x00", "\\0"), ("\n", "\\n"), ("\r", "\\r"), ("\x1a", "\\Z"), ('"', '\\"'),
                ("'", "\\'"))
"""A quoted SQL string's escapes (the session never has NO_BACKSLASH_ESCAPES), backslash first."""
_UNQUOTED = frozenset({"int", "float", "decimal", "bool"})
"""Logical types whose SQL literal is their text unquoted (a BIT column reads a quoted '5' as the byte 0x35)."""
_LOGICAL = {"string": "string", "binary": "bytes", "float": "float", "decimal": "decimal", "bool": "bool",
            "timestamp": "datetime", "date": "date", "int": "int"}


def _float_text(values: pa.Array) -> pa.Array:
    """``repr`` of each value (:func:`wormhole.plugins.arrow_text.float_text`); MySQL holds no infinity or NaN."""
    bad = pc.invert(pc.fill_null(pc.is_finite(values), True))
    if pc.any(bad).as_py():
        raise ValueError(f"MySQL cannot store the float {pc.filter(values, bad)[0].as_py()!r}")
    return float_text(values)


_TEXT: Encoders = {
    "string": lambda v: pc.cast(v, pa.string()),  # text and json
    "float": lambda v: _float_text(pc.cast(v, pa.float64())),
    "decimal": decimal_text,  # plain notation, as every text writer
    "bool": lambda v: pc.cast(pc.cast(v, pa.uint8()), pa.string()),
    "timestamp": lambda v: timestamp_fields(v, "T"),  # Python's isoformat: 'T', no fraction when it is zero
    "int": lambda v: pc.cast(v, pa.string()), "date": lambda v: pc.cast(v, pa.string()),
}


def _decimal_value(v: Any) -> str:
    if not v.is_finite():
        raise ValueError(f"MySQL DECIMAL cannot hold {v}")
    text = str(v)
    return format(v, "f") if "E" in text else text  # str() may choose an exponent (1E-30); 'f' never does


def _float_value(v: float) -> str:
    text = float.__repr__(v)
    if "n" in text:  # inf / nan (no finite repr contains an 'n')
        raise ValueError(f"MySQL cannot store the float {text}")
    return text


def _datetime_value(v: Any) -> str:
    if type(v) is str:
        return v  # a zero date kept as text goes back as it came
    if type(v) is date:
        return v.isoformat()
    # Sessions run in UTC, so an aware value is stored as the same instant.
    return (v if v.tzinfo is None else v.astimezone(UTC).replace(tzinfo=None)).isoformat()


def _str_value(v: Any) -> str:
    if type(v) is not str:
        raise TypeError(f"a {type(v).__name__} in a text column")
    return v


_VALUE_TEXT: dict[str, Callable[[Any], str]] = {
    "int": int.__repr__,  # writes a bool as 1/0; raises for anything but an int
    "decimal": _decimal_value, "float": _float_value, "bool": lambda v: "1" if v else "0",
    "date": lambda v: v if type(v) is str else date.isoformat(v), "datetime": _datetime_value,
    "json": json_dumps, "string": _str_value, "bytes": bytes.hex,
}
"""One value's text, for a column whose Arrow type does not hold its values (an exact column's)."""


def logical_of(field: pa.Field) -> str:
    """The column's logical type: named in its field's metadata, else that of its Arrow type."""
    named = (field.metadata or {}).get(LOGICAL_KEY)
    return named.decode() if named else _LOGICAL.get(kind_of(field.type) or "", "string")


def _value_text(batch: pa.RecordBatch, i: int, logical: str) -> pa.Array:
    """Column ``i``'s text made from its values (an exact column, a decimal of no declared scale)."""
    fmt = _VALUE_TEXT[logical]
    return pa.array([None if v is None else fmt(v) for v in column_values(batch, i)], pa.string())


def column_text(batch: pa.RecordBatch, i: int, target: Narrowing | None = None) -> tuple[pa.Array, str]:
    """Column ``i``'s text (null for NULL; bytes as hex) and its logical type; raises ValueError for a value
    MySQL cannot hold (a float infinity or NaN; a value its ``target`` column would change), TypeError for a
    value of another type than its column's."""
    field = batch.schema.field(i)
    logical = logical_of(field)
    text = _column_text(batch, i, field, logical)
    check_column(batch, i, target)
    return text, logical


def _column_text(batch: pa.RecordBatch, i: int, field: pa.Field, logical: str) -> pa.Array:
    values = batch.column(i)
    kind = kind_of(field.type)
    codec = exact_codec(field)
    if kind == "binary" and codec is None:
        return hex_text(pc.cast(values, pa.binary()))
    if codec == b"text" and logical in ("int", "date"):  # its text is MySQL's: digits, a date or a zero date
        return pc.cast(values, pa.string())
    if kind is None or kind not in _TEXT or codec is not None or free_scale(field):
        return _value_text(batch, i, logical)
    return _TEXT[kind](values)


def load_fields(batch: pa.RecordBatch, i: int, target: Narrowing | None = None) -> pa.Array:
    """Column ``i`` as LOAD DATA fields (escaped, ``\\N`` for NULL)."""
    text, logical = column_text(batch, i, target)
    return pc.fill_null(text if logical == "bytes" else escaped(text, _ESCAPES), NULL)


def sql_literals(batch: pa.RecordBatch, i: int, target: Narrowing | None = None) -> pa.Array:
    """Column ``i`` as SQL literals (``NULL``, numbers bare, bytes ``X'..'``, the rest quoted and escaped)."""
    text, logical = column_text(batch, i, target)
    if logical not in _UNQUOTED:
        text = text if logical == "bytes" else escaped(text, _SQL_ESCAPES)
        text = pc.binary_join_element_wise("X'" if logical == "bytes" else "'", text, "'", "")
    return pc.fill_null(text, "NULL")


def sql_rows(batch: pa.RecordBatch, targets: Sequence[Narrowing | None] | None = None) -> list[str]:
    """Each row as ``(lit,lit,...)``; raises if some value cannot be written as a literal (``targets``: each
    column's :class:`~wormhole.plugins.sql.narrowing.Narrowing`, None for a column nothing narrows)."""
    if batch.num_columns == 0:
        raise ValueError("a batch without columns has no INSERT values")
    columns = [sql_literals(batch, i, None if targets is None else targets[i]) for i in range(batch.num_columns)]
    return pc.binary_join_element_wise("(", pc.binary_join_element_wise(*columns, ","), ")", "").to_pylist()


def wire_text(wire: pa.Array, kind: pa.DataType) -> pa.Array:
    """One column's wire text (binary, as the mysql reader cut it) as LOAD DATA fields: escaped, ``\\N``
    for NULL, bytes (a binary column) as hex for UNHEX: the text itself is not parsed nor re-formatted."""
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        text = hex_text(wire)
    else:  # UTF-8 already: the typed cast of the same bytes checked it
        text = escaped(wire.view(pa.string()), _ESCAPES)
    return pc.fill_null(text, NULL)


def arrow_payload(batch: pa.RecordBatch, wire: Sequence[pa.Array | None] | None = None,
                  targets: Sequence[Narrowing | None] | None = None) -> pa.Buffer:
    """The batch as one LOAD DATA LOCAL INFILE buffer (utf-8); a column with ``wire`` text
    (:mod:`.passthrough`) takes its fields from that instead (its target declares the source's type, so
    nothing narrows it). ``targets``: as :func:`sql_rows`."""
    if batch.num_columns == 0:
        raise ValueError("a batch without columns has no LOAD DATA payload")
    texts = [load_fields(batch, i, None if targets is None else targets[i]) if wire is None or wire[i] is None
             else wire_text(wire[i], batch.column(i).type) for i in range(batch.num_columns)]
    return tab_lines(texts)

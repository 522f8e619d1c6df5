"""A batch as PostgreSQL's COPY text format, column-wise with Arrow compute (no Python per value): each field
the text the target type's input function reads back to the same value; an exact column value by value
(:func:`field_text`); a JSON array into an array column as its array literal (:func:`array_literal`)."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.arrow_text import NotExact, date_text, decimal_text, hex_text
from wormhole.plugins.batch import LOGICAL_KEY, column_values, exact_codec, free_scale, rows_from_arrow, trimmed
from wormhole.plugins.schema import Row
from wormhole.plugins.sql.bulk_text import (
    NULL,
    Encoders,
    column_fields,
    escaped,
    tab_lines,
    timestamp_fields,
    value_bytes,
)
from wormhole.plugins.values import json_dumps, plain_decimal

_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"))
"""COPY text escapes, backslash first (the others add backslashes)."""


_JSON = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=str)  # numbers left as written
_SPACE = " \t\n\r"


def array_literal(text: str) -> str:
    """A JSON array's text as PostgreSQL's array literal, which an array column's input reads back to the same
    value: nested arrays as its dimensions, ``null`` as NULL, a string quoted (backslash before ``"`` and
    ``\\``), a number, ``true`` or ``false`` as written (digit for digit), an object as its JSON text quoted
    (a json[] element). Any other text is returned as it is: PostgreSQL reads it or names it malformed."""
    at = len(text) - len(text.lstrip(_SPACE))
    if not text.startswith("[", at):
        return text
    try:
        literal, end = _array(text, at)
    except (ValueError, IndexError):  # not JSON (JSONDecodeError is a ValueError), or cut short
        return text
    return literal if not text[end:].strip(_SPACE) else text


def _skip(text: str, at: int) -> int:
    while text[at] in _SPACE:
        at += 1
    return at


def _array(text: str, at: int) -> tuple[str, int]:
    """The JSON array starting at ``text[at]`` (``[``) as an array literal, and where it ends."""
    parts: list[str] = []
    at = _skip(text, at + 1)
    if text[at] == "]":
        return "{}", at + 1
    while True:
        if text[at] == "[":
            part, at = _array(text, at)
        else:
            value, end = _JSON.raw_decode(text, at)
            raw, at = text[at:end], end
            part = "NULL" if value is None else _quoted(value) if raw[0] == '"' else _quoted(raw) \
                if raw[0] == "{" else raw
        parts.append(part)
        at = _skip(text, at)
        if text[at] == "]":
            return "{" + ",".join(parts) + "}", at + 1
        if text[at] != ",":
            raise ValueError(f"no ',' or ']' at {at}")
        at = _skip(text, at + 1)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def array_literals(values: pa.Array) -> pa.Array:
    """A string column's values for an array column (:func:`array_literal`), nulls kept."""
    return pa.array([None if v is None else array_literal(v) for v in values.to_pylist()], pa.string())


def nul_rows(batch: pa.RecordBatch) -> dict[int, str]:
    """Rows holding NUL (U+0000) in a string or json column, which PostgreSQL text cannot store: row index
    -> the reason, naming the first such column."""
    bad: dict[int, str] = {}
    for i, field in enumerate(batch.schema):
        column = batch.column(i)
        if not pa.types.is_string(field.type) or value_bytes(column).find(b"\x00") < 0:
            continue
        found = pc.fill_null(pc.match_substring(column, "\x00"), False).to_numpy(zero_copy_only=False)
        for row in found.nonzero()[0].tolist():
            bad.setdefault(int(row), f"column {field.name}: a string holding NUL (\\x00), which PostgreSQL "
                                     f"text cannot store")
    return bad


def _bytea(values: pa.Array) -> pa.Array:
    """Binary values as bytea hex input escaped for COPY (``\\\\x`` then two digits a byte), nulls kept."""
    return pc.binary_join_element_wise("\\\\x", hex_text(values), "")


def _decimal(values: pa.Array, field: pa.Field) -> pa.Array:
    if free_scale(field):  # each value at its own scale, not the column's padded 18
        return pa.array([None if v is None else plain_decimal(trimmed(v)) for v in values.to_pylist()], pa.string())
    return decimal_text(values)


def _date(values: pa.Array) -> pa.Array:
    try:
        return date_text(values)
    except NotExact as exc:
        raise ValueError(str(exc)) from None


_COLUMN_FIELDS: Encoders = {
    "string": lambda v: escaped(pc.cast(v, pa.string()), _ESCAPES),  # text and json
    "binary": lambda v: _bytea(pc.cast(v, pa.binary())),
    "float": lambda v: pc.cast(pc.cast(v, pa.float64()), pa.string()),
    "bool": lambda v: pc.if_else(v, "t", "f"),
    "timestamp": lambda v: timestamp_fields(v, " "), "date": _date, "int": lambda v: pc.cast(v, pa.string()),
}


def column_text(values: pa.Array, field: pa.Field) -> pa.Array:
    """One column as COPY text fields (``\\N`` for NULL); ValueError for a value PostgreSQL has no text of."""
    return column_fields(values, {**_COLUMN_FIELDS, "decimal": lambda v: _decimal(v, field)}, "COPY")


def field_text(batch: pa.RecordBatch, i: int, array: bool = False) -> pa.Array:
    """Column ``i`` as COPY text fields: column-wise (:func:`column_text`), or value by value for an exact column
    (:data:`~wormhole.plugins.batch.EXACT_KEY`); ``array``: its target is an array column. ValueError or
    TypeError for a value PostgreSQL has no text of."""
    field = batch.schema.field(i)
    if exact_codec(field) is None:
        return column_text(batch.column(i), field)
    kind = (field.metadata or {}).get(LOGICAL_KEY, b"string").decode()
    fmt = _FIELDS["array" if array and kind in ("string", "json") else kind]
    return pa.array([NULL if v is None else fmt(v) for v in column_values(batch, i)], pa.string())


def copy_payload(batch: pa.RecordBatch, texts: Sequence[pa.Array] | None = None) -> pa.Buffer:
    """The batch as one COPY FROM STDIN text buffer (UTF-8). ``texts``: its columns' fields already made
    (:func:`column_text`), so a piece of a batch is cut from them without encoding again."""
    if batch.num_columns == 0:
        raise ValueError("a batch without columns has no COPY text")
    if texts is None:
        texts = [field_text(batch, i) for i in range(batch.num_columns)]
    return tab_lines(texts)


def _float_field(v: float) -> str:
    return repr(v) if math.isfinite(v) else ("NaN" if v != v else "Infinity" if v > 0 else "-Infinity")


def _escape(text: str) -> str:
    if "\x00" in text:
        raise ValueError("a string holding NUL (\\x00), which PostgreSQL text cannot store")
    for special, escape in _ESCAPES:
        if special in text:
            text = text.replace(special, escape)
    return text


def _datetime_field(v: datetime) -> str:
    if v.tzinfo is not None:  # an aware value is stored as its UTC time (sessions run in UTC)
        v = v.astimezone(UTC).replace(tzinfo=None)
    return v.isoformat(" ")


_FIELDS: dict[str, Callable[[Any], str]] = {
    "int": lambda v: str(operator.index(v)), "float": lambda v: _float_field(float(v)),
    "decimal": lambda v: plain_decimal(Decimal(v)), "string": _escape,
    "bytes": lambda v: "\\\\x" + bytes(v).hex(), "bool": lambda v: "t" if v else "f",
    "date": lambda v: v.isoformat() if isinstance(v, date) and not isinstance(v, datetime) else _not(v, "date"),
    "datetime": lambda v: _datetime_field(v) if isinstance(v, datetime) else _not(v, "datetime"),
    "json": lambda v: _escape(json_dumps(v)),
    "array": lambda v: _escape(array_literal(v if isinstance(v, str) else json_dumps(v))),
}
"""Logical type -> the COPY text of a Python value, for an exact column (values its Arrow type cannot hold: a
decimal of another scale, an int beyond int64 for a numeric target, an aware datetime); ``array``: a string
or json value for an array column."""


def _not(value: Any, kind: str) -> str:
    raise TypeError(f"a {type(value).__name__} ({value!r:.60}) in a {kind} column")


class ArrowPiece:
    """Rows of a batch as Arrow, with each column's COPY text made once."""

    binary = False

    def __init__(self, batch: pa.RecordBatch, texts: Sequence[pa.Array]) -> None:
        self.batch = batch
        self.texts = texts

    @property
    def num_rows(self) -> int:
        return int(self.batch.num_rows)

    def payload(self, start: int, end: int) -> pa.Buffer:
        return copy_payload(self.batch, [t.slice(start, end - start) for t in self.texts]) if end > start else \
            pa.py_buffer(b"")

    def parts(self, start: int, end: int) -> tuple[Any, ...]:
        return (self.payload(start, end),)

    def row(self, index: int) -> Row:
        return rows_from_arrow(self.batch.slice(index, 1))[0]



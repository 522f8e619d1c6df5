"""csv and jsonl text of an Arrow batch, built column-wise by pyarrow compute: byte for byte the text
the row encoders (:class:`~wormhole.plugins.file.csv_format.CsvEncoder`,
:class:`~wormhole.plugins.file.jsonl_format.JsonlEncoder`) write for the same values.

pyarrow's own csv writer quotes every string and formats numbers its own way, so it cannot give that
text; instead each column becomes its field text (Python's ``repr`` of a float, a decimal's plain
notation, ``isoformat`` of dates and datetimes), then one element-wise join per batch makes the lines,
and the joined array's data buffer is the batch's text, with no copy. The few values whose text Arrow
does not format as Python does (a float that Python writes with an exponent, a decimal Arrow writes
with one) are formatted in Python, only those; bytes (base64) and json (its canonical text) columns are
formatted value by value in Python. A batch these encoders cannot render exactly (a non-finite float in
jsonl, an unexpected Arrow type, a date beyond Python's years) gives None: the caller encodes its rows.
"""

from __future__ import annotations

import binascii
import csv
import io
import struct
from collections.abc import Callable
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.batch import arrow_type
from wormhole.plugins.schema import Schema
from wormhole.plugins.values import json_dumps, json_loads, plain_decimal

Text: TypeAlias = pa.Array
"""A column's field text: a string array, null where the value is NULL."""


class NotExact(Exception):
    """The batch holds a value whose text these encoders do not make exactly as the row encoder does."""


def _patched(text: Text, need: Any, values: pa.Array, fmt: Callable[[Any], str]) -> Text:
    """``text`` with the values where ``need`` is true formatted by ``fmt`` in Python (only those)."""
    need = pc.fill_null(need, False)
    if not pc.any(need).as_py():
        return text
    fixed = [fmt(v) for v in pc.filter(values, need).to_pylist()]
    return pc.replace_with_mask(text, need, pa.array(fixed, pa.string()))


def float_text(values: pa.Array) -> Text:
    """``repr`` of each float. Arrow prints the same shortest digits, positionally where 1e-7 <= |x| < 1e10
    (Python: 1e-4 <= |x| < 1e16): inside both ranges (and for zero) its text is Python's, plus ``.0`` for a
    whole number; the rest (few in most data) go through ``repr``. Decided by numeric tests only."""
    text = pc.cast(values, pa.string())
    magnitude = pc.abs(values)
    shared = pc.or_(pc.and_(pc.greater_equal(magnitude, 1e-4), pc.less(magnitude, 1e10)), pc.equal(magnitude, 0))
    whole = pc.and_(shared, pc.equal(pc.trunc(values), values))
    text = _patched(text, whole, text, lambda t: t + ".0")
    return _patched(text, pc.invert(shared), values, repr)


def decimal_text(values: pa.Array) -> Text:
    """Plain notation (:func:`plain_decimal`): Arrow's text but where it writes an exponent (0E-18)."""
    text = pc.cast(values, pa.string())
    return _patched(text, pc.match_substring(text, "E"), values, plain_decimal)


def date_text(values: pa.Array) -> Text:
    text = pc.cast(values, pa.string())
    if pc.any(pc.not_equal(pc.utf8_length(text), 10)).as_py():
        raise NotExact("a date beyond the years 1-9999")
    return text


def datetime_text(values: pa.Array, sep: str) -> Text:
    """``datetime.isoformat(sep)``: no fraction when the microseconds are zero."""
    text = pc.cast(values, pa.string())  # "YYYY-MM-DD HH:MM:SS.ffffff"
    if pc.any(pc.not_equal(pc.utf8_length(text), 26)).as_py():
        raise NotExact("a datetime beyond the years 1-9999")
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


def expected_types(schema: Schema) -> list[pa.DataType]:
    return [arrow_type(c) for c in schema.columns]


def lines_buffer(pieces: list[Any], rows: int) -> pa.Buffer:
    """The rows' lines (``pieces`` joined element-wise, scalars and arrays) as one buffer, no copy."""
    lines = pc.binary_join_element_wise(*pieces, "")
    if not isinstance(lines, pa.Array):  # every piece a scalar: a batch without columns
        lines = pa.array([lines.as_py()] * rows, pa.string())
    _, offsets, data = lines.buffers()
    if lines.offset or data is None:
        return pa.py_buffer(b"".join(s.encode("utf-8") for s in lines.to_pylist()))
    start, end = struct.unpack_from("<i", offsets, 0)[0], struct.unpack_from("<i", offsets, 4 * len(lines))[0]
    return data.slice(start, end - start)


def holds(values: pa.Array, chars: bytes) -> bool:
    """Whether any value of a string array holds one of the (ASCII) ``chars``: one copy of its data
    buffer and a ``memchr`` per character, far cheaper than a regular expression per value."""
    _, offsets, data = values.buffers()
    if data is None or not len(values):
        return False
    start = struct.unpack_from("<i", offsets, values.offset * 4)[0]
    end = struct.unpack_from("<i", offsets, (values.offset + len(values)) * 4)[0]
    blob = memoryview(data)[start:end].tobytes()
    return any(c in blob for c in chars)


# ---------------------------------------------------------------------------------------------
# csv


def _quoting_chars(delimiter: str) -> str:
    """The characters that make the csv module quote a field (3.11 quotes no lone \\r; later ones may)."""
    found = ""
    for c in dict.fromkeys((delimiter, '"', "\r", "\n")):
        buf = io.StringIO()
        csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerow([f"a{c}b"])
        if buf.getvalue().startswith('"'):
            found += c
    return found


def _csv_field(text: str, delimiter: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerow([text, ""])
    return buf.getvalue()[:-2]  # less the "," of the empty second field and the line end


_CHARSET = {
    "int": set("-0123456789"), "float": set("-+.0123456789einfa"), "decimal": set("-.0123456789"),
    "bool": set("truefals"), "date": set("-0123456789"), "datetime": set("-0123456789 :."),
    "bytes": set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="),
}
"""What a type's field text can hold: a column whose text cannot hold a quoting character needs no check."""


class CsvArrowEncoder:
    """The csv text of Arrow batches of ``schema``, as the csv module writes their rows."""

    def __init__(self, schema: Schema, delimiter: str, null: str) -> None:
        self._schema = schema
        self._types = expected_types(schema)
        self._delimiter = delimiter
        self._quoting = _quoting_chars(delimiter)
        self._pattern = "[" + "".join("\\" + c if c in "\\]^-[" else c for c in self._quoting) + "]"
        self._scan = self._quoting.encode("utf-8")  # a non-ASCII delimiter: its bytes, each a candidate
        self._null = _csv_field(null, delimiter) if null else ""

    def _column(self, kind: str, values: pa.Array) -> Text:
        if kind == "float":
            return float_text(values)
        if kind == "decimal":
            return decimal_text(values)
        if kind == "bool":
            return bool_text(values)
        if kind == "bytes":
            return base64_text(values)
        if kind == "json":
            return json_values(values, json_dumps)
        if kind == "datetime":
            return datetime_text(values, " ")
        if kind == "date":
            return date_text(values)
        return values if kind == "string" else pc.cast(values, pa.string())

    def _quoted(self, kind: str, text: Text) -> Text:
        if kind in _CHARSET and not set(self._quoting) & _CHARSET[kind]:
            return text
        if not holds(text, self._scan):
            return text
        need = pc.match_substring_regex(text, self._pattern)
        if not pc.any(need).as_py():
            return text
        quoted = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
        return pc.if_else(need, quoted, text)

    def encode(self, batch: pa.RecordBatch) -> pa.Buffer:
        """The batch's lines; raises :class:`NotExact` for a batch these columns cannot render exactly."""
        if batch.schema.types != self._types:
            raise NotExact("the batch's Arrow types are not the schema's")
        pieces: list[Any] = []
        for i, column in enumerate(self._schema.columns):
            text = self._quoted(column.type, self._column(column.type, batch.column(i)))
            pieces += [pc.fill_null(text, self._null), self._delimiter]
        pieces[-1] = "\n"
        if len(pieces) == 2:  # one column: the csv module writes an empty line as ""
            pieces[0] = pc.if_else(pc.equal(pieces[0], ""), '""', pieces[0])
        return lines_buffer(pieces, batch.num_rows)


# ---------------------------------------------------------------------------------------------
# jsonl


_JSON_ESCAPED = bytes(range(0x20)) + b'"\\'


def _quoted_string(values: Text, dumps: Callable[[Any], str]) -> Text:
    """JSON strings: quoted as they are unless they hold a character JSON escapes (then ``dumps``)."""
    text = pc.binary_join_element_wise('"', values, '"', "")
    if not holds(values, _JSON_ESCAPED):
        return text
    return _patched(text, pc.match_substring_regex(values, r'[\x00-\x1f"\\]'), values, dumps)


class JsonlArrowEncoder:
    """The JSON lines of Arrow batches of ``schema``, as the row encoder writes them."""

    def __init__(self, schema: Schema, encode: Callable[[Any], str]) -> None:
        self._schema = schema
        self._types = expected_types(schema)
        self._encode = encode
        self._keys = [("{" if i == 0 else ",") + encode(c.name) + ":" for i, c in enumerate(schema.columns)]

    def _column(self, kind: str, values: pa.Array) -> Text:
        if kind in ("int", "bool"):
            return bool_text(values) if kind == "bool" else pc.cast(values, pa.string())
        if kind == "float":
            if not pc.all(pc.is_finite(values)).as_py():
                raise NotExact("JSON has no NaN or infinity: the row encoder refuses the row")
            return float_text(values)
        if kind == "json":
            return json_values(values, self._encode)
        if kind == "string":
            return _quoted_string(values, self._encode)
        if kind == "decimal":
            text = decimal_text(values)
        elif kind == "bytes":
            text = base64_text(values)
        elif kind == "date":
            text = date_text(values)
        else:
            text = datetime_text(values, "T")
        return pc.binary_join_element_wise('"', text, '"', "")

    def encode(self, batch: pa.RecordBatch) -> pa.Buffer:
        """The batch's lines; raises :class:`NotExact` for a batch these columns cannot render exactly."""
        if batch.schema.types != self._types:
            raise NotExact("the batch's Arrow types are not the schema's")
        pieces: list[Any] = []
        for i, column in enumerate(self._schema.columns):
            pieces += [self._keys[i], pc.fill_null(self._column(column.type, batch.column(i)), "null")]
        pieces.append("}\n" if pieces else "{}\n")
        return lines_buffer(pieces, batch.num_rows)

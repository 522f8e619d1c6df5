"""csv and jsonl text of an Arrow batch, built column-wise by pyarrow compute: byte for byte the text
the row encoders (:class:`~wormhole.plugins.file.csv_format.CsvEncoder`,
:class:`~wormhole.plugins.file.jsonl_format.JsonlEncoder`) write for the same values.

Each column becomes its field text (:mod:`wormhole.plugins.arrow_text`). A csv batch no field of which
the csv module would quote (most data) is then joined by pyarrow's csv writer, unquoted (its "needed"
quoting quotes every string, so only its "none" style writes the csv module's text); another batch's fields
are quoted where the csv module would, and one element-wise join per batch makes the lines, the joined
array's data buffer being the batch's text, with no copy. A batch these encoders cannot render exactly (a
non-finite float in jsonl, an unexpected Arrow type, a date beyond Python's years) raises
:class:`~wormhole.plugins.arrow_text.NotExact`: the caller encodes its rows.
"""

from __future__ import annotations

import csv
import io
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from wormhole.plugins.arrow_text import (
    NotExact,
    Text,
    base64_text,
    bool_text,
    date_text,
    datetime_text,
    decimal_text,
    float_text,
    in_python_range,
    json_values,
    patched,
)
from wormhole.plugins.batch import arrow_type
from wormhole.plugins.schema import Schema
from wormhole.plugins.values import json_dumps


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


_RAW = ("int", "string", "date")
"""Kinds pyarrow's csv writer is given as they are: its cast to text is the one :meth:`CsvArrowEncoder._column`
makes of them (a date after its range check)."""

_STRUCTURAL = '"\r\n'
"""What pyarrow's csv writer refuses in a field unquoted (with the delimiter): a superset of what makes the
csv module quote (3.11 writes a lone \\r as it is)."""


class CsvArrowEncoder:
    """The csv text of Arrow batches of ``schema``, as the csv module writes their rows.

    A batch no field of which the csv module would quote (the common case) is written by pyarrow's csv
    writer unquoted (``quoting_style="none"``: its C++ joins the fields, and refuses a field holding a
    quote, the delimiter or a line end), given each column as its field text, or as it is where its cast
    is that text; another batch, or a delimiter or NULL text that writer cannot take, is joined by compute
    kernels, each field quoted where the csv module would.
    """

    def __init__(self, schema: Schema, delimiter: str, null: str) -> None:
        self._schema = schema
        self._kinds = [c.type for c in schema.columns]
        self._types = expected_types(schema)
        self._delimiter = delimiter
        self._quoting = _quoting_chars(delimiter)
        self._pattern = "[" + "".join("\\" + c if c in "\\]^-[" else c for c in self._quoting) + "]"
        self._scan = self._quoting.encode("utf-8")  # a non-ASCII delimiter: its bytes, each a candidate
        self._null = _csv_field(null, delimiter) if null else ""
        self._writer = self._writer_options()
        self._structural = (_STRUCTURAL + delimiter).encode("utf-8")
        self._names = [f"c{i}" for i in range(len(schema.columns))]
        # The columns whose text may hold what the writer refuses (the others' text cannot, see _writer_options)
        self._scanned = [i for i, kind in enumerate(self._kinds) if kind not in _CHARSET]

    def _writer_options(self) -> pa_csv.WriteOptions | None:
        """pyarrow's writer, where it can write what the csv module does: an ASCII delimiter no number,
        date or base64 text holds (those are not checked per batch), a NULL text the csv module writes
        as it is (pyarrow refuses quotes in it), more than one column (the csv module writes a line of one
        empty field as ``""``)."""
        texts = set().union(*_CHARSET.values())
        if (not self._delimiter.isascii() or self._delimiter in texts or '"' in self._null
                or len(self._kinds) < 2):
            return None
        # batch_size: a batch in one piece (pyarrow's 1,024 rows would cut an exchange batch in four)
        return pa_csv.WriteOptions(include_header=False, delimiter=self._delimiter, quoting_style="none",
                                   null_string=self._null, batch_size=1 << 16)

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
        if self._writer is None:
            return self._joined([self._column(k, batch.column(i)) for i, k in enumerate(self._kinds)], batch.num_rows)
        columns = [self._field(kind, batch.column(i)) for i, kind in enumerate(self._kinds)]
        if any(holds(columns[i], self._structural) for i in self._scanned):
            return self._joined([pc.cast(c, pa.string()) if k in ("int", "date") else c
                                 for k, c in zip(self._kinds, columns, strict=True)], batch.num_rows)
        sink = pa.BufferOutputStream()
        pa_csv.write_csv(pa.RecordBatch.from_arrays(columns, names=self._names), sink, self._writer)
        return sink.getvalue()

    def _field(self, kind: str, values: pa.Array) -> pa.Array:
        """A column as pyarrow's writer is given it: its field text, or its values where the writer's own
        cast makes that text."""
        if kind == "date" and not in_python_range(values, "date"):
            raise NotExact("a date beyond the years 1-9999")
        return values if kind in _RAW else self._column(kind, values)

    def _joined(self, texts: list[Text], rows: int) -> pa.Buffer:
        """The lines of the columns' field texts joined by compute kernels, each field quoted as the csv
        module would."""
        pieces: list[Any] = []
        for kind, text in zip(self._kinds, texts):
            text = self._quoted(kind, text)
            pieces += [pc.fill_null(text, self._null) if text.null_count else text, self._delimiter]
        pieces[-1] = "\n"
        if len(pieces) == 2:  # one column: the csv module writes an empty line as ""
            pieces[0] = pc.if_else(pc.equal(pieces[0], ""), '""', pieces[0])
        return lines_buffer(pieces, rows)


# ---------------------------------------------------------------------------------------------
# jsonl


_JSON_ESCAPED = bytes(range(0x20)) + b'"\\'


def _quoted_string(values: Text, dumps: Callable[[Any], str]) -> Text:
    """JSON strings: quoted as they are unless they hold a character JSON escapes (then ``dumps``)."""
    text = pc.binary_join_element_wise('"', values, '"', "")
    if not holds(values, _JSON_ESCAPED):
        return text
    return patched(text, pc.match_substring_regex(values, r'[\x00-\x1f"\\]'), values, dumps)


class JsonlArrowEncoder:
    """The JSON lines of Arrow batches of ``schema``, as the row encoder writes them."""

    def __init__(self, schema: Schema, encode: Callable[[Any], str], json_encode: Callable[[Any], str]) -> None:
        self._schema = schema
        self._types = expected_types(schema)
        self._encode = encode
        self._json_encode = json_encode
        self._keys = [("{" if i == 0 else ",") + encode(c.name) + ":" for i, c in enumerate(schema.columns)]

    def _column(self, kind: str, values: pa.Array) -> Text:
        if kind in ("int", "bool"):
            return bool_text(values) if kind == "bool" else pc.cast(values, pa.string())
        if kind == "float":
            if not pc.all(pc.is_finite(values)).as_py():
                raise NotExact("JSON has no NaN or infinity: the row encoder refuses the row")
            return float_text(values)
        if kind == "json":
            return json_values(values, self._json_encode)
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
            text = self._column(column.type, batch.column(i))
            pieces += [self._keys[i], pc.fill_null(text, "null") if text.null_count else text]
        pieces.append("}\n" if pieces else "{}\n")
        return lines_buffer(pieces, batch.num_rows)

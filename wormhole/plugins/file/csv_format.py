"""csv: field text to logical types when reading, logical types to field text when writing.

Reading takes the header as the column names (all strings) unless ``columns`` names and types
them; ``null`` is the field text that means NULL. Writing formats only bool, bytes and json values
(and NULLs when ``null`` is set): the csv module already writes ``str()`` of the rest, which is the
wanted text (ints, repr of floats, Decimal, ``date.isoformat``, ``datetime.isoformat(" ")``).
"""

from __future__ import annotations

import base64
import csv
import io
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from itertools import islice
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.errors import ReadError
from wormhole.plugins.arrow_parse import TEXT_CASTS, Unfit
from wormhole.plugins.base import Column, Row, Schema
from wormhole.plugins.file.arrow_text import CsvArrowEncoder
from wormhole.plugins.file.convert import (
    ArrowFn,
    BatchConverter,
    ColumnFn,
    Converted,
    parse_bool,
    parse_bytes,
    parse_decimal,
)
from wormhole.plugins.file.options import FileReaderOptions, FileWriterOptions
from wormhole.plugins.values import json_dumps, json_loads, plain_decimals

PLUGIN_NAME = "file"

_TEXT_PARSERS: dict[str, Callable[[str], Any] | None] = {
    "int": int,
    "float": float,
    "decimal": parse_decimal,
    "string": None,
    "bytes": parse_bytes,
    "bool": parse_bool,
    "date": date.fromisoformat,
    "datetime": datetime.fromisoformat,
    "json": json_loads,
}


def column_parser(ltype: str, null: str) -> ColumnFn:
    """Converts a column of field texts to ``ltype`` values, ``null`` to None; an empty field too
    where '' can be no value of ``ltype`` (a file written with ``null: ""``, or by another tool)."""
    parse = _TEXT_PARSERS[ltype]
    if ltype not in ("string", "bytes") and null != "":
        def convert_empty(col: Sequence[Any]) -> Sequence[Any]:
            if "" in col or null in col:
                return [None if v == null or v == "" else parse(v) for v in col]  # type: ignore[misc]
            return list(map(parse, col))  # type: ignore[arg-type]

        return convert_empty

    def convert(col: Sequence[Any]) -> Sequence[Any]:
        # ``null in col`` is one C-level scan; the comprehension runs only when NULLs are present.
        if null in col:
            if parse is None:
                return [None if v == null else v for v in col]
            return [None if v == null else parse(v) for v in col]
        return col if parse is None else list(map(parse, col))

    return convert


def arrow_column(column: Column, null: str) -> ArrowFn:
    """A column of field texts as its Arrow array, with the NULLs and values :func:`column_parser` gives;
    raises Unfit for a column to convert by its Python parser (bytes, json, a text the casts do not read as
    Python does)."""
    empty_is_null = column.type not in ("string", "bytes") and null != ""
    cast = TEXT_CASTS.get(column.type)
    if cast is None and column.type != "string":
        def python(col: Sequence[Any]) -> pa.Array:
            raise Unfit(f"a {column.type} column is parsed in Python")

        return python

    def convert(col: Sequence[Any]) -> pa.Array:
        text = pa.array(col, pa.string())
        is_null = pc.equal(text, null)
        if empty_is_null:
            is_null = pc.or_(is_null, pc.equal(text, ""))
        if pc.any(is_null).as_py():
            text = pc.if_else(is_null, pa.scalar(None, pa.string()), text)
        return text if cast is None else cast(text, column)

    return convert


def header_schema(path: str, delimiter: str) -> Schema | None:
    """The columns the header of ``path`` names, all strings; None for an empty file."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader(f, delimiter=delimiter), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ReadError(f"cannot read the header of {path}: {exc}", plugin=PLUGIN_NAME) from exc
    if not header:
        return None
    if len(set(header)) != len(header) or "" in header:
        raise ReadError(f"{path}:1: header has empty or duplicate column names: {header}; set columns",
                        plugin=PLUGIN_NAME)
    return Schema(tuple(Column(name, "string") for name in header))


def line_numbers(raw: list[list[str]], start: int) -> Callable[[int], int]:
    """Line number of each row of a csv batch, computed only if a row is rejected."""
    cache: list[int] = []

    def line_of(index: int) -> int:
        if not cache:
            line = start + 1
            for r in raw:
                cache.append(line)
                # A quoted field may span lines; count them so later rows keep their real line.
                line += 1 + sum(v.count("\n") for v in r)
        return cache[index]

    return line_of


class CsvReader:
    """Reads csv files into typed batches of ``batch_rows`` rows (a :class:`FormatReader`)."""

    def __init__(self, options: FileReaderOptions, schema: Schema, batch_rows: int) -> None:
        self._delimiter = options.delimiter
        self._header = options.header
        self._convert = BatchConverter(schema, [column_parser(c.type, options.null) for c in schema.columns],
                                       [arrow_column(c, options.null) for c in schema.columns]).convert
        self._batch_rows = batch_rows

    def batches(self, path: str) -> Iterator[Converted]:
        try:
            with open(path, encoding="utf-8-sig", newline="") as f:
                reader = csv.reader(f, delimiter=self._delimiter)
                if self._header:
                    next(reader, None)
                while True:
                    start = reader.line_num
                    raw = list(islice(reader, self._batch_rows))
                    if not raw:
                        return
                    yield self._convert(raw, path, line_numbers(raw, start))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc


# ---------------------------------------------------------------------------------------------
# Writing


def _text_bool(v: Any) -> Any:
    return v if v is None else ("true" if v else "false")


def _text_bytes(v: Any) -> Any:
    return v if v is None else base64.b64encode(v).decode("ascii")


def _text_json(v: Any) -> Any:
    return v if v is None else json_dumps(v)


_FORMAT: dict[str, Callable[[Any], Any]] = {"bool": _text_bool, "bytes": _text_bytes, "json": _text_json}
"""Only these types need formatting (see the module docstring)."""


def column_formatter(ltype: str, null: str) -> ColumnFn | None:
    """Formats a column of ``ltype`` values as the csv module should see them; None: as they are."""
    if ltype == "decimal":  # str() would write 0E-18: plain notation, column-wise
        if null:
            return lambda col: [null if v is None else v for v in plain_decimals(col)]
        return plain_decimals
    fmt = _FORMAT.get(ltype)
    if fmt is not None:
        if null:
            return lambda col: [null if v is None else fmt(v) for v in col]
        return lambda col: list(map(fmt, col))
    if null:
        # ``None in col`` is one C-level scan; most columns hold no NULL and are left as they are.
        return lambda col: [null if v is None else v for v in col] if None in col else col
    return None


class CsvEncoder:
    """Serialises batches as csv text (UTF-8, ``\\n`` line ends)."""

    def __init__(self, options: FileWriterOptions, schema: Schema) -> None:
        self._delimiter = options.delimiter
        self._names = schema.names if options.header else None
        # Fast path: with no bool/bytes/json/decimal column, batches go to the csv module as they are
        # (it writes None as an empty field), only rows holding a NULL rebuilt with the null text.
        typed = any(column_formatter(c.type, "") is not None for c in schema.columns)
        fns = [(i, column_formatter(c.type, options.null)) for i, c in enumerate(schema.columns)] if typed else []
        self._fns = [(i, fn) for i, fn in fns if fn is not None]
        self._null = options.null
        self._arrow = CsvArrowEncoder(schema, options.delimiter, options.null)

    def encode_arrow(self, batch: pa.RecordBatch) -> pa.Buffer:
        """The text of an Arrow batch, the same as :meth:`encode` of its rows (raises NotExact where not)."""
        return self._arrow.encode(batch)

    def text(self, rows: Sequence[Sequence[Any]]) -> bytes:
        buf = io.StringIO()
        csv.writer(buf, delimiter=self._delimiter, lineterminator="\n").writerows(rows)
        return buf.getvalue().encode("utf-8")

    def header(self) -> bytes:
        """The header line every part starts with (``header``), else nothing."""
        return b"" if self._names is None else self.text([self._names])

    def encode(self, rows: Sequence[Row]) -> bytes:
        if not self._fns:
            null = self._null
            if null:  # ``None in r`` is a C-level scan: a row without NULL is passed as it is
                rows = [tuple([null if v is None else v for v in r]) if None in r else r for r in rows]
            return self.text(rows)
        cols: list[Sequence[Any]] = list(zip(*rows, strict=True))
        for i, fn in self._fns:
            cols[i] = fn(cols[i])
        return self.text(list(zip(*cols, strict=True)))

"""csv: field text to logical types when reading, logical types to field text when writing.

Reading takes the header as the column names (all strings) unless ``columns`` names and types
them; ``null`` is the field text that means NULL. Writing formats only bool, bytes and json values
(and NULLs when ``null`` is set): the csv module already writes ``str()`` of the rest, which is the
wanted text (ints, repr of floats, Decimal, ``date.isoformat``, ``datetime.isoformat(" ")``).
"""

from __future__ import annotations

import base64
import codecs
import csv
import io
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from itertools import islice
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from wormhole.errors import ReadError
from wormhole.plugins.arrow_parse import TEXT_CASTS, Unfit
from wormhole.plugins.base import Batch, Column, Row, Schema
from wormhole.plugins.file.arrow_text import CsvArrowEncoder
from wormhole.plugins.file.convert import (
    CONVERSION_ERRORS,
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

    def convert(col: Sequence[Any] | pa.Array) -> pa.Array:
        text = col if isinstance(col, pa.Array) else pa.array(col, pa.string())
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
    """Reads csv files into typed batches of ``batch_rows`` rows (a :class:`FormatReader`).

    A file is read ``batch_rows`` lines at a time; lines that hold no quote, no lone CR, no NUL and no
    field beyond the csv module's limit are parsed by pyarrow's csv reader into string columns (the same
    fields the csv module splits them into) and cast (:func:`arrow_column`). A chunk with a row of the
    wrong width or a bad value is read again by the csv module, which rejects exactly those rows with
    their lines; from the first chunk holding a quote (a field may span lines) the csv module reads the
    rest of the file.
    """

    def __init__(self, options: FileReaderOptions, schema: Schema, batch_rows: int) -> None:
        self._delimiter = options.delimiter
        self._header = options.header
        self._converter = BatchConverter(schema, [column_parser(c.type, options.null) for c in schema.columns],
                                         [arrow_column(c, options.null) for c in schema.columns])
        self._convert = self._converter.convert
        self._batch_rows = batch_rows
        self._names = list(schema.names)
        self._arrow_parse = len(options.delimiter.encode("utf-8")) == 1 and options.delimiter not in '"\r\n'
        self._quoting = _quoting(options.delimiter)

    def batches(self, path: str) -> Iterator[Converted]:
        try:
            with open(path, "rb") as f:
                if self._arrow_parse:
                    yield from self._chunks(f, path)
                else:
                    yield from self._python(f, 0, 0, path, self._header)
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc

    def _python(self, f: BinaryIO, pos: int, line: int, path: str, header: bool) -> Iterator[Converted]:
        """The file from byte ``pos`` (line ``line``) read by the csv module, as it always was."""
        f.seek(pos)
        text = io.TextIOWrapper(f, encoding="utf-8-sig" if pos == 0 else "utf-8", newline="")
        try:
            reader = csv.reader(text, delimiter=self._delimiter)
            if header:
                next(reader, None)
            while True:
                start = reader.line_num
                raw = list(islice(reader, self._batch_rows))
                if not raw:
                    return
                yield self._convert(raw, path, line_numbers(raw, line + start))
        finally:
            text.detach()  # the file is the caller's to close

    def _chunks(self, f: BinaryIO, path: str) -> Iterator[Converted]:
        if f.read(3) != codecs.BOM_UTF8:
            f.seek(0)
        line = 0
        if self._header:
            first = f.readline()
            if not _plain(first, [first], self._quoting):
                yield from self._python(f, 0, 0, path, True)
                return
            line = 1
        while True:
            pos = f.tell()
            lines = list(islice(f, self._batch_rows))
            if not lines:
                return
            chunk = b"".join(lines)
            if not _plain(chunk, lines, self._quoting):
                yield from self._python(f, pos, line, path, False)
                return
            batch = self._parse(chunk)
            if batch is None:  # a row of the wrong width, a bad value: the csv module finds them
                raw = list(csv.reader(io.StringIO(chunk.decode("utf-8"), newline=""), delimiter=self._delimiter))
                yield self._convert(raw, path, line_numbers(raw, line))
            else:
                yield batch, []
            line += len(lines)

    def _parse(self, chunk: bytes) -> Batch | None:
        """The chunk's rows as Arrow columns; None when a row has another width or a value does not convert."""
        invalid: list[int] = []

        def on_invalid(row: Any) -> str:
            invalid.append(row.number)
            return "skip"

        try:
            table = pa_csv.read_csv(
                pa.BufferReader(chunk),
                read_options=pa_csv.ReadOptions(column_names=self._names, use_threads=False, block_size=len(chunk) + 1),
                parse_options=pa_csv.ParseOptions(delimiter=self._delimiter, quote_char='"', newlines_in_values=False,
                                                  ignore_empty_lines=True, invalid_row_handler=on_invalid),
                convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(self._names, pa.string()),
                                                      strings_can_be_null=False, null_values=[], check_utf8=True))
            if invalid:
                return None
            return self._converter.arrow_of([table.column(i).combine_chunks() for i in range(len(self._names))])
        except (pa.ArrowException, *CONVERSION_ERRORS):
            return None


def _quoting(delimiter: str) -> str:
    """A line of fields each unquoted (no quote, delimiter or line end) or wholly quoted (``""`` inside):
    the fields both csv parsers read alike, none spanning lines."""
    d = f"\\x{{{ord(delimiter):x}}}"  # RE2's escape of any character (re.escape's of a tab is no RE2 escape)
    field = f'([^"{d}\\r\\n]*|"([^"]|"")*")'
    return f"^{field}({d}{field})*\\r?\\n?$"


def _plain(chunk: bytes, lines: list[bytes], quoting: str) -> bool:
    """Lines pyarrow's csv reader splits into the fields the csv module does: quotes only around whole
    fields on one line, CR only before LF, no NUL (3.11's csv module reads it, pyarrow too, but not
    alike), no field over the csv module's limit (it fails the file)."""
    if b"\x00" in chunk or chunk.count(b"\r") != chunk.count(b"\r\n") or max(map(len, lines)) > csv.field_size_limit():
        return False
    # One regex over the lines, only for a chunk that quotes at all (most files quote few fields).
    return b'"' not in chunk or _all_match(pa.array(lines, pa.binary()), quoting)


def _all_match(lines: pa.Array, pattern: str) -> bool:
    try:
        return bool(pc.all(pc.match_substring_regex(lines, pattern)).as_py())
    except pa.ArrowException:  # not UTF-8: the csv module reads it and fails the file
        return False


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

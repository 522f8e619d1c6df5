"""The file store's source role: find the files, infer the schema, parse csv/jsonl into typed batches.

Batches are converted column by column (``zip(*rows)``, one comprehension per column that needs
work), so the per-row Python cost stays small. Only when a batch fails to convert is it walked row
by row, to send exactly the bad rows to the dirty sink with ``<file>:<line>`` and skip them.

parquet files are read through pyarrow (imported only for that format) in record batches of
``batch_rows``; the schema is the first file's, its Arrow types mapped to logical types, and every
other file must have the same columns. A column converts with one ``to_pylist``; a value Python
cannot hold (a timestamp beyond year 9999) sends its row to the dirty sink with ``<file>: row <n>``.
"""

from __future__ import annotations

import base64
import csv
import glob
import json
import operator
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from functools import partial
from itertools import islice
from types import ModuleType
from typing import Any

from wormhole.errors import ReadError, SplitError, StorageError
from wormhole.plugins.base import Column, ReadContext, Rejected, Row, Schema, SourceInfo, Split
from wormhole.plugins.file.options import EXTENSIONS, PYARROW_MISSING, FileReaderOptions, import_pyarrow

PLUGIN_NAME = "file"

CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, RecursionError)
"""What a bad value raises while converting (binascii.Error and JSONDecodeError are ValueErrors)."""

ColumnFn = Callable[[Sequence[Any]], Sequence[Any]]
"""Converts one column of a batch (a sequence of raw values) to typed values."""


# ---------------------------------------------------------------------------------------------
# Finding files


def resolve_files(path: str, fmt: str, error: type[StorageError]) -> list[str]:
    """Absolute paths of the regular files ``path`` names, sorted; ``error`` when there are none."""
    if os.path.isdir(path):
        ext = "." + EXTENSIONS[fmt]
        try:
            with os.scandir(path) as entries:
                found = [e.path for e in entries
                         if e.name.endswith(ext) and not e.name.startswith(("_", ".")) and e.is_file()]
        except OSError as exc:
            raise error(f"cannot list directory {path}: {exc}", plugin=PLUGIN_NAME) from exc
    elif os.path.isfile(path):
        found = [path]
    else:
        # Hadoop-style markers (_SUCCESS) and hidden files are never data, even when a glob matches.
        found = [p for p in glob.glob(path, recursive=True)
                 if not os.path.basename(p).startswith(("_", ".")) and os.path.isfile(p)]
    if not found:
        raise error(f"no {fmt} file matches {path}", plugin=PLUGIN_NAME)
    return sorted(os.path.abspath(p) for p in found)


# ---------------------------------------------------------------------------------------------
# Value parsing: csv text and JSON values to logical types


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _parse_bool(text: str) -> bool:
    try:
        return _BOOL_TEXT[text.strip().lower()]
    except KeyError:
        raise ValueError(f"not a boolean (true/false/1/0): {text!r}") from None


def _parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a decimal: {text!r}") from None


def _parse_bytes(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


_TEXT_PARSERS: dict[str, Callable[[str], Any] | None] = {
    "int": int,
    "float": float,
    "decimal": _parse_decimal,
    "string": None,
    "bytes": _parse_bytes,
    "bool": _parse_bool,
    "date": date.fromisoformat,
    "datetime": datetime.fromisoformat,
    "json": json.loads,
}


def _csv_column_fn(ltype: str, null: str) -> ColumnFn:
    parse = _TEXT_PARSERS[ltype]

    def convert(col: Sequence[Any]) -> Sequence[Any]:
        # ``null in col`` is one C-level scan; the comprehension runs only when NULLs are present.
        if null in col:
            if parse is None:
                return [None if v == null else v for v in col]
            return [None if v == null else parse(v) for v in col]
        return col if parse is None else list(map(parse, col))

    return convert


def _json_kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def _json_int(v: Any) -> int:
    if type(v) is float and v.is_integer():
        return int(v)
    if type(v) is str:
        return int(v)
    raise TypeError(f"expected an integer, got {_json_kind(v)}")


def _json_float(v: Any) -> float:
    if type(v) in (int, str):
        return float(v)
    raise TypeError(f"expected a number, got {_json_kind(v)}")


def _json_decimal(v: Any) -> Decimal:
    if type(v) is str:
        return _parse_decimal(v)
    if type(v) in (int, float):
        return Decimal(repr(v))
    raise TypeError(f"expected a decimal, got {_json_kind(v)}")


def _json_string(v: Any) -> str:
    # Lenient: a scalar or nested value in a string column keeps its JSON text.
    return json.dumps(v, ensure_ascii=False)


def _json_bool(v: Any) -> bool:
    if type(v) is str:
        return _parse_bool(v)
    if type(v) is int and v in (0, 1):
        return bool(v)
    raise TypeError(f"expected a boolean, got {_json_kind(v)}")


def _json_from_text(parse: Callable[[str], Any], what: str) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if type(v) is str:
            return parse(v)
        raise TypeError(f"expected {what} string, got {_json_kind(v)}")

    return convert


_NONE = type(None)
_JSON_PASS: dict[str, frozenset[type] | None] = {
    "int": frozenset((int, _NONE)),
    "float": frozenset((float, _NONE)),
    "decimal": frozenset((_NONE,)),
    "string": frozenset((str, _NONE)),
    "bytes": frozenset((_NONE,)),
    "bool": frozenset((bool, _NONE)),
    "date": frozenset((_NONE,)),
    "datetime": frozenset((_NONE,)),
    "json": None,
}
"""Python types a JSON value may already have for each logical type (None: anything goes)."""

_JSON_COERCE: dict[str, Callable[[Any], Any]] = {
    "int": _json_int,
    "float": _json_float,
    "decimal": _json_decimal,
    "string": _json_string,
    "bytes": _json_from_text(_parse_bytes, "a base64"),
    "bool": _json_bool,
    "date": _json_from_text(date.fromisoformat, "an ISO date"),
    "datetime": _json_from_text(datetime.fromisoformat, "an ISO datetime"),
}


def _jsonl_column_fn(ltype: str) -> ColumnFn | None:
    passing = _JSON_PASS[ltype]
    if passing is None:
        return None
    coerce = _JSON_COERCE[ltype]

    def convert(col: Sequence[Any]) -> Sequence[Any]:
        if set(map(type, col)) <= passing:
            return col
        return [v if type(v) in passing else coerce(v) for v in col]

    return convert


class BatchConverter:
    """Turns raw rows (csv field lists or JSON value tuples) into typed rows and rejections."""

    def __init__(self, schema: Schema, column_fns: Sequence[ColumnFn | None]) -> None:
        self.names = schema.names
        self.width = len(schema)
        self.fns = [(i, fn) for i, fn in enumerate(column_fns) if fn is not None]

    def convert(self, raw: list[Sequence[Any]], path: str,
                line_of: Callable[[int], int]) -> tuple[list[Row], list[Rejected]]:
        if set(map(len, raw)) == {self.width}:
            try:
                return self._columnar(raw), []
            except CONVERSION_ERRORS:
                pass  # some value is bad: find it row by row below
        return self._row_by_row(raw, path, line_of)

    def _columnar(self, raw: list[Sequence[Any]]) -> list[Row]:
        if not self.fns:
            return [tuple(r) for r in raw]
        cols: list[Sequence[Any]] = list(zip(*raw, strict=True))
        for i, fn in self.fns:
            cols[i] = fn(cols[i])
        return list(zip(*cols, strict=True))

    def _row_by_row(self, raw: list[Sequence[Any]], path: str,
                    line_of: Callable[[int], int]) -> tuple[list[Row], list[Rejected]]:
        rows: list[Row] = []
        rejected: list[Rejected] = []
        for index, r in enumerate(raw):
            if len(r) != self.width:
                if r:  # a blank csv line is no row at all
                    rejected.append(Rejected(tuple(r), f"{path}:{line_of(index)}: expected {self.width} "
                                                       f"fields, got {len(r)}"))
                continue
            out = list(r)
            for i, fn in self.fns:
                try:
                    out[i] = fn((r[i],))[0]
                except CONVERSION_ERRORS as exc:
                    rejected.append(Rejected(tuple(r), f"{path}:{line_of(index)}: column {self.names[i]}: "
                                                       f"{exc}"))
                    break
            else:
                rows.append(tuple(out))
        return rows, rejected


# ---------------------------------------------------------------------------------------------
# parquet: Arrow types to logical types, Arrow arrays to Python values


def _pyarrow() -> tuple[ModuleType, ModuleType]:
    try:
        return import_pyarrow()
    except ImportError as exc:
        raise ReadError(PYARROW_MISSING, plugin=PLUGIN_NAME) from exc


def arrow_logical_type(pa: ModuleType, atype: Any) -> str:
    """The logical type a parquet column of Arrow type ``atype`` is read as."""
    t = pa.types
    if t.is_dictionary(atype):
        return arrow_logical_type(pa, atype.value_type)
    if t.is_integer(atype):
        return "int"
    if t.is_floating(atype):
        return "float"
    if t.is_decimal(atype):
        return "decimal"
    if t.is_string(atype) or t.is_large_string(atype) or t.is_time(atype):
        return "string"  # a time of day reads as its ISO text, as the mysql store reads TIME
    if t.is_binary(atype) or t.is_large_binary(atype) or t.is_fixed_size_binary(atype):
        return "bytes"
    if t.is_boolean(atype):
        return "bool"
    if t.is_date(atype):
        return "date"
    if t.is_timestamp(atype):
        return "datetime"
    return "json"  # lists, structs, maps and the rest: their Python values (to_pylist)


def _arrow_columns(pa: ModuleType, arrow_schema: Any) -> tuple[Column, ...]:
    return tuple(Column(f.name, arrow_logical_type(pa, f.type), f.nullable) for f in arrow_schema)  # type: ignore[arg-type]


def _describe(columns: Sequence[Column]) -> str:
    return ", ".join(f"{c.name} {c.type}" for c in columns)


ArrowColumnFn = Callable[[Any], list[Any]]
"""Converts one Arrow array of a record batch to a list of Python values."""


def _arrow_column_fn(pa: ModuleType, atype: Any) -> ArrowColumnFn:
    t = pa.types
    if t.is_dictionary(atype):
        inner = _arrow_column_fn(pa, atype.value_type)
        return lambda arr: inner(arr.dictionary_decode())
    target = None
    if t.is_timestamp(atype) and (atype.tz is not None or atype.unit != "us"):
        # Arrow keeps timestamps in UTC: dropping the zone gives naive UTC. Python datetimes stop at
        # microseconds, so nanoseconds are truncated; a value out of range still fails the cast.
        target = pa.timestamp("us")
    elif t.is_float16(atype):
        target = pa.float64()
    elif t.is_time(atype):
        target = pa.string()
    if target is None:
        return lambda arr: arr.to_pylist()
    import pyarrow.compute as pc

    options = pc.CastOptions(target, allow_time_truncate=True)
    return lambda arr: arr.cast(options=options).to_pylist()


ARROW_VALUE_ERRORS = (ValueError, ArithmeticError)
"""What a value Python cannot hold raises in a cast or ``to_pylist`` (ArrowInvalid is a ValueError;
a date beyond year 9999 raises ValueError or OverflowError)."""


def _arrow_value_text(arr: Any, index: int) -> str:
    # The value as Arrow prints it (``<value out of range: ...>``), for the dirty record; the
    # printout of a one-value array is the value's lines between "[" and "]".
    lines = str(arr.slice(index, 1).to_string()).splitlines()
    return "\n".join(line.strip() for line in lines[1:-1])


# ---------------------------------------------------------------------------------------------
# The source role


class FileSplitter:
    """One split per file, sorted by path."""

    def __init__(self, options: FileReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def split(self, advice: int) -> list[Split]:
        files = resolve_files(self.options.path, self.options.format, SplitError)
        return [Split(id=p, resource_mark="file:" + os.path.dirname(p), params={"path": p}) for p in files]


class FileReaderPeriphery:
    def __init__(self, options: FileReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def prepare(self) -> SourceInfo:
        files = resolve_files(self.options.path, self.options.format, ReadError)
        try:
            size = sum(os.path.getsize(p) for p in files)
        except OSError as exc:
            raise ReadError(f"cannot stat {self.options.path}: {exc}", plugin=PLUGIN_NAME) from exc
        if self.options.format != "parquet":
            return SourceInfo(estimated_bytes=size)
        pa, pq = _pyarrow()
        rows = 0
        for path in files:
            try:
                rows += pq.read_metadata(path).num_rows  # the footer only: exact and cheap
            except (OSError, pa.ArrowException) as exc:
                raise ReadError(f"cannot read the parquet footer of {path}: {exc}", plugin=PLUGIN_NAME) from exc
        return SourceInfo(estimated_rows=rows, estimated_bytes=size)


class FileReader:
    """Reads csv, jsonl or parquet files; one instance per reader thread."""

    def __init__(self, options: FileReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.ctx = ctx
        self._schema: Schema | None = None
        self._converter: BatchConverter | None = None
        self._first_file = ""
        """parquet: the file the schema came from, and its columns (all of them, as read)."""
        self._first_columns: tuple[Column, ...] = ()

    # -- schema ---------------------------------------------------------------------------------

    def schema(self) -> Schema:
        if self._schema is None:
            opts = self.options
            if opts.format == "parquet":
                self._schema = self._parquet_schema()
            elif opts.columns is not None:
                self._schema = Schema(tuple(Column(c.name, c.type) for c in opts.columns))
            elif opts.format == "csv":
                if not opts.header:
                    raise ReadError(f"{opts.path}: columns are required when header is false",
                                    plugin=PLUGIN_NAME)
                self._schema = self._infer(self._csv_header)
            else:
                self._schema = self._infer(self._jsonl_first_object)
        return self._schema

    def _parquet_schema(self) -> Schema:
        pa, pq = _pyarrow()
        first = resolve_files(self.options.path, self.options.format, ReadError)[0]
        try:
            arrow_schema = pq.read_schema(first)
        except (OSError, pa.ArrowException) as exc:
            raise ReadError(f"cannot read the schema of {first}: {exc}", plugin=PLUGIN_NAME) from exc
        columns = _arrow_columns(pa, arrow_schema)
        names = [c.name for c in columns]
        if not columns:
            raise ReadError(f"{first}: the parquet file has no columns", plugin=PLUGIN_NAME)
        if len(set(names)) != len(names):
            raise ReadError(f"{first}: duplicate column names: {names}", plugin=PLUGIN_NAME)
        self._first_file, self._first_columns = first, columns
        if self.options.columns is None:
            return Schema(columns)
        # ``columns`` picks and orders the columns; their types come from the file.
        by_name = {c.name: c for c in columns}
        missing = [c.name for c in self.options.columns if c.name not in by_name]
        if missing:
            raise ReadError(f"{first}: no column {missing[0]!r} in the parquet file (it has {', '.join(names)})",
                            plugin=PLUGIN_NAME)
        return Schema(tuple(by_name[c.name] for c in self.options.columns))

    def _check_parquet_columns(self, path: str, arrow_schema: Any, pa: ModuleType) -> None:
        found = _arrow_columns(pa, arrow_schema)
        kinds = {c.name: c.type for c in found}
        # A column of Arrow type null holds only NULLs (pandas writes one for an all-None column): it fits any type.
        untyped = {f.name for f in arrow_schema if pa.types.is_null(f.type)}
        wanted = self.schema().columns
        if self.options.columns is None:
            same = len(found) == len(wanted) and len(kinds) == len(found)
        else:
            same = True  # only the chosen columns must match; the others may differ
        if same and all(kinds.get(c.name) == c.type or c.name in untyped for c in wanted):
            return
        raise ReadError(f"{path}: its columns ({_describe(found)}) differ from those of the first file "
                        f"{self._first_file} ({_describe(self._first_columns)})", plugin=PLUGIN_NAME)

    def _infer(self, from_file: Callable[[str], Schema | None]) -> Schema:
        for path in resolve_files(self.options.path, self.options.format, ReadError):
            schema = from_file(path)
            if schema is not None:
                return schema
        raise ReadError(f"{self.options.path}: every file is empty; set columns to read it",
                        plugin=PLUGIN_NAME)

    def _csv_header(self, path: str) -> Schema | None:
        try:
            with open(path, encoding="utf-8-sig", newline="") as f:
                header = next(csv.reader(f, delimiter=self.options.delimiter), None)
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ReadError(f"cannot read the header of {path}: {exc}", plugin=PLUGIN_NAME) from exc
        if not header:
            return None
        if len(set(header)) != len(header) or "" in header:
            raise ReadError(f"{path}:1: header has empty or duplicate column names: {header}; set columns",
                            plugin=PLUGIN_NAME)
        return Schema(tuple(Column(name, "string") for name in header))

    def _jsonl_first_object(self, path: str) -> Schema | None:
        try:
            with open(path, "rb") as f:
                lineno, line = next(((n, text) for n, text in enumerate(f, start=1) if text.strip()),
                                    (0, b""))
        except OSError as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc
        if not lineno:
            return None
        try:
            first = json.loads(line)
        except ValueError as exc:
            raise ReadError(f"{path}:{lineno}: malformed JSON, cannot infer columns: {exc}",
                            plugin=PLUGIN_NAME) from exc
        if not isinstance(first, dict) or not first:
            raise ReadError(f"{path}:{lineno}: expected a non-empty JSON object to infer columns from",
                            plugin=PLUGIN_NAME)
        return Schema(tuple(Column(str(k), _infer_json_type(v)) for k, v in first.items()))

    # -- reading --------------------------------------------------------------------------------

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        schema = self.schema()
        if self.options.format == "parquet":
            return self._read_parquet(str(split.params.get("path", split.id)), split.id)
        if self._converter is None:
            if self.options.format == "csv":
                null = self.options.null
                fns: list[ColumnFn | None] = [_csv_column_fn(c.type, null) for c in schema.columns]
            else:
                fns = [_jsonl_column_fn(c.type) for c in schema.columns]
            self._converter = BatchConverter(schema, fns)
        path = str(split.params.get("path", split.id))
        if self.options.format == "csv":
            return self._read_csv(path, split.id)
        return self._read_jsonl(path, split.id)

    def _reject(self, rejected: list[Rejected], split_id: str) -> None:
        if rejected:
            self.ctx.dirty.reject("source", rejected, split_id)

    def _read_csv(self, path: str, split_id: str) -> Iterator[Sequence[Row]]:
        assert self._converter is not None
        convert = self._converter.convert
        batch_rows = self.ctx.batch_rows
        try:
            with open(path, encoding="utf-8-sig", newline="") as f:
                reader = csv.reader(f, delimiter=self.options.delimiter)
                if self.options.header:
                    next(reader, None)
                while True:
                    start = reader.line_num
                    raw = list(islice(reader, batch_rows))
                    if not raw:
                        return
                    rows, rejected = convert(raw, path, _csv_lines(raw, start))
                    self._reject(rejected, split_id)
                    if rows:
                        yield rows
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc

    def _read_jsonl(self, path: str, split_id: str) -> Iterator[Sequence[Row]]:
        assert self._converter is not None
        convert = self._converter.convert
        names = self._converter.names
        batch_rows = self.ctx.batch_rows
        loads = json.loads
        try:
            with open(path, "rb") as f:
                first = 1
                while True:
                    lines = list(islice(f, batch_rows))
                    if not lines:
                        return
                    try:
                        # A non-object line has no .get: AttributeError sends the batch to the slow path.
                        raw: list[Sequence[Any]] = [tuple(map(o.get, names)) for o in map(loads, lines)]
                        rows, rejected = convert(raw, path, partial(operator.add, first))
                    except (ValueError, AttributeError, TypeError, RecursionError):
                        rows, rejected = self._jsonl_slow(lines, first, path, names)
                    first += len(lines)
                    self._reject(rejected, split_id)
                    if rows:
                        yield rows
        except OSError as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc

    def _read_parquet(self, path: str, split_id: str) -> Iterator[Sequence[Row]]:
        pa, pq = _pyarrow()
        names = list(self.schema().names)
        try:
            with pq.ParquetFile(path) as pf:
                arrow_schema = pf.schema_arrow
                self._check_parquet_columns(path, arrow_schema, pa)
                fns = [_arrow_column_fn(pa, arrow_schema.field(name).type) for name in names]
                first = 1
                for batch in pf.iter_batches(batch_size=self.ctx.batch_rows, columns=names):
                    rows, rejected = self._arrow_rows(batch, fns, names, path, first)
                    first += batch.num_rows
                    self._reject(rejected, split_id)
                    if rows:
                        yield rows
        except (OSError, pa.ArrowException) as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc

    @staticmethod
    def _arrow_rows(batch: Any, fns: Sequence[ArrowColumnFn], names: Sequence[str], path: str,
                    first: int) -> tuple[list[Row], list[Rejected]]:
        cols: list[list[Any]] = []
        bad: dict[int, str] = {}
        for i, fn in enumerate(fns):
            arr = batch.column(i)
            try:
                cols.append(fn(arr))
                continue
            except ARROW_VALUE_ERRORS:
                pass  # some value has no Python form: convert this column value by value
            values: list[Any] = []
            for j in range(len(arr)):
                try:
                    values.append(fn(arr.slice(j, 1))[0])
                except ARROW_VALUE_ERRORS as exc:
                    values.append(_arrow_value_text(arr, j))
                    bad.setdefault(j, f"{path}: row {first + j}: column {names[i]}: {exc}")
            cols.append(values)
        rows = list(zip(*cols))
        if not bad:
            return rows, []
        rejected = [Rejected(rows[j], reason) for j, reason in sorted(bad.items())]
        return [r for j, r in enumerate(rows) if j not in bad], rejected

    def _jsonl_slow(self, lines: list[bytes], first: int, path: str,
                    names: tuple[str, ...]) -> tuple[list[Row], list[Rejected]]:
        assert self._converter is not None
        raw: list[Sequence[Any]] = []
        numbers: list[int] = []
        rejected: list[Rejected] = []
        for lineno, line in enumerate(lines, start=first):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError) as exc:
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                rejected.append(Rejected((text,), f"{path}:{lineno}: malformed JSON: {exc}"))
                continue
            if not isinstance(obj, dict):
                rejected.append(Rejected((obj,), f"{path}:{lineno}: expected a JSON object, "
                                                 f"got {_json_kind(obj)}"))
                continue
            raw.append(tuple(map(obj.get, names)))
            numbers.append(lineno)
        rows, bad = self._converter.convert(raw, path, numbers.__getitem__)
        return rows, rejected + bad


def _csv_lines(raw: list[list[str]], start: int) -> Callable[[int], int]:
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


def _infer_json_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (dict, list)):
        return "json"
    return "string"

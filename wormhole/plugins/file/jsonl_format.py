"""jsonl: one JSON object per line, its values coerced to logical types; and back when writing.

Reading takes the first object's keys (and its values' kinds) as the columns unless ``columns``
names them. A value that already has the column's Python type passes untouched; others are coerced
(an integral float to int, ISO text to a date, base64 text to bytes). A line that is not JSON or
not an object is rejected with ``<file>:<line>``. A file with a decimal or json column is parsed with
exact numbers (:func:`~wormhole.plugins.values.json_parse`: a fraction as a ``Decimal``, never a double).
Writing renders dates as ISO text, decimals as strings, bytes as base64, and a json column's value as
JSON with its numbers digit for digit.
"""

from __future__ import annotations

import base64
import json
import operator
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from functools import partial
from itertools import islice
from typing import Any

import pyarrow as pa

from wormhole.errors import ReadError
from wormhole.plugins.arrow_parse import TEXT_CASTS, Unfit, python_array
from wormhole.plugins.base import Column, Rejected, Row, Schema
from wormhole.plugins.batch import arrow_type
from wormhole.plugins.file.arrow_text import JsonlArrowEncoder
from wormhole.plugins.file.convert import (
    ArrowFn,
    BatchConverter,
    ColumnFn,
    Converted,
    parse_bool,
    parse_bytes,
    parse_decimal,
)
from wormhole.plugins.values import JSON_NULL, from_text, json_dumps, json_encoder, json_parse, plain_decimal

PLUGIN_NAME = "file"


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", Decimal: "a number", str: "a string",
            list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


def _to_int(v: Any) -> int:
    if type(v) is float and v.is_integer():
        return int(v)
    if type(v) is Decimal and v.is_finite() and v == v.to_integral_value():
        return int(v)
    if type(v) is str:
        return int(v)
    raise TypeError(f"expected an integer, got {_kind(v)}")


def _to_float(v: Any) -> float:
    if type(v) in (int, str, Decimal):  # a Decimal as a double the same as float() of its text
        return float(v)
    raise TypeError(f"expected a number, got {_kind(v)}")


def _to_decimal(v: Any) -> Decimal:
    if type(v) is str:
        return parse_decimal(v)
    if type(v) in (int, float):
        return Decimal(repr(v))
    raise TypeError(f"expected a decimal, got {_kind(v)}")


def _to_string(v: Any) -> str:
    # Lenient: a scalar or nested value in a string column keeps its JSON text.
    return json_dumps(v)


def _to_bool(v: Any) -> bool:
    if type(v) is str:
        return parse_bool(v)
    if type(v) is int and v in (0, 1):
        return bool(v)
    raise TypeError(f"expected a boolean, got {_kind(v)}")


def _from_text(parse: Callable[[str], Any], what: str) -> Callable[[Any], Any]:
    return from_text(parse, lambda v: f"expected {what} string, got {_kind(v)}")


_NONE = type(None)
_PASS: dict[str, frozenset[type] | None] = {
    "int": frozenset((int, _NONE)),
    "float": frozenset((float, _NONE)),
    "decimal": frozenset((Decimal, _NONE)),
    "string": frozenset((str, _NONE)),
    "bytes": frozenset((_NONE,)),
    "bool": frozenset((bool, _NONE)),
    "date": frozenset((_NONE,)),
    "datetime": frozenset((_NONE,)),
    "json": None,
}
"""Python types a JSON value may already have for each logical type (None: anything goes)."""

_COERCE: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "float": _to_float,
    "decimal": _to_decimal,
    "string": _to_string,
    "bytes": _from_text(parse_bytes, "a base64"),
    "bool": _to_bool,
    "date": _from_text(date.fromisoformat, "an ISO date"),
    "datetime": _from_text(datetime.fromisoformat, "an ISO datetime"),
}


_NUMBERS = frozenset((Decimal, int, float, _NONE))
"""What an exactly parsed file (:data:`_EXACT_TYPES`) gives a float column: ``float()`` of each, in C."""


def _floats(col: Sequence[Any]) -> list[Any]:
    return list(map(float, col)) if None not in col else [None if v is None else float(v) for v in col]


def column_coercer(ltype: str) -> ColumnFn | None:
    """Converts a column of JSON values to ``ltype`` values; None when any value will do."""
    passing = _PASS[ltype]
    if passing is None:
        return None
    coerce = _COERCE[ltype]

    def convert(col: Sequence[Any]) -> Sequence[Any]:
        kinds = set(map(type, col))
        if kinds <= passing:
            return col
        if ltype == "float" and kinds <= _NUMBERS:
            return _floats(col)
        return [v if type(v) in passing else coerce(v) for v in col]

    return convert


_AS_PARSED: dict[str, type] = {"int": int, "float": float, "string": str, "bool": bool}
"""Logical types whose JSON values pass untouched (:data:`_PASS`): a column of them is one ``pa.array``."""


def arrow_column(column: Column) -> ArrowFn:
    """A column of JSON values as its Arrow array, with the values :func:`column_coercer` gives: values
    of the type itself as they are, ISO and decimal text by casts; raises Unfit for a column to coerce in
    Python (an integral float in an int column, base64 text, a text the casts do not read as Python does)."""
    kind = column.type
    same = _AS_PARSED.get(kind)
    cast = TEXT_CASTS.get(kind)

    def convert(col: Sequence[Any]) -> pa.Array:
        if kind == "json":
            return python_array(column, col)  # JSON null is SQL NULL here: None
        kinds = set(map(type, col)) - {_NONE}
        if same is not None and kinds <= {same}:
            return pa.array(col, arrow_type(column), from_pandas=False)
        if kind == "float" and kinds <= _NUMBERS:
            return pa.array(_floats(col), arrow_type(column), from_pandas=False)
        if cast is not None and kinds <= {str}:
            return cast(pa.array(col, pa.string()), column)
        raise Unfit(f"values of {sorted(k.__name__ for k in kinds)} in a {kind} column")

    return convert


def _infer_type(value: Any) -> Any:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (dict, list)):
        return "json"
    return "string"


def first_object_schema(path: str) -> Schema | None:
    """The columns of the first JSON object of ``path``; None for a file of blank lines."""
    try:
        with open(path, "rb") as f:
            lineno, line = next(((n, text) for n, text in enumerate(f, start=1) if text.strip()), (0, b""))
    except OSError as exc:
        raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc
    if not lineno:
        return None
    try:
        first = json.loads(line)
    except ValueError as exc:
        raise ReadError(f"{path}:{lineno}: malformed JSON, cannot infer columns: {exc}", plugin=PLUGIN_NAME) from exc
    if not isinstance(first, dict) or not first:
        raise ReadError(f"{path}:{lineno}: expected a non-empty JSON object to infer columns from",
                        plugin=PLUGIN_NAME)
    return Schema(tuple(Column(str(k), _infer_type(v)) for k, v in first.items()))


_DECODE = json.JSONDecoder().decode
"""json.loads of a str, less its per-call work on bytes (the encoding sniffed line by line)."""

_EXACT_TYPES = frozenset(("decimal", "json"))
"""Column types whose values keep a number's digits: a file with one is parsed with exact numbers."""


def _objects(lines: list[bytes], decode: Callable[[str], Any]) -> Iterator[Any]:
    """The JSON value of each line, as ``json.loads`` gives it, the batch decoded from UTF-8 at once.
    ``json.loads`` of a line would take a BOM or UTF-16 too: such a line (and one not UTF-8) raises here,
    so the batch goes line by line as it always did."""
    texts = b"".join(lines).decode("utf-8").split("\n")
    if texts[-1] == "":
        texts.pop()  # the last line's newline
    if len(texts) != len(lines):
        raise ValueError("a line the decoded text does not split into")
    return map(decode, texts)


class JsonlReader:
    """Reads jsonl files into typed batches of ``batch_rows`` lines (a :class:`FormatReader`)."""

    def __init__(self, schema: Schema, batch_rows: int) -> None:
        self._converter = BatchConverter(schema, [column_coercer(c.type) for c in schema.columns],
                                         [arrow_column(c) for c in schema.columns])
        self._batch_rows = batch_rows
        # Doubles where no column needs more (the C parser's fast path); else every number exact
        exact = any(c.type in _EXACT_TYPES for c in schema.columns)
        self._decode: Callable[[str], Any] = json_parse if exact else _DECODE
        self._loads: Callable[[bytes], Any] = json_parse if exact else json.loads

    def batches(self, path: str) -> Iterator[Converted]:
        convert = self._converter.convert
        names = self._converter.names
        try:
            with open(path, "rb") as f:
                first = 1
                while True:
                    lines = list(islice(f, self._batch_rows))
                    if not lines:
                        return
                    try:
                        # A non-object line has no .get: AttributeError sends the batch to the slow path.
                        raw: list[Sequence[Any]] = [tuple(map(o.get, names)) for o in _objects(lines, self._decode)]
                        converted = convert(raw, path, partial(operator.add, first))
                    except (ValueError, AttributeError, TypeError, RecursionError):
                        converted = self._slow(lines, first, path)
                    first += len(lines)
                    yield converted
        except OSError as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc

    def _slow(self, lines: list[bytes], first: int, path: str) -> Converted:
        """A batch line by line: malformed lines and non-objects are rejected, blank lines skipped."""
        names = self._converter.names
        raw: list[Sequence[Any]] = []
        numbers: list[int] = []
        rejected: list[Rejected] = []
        for lineno, line in enumerate(lines, start=first):
            if not line.strip():
                continue
            try:
                obj = self._loads(line)
            except (ValueError, RecursionError) as exc:
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                rejected.append(Rejected((text,), f"{path}:{lineno}: malformed JSON: {exc}"))
                continue
            if not isinstance(obj, dict):
                rejected.append(Rejected((obj,), f"{path}:{lineno}: expected a JSON object, got {_kind(obj)}"))
                continue
            raw.append(tuple(map(obj.get, names)))
            numbers.append(lineno)
        rows, bad = self._converter.convert(raw, path, numbers.__getitem__)
        return rows, rejected + bad


# ---------------------------------------------------------------------------------------------
# Writing


def _default(v: Any) -> Any:
    if isinstance(v, date):  # datetime too
        return v.isoformat()
    if isinstance(v, Decimal):
        return plain_decimal(v)
    if v is JSON_NULL:
        return None  # JSON has one null: a json column's null and SQL NULL read back alike (docs/manual/types.md)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(v).decode("ascii")
    raise TypeError(f"cannot write a value of type {type(v).__name__} as JSON")


class JsonlEncoder:
    """Serialises batches as JSON lines (UTF-8, compact, NaN refused)."""

    def __init__(self, schema: Schema) -> None:
        self._names = schema.names
        # check_circular=False saves ~10% per row; a self-referencing value still fails (RecursionError).
        self._encode: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                                                              allow_nan=False, check_circular=False,
                                                              default=_default).encode
        # A json column's decimals are JSON numbers, digit for digit (a decimal column's are strings)
        json_encode = json_encoder((",", ":"), _default, check_circular=False)
        self._arrow = JsonlArrowEncoder(schema, self._encode, json_encode)
        self._keys: list[str] | None = None
        self._encoders: list[Callable[[Any], str]] = []
        types = {c.type for c in schema.columns}
        if "json" in types and "decimal" not in types:
            self._encode = json_encode  # the row's only decimals are its json values'
        elif "json" in types:
            # A row is written field by field, each with its column's encoder, in the key order of a dict's.
            self._keys = [("{" if i == 0 else ",") + self._encode(c.name) + ":" for i, c in enumerate(schema.columns)]
            self._encoders = [json_encode if c.type == "json" else self._encode for c in schema.columns]

    def encode_arrow(self, batch: pa.RecordBatch) -> pa.Buffer:
        """The lines of an Arrow batch, the same as :meth:`encode` of its rows (raises NotExact where not)."""
        return self._arrow.encode(batch)

    def header(self) -> bytes:
        return b""

    def encode(self, rows: Sequence[Row]) -> bytes:
        names = self._names
        encode = self._encode
        if self._keys is not None:
            lines = list(map(self._line, rows))
        else:
            lines = [encode(dict(zip(names, r, strict=True))) for r in rows]
        lines.append("")
        return "\n".join(lines).encode("utf-8")

    def _line(self, row: Row) -> str:
        assert self._keys is not None
        pieces = [piece for key, encode, v in zip(self._keys, self._encoders, row, strict=True)
                  for piece in (key, encode(v))]
        pieces.append("}")
        return "".join(pieces)

"""Each logical type's Arrow form, and rows to Arrow and back: the values of a :class:`~wormhole.plugins.batch.Batch`.

The Arrow form of each logical type (:func:`arrow_type`) keeps what the source declared: unsigned
BIGINT as uint64, a decimal's precision and scale, timestamps in microseconds (naive, UTC when the value
was aware), binary apart from text, JSON as its text with the field marked ``json`` (JSON ``null`` is
the text ``null``, SQL NULL is null). A value that form cannot hold exactly travels in an *exact column*
(:data:`EXACT_KEY`): rows made a batch keep every value exactly, and :func:`rows_from_arrow` gives them back.
"""


from __future__ import annotations

import importlib.abc
import os
import pickle
import sys
from collections.abc import Callable, Sequence
from datetime import date, datetime
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa

from wormhole.plugins.schema import Column, Row, Schema
from wormhole.plugins.values import JSON_NULL, json_dumps, json_loads

LOGICAL_KEY = b"wormhole.type"
"""Field metadata naming the logical type (json is text in Arrow; the key tells it apart)."""

DEFAULT_DECIMAL = (38, 18)
"""Precision and scale of a decimal column whose source declared none (a file's, the generator's)."""


class _HidePandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def arrow_for_this_process() -> None:
    """Process-wide Arrow choices, made once at start before any batch (the CLI calls it):

    - pyarrow imports pandas (when installed: the spark extra installs it) on its first ``pa.array``, only
      to ask whether the value is a pandas object: about 40 MiB and 0.3 s the data plane never uses. That
      first look is made here with pandas hidden, so pyarrow remembers it has none to check for; pandas
      itself stays importable (``to_pandas`` and PySpark still import it when they need it).
    - The system allocator instead of pyarrow's default (mimalloc), which keeps freed batches' memory:
      peak RSS of a 1M-row MySQL copy 131 MiB against 179 MiB (x3: 156 against 214), at the same speed
      (docs/benchmarks.md). ``ARROW_DEFAULT_MEMORY_POOL`` set by the user is kept.
    """
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa.set_memory_pool(pa.system_memory_pool())
    if "pandas" in sys.modules:
        return
    hide = _HidePandas()
    sys.meta_path.insert(0, hide)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(hide)


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow type a column's values travel as."""
    kind = column.type
    if kind == "int":
        return pa.uint64() if column.unsigned else pa.int64()
    if kind == "decimal":
        precision, scale = decimal_shape(column)
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    return _PLAIN[kind]


_PLAIN: dict[str, pa.DataType] = {
    "float": pa.float64(), "string": pa.string(), "bytes": pa.binary(), "bool": pa.bool_(),
    "date": pa.date32(), "datetime": pa.timestamp("us"), "json": pa.string(),
}


def decimal_shape(column: Column) -> tuple[int, int]:
    """(precision, scale) of a decimal column: what the source declared, else :data:`DEFAULT_DECIMAL`."""
    if column.precision is None:
        return DEFAULT_DECIMAL
    return column.precision, column.scale or 0


FREE_SCALE_KEY = b"wormhole.free_scale"
"""Field metadata of a decimal column whose source declared no precision and scale (a file's, a SQLite
column's): its Arrow form holds every value at scale 18, where each value had a scale of its own."""


def arrow_field(column: Column) -> pa.Field:
    meta = {LOGICAL_KEY: column.type.encode()}
    if column.type == "decimal" and column.precision is None:
        meta[FREE_SCALE_KEY] = b"1"
    return pa.field(column.name, arrow_type(column), column.nullable, meta)


def free_scale(field: pa.Field) -> bool:
    """A decimal field whose values had no declared scale (:data:`FREE_SCALE_KEY`)."""
    return bool(field.metadata) and field.metadata.get(FREE_SCALE_KEY) == b"1"


def trimmed(d: Decimal) -> Decimal:
    # The value at the smallest scale that holds it, never with a positive exponent (100, not 1E+2); in a
    # context as wide as Arrow's decimals (the default's 28 digits rounded 38-digit values).
    return d.quantize(_ONE, context=_WIDE) if d == d.to_integral_value() else d.normalize(_WIDE)


_ONE = Decimal(1)
_WIDE = Context(prec=80)


def arrow_schema(schema: Schema) -> pa.Schema:
    return pa.schema([arrow_field(c) for c in schema.columns])


class BadValues(ValueError):
    """Rows whose values have no Arrow form in their column (a lone surrogate, a decimal wider than
    its column): ``bad`` maps each row's index in the batch to the reason."""

    def __init__(self, bad: dict[int, str]) -> None:
        super().__init__(f"{len(bad)} rows cannot be held as Arrow values: {next(iter(bad.values()))}")
        self.bad = bad


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (float, int), "decimal": (Decimal, int), "string": (str,),
    "bytes": (bytes, bytearray, memoryview), "bool": (bool,), "date": (date,), "datetime": (datetime,),
}
"""The Python values each logical type takes. pa.array converts others without a word where it can (1.5
into an int64 column is 1, a datetime into a date32 column loses its time): they are refused instead."""
_EXACT_TYPES: dict[str, tuple[type, ...]] = {"float": (float,), "date": (date,), "int": (int,),
                                              "decimal": (Decimal, int)}
"""The types a column converts in one call (exactly these: a subclass, bool or datetime, is checked value by value)."""
_ARROW_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError, UnicodeError)


def _misfit(column: Column, value: Any) -> str | None:
    """Why ``value`` has no exact Arrow form in ``column`` by its Python type, else None."""
    allowed = _PYTHON_TYPES.get(column.type)
    if allowed is None or isinstance(value, allowed):
        if column.type == "date" and isinstance(value, datetime):
            return f"column {column.name}: a datetime ({value}) in a date column"
        if column.type in ("int", "float", "decimal") and isinstance(value, bool):
            return f"column {column.name}: a bool ({value}) in a {column.type} column"
        if column.type == "float" and isinstance(value, int) and abs(value) > 2**53:
            return f"column {column.name}: the int {value} has no exact double"
        return None
    return f"column {column.name}: a {type(value).__name__} ({value!r:.80}) in a {column.type} column"


def _json_text(v: Any) -> str:
    return "null" if v is JSON_NULL else json_dumps(v)


def _column_array(column: Column, values: Sequence[Any], bad: dict[int, str]) -> pa.Array:
    kind = arrow_type(column)
    allowed = _PYTHON_TYPES.get(column.type)
    # One C-level scan of the value types: a column of the expected types converts in one call.
    fits = allowed is None or set(map(type, values)) <= {*_EXACT_TYPES.get(column.type, allowed), type(None)}
    if fits:
        try:
            if column.type == "json":
                return pa.array([None if v is None else _json_text(v) for v in values], kind)
            return pa.array(values, kind, from_pandas=False)
        except _ARROW_ERRORS:
            pass
    # Some value spoils the column: find every such row, by value, so only those are refused.
    good: list[Any] = []
    for i, v in enumerate(values):
        reason = None if v is None else _misfit(column, v)
        try:
            if reason is None and v is not None:
                v = _json_text(v) if column.type == "json" else v
                pa.array([v], kind)
        except _ARROW_ERRORS as exc:
            reason = f"column {column.name}: {type(exc).__name__}: {exc}"
        if reason is not None:
            bad.setdefault(i, reason)
            v = None
        good.append(v)
    return pa.array(good, kind)


def arrow_from_rows(schema: Schema, rows: Sequence[Row]) -> pa.RecordBatch:
    """The rows as a record batch of ``schema``; raises :class:`BadValues` naming the rows that have none
    (the other rows are fine: drop the bad ones and convert again)."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema.columns]
    bad: dict[int, str] = {}
    arrays = [_column_array(c, values, bad) for c, values in zip(schema.columns, columns, strict=True)]
    if bad:
        raise BadValues(bad)
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(schema))


_FROM_TEXT: dict[pa.DataType, Callable[[str], Any]] = {pa.timestamp("us"): datetime.fromisoformat,
                                                       pa.date32(): date.fromisoformat}
"""Types whose values Arrow makes into Python objects slowly: their text, parsed by C functions, is ~5x faster."""


def _pylist(column: pa.Array) -> list[Any]:
    parse = _FROM_TEXT.get(column.type)
    if parse is None:
        return column.to_pylist()
    texts = column.cast(pa.string()).to_pylist()
    if not column.null_count:
        return list(map(parse, texts))
    return [None if t is None else parse(t) for t in texts]


def column_values(batch: pa.RecordBatch, index: int) -> list[Any]:
    """One column of a record batch as Python values (json parsed: JSON ``null`` is JSON_NULL)."""
    field = batch.schema.field(index)
    codec = exact_codec(field)
    if codec is not None:
        return _exact_values(field, batch.column(index), codec)
    values = _pylist(batch.column(index))
    if field.metadata and field.metadata.get(LOGICAL_KEY) == b"json":
        values = [None if v is None else json_loads(v) for v in values]
    elif free_scale(field):
        # Scale 18 is the column's Arrow form, not the values': each comes back at the smallest scale
        # that holds it (2.25, not 2.250000000000000000).
        values = [None if v is None else trimmed(v) for v in values]
    return values


def rows_from_arrow(batch: pa.RecordBatch) -> tuple[Row, ...]:
    if not batch.num_columns:
        return ((),) * batch.num_rows
    return tuple(zip(*(column_values(batch, i) for i in range(batch.num_columns)), strict=True))


# -- exact columns: values a column's Arrow type cannot hold exactly ------------------------------

EXACT_KEY = b"wormhole.exact"
"""Field metadata of an *exact* column: one whose values its logical type's Arrow type cannot hold exactly,
carried instead as a binary column of each value in a declared codec (the value of this key):

- ``text``: the value's own text (UTF-8, a lone surrogate passed through): an integer beyond 64 bits, a
  decimal of another scale than its column's or of none declared (``numeric`` without a typmod, a file's),
  a zero or partial date (``0000-00-00``) and a date Python cannot hold (``infinity``) as the text the
  reader kept, an aware datetime with its offset, a string that is not valid UTF-8. Read back by the
  column's logical type (``int(text)``, ``Decimal(text)``, ``fromisoformat`` or else the text itself).
- ``python``: the value's pickle, for a value of another Python type than its column's (a float in an int
  column: no store's reader gives one, a test's or a third-party reader's may), so that the writer sees
  the value the reader gave and takes or refuses it as its own rules say.

The field keeps :data:`LOGICAL_KEY`, so every writer knows the column's logical type; :func:`rows_of` and
:meth:`Batch.arrow` decode it, value for value. Only a batch made from rows (:meth:`Batch.of_rows`: a
reader of Python values, a transform's derived values) has exact columns."""

_CANONICAL: dict[str, type] = {"int": int, "float": float, "decimal": Decimal, "string": str, "bytes": bytes,
                               "bool": bool, "date": date, "datetime": datetime}
"""The one Python type of each logical type's values (json takes any JSON value)."""
_TEXT_TYPES = frozenset({"int", "decimal", "date", "datetime", "string"})
"""Logical types whose values the ``text`` codec reads back exactly."""


def _typed_array(column: Column, values: Sequence[Any]) -> pa.Array | None:
    """``values`` in their column's Arrow type when it holds each exactly (same type, value and text back),
    else None."""
    kind = column.type
    try:
        if kind == "json":
            return pa.array([None if v is None else _json_text(v) for v in values], pa.string())
        types = set(map(type, values))
        types.discard(type(None))
        if not types <= {_CANONICAL[kind]}:
            return None
        if kind == "decimal":
            if column.precision is None:
                return None  # no declared scale: each value keeps its own (text)
            _, scale = decimal_shape(column)
            if any(v.as_tuple().exponent != -scale for v in values if v is not None):
                return None  # Arrow would pad or round it to the column's scale
        elif kind == "datetime" and any(v is not None and v.tzinfo is not None for v in values):
            return None  # Arrow would make it naive UTC; its text keeps the offset
        return pa.array(values, arrow_type(column), from_pandas=False)
    except _ARROW_ERRORS:
        return None


def _text_of(kind: str, v: Any) -> str | None:
    """The ``text`` codec's text of ``v`` in a column of ``kind``, None when it would not read back exactly."""
    t = type(v)
    if t is _CANONICAL[kind]:
        return v if t is str else v.isoformat() if t in (date, datetime) else str(v)
    if t is str and kind in ("date", "datetime"):
        try:  # the text a reader kept for a date Python cannot hold; a text that parses would come back a date
            (date.fromisoformat if kind == "date" else datetime.fromisoformat)(v)
        except ValueError:
            return v
    return None


def _exact_array(column: Column, values: Sequence[Any]) -> tuple[pa.Array, bytes]:
    """A column its Arrow type cannot hold exactly, in the codec that holds it (:data:`EXACT_KEY`)."""
    if column.type in _TEXT_TYPES:
        texts = [None if v is None else _text_of(column.type, v) for v in values]
        if all(t is not None or v is None for t, v in zip(texts, values, strict=True)):
            return pa.array([None if t is None else t.encode("utf-8", "surrogatepass") for t in texts],
                            pa.binary()), b"text"
    return pa.array([None if v is None else pickle.dumps(v) for v in values], pa.binary()), b"python"


def _from_text(kind: str) -> Callable[[str], Any]:
    if kind == "int":
        return int
    if kind == "decimal":
        return Decimal
    if kind == "string":
        return str

    parse = date.fromisoformat if kind == "date" else datetime.fromisoformat

    def value(text: str) -> Any:
        try:
            return parse(text)
        except ValueError:
            return text  # the text a reader kept for a date Python cannot hold

    return value


def exact_codec(field: pa.Field) -> bytes | None:
    """The codec of an exact column (:data:`EXACT_KEY`), None for a column in its own Arrow type."""
    return field.metadata.get(EXACT_KEY) if field.metadata else None


def _exact_values(field: pa.Field, array: pa.Array, codec: bytes) -> list[Any]:
    raw = array.to_pylist()
    if codec == b"python":
        return [None if b is None else pickle.loads(b) for b in raw]
    kind = (field.metadata or {}).get(LOGICAL_KEY, b"string").decode()
    parse = _from_text(kind)
    return [None if b is None else parse(b.decode("utf-8", "surrogatepass")) for b in raw]


def exact_field(column: Column, codec: bytes = b"text") -> pa.Field:
    """The field of ``column`` as an exact column in ``codec`` (:data:`EXACT_KEY`): binary, its logical type kept."""
    return pa.field(column.name, pa.binary(), column.nullable, {LOGICAL_KEY: column.type.encode(), EXACT_KEY: codec})


def exact_column(column: Column, values: Sequence[Any]) -> tuple[pa.Array, pa.Field]:
    """One column's Python values as Arrow, every value exactly: in its logical type's Arrow type when that
    holds them, else as an exact column (:data:`EXACT_KEY`)."""
    array = _typed_array(column, values)
    if array is not None:
        return array, arrow_field(column)
    array, codec = _exact_array(column, values)
    return array, exact_field(column, codec)


def exact_from_rows(schema: Schema, rows: Sequence[Row]) -> pa.RecordBatch:
    """The rows as a record batch of ``schema`` holding every value exactly (:func:`exact_column`); raises
    :class:`BadValues` naming the rows that are not as wide as the schema (they have no columns to go in)."""
    width = len(schema.columns)
    if wrong := {i: f"expected {width} values, got {len(r)}" for i, r in enumerate(rows) if len(r) != width}:
        raise BadValues(wrong)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema.columns]
    pairs = [exact_column(c, values) for c, values in zip(schema.columns, columns, strict=True)]
    return pa.RecordBatch.from_arrays([a for a, _ in pairs], schema=pa.schema([f for _, f in pairs]))


def has_exact(batch: pa.RecordBatch) -> bool:
    """Some column of the record batch is an exact column (:data:`EXACT_KEY`)."""
    return any(exact_codec(f) is not None for f in batch.schema)


def infer_schema(rows: Sequence[Row]) -> Schema:
    """A schema for rows given without one (a test's): each column's logical type from its first value's
    Python type (string when every value is NULL, json for dicts and lists)."""
    width = len(rows[0]) if rows else 0
    kinds = {t: k for k, t in _CANONICAL.items()}
    columns = []
    for i in range(width):
        first = next((r[i] for r in rows if r[i] is not None), None)
        kind = "string" if first is None else kinds.get(type(first), "json")
        columns.append(Column(f"c{i}", kind))  # type: ignore[arg-type]
    return Schema(tuple(columns))



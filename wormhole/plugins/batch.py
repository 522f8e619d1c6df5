"""The unit of exchange, and the one type of the writer contract: a :class:`Batch` of rows, held as Arrow
columns or as tuples, each form made from the other once.

A reader that decodes straight into columns (mysql) yields :meth:`Batch.of_arrow`; a reader of Python
values yields tuples, which the exchange makes a batch. A writer that encodes columns (mysql's LOAD DATA
encoder, parquet) asks for :meth:`Batch.arrow`; a row-at-a-time store takes the tuples from
:func:`rows_of`. A source's own encoding (:class:`EncodedRows`) and its wire text are facets of a batch
that only the writers of a store that loads them read, as chosen once per destination (the encoding when
every destination's prepared periphery takes it, the wire text of the columns whose types match). The
exchange hands the same immutable object to every destination, so the form a writer asks for is made at
most once per batch (under the batch's lock) and shared: a MySQL-to-MySQL copy never builds a tuple, and a
row writer beside it turns the batch into tuples once for all of them.

The Arrow form of each logical type (:func:`arrow_type`) keeps what the source declared: unsigned
BIGINT as uint64, a decimal's precision and scale, timestamps in microseconds (naive, UTC when the value
was aware), binary apart from text, JSON as its text with the field marked ``json`` (JSON ``null`` is
the text ``null``, SQL NULL is null).
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Context, Decimal
from typing import Any, overload

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


@dataclass(frozen=True, slots=True)
class Encoding:
    """A source's own encoding of its rows, the bytes its server sends, which a destination declaring the
    same column types loads as they are: no value is decoded or encoded on the way (``SourceRole.encoded``,
    ``SinkRole.encoded``; the engine chooses it when every destination of a run takes it)."""

    format: str
    """The byte format: ``postgres.copy_binary`` (rows of PostgreSQL's binary COPY, without its header)."""
    columns: tuple[str, ...]
    """Each column's type as the source declares it (``character varying(60)``, ``numeric(12,2)``)."""


@dataclass(frozen=True, slots=True)
class EncodedRows:
    """Rows in a source's :class:`Encoding`: one ``payload`` holding them back to back, ``ends[i]`` the
    offset just past row ``i``."""

    encoding: Encoding
    payload: bytes | bytearray
    """The rows' bytes (a reader's buffer handed on: nobody writes to it again)."""
    ends: Sequence[int]
    decode: Callable[[EncodedRows, int], Row]
    """Row ``i`` as values, by the source's own rules; only for whoever needs values (a row a destination
    refused, written to the dirty-record file with its reason)."""

    def span(self, start: int, end: int) -> memoryview:
        """The bytes of rows ``start`` to ``end``."""
        first = self.ends[start - 1] if start else 0
        return memoryview(self.payload)[first:self.ends[end - 1] if end > start else first]

    def row(self, index: int) -> Row:
        return self.decode(self, index)


class Batch(Sequence["Row"]):
    """An immutable batch of rows as the exchange hands it to every destination (the same object).

    Its memo (:func:`batch_memo`) lets writers that derive the same thing from a batch, such as
    two MySQL destinations encoding it for LOAD DATA, do that work once per batch instead of once per
    destination. Keys must name everything the derived value depends on.
    """

    def __init__(self, rows: Sequence[Row] = (), *, arrow: pa.RecordBatch | None = None,
                 wire: Sequence[pa.Array | None] | None = None, encoded: EncodedRows | None = None) -> None:
        self._tuples: tuple[Row, ...] | None = tuple(rows) if arrow is None and encoded is None else None
        self._arrow = arrow
        self.wire: tuple[pa.Array | None, ...] | None = tuple(wire) if wire is not None and arrow is not None else None
        """The source's own text of each column (None for a column that has none), beside the Arrow form:
        the mysql reader's wire bytes, which a mysql destination declaring the same types loads as they
        are (:mod:`wormhole.plugins.mysql.passthrough`). Only the reader's own batches carry it: a batch
        made from another (a transform's, one without some rows) holds other values, and has none."""
        self.encoded = encoded
        """The rows in the source's own encoding (:class:`EncodedRows`), when the reader sent them so (the
        engine chose it: every destination loads them as they are); their values are decoded only if asked."""
        self._native = arrow is not None
        self._len = (arrow.num_rows if arrow is not None else len(encoded.ends) if encoded is not None
                     else len(self._tuples or ()))
        self._lock = threading.Lock()
        self.memo: dict[Any, Any] = {}
        """What writers derived from the batch, by keys naming all it depends on (:func:`batch_memo`)."""

    @classmethod
    def of_rows(cls, rows: Sequence[Row]) -> Batch:
        """A batch of rows given as tuples (a reader's, a test's)."""
        return cls(rows)

    @classmethod
    def of_encoded(cls, encoded: EncodedRows) -> Batch:
        return cls(encoded=encoded)

    @classmethod
    def of_arrow(cls, batch: pa.RecordBatch, wire: Sequence[pa.Array | None] | None = None) -> Batch:
        return cls(arrow=batch, wire=wire)

    def sliced(self, start: int, length: int) -> Batch:
        """Rows ``start`` to ``start + length`` of a batch of Arrow columns, its wire text with them."""
        assert self._arrow is not None
        wire = None if self.wire is None else [None if w is None else w.slice(start, length) for w in self.wire]
        return Batch.of_arrow(self._arrow.slice(start, length), wire)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Row, ...]: ...

    def __getitem__(self, index: int | slice) -> Row | tuple[Row, ...]:
        return self.tuples()[index]

    def __iter__(self) -> Iterator[Row]:
        return iter(self.tuples())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Batch, tuple, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists: not hashable

    def __repr__(self) -> str:
        form = "arrow" if self._arrow is not None else "encoded" if self.encoded is not None else "tuples"
        return f"Batch({self._len} rows, {form})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The lock stays behind (Spark ships batches between processes); the form the batch has goes
        # (the wire text stays too: it is for a local mysql destination only).
        if self._arrow is not None:
            return (_rows_of_arrow, (self._arrow,))
        return (Batch, (self.tuples(),))  # an encoded batch as its values (an encoding is for local runs)

    @property
    def native_arrow(self) -> pa.RecordBatch | None:
        """The Arrow form of a batch that came as Arrow columns (:meth:`of_arrow`), else None. The Arrow
        form made from tuples (:meth:`arrow`) holds the same values, not always the same text: a decimal
        takes its column's scale (1.5 is 1.500000000000000000 in a column that declares none), so writers
        of text encode columns only from this one."""
        return self._arrow if self._native else None

    @property
    def has_arrow(self) -> bool:
        """The batch came as (or was already made into) Arrow columns: :meth:`arrow` costs nothing."""
        return self._arrow is not None

    def tuples(self) -> tuple[Row, ...]:
        if self._tuples is None:
            with self._lock:
                if self._tuples is None:
                    if self.encoded is not None:
                        encoded = self.encoded
                        self._tuples = tuple(encoded.row(i) for i in range(self._len))
                    else:
                        assert self._arrow is not None
                        self._tuples = rows_from_arrow(self._arrow)
        return self._tuples

    def arrow(self, schema: Schema) -> pa.RecordBatch:
        """The batch as Arrow columns of ``schema`` (made once). Raises :class:`BadValues` when rows have
        no Arrow form; the caller refuses those rows and converts the rest (:meth:`without`)."""
        if self._arrow is None:
            with self._lock:
                if self._arrow is None:
                    self._arrow = arrow_from_rows(schema, self.tuples())
        return self._arrow

    def without(self, indexes: set[int] | dict[int, Any]) -> Batch:
        """The batch less the rows at ``indexes``."""
        return Batch([row for i, row in enumerate(self.tuples()) if i not in indexes])

    @property
    def arrow_form(self) -> pa.RecordBatch:
        """The Arrow form of a batch that has one (:attr:`has_arrow`)."""
        assert self._arrow is not None, "the batch has no Arrow form yet: ask arrow(schema)"
        return self._arrow

    @property
    def encoded_nbytes(self) -> int | None:
        """The size of the encoded form, when the batch came so."""
        return None if self.encoded is None else len(self.encoded.payload)

    @property
    def arrow_nbytes(self) -> int | None:
        """The Arrow form's buffer size, with the wire text it carries (the queue's byte bound counts what a
        batch holds), when the batch has one."""
        if self._arrow is None:
            return None
        return self._arrow.nbytes + sum(w.nbytes for w in self.wire or () if w is not None)

    @property
    def whole(self) -> bool:
        """The batch holds its rows whole, as Arrow columns or a source's encoding (not as tuples only)."""
        return self._arrow is not None or self.encoded is not None

    @property
    def held_nbytes(self) -> int | None:
        """The bytes a batch holding its rows whole (Arrow columns, a source's encoding) holds; None for a
        batch of tuples only (its size is estimated)."""
        return self.arrow_nbytes if self._arrow is not None else self.encoded_nbytes


def _rows_of_arrow(batch: pa.RecordBatch) -> Batch:
    return Batch(arrow=batch)


def batch_memo(batch: Batch) -> dict[Any, Any]:
    """The memo ``batch`` shares between the destinations it goes to (:attr:`Batch.memo`)."""
    return batch.memo


def as_batch(rows: Batch | Collection[Row]) -> Batch:
    """What a reader yielded, as a batch: a :class:`Batch` as it is, rows given as tuples wrapped in one."""
    return rows if isinstance(rows, Batch) else Batch.of_rows(tuple(rows))


def rows_of(batch: Batch) -> tuple[Row, ...]:
    """The batch's rows as tuples, for a store that writes a row at a time: made once per batch (from its
    Arrow columns or the source's encoding) and shared by every destination that asks."""
    return batch.tuples()


"""parquet: Arrow types and logical types both ways, and the reader of parquet files.

pyarrow (the ``parquet`` extra) is imported only when a task uses this format. Files are read in
record batches of ``batch_rows``; the schema is the first file's, its Arrow types mapped to logical
types (a decimal keeps its precision and scale), and every other file must have the same columns. A
batch goes on as Arrow columns (``Batch.of_arrow``), each column cast to its logical type's Arrow type,
when every value has a Python form too; otherwise (a timestamp beyond year 9999, and always for nested
columns, read as json values) a column converts with one ``to_pylist`` and a value Python cannot hold
sends its row to the dirty sink with ``<file>: row <n>``. The other direction, logical types to Arrow types, is
:func:`wormhole.plugins.values.arrow_types`, the contract the parquet part writer and Spark share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

from wormhole.errors import ReadError
from wormhole.plugins.arrow_text import in_python_range
from wormhole.plugins.base import Batch, Column, Rejected, Row, Schema
from wormhole.plugins.batch import arrow_schema as batch_schema
from wormhole.plugins.batch import arrow_type
from wormhole.plugins.file.convert import Converted
from wormhole.plugins.file.options import PYARROW_MISSING, FileReaderOptions, import_pyarrow

PLUGIN_NAME = "file"


def _pyarrow() -> tuple[ModuleType, ModuleType]:
    try:
        return import_pyarrow()
    except ImportError as exc:
        raise ReadError(PYARROW_MISSING, plugin=PLUGIN_NAME) from exc


def footer_rows(files: Sequence[str]) -> int:
    """The rows of ``files`` as their footers count them: exact and cheap (no data is read)."""
    pa, pq = _pyarrow()
    rows = 0
    for path in files:
        try:
            rows += pq.read_metadata(path).num_rows
        except (OSError, pa.ArrowException) as exc:
            raise ReadError(f"cannot read the parquet footer of {path}: {exc}", plugin=PLUGIN_NAME) from exc
    return rows


_LOGICAL_TYPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("is_integer",), "int"),
    (("is_floating",), "float"),
    (("is_decimal",), "decimal"),
    (("is_string", "is_large_string", "is_time"), "string"),  # a time of day reads as its ISO text, as mysql's TIME
    (("is_binary", "is_large_binary", "is_fixed_size_binary"), "bytes"),
    (("is_boolean",), "bool"),
    (("is_date",), "date"),
    (("is_timestamp",), "datetime"),
)
"""``pyarrow.types`` tests, in order, and the logical type of the Arrow types they accept."""


def arrow_logical_type(pa: ModuleType, atype: Any) -> str:
    """The logical type a parquet column of Arrow type ``atype`` is read as."""
    if pa.types.is_dictionary(atype):
        return arrow_logical_type(pa, atype.value_type)
    for tests, kind in _LOGICAL_TYPES:
        if any(getattr(pa.types, test)(atype) for test in tests):
            return kind
    return "json"  # lists, structs, maps and the rest: their Python values (to_pylist)


def _arrow_column(pa: ModuleType, field: Any) -> Column:
    kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    if pa.types.is_decimal(kind):
        return Column(field.name, "decimal", field.nullable, precision=kind.precision, scale=kind.scale)
    return Column(field.name, arrow_logical_type(pa, field.type), field.nullable,  # type: ignore[arg-type]
                  unsigned=pa.types.is_uint64(field.type))


def _arrow_columns(pa: ModuleType, arrow_schema: Any) -> tuple[Column, ...]:
    return tuple(_arrow_column(pa, f) for f in arrow_schema)


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


def _arrow_rows(batch: Any, fns: Sequence[ArrowColumnFn], names: Sequence[str], path: str, first: int) -> Converted:
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
    rows: list[Row] = list(zip(*cols))
    if not bad:
        return rows, []
    rejected = [Rejected(rows[j], reason) for j, reason in sorted(bad.items())]
    return [r for j, r in enumerate(rows) if j not in bad], rejected


def arrow_batch(pa: ModuleType, batch: Any, schema: Schema) -> Any:
    """``batch`` as a record batch of ``schema``'s Arrow types, or None when some value has no Python form
    (the row path then rejects its row) or a column is nested (json values: the row path reads them)."""
    import pyarrow.compute as pc

    arrays = []
    for column in schema.columns:
        if column.type == "json":
            return None
        arr = batch.column(column.name)
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        target = arrow_type(column)
        if arr.type != target:
            if column.type == "decimal":
                return None  # another file's scale: a cast would change the values' exponent
            arr = arr.cast(options=pc.CastOptions(target, allow_time_truncate=True))
        if column.type in ("date", "datetime") and not in_python_range(arr, column.type):
            return None
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=batch_schema(schema))


class ParquetReader:
    """The schema of a parquet source and the batches of its files (a :class:`FormatReader`)."""

    def __init__(self, options: FileReaderOptions, files: Callable[[], list[str]], batch_rows: int) -> None:
        self.options = options
        self._files = files
        self._batch_rows = batch_rows
        self._schema: Schema | None = None
        self._first_file = ""
        """The file the schema came from, and its columns (all of them, as read)."""
        self._first_columns: tuple[Column, ...] = ()

    def schema(self) -> Schema:
        if self._schema is None:
            self._schema = self._read_schema()
        return self._schema

    def _read_schema(self) -> Schema:
        pa, pq = _pyarrow()
        first = self._files()[0]
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

    def _check_columns(self, path: str, arrow_schema: Any, pa: ModuleType) -> None:
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

    def _columnar(self, pa: ModuleType, batch: Any) -> Any:
        try:
            return arrow_batch(pa, batch, self.schema())
        except (pa.ArrowException, *ARROW_VALUE_ERRORS):
            return None  # a value its type cannot hold: the row path rejects its row

    def batches(self, path: str) -> Iterator[Converted]:
        pa, pq = _pyarrow()
        names = list(self.schema().names)
        try:
            with pq.ParquetFile(path) as pf:
                arrow_schema = pf.schema_arrow
                self._check_columns(path, arrow_schema, pa)
                fns = [_arrow_column_fn(pa, arrow_schema.field(name).type) for name in names]
                first = 1
                for batch in pf.iter_batches(batch_size=self._batch_rows, columns=names):
                    columnar = self._columnar(pa, batch)
                    converted = (Batch.of_arrow(columnar), []) if columnar is not None else _arrow_rows(
                        batch, fns, names, path, first)
                    first += batch.num_rows
                    yield converted
        except (OSError, pa.ArrowException) as exc:
            raise ReadError(f"cannot read {path}: {exc}", plugin=PLUGIN_NAME) from exc

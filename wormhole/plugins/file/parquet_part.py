"""The parquet part writer: batches become Arrow tables, written as snappy row groups.

A batch that comes as Arrow columns is written as it is, its columns cast to the contract types
(a declared decimal to decimal(38, 18); json text made the text the row path writes); one of tuples,
or one whose columns do not cast exactly (a NULL in a column that is not nullable, a decimal beyond
decimal(38, 18)), converts as before. Each tuple batch converts column-wise to Arrow arrays of the contract types
(:func:`~wormhole.plugins.values.arrow_types`); a batch with a value its Arrow type
cannot hold is converted again row by row, to reject exactly those rows. Converted batches are
buffered and written as one row group once they hold :data:`ROW_GROUP_ROWS` rows.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from wormhole.errors import WriteError
from wormhole.plugins.arrow_text import own_arrow
from wormhole.plugins.base import Batch, Rejected, Row, Schema, WriteResult, rows_of
from wormhole.plugins.file.layout import create_part
from wormhole.plugins.file.options import PYARROW_MISSING, import_pyarrow
from wormhole.plugins.values import arrow_types, json_loads, json_text

ARROW_ERRORS = (ValueError, TypeError, ArithmeticError, RecursionError, NotImplementedError)
"""What converting a value pyarrow's type cannot hold raises: ArrowInvalid is a ValueError,
ArrowTypeError a TypeError, ArrowNotImplementedError a NotImplementedError; OverflowError (an int
beyond int64), UnicodeEncodeError (a lone surrogate)."""

ROW_GROUP_ROWS = 128 * 1024
"""Buffered batches are written as one row group once they hold this many rows. Readers (Spark
included) prefer a few large row groups to one per batch; the bound keeps a writer's memory small."""


def _int_value(v: Any) -> Any:
    # pyarrow truncates a float or Decimal to int64 without a word (1.5 -> 1): only whole numbers pass.
    if v is None or type(v) is int or isinstance(v, bool):
        return v  # pyarrow itself refuses a bool
    n = int(v)
    if n != v:
        raise ValueError(f"{v!r} is not an integer")
    return n


def _int_column(col: Sequence[Any]) -> Sequence[Any]:
    if set(map(type, col)) <= {int, type(None)}:
        return col
    return [_int_value(v) for v in col]


def _json_column(col: Sequence[Any]) -> Sequence[Any]:
    return [json_text(v) for v in col]


_ARROW_PREPARE: dict[str, Callable[[Sequence[Any]], Sequence[Any]]] = {"int": _int_column, "json": _json_column}
"""Columns that need Python work before ``pa.array``; pyarrow takes the others' values as they are."""


class ParquetPart:
    """One parquet part file.

    ``open`` creates the file afresh; ``flush`` writes the buffered rows as a row group and syncs;
    ``close`` writes what is left and the footer (nothing more after a failed write).
    """

    def __init__(self, path: str, schema: Schema, error: Callable[[str], WriteError]) -> None:
        self.path = path
        self._columns = schema.columns
        self._error = error
        self._pa: Any = None
        self._arrow_schema: Any = None
        self._file: BinaryIO | None = None
        self._writer: Any = None
        self._pending: list[Any] = []
        self._pending_rows = 0
        self._failed = False

    def open(self) -> None:
        try:
            pa, pq = import_pyarrow()
        except ImportError as exc:
            raise self._error(PYARROW_MISSING) from exc
        self._pa = pa
        types = arrow_types(pa)
        # A BIGINT UNSIGNED as uint64 (Spark reads it as decimal(20,0)): int64 would refuse 2**63 and up.
        self._arrow_schema = pa.schema([pa.field(c.name, pa.uint64() if c.unsigned else types[c.type],
                                                 nullable=c.nullable) for c in self._columns])
        try:
            self._file = create_part(self.path)
            self._writer = pq.ParquetWriter(self._file, self._arrow_schema, compression="snappy")
        except (OSError, pa.ArrowException) as exc:
            raise self._error(f"cannot open {self.path}: {exc}") from exc

    # -- converting -----------------------------------------------------------------------------

    def _array(self, i: int, col: Sequence[Any]) -> Any:
        column = self._columns[i]
        prepare = _ARROW_PREPARE.get(column.type)
        arr = self._pa.array(prepare(col) if prepare else col, type=self._arrow_schema.field(i).type)
        if arr.null_count and not column.nullable:
            raise ValueError("NULL in a column that is not nullable")
        return arr

    def _table(self, rows: Sequence[Row]) -> Any:
        cols = list(zip(*rows, strict=True))
        return self._pa.Table.from_arrays([self._array(i, col) for i, col in enumerate(cols)],
                                          schema=self._arrow_schema)

    def _columnar(self, rows: Batch) -> Any:
        """The table of a batch of Arrow columns, cast to the file's types; None for tuples, or for a batch
        the row path must sort (its reasons per row are the ones it always gave)."""
        batch = own_arrow(rows)
        if batch is None or batch.num_columns != len(self._columns):
            return None
        arrays = []
        try:
            for i, column in enumerate(self._columns):
                arr = batch.column(i)
                if arr.null_count and not column.nullable:
                    return None
                target = self._arrow_schema.field(i).type
                if column.type == "json":  # the text json_text writes of the parsed value (a str as it is)
                    arr = self._pa.array([None if v is None else json_text(json_loads(v)) for v in arr.to_pylist()],
                                         type=target)
                elif arr.type != target:
                    arr = arr.cast(target)
                arrays.append(arr)
            return self._pa.Table.from_arrays(arrays, schema=self._arrow_schema)
        except (self._pa.ArrowException, *ARROW_ERRORS):
            return None

    def _convert(self, batch: Batch) -> tuple[Any, list[Rejected]]:
        table = self._columnar(batch)
        if table is not None:
            return table, []
        rows = rows_of(batch)
        try:
            return self._table(rows), []
        except ARROW_ERRORS:
            pass  # some value does not fit its Arrow type: find the rows row by row
        good, rejected = self._sort_rows(rows)
        if not good:
            return None, rejected
        try:
            return self._table(good), rejected
        except ARROW_ERRORS as exc:  # every value converted alone; together they must too
            raise self._error(f"cannot convert a batch for {self.path}: {exc}") from exc

    def _sort_rows(self, rows: Sequence[Row]) -> tuple[list[Row], list[Rejected]]:
        """The rows whose every value converts, and the others with the first bad value's reason."""
        good: list[Row] = []
        rejected: list[Rejected] = []
        width = len(self._columns)
        for row in rows:
            if len(row) != width:
                rejected.append(Rejected(tuple(row), f"expected {width} values, got {len(row)}"))
                continue
            for i, value in enumerate(row):
                try:
                    self._array(i, (value,))
                except ARROW_ERRORS as exc:
                    reason = f"column {self._columns[i].name}: {type(exc).__name__}: {exc}"
                    rejected.append(Rejected(tuple(row), reason))
                    break
            else:
                good.append(row)
        return good, rejected

    # -- writing --------------------------------------------------------------------------------

    def _write_pending(self) -> None:
        if not self._pending:
            return
        pa = self._pa
        # Taken out first: after a failure the same rows are not tried again by close().
        tables, self._pending, self._pending_rows = self._pending, [], 0
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        try:
            self._writer.write_table(table, row_group_size=table.num_rows)
        except (OSError, pa.ArrowException) as exc:
            self._failed = True
            raise self._error(f"cannot write {self.path}: {exc}") from exc

    def write(self, batch: Batch) -> WriteResult:
        if self._writer is None:
            raise self._error(f"{self.path} is not open")
        if not batch:
            return WriteResult(written=0)
        table, rejected = self._convert(batch)
        if table is not None:
            self._pending.append(table)
            self._pending_rows += table.num_rows
            if self._pending_rows >= ROW_GROUP_ROWS:
                self._write_pending()
        return WriteResult(written=len(batch) - len(rejected), rejected=tuple(rejected))

    def flush(self) -> None:
        if self._writer is None or self._file is None:
            return
        self._write_pending()
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            self._failed = True
            raise self._error(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        writer, f = self._writer, self._file
        if f is None:
            return
        pa = self._pa
        try:
            if writer is not None and not self._failed:
                try:
                    self._write_pending()
                    writer.close()  # the footer: without it the file is no parquet file
                    writer = None
                    f.flush()
                    os.fsync(f.fileno())
                    f.close()
                except (OSError, pa.ArrowException) as exc:
                    self._failed = True
                    raise self._error(f"cannot close {self.path}: {exc}") from exc
        finally:
            self._writer = self._file = None
            self._pending, self._pending_rows = [], 0
            # After a failure the part is garbage (rollback removes it): close quietly, so the first
            # error stands. pyarrow's writer must be closed too, or its finaliser writes into the file.
            if writer is not None:
                with contextlib.suppress(OSError, ValueError, pa.ArrowException):
                    writer.close()
            if not f.closed:
                with contextlib.suppress(OSError):
                    f.close()

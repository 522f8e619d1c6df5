"""Typed batches from raw csv fields or JSON values, shared by the csv and jsonl readers.

Batches are converted column by column (``zip(*rows)``) into Arrow columns by each format's column
function (pyarrow casts, :mod:`wormhole.plugins.arrow_parse`); a column those casts do not read as the
Python parsers do is converted by its Python function and made Arrow from those values when Arrow holds
each as it is, else the batch goes as tuples. Only when a batch fails to convert is it walked row by row,
to send exactly the bad rows to the dirty sink with ``<file>:<line>`` and skip them; the rows left are
made Arrow again.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

import pyarrow as pa

from wormhole.plugins.arrow_parse import FAILED, Unfit, python_array
from wormhole.plugins.base import Batch, Rejected, Row, Schema
from wormhole.plugins.batch import arrow_schema

CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, RecursionError)
"""What a bad value raises while converting (binascii.Error and JSONDecodeError are ValueErrors)."""

ColumnFn = Callable[[Sequence[Any]], Sequence[Any]]
"""Converts one column of a batch (a sequence of raw values) to typed values."""

ArrowFn = Callable[[Sequence[Any]], pa.Array]
"""Converts one column of a batch to its Arrow array with the values the ColumnFn gives, or raises
(:class:`~wormhole.plugins.arrow_parse.Unfit`, an Arrow error) when it cannot say so."""

Converted = tuple[Batch | Sequence[Row], list[Rejected]]
"""A batch as a format reader yields it: the typed rows (a list, or Arrow columns as ``Batch``) and the
rows it rejected, with reasons."""


class FormatReader(Protocol):
    """Reads the files of one format; one instance per reader thread (see :class:`FileReader`)."""

    def batches(self, path: str) -> Iterator[Converted]:
        """The converted batches of one file; raises ReadError when the file cannot be read."""
        ...


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def parse_bool(text: str) -> bool:
    try:
        return _BOOL_TEXT[text.strip().lower()]
    except KeyError:
        raise ValueError(f"not a boolean (true/false/1/0): {text!r}") from None


def parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a decimal: {text!r}") from None


def parse_bytes(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


class BatchConverter:
    """Turns raw rows (csv field lists or JSON value tuples) into typed rows and rejections."""

    def __init__(self, schema: Schema, column_fns: Sequence[ColumnFn | None],
                 arrow_fns: Sequence[ArrowFn] | None = None) -> None:
        self.names = schema.names
        self.width = len(schema)
        self.fns = [(i, fn) for i, fn in enumerate(column_fns) if fn is not None]
        self._column_fns = list(column_fns)
        self._arrow_fns = arrow_fns
        self._columns = schema.columns
        self._schema = arrow_schema(schema)

    def convert(self, raw: Sequence[Sequence[Any]], path: str, line_of: Callable[[int], int]) -> Converted:
        if set(map(len, raw)) == {self.width}:
            try:
                batch = self._arrow(raw)
                return (batch if batch is not None else self._columnar(raw)), []
            except CONVERSION_ERRORS:
                pass  # some value is bad: find it row by row below
        rows, rejected, kept = self._row_by_row(raw, path, line_of)
        if rejected and kept:
            # Only the bad rows spoilt the batch: the rest may well be Arrow columns.
            try:
                batch = self._arrow([raw[i] for i in kept])
            except CONVERSION_ERRORS:
                batch = None
            if batch is not None:
                return batch, rejected
        return rows, rejected

    def _arrow(self, raw: Sequence[Sequence[Any]]) -> Batch | None:
        if self._arrow_fns is None or not raw:
            return None
        return self.arrow_of(list(zip(*raw, strict=True)))

    def arrow_of(self, cols: Sequence[Sequence[Any] | pa.Array]) -> Batch | None:
        """The batch of these raw columns (Python values, or Arrow strings parsed by pyarrow's csv reader)
        as Arrow columns; None when a value has no Arrow form as the Python parser gives it. Raises what
        the Python parser raises for a bad value."""
        assert self._arrow_fns is not None
        arrays: list[pa.Array] = []
        for i, (fast, values) in enumerate(zip(self._arrow_fns, cols, strict=True)):
            try:
                arrays.append(fast(values))
                continue
            except (Unfit, *FAILED):
                pass  # this column value by value, as the row path converts it
            if isinstance(values, pa.Array):
                values = values.to_pylist()
            fn = self._column_fns[i]
            typed = values if fn is None else fn(values)
            try:
                arrays.append(python_array(self._columns[i], typed))
            except (Unfit, *FAILED):
                return None
        return Batch.of_arrow(pa.RecordBatch.from_arrays(arrays, schema=self._schema))

    def _columnar(self, raw: Sequence[Sequence[Any]]) -> list[Row]:
        if not self.fns:
            return [tuple(r) for r in raw]
        cols: list[Sequence[Any]] = list(zip(*raw, strict=True))
        for i, fn in self.fns:
            cols[i] = fn(cols[i])
        return list(zip(*cols, strict=True))

    def _row_by_row(self, raw: Sequence[Sequence[Any]], path: str,
                    line_of: Callable[[int], int]) -> tuple[list[Row], list[Rejected], list[int]]:
        rows: list[Row] = []
        rejected: list[Rejected] = []
        kept: list[int] = []
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
                kept.append(index)
        return rows, rejected, kept

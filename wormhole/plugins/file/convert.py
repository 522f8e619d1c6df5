"""Typed batches from raw csv fields or JSON values, shared by the csv and jsonl readers.

Batches are converted column by column (``zip(*rows)``, one comprehension per column that needs
work), so the per-row Python cost stays small. Only when a batch fails to convert is it walked row
by row, to send exactly the bad rows to the dirty sink with ``<file>:<line>`` and skip them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from wormhole.plugins.base import Rejected, Row, Schema

CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, RecursionError)
"""What a bad value raises while converting (binascii.Error and JSONDecodeError are ValueErrors)."""

ColumnFn = Callable[[Sequence[Any]], Sequence[Any]]
"""Converts one column of a batch (a sequence of raw values) to typed values."""

Converted = tuple[Sequence[Row], list[Rejected]]
"""A batch as a format reader yields it: the typed rows (a list, or Arrow columns as ``Rows``) and the
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

    def __init__(self, schema: Schema, column_fns: Sequence[ColumnFn | None]) -> None:
        self.names = schema.names
        self.width = len(schema)
        self.fns = [(i, fn) for i, fn in enumerate(column_fns) if fn is not None]

    def convert(self, raw: Sequence[Sequence[Any]], path: str, line_of: Callable[[int], int]) -> Converted:
        if set(map(len, raw)) == {self.width}:
            try:
                return self._columnar(raw), []
            except CONVERSION_ERRORS:
                pass  # some value is bad: find it row by row below
        return self._row_by_row(raw, path, line_of)

    def _columnar(self, raw: Sequence[Sequence[Any]]) -> list[Row]:
        if not self.fns:
            return [tuple(r) for r in raw]
        cols: list[Sequence[Any]] = list(zip(*raw, strict=True))
        for i, fn in self.fns:
            cols[i] = fn(cols[i])
        return list(zip(*cols, strict=True))

    def _row_by_row(self, raw: Sequence[Sequence[Any]], path: str, line_of: Callable[[int], int]) -> Converted:
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

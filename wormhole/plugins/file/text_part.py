"""The csv and jsonl part writer: each batch serialised in memory, then appended to the part in one call.

The text formats' counterpart of :mod:`~wormhole.plugins.file.parquet_part`; apart from ``writer.py``,
which decides which parts exist and when they become durable, because this only writes bytes. A batch
that comes as Arrow columns is encoded column-wise (:mod:`~wormhole.plugins.file.arrow_text`, the same
text); one of tuples, or one the columnar encoder cannot render exactly, row-wise as before.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Sequence
from typing import BinaryIO, Protocol

import pyarrow as pa

from wormhole.errors import WriteError
from wormhole.plugins.arrow_text import NotExact, own_text_arrow
from wormhole.plugins.base import Batch, Rejected, Row, WriteResult, rows_of
from wormhole.plugins.file.layout import create_part

SERIALISE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, RecursionError, csv.Error)
"""What a row the format cannot hold raises (UnicodeEncodeError is a ValueError)."""


class _Encoder(Protocol):
    def header(self) -> bytes: ...

    def encode(self, rows: Sequence[Row]) -> bytes: ...

    def encode_arrow(self, batch: pa.RecordBatch) -> pa.Buffer: ...


class TextPart:
    """One csv or jsonl part file: each batch serialised in memory, then written in one call."""

    def __init__(self, path: str, encoder: _Encoder, error: Callable[[str], WriteError]) -> None:
        self.path = path
        self._encode = encoder.encode
        self._encode_arrow = encoder.encode_arrow
        self._header = encoder.header
        self._error = error
        self._file: BinaryIO | None = None

    def open(self) -> None:
        try:
            self._file = create_part(self.path)
            self._file.write(self._header())
        except OSError as exc:
            raise self._error(f"cannot open {self.path}: {exc}") from exc
        except ValueError as exc:  # a column name UTF-8 cannot hold
            raise self._error(f"cannot write the csv header of {self.path}: {exc}") from exc

    def write(self, batch: Batch) -> WriteResult:
        if self._file is None:
            raise self._error(f"{self.path} is not open")
        if not batch:
            return WriteResult(written=0)
        rejected: list[Rejected] = []
        columnar = self._columnar(batch)
        rows = rows_of(batch) if columnar is None else ()
        try:
            data = columnar if columnar is not None else self._encode(rows)
        except SERIALISE_ERRORS:
            # Some row cannot be written: serialise one by one and keep the others.
            parts: list[bytes] = []
            for row in rows:
                try:
                    parts.append(self._encode((row,)))
                except SERIALISE_ERRORS as exc:
                    rejected.append(Rejected(row, f"{type(exc).__name__}: {exc}"))
            data = b"".join(parts)
        try:
            self._file.write(data)
        except OSError as exc:
            raise self._error(f"cannot write {self.path}: {exc}") from exc
        return WriteResult(written=len(batch) - len(rejected), rejected=tuple(rejected))

    def _columnar(self, batch: Batch) -> pa.Buffer | None:
        """The text of a batch of Arrow columns; None for tuples or a batch to encode row by row."""
        form = own_text_arrow(batch)
        if form is None:
            return None
        try:
            return self._encode_arrow(form)
        except (NotExact, pa.ArrowException, *SERIALISE_ERRORS):
            return None  # the row encoder writes what it can and rejects the rest with their reasons

    def flush(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise self._error(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        f, self._file = self._file, None
        if f is None:
            return
        try:
            f.close()
        except OSError as exc:
            raise self._error(f"cannot close {self.path}: {exc}") from exc

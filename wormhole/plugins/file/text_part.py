"""The csv and jsonl part writer: each batch serialised in memory, then appended to the part in one call.

The text formats' counterpart of :mod:`~wormhole.plugins.file.parquet_part`; apart from ``writer.py``,
which decides which parts exist and when they become durable, because this only writes bytes.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Sequence
from typing import BinaryIO, Protocol

from wormhole.errors import WriteError
from wormhole.plugins.base import Rejected, Row, WriteResult
from wormhole.plugins.file.layout import create_part

SERIALISE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, RecursionError, csv.Error)
"""What a row the format cannot hold raises (UnicodeEncodeError is a ValueError)."""


class _Encoder(Protocol):
    def header(self) -> bytes: ...

    def encode(self, rows: Sequence[Row]) -> bytes: ...


class TextPart:
    """One csv or jsonl part file: each batch serialised in memory, then written in one call."""

    def __init__(self, path: str, encoder: _Encoder, error: Callable[[str], WriteError]) -> None:
        self.path = path
        self._encode = encoder.encode
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

    def write(self, rows: Sequence[Row]) -> WriteResult:
        if self._file is None:
            raise self._error(f"{self.path} is not open")
        if not rows:
            return WriteResult(written=0)
        rejected: list[Rejected] = []
        try:
            data = self._encode(rows)
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
        return WriteResult(written=len(rows) - len(rejected), rejected=tuple(rejected))

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

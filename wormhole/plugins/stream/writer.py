"""The stream store's sink role: a null sink that counts and drops rows (``fail_after``, ``delay_ms`` for tests),
or prints them on standard output (``print``, as DataX's streamwriter)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from wormhole.errors import WriteError
from wormhole.plugins.base import Batch, Row, WriteContext, WriteResult, rows_of
from wormhole.plugins.stream.options import NullWriterOptions
from wormhole.plugins.stream.periphery import NullPeriphery


class NullWriter:
    def __init__(self, options: NullWriterOptions, ctx: WriteContext, periphery: NullPeriphery, worker: int) -> None:
        self._o = options
        self._ctx = ctx
        self._p = periphery

    def open(self) -> None:
        pass

    def write(self, batch: Batch) -> WriteResult:
        if self._o.delay_ms:
            time.sleep(self._o.delay_ms / 1000)
        if self._o.fail_after is not None:
            with self._p.lock:
                self._p.rows += len(batch)
                if self._p.rows > self._o.fail_after:
                    raise WriteError(f"null sink configured to fail after {self._o.fail_after} rows",
                                     destination=self._ctx.destination, plugin="stream")
        if self._o.print:
            self._print(rows_of(batch))
        return WriteResult(written=len(batch))

    def _print(self, rows: Sequence[Row]) -> None:
        o = self._o
        text = "".join(o.delimiter.join(o.null if v is None else _escape(_text(v)) for v in row) + "\n"
                       for row in rows)
        with _STDOUT_LOCK:  # one write per batch: the writers' rows never interleave within a line
            sys.stdout.write(text)
            sys.stdout.flush()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


_STDOUT_LOCK = threading.Lock()
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _text(value: Any) -> str:
    """A value as DataX prints it: booleans as true/false, dates ISO with a space, bytes as UTF-8 text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _escape(text: str) -> str:
    return text.translate(_ESCAPES)

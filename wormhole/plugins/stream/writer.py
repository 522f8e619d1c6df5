"""The stream store's sink role: a null sink that counts and drops rows (``fail_after``, ``delay_ms`` for tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from wormhole.errors import WriteError
from wormhole.plugins.base import Row, ShippedWithoutLock, WriteContext, WriteResult
from wormhole.plugins.stream.options import NullWriterOptions


class NullPeriphery(ShippedWithoutLock):
    def __init__(self, options: NullWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        self.rows = 0
        self.committed = False
        self.rolled_back = False
        self.lock = threading.Lock()

    def prepare(self) -> None:
        pass

    def commit(self) -> None:
        self.committed = True

    def rollback(self) -> None:
        self.rolled_back = True


class NullWriter:
    def __init__(self, options: NullWriterOptions, ctx: WriteContext, periphery: NullPeriphery, worker: int) -> None:
        self._o = options
        self._ctx = ctx
        self._p = periphery

    def open(self) -> None:
        pass

    def write(self, rows: Sequence[Row]) -> WriteResult:
        if self._o.delay_ms:
            time.sleep(self._o.delay_ms / 1000)
        if self._o.fail_after is not None:
            with self._p.lock:
                self._p.rows += len(rows)
                if self._p.rows > self._o.fail_after:
                    raise WriteError(f"null sink configured to fail after {self._o.fail_after} rows",
                                     destination=self._ctx.destination, plugin="stream")
        return WriteResult(written=len(rows))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

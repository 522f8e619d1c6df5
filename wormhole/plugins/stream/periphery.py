"""The stream store's peripheries: the generator's row count as the source's estimate; the null sink's,
which records whether it was committed or rolled back (tests ask)."""

from __future__ import annotations

import threading

from wormhole.plugins.base import ReadContext, ShippedWithoutLock, SourceInfo, WriteContext
from wormhole.plugins.stream.options import NullWriterOptions, StreamReaderOptions


class StreamReaderPeriphery:
    def __init__(self, options: StreamReaderOptions, ctx: ReadContext) -> None:
        self._o = options

    def prepare(self) -> SourceInfo:
        return SourceInfo(estimated_rows=self._o.rows)


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

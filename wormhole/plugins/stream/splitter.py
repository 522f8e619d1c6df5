"""The stream store's splitter: ``splits`` equal row ranges of the ``rows`` the generator makes."""

from __future__ import annotations

from wormhole.plugins.base import ReadContext, Split
from wormhole.plugins.stream.options import StreamReaderOptions


class StreamSplitter:
    def __init__(self, options: StreamReaderOptions, ctx: ReadContext) -> None:
        self._o = options

    def split(self, advice: int) -> list[Split]:
        n, rows = self._o.splits, self._o.rows
        bounds = [rows * i // n for i in range(n + 1)]
        return [Split(id=f"stream-{i}", resource_mark="stream", params={"lo": bounds[i], "hi": bounds[i + 1]})
                for i in range(n)]

"""The hive store's splitter: a table is one split (Spark's read cuts it into partitions)."""

from __future__ import annotations

from wormhole.plugins.base import ReadContext, Split
from wormhole.plugins.hive.options import HiveReaderOptions


class HiveSplitter:
    def __init__(self, options: HiveReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def split(self, advice: int) -> list[Split]:
        return [Split(id=self.options.table, resource_mark=f"hive:{self.options.table}")]

"""The hive store's reader: the schema from the catalog; the rows are read by Spark only.

:func:`wormhole.plugins.hive.spark.read` is the native Spark read (``SourceRole.spark_read``); the
row reader's ``read`` is never called (``SourceRole.spark_only``), and says so if it is.
"""

from __future__ import annotations

from typing import Any

from wormhole.errors import ReadError
from wormhole.plugins.base import ReadContext, Schema, Split
from wormhole.plugins.hive.options import HiveReaderOptions
from wormhole.plugins.hive.spark import table_schema
from wormhole.spark import spark_session

PLUGIN_NAME = "hive"


class HiveReader:
    def __init__(self, options: HiveReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def schema(self) -> Schema:
        return table_schema(spark_session(), self.options)

    def read(self, split: Split) -> Any:
        raise ReadError("hive tables are read by Spark only (settings.engine spark or auto)", plugin=PLUGIN_NAME)

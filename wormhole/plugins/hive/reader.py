"""The hive store's source role: tables are read by Spark only (``spark.table``, ``where``, ``columns``).

The driver checks the table exists and takes its schema from the catalog; :func:`read` is the
native Spark read (``SourceRole.spark_read``). The row reader is never called (``spark_only``).
This module imports pyspark: only the plugin entry's factories and Spark mode load it.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from wormhole.errors import ReadError, SplitError
from wormhole.plugins.base import ReadContext, Schema, SourceInfo, Split
from wormhole.plugins.hive.options import HiveReaderOptions
from wormhole.plugins.hive.sql import quote, table_ref
from wormhole.spark import spark_session
from wormhole.spark.session import describe_spark_error
from wormhole.spark.types import logical_schema

PLUGIN_NAME = "hive"


def read(spark: SparkSession, options: HiveReaderOptions, splits: list[Split], schema: Schema | None) -> DataFrame:
    """The table as a DataFrame, filtered by ``where`` and cut to ``columns``."""
    try:
        frame = spark.table(table_ref(options.table))
        if options.where:
            frame = frame.where(options.where)
        if options.columns:
            frame = frame.select([quote(c) for c in options.columns])
    except Exception as exc:
        raise SplitError(f"cannot read hive table {options.table}: {describe_spark_error(exc)}",
                         plugin=PLUGIN_NAME) from exc
    return frame


class HiveSource:
    """Periphery, splitter and schema of a hive source; the rows are read by :func:`read` on Spark."""

    def __init__(self, options: HiveReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def prepare(self) -> SourceInfo:
        spark = spark_session()
        if not spark.catalog.tableExists(self.options.table):
            raise ReadError(f"hive table {self.options.table} does not exist", plugin=PLUGIN_NAME)
        return SourceInfo()

    def split(self, advice: int) -> list[Split]:
        return [Split(id=self.options.table, resource_mark=f"hive:{self.options.table}")]

    def schema(self) -> Schema:
        return logical_schema(read(spark_session(), self.options, [], None).schema)

    def read(self, split: Split) -> Any:
        raise ReadError("hive tables are read by Spark only (settings.engine spark or auto)", plugin=PLUGIN_NAME)

"""The hive store's Spark adapter: what it does with DataFrames, the only hive module importing pyspark.

:func:`read` is the native Spark read (``SourceRole.spark_read``: the table, filtered by ``where``
and cut to ``columns``), :func:`write` the native Spark write (``SinkRole.spark_write``: Spark's
parquet writer into the staging directory, whose commit protocol makes task retries safe), and
:func:`staged` the staging directory as a DataFrame for the periphery's INSERT at commit. The
periphery reaches the catalog through the run's session alone (``ctx.spark``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession

from wormhole.errors import SplitError
from wormhole.plugins.base import Schema, Split, WriteContext
from wormhole.plugins.hive.options import HiveReaderOptions, HiveWriterOptions
from wormhole.plugins.hive.sql import quote, table_ref
from wormhole.plugins.spark_kit import canonical, describe_spark_error, exact_columns, logical_schema, spark_schema


class Staging(Protocol):
    """What :func:`write` needs of the destination's periphery (:class:`.periphery.HiveWriterPeriphery`)."""

    tmp_dir: str


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


def table_schema(spark: SparkSession, options: HiveReaderOptions) -> Schema:
    """The logical schema of what :func:`read` gives (the catalog's, nothing is read)."""
    return logical_schema(read(spark, options, [], None).schema)


def staged(spark: SparkSession, tmp_dir: str, schema: Schema) -> DataFrame:
    """The staging directory's Parquet as a DataFrame (empty, with ``schema``, when nothing was staged)."""
    if Path(tmp_dir).is_dir() and any(Path(tmp_dir).glob("*.parquet")):
        return spark.read.parquet(tmp_dir)
    return spark.createDataFrame([], spark_schema(schema))


def write(frame: DataFrame, options: HiveWriterOptions, ctx: WriteContext, periphery: Staging) -> bool:
    """Spark mode: Spark writes the staging Parquet (its commit protocol makes task retries safe);
    False (the parquet row writer on the driver, as in local mode) for a frame with exact-text
    columns, whose cast would fail the whole destination on one value that does not fit."""
    if exact_columns(frame.schema):
        return False
    canonical(frame, ctx.schema).write.mode("overwrite").option("compression", "snappy").parquet(periphery.tmp_dir)
    return True

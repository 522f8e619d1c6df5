"""The hive store: tables of the Spark session's catalog (an embedded metastore under var/ by default).

Reading is Spark only (``spark.table`` with the task's ``where`` and ``columns``), so a hive source
runs with ``settings.engine`` spark or auto. Writing stages the rows as Parquet in a directory of
the run (the file store's parquet writer in local mode, Spark's in Spark mode) and loads them into
the table at commit with one ``INSERT INTO|OVERWRITE TABLE ... [PARTITION (static spec)]``;
rollback removes the staging directory, so a failed destination never touches the table. The
catalog needs the SparkSession in both engines, which is why ``auto`` picks Spark for it.

Modules: ``options``, ``sql`` (quoting, literals, created column types),
``splitter``, ``reader``, ``periphery``, ``writer`` and ``spark`` (the Spark adapter: the native read
and write, the only one importing pyspark). All but ``options`` and ``sql`` reach the Spark session,
so this entry loads them only when a task uses the store: ``wormhole plugins hive`` and a task naming
no Spark store never import pyspark.
"""

from __future__ import annotations

from typing import Any

from wormhole.plugins.base import Plugin, ReadContext, SinkRole, SourceRole, WriteContext
from wormhole.plugins.hive.options import HiveReaderOptions, HiveWriterOptions

__all__ = ["PLUGIN", "HiveReaderOptions", "HiveWriterOptions"]


def _splitter(options: HiveReaderOptions, ctx: ReadContext) -> Any:
    from wormhole.plugins.hive.splitter import HiveSplitter

    return HiveSplitter(options, ctx)


def _reader(options: HiveReaderOptions, ctx: ReadContext) -> Any:
    from wormhole.plugins.hive.reader import HiveReader

    return HiveReader(options, ctx)


def _reader_periphery(options: HiveReaderOptions, ctx: ReadContext) -> Any:
    from wormhole.plugins.hive.periphery import HiveReaderPeriphery

    return HiveReaderPeriphery(options, ctx)


def _writer_periphery(options: HiveWriterOptions, ctx: WriteContext) -> Any:
    from wormhole.plugins.hive.periphery import HiveWriterPeriphery

    return HiveWriterPeriphery(options, ctx)


def _writer(options: HiveWriterOptions, ctx: WriteContext, periphery: Any, worker: int) -> Any:
    from wormhole.plugins.hive.writer import staging_writer

    return staging_writer(options, ctx, periphery, worker)


SOURCE = SourceRole(options=HiveReaderOptions, splitter=_splitter, reader=_reader, periphery=_reader_periphery,
                    spark_read="wormhole.plugins.hive.spark:read",
                    spark_only=True)  # tables are read by spark.table only

SINK = SinkRole(options=HiveWriterOptions, periphery=_writer_periphery, writer=_writer, method_keys=("mode",),
                spark_write="wormhole.plugins.hive.spark:write",
                needs_spark=True)  # the catalog needs a SparkSession in both engines, so auto picks Spark

PLUGIN = Plugin(
    name="hive",
    description="Hive tables of the Spark catalog: read through Spark; write staged Parquet, INSERT at commit",
    source=SOURCE,
    sink=SINK,
)

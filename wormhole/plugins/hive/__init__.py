"""The hive store: tables of the Spark session's catalog (an embedded metastore under var/ by default).

Reading is Spark only (``spark.table`` with the task's ``where`` and ``columns``), so a hive source
runs with ``settings.engine`` spark or auto. Writing stages the rows as Parquet in a directory of
the run (the file store's parquet writer in local mode, Spark's in Spark mode) and loads them into
the table at commit with one ``INSERT INTO|OVERWRITE TABLE ... [PARTITION (static spec)]``;
rollback removes the staging directory, so a failed destination never touches the table. The
catalog needs the SparkSession in both engines, which is why ``auto`` picks Spark for it.

Modules: ``options``, ``sql`` (quoting, literals, created column types), ``reader`` and ``writer``.
The reader and writer import pyspark, so this entry loads them only when a task uses the store:
``wormhole plugins hive`` and a task naming no Spark store never import pyspark.
"""

from __future__ import annotations

from typing import Any

from wormhole.plugins.base import Plugin, ReadContext, SinkRole, SourceRole, WriteContext
from wormhole.plugins.hive.options import HiveReaderOptions, HiveWriterOptions

__all__ = ["PLUGIN", "HiveReaderOptions", "HiveWriterOptions"]


def _source(options: HiveReaderOptions, ctx: ReadContext) -> Any:
    from wormhole.plugins.hive.reader import HiveSource

    return HiveSource(options, ctx)


def _writer_periphery(options: HiveWriterOptions, ctx: WriteContext) -> Any:
    from wormhole.plugins.hive.writer import HiveWriterPeriphery

    return HiveWriterPeriphery(options, ctx)


def _writer(options: HiveWriterOptions, ctx: WriteContext, periphery: Any, worker: int) -> Any:
    from wormhole.plugins.hive.writer import staging_writer

    return staging_writer(options, ctx, periphery, worker)


PLUGIN = Plugin(
    name="hive",
    description="Hive tables of the Spark catalog: read through Spark; write staged Parquet, INSERT at commit",
    source=SourceRole(options=HiveReaderOptions, splitter=_source, reader=_source, periphery=_source,
                      spark_read="wormhole.plugins.hive.reader:read", spark_only=True),
    sink=SinkRole(options=HiveWriterOptions, periphery=_writer_periphery, writer=_writer,
                  spark_write="wormhole.plugins.hive.writer:write", needs_spark=True),
)

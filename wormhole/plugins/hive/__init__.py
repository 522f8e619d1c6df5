"""The hive store: tables of the Spark session's catalog (an embedded metastore under var/ by default).

Reading is Spark only (``spark.table`` with the task's ``where`` and ``columns``), so a hive source
runs with ``settings.engine`` spark or auto. Writing stages the rows as Parquet in a directory of
the run (the file store's parquet writer in local mode, Spark's in Spark mode) and loads them into
the table at commit with one ``INSERT INTO|OVERWRITE TABLE ... [PARTITION (static spec)]``;
rollback removes the staging directory, so a failed destination never touches the table. The
catalog needs the SparkSession in both engines, which is why ``auto`` picks Spark for it.
The implementation lives in :mod:`wormhole.spark.hive` (the only place that may import pyspark).
"""

from __future__ import annotations

from typing import Any

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.hive.options import HiveReaderOptions, HiveWriterOptions

__all__ = ["PLUGIN", "HiveReaderOptions", "HiveWriterOptions"]


def _impl() -> Any:
    from wormhole.spark import hive

    return hive


def _source(options: HiveReaderOptions, ctx: Any) -> Any:
    return _impl().HiveSource(options, ctx)


def _writer_periphery(options: HiveWriterOptions, ctx: Any) -> Any:
    return _impl().HiveWriterPeriphery(options, ctx)


def _writer(options: HiveWriterOptions, ctx: Any, periphery: Any, worker: int) -> Any:
    return _impl().staging_writer(options, ctx, periphery, worker)


PLUGIN = Plugin(
    name="hive",
    description="Hive tables of the Spark catalog: read through Spark; write staged Parquet, INSERT at commit",
    source=SourceRole(options=HiveReaderOptions, splitter=_source, reader=_source, periphery=_source,
                      spark_read="wormhole.spark.hive:read", spark_only=True),
    sink=SinkRole(options=HiveWriterOptions, periphery=_writer_periphery, writer=_writer,
                  spark_write="wormhole.spark.hive:write", needs_spark=True),
)

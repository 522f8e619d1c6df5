"""The mysql store (MySQL and MariaDB through pymysql): split reads of tables or sharded tables, and
loads by LOAD DATA or multi-row INSERT with append, truncate or atomic staging-table replace.

See :mod:`.reader` for splitting and reading, :mod:`.writer` for loads, commits and rollbacks,
:mod:`.types` for the type mapping, and :mod:`.options` for the parameters users write.
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.mysql.options import MysqlReaderOptions, MysqlWriterOptions
from wormhole.plugins.mysql.reader import MysqlReader, MysqlReaderPeriphery, MysqlSplitter
from wormhole.plugins.mysql.writer import MysqlWriter, MysqlWriterPeriphery

__all__ = [
    "PLUGIN",
    "MysqlReader",
    "MysqlReaderOptions",
    "MysqlReaderPeriphery",
    "MysqlSplitter",
    "MysqlWriter",
    "MysqlWriterOptions",
    "MysqlWriterPeriphery",
]


def _single_writer_key(options: MysqlWriterOptions) -> str | None:
    # Two destinations truncating or swapping the same table would undo each other's load.
    if options.load == "append":
        return None
    return f"mysql table {options.host}:{options.port}/{options.database}.{options.table}".lower()


PLUGIN = Plugin(
    name="mysql",
    description="MySQL/MariaDB tables: key-range split reads (sharded too); append, truncate or staging loads",
    source=SourceRole(
        options=MysqlReaderOptions,
        splitter=MysqlSplitter,
        reader=MysqlReader,
        periphery=MysqlReaderPeriphery,
        spark_read="wormhole.spark.stores:mysql_read",
    ),
    sink=SinkRole(
        options=MysqlWriterOptions,
        periphery=MysqlWriterPeriphery,
        writer=MysqlWriter,
        # Three connections keep the server busy while each writer encodes its next piece; one
        # leaves the server idle half the time (make bench).
        default_concurrency=3,
        single_writer_key=_single_writer_key,
        spark_write="wormhole.spark.stores:mysql_write",
        spark_partitions=True,  # only replace/upsert use the row writer on Spark, and they replay cleanly
    ),
)

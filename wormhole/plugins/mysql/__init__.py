"""The mysql store (MySQL and MariaDB through pymysql): split reads of tables or sharded tables, and
loads by LOAD DATA or multi-row INSERT with append, truncate or atomic staging-table replace.

The entry below says what the store can do (its roles' facets), :mod:`.options` holds the parameters users write (and
the source shapes they resolve to), :mod:`.splitter` and :mod:`.reader` the source role,
:mod:`.periphery` both roles' peripheries, :mod:`.staging` and :mod:`.writer` the sink role,
:mod:`.types` the type mapping, :mod:`.spark` the native Spark read and write (loaded in Spark mode
only).
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.mysql.options import MysqlReaderOptions, MysqlWriterOptions, single_writer_key
from wormhole.plugins.mysql.passthrough import plan_load
from wormhole.plugins.mysql.periphery import MysqlReaderPeriphery, MysqlWriterPeriphery
from wormhole.plugins.mysql.reader import MysqlReader
from wormhole.plugins.mysql.splitter import MysqlSplitter
from wormhole.plugins.mysql.writer import MysqlWriter
from wormhole.plugins.sql.roles import sink_role, source_role

# The kit's roles (:mod:`wormhole.plugins.sql.roles`): incremental bounds, pushdown, busy_threads (MySQL's
# Threads_running); each split durable with its marker row, leftovers, three writers, Spark partitions.
SOURCE = source_role(
    MYSQL,
    options=MysqlReaderOptions,
    splitter=MysqlSplitter,
    reader=MysqlReader,
    periphery=MysqlReaderPeriphery,
    spark_read="wormhole.plugins.mysql.spark:read",
)

SINK = sink_role(
    options=MysqlWriterOptions,
    periphery=MysqlWriterPeriphery,
    writer=MysqlWriter,
    single_writer_key=single_writer_key,
    method_keys=("load", "write_mode", "method"),
    uses_wire_text=True,
    plan_load=plan_load,
)

PLUGIN = Plugin(
    name="mysql",
    description="MySQL/MariaDB tables: key-range split reads (sharded too); append, truncate or staging loads",
    source=SOURCE,
    sink=SINK,
)

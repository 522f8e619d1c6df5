"""The mysql store (MySQL and MariaDB through pymysql): split reads of tables or sharded tables, and
loads by LOAD DATA or multi-row INSERT with append, truncate or atomic staging-table replace.

The entry below says what the store can do (its roles' facets), :mod:`.options` holds the parameters users write (and
the source shapes they resolve to), :mod:`.splitter` and :mod:`.reader` the source role,
:mod:`.periphery` both roles' peripheries, :mod:`.staging` and :mod:`.writer` the sink role,
:mod:`.types` the type mapping, :mod:`.spark` the native Spark read and write (loaded in Spark mode
only).
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.facets import DurableFacet, LeftoverFacet
from wormhole.plugins.mysql.bounds import bounds
from wormhole.plugins.mysql.options import MysqlReaderOptions, MysqlWriterOptions, single_writer_key
from wormhole.plugins.mysql.passthrough import plan_load
from wormhole.plugins.mysql.periphery import MysqlReaderPeriphery, MysqlWriterPeriphery
from wormhole.plugins.mysql.reader import MysqlReader
from wormhole.plugins.mysql.splitter import MysqlSplitter
from wormhole.plugins.mysql.writer import MysqlWriter

SOURCE = SourceRole(
    options=MysqlReaderOptions,
    splitter=MysqlSplitter,
    reader=MysqlReader,
    periphery=MysqlReaderPeriphery,
    spark_read="wormhole.plugins.mysql.spark:read",
    bounds=bounds,
    pushdown="mysql",  # the reader ANDs the task's leading filters to its split queries
    busy_threads=MysqlReaderPeriphery.busy_threads,  # MySQL's Threads_running, which adaptive push-up asks
)

SINK = SinkRole(
    options=MysqlWriterOptions,
    periphery=MysqlWriterPeriphery,
    writer=MysqlWriter,
    # Three connections keep the server busy while each writer encodes its next piece; one
    # leaves the server idle half the time (make bench).
    default_concurrency=3,
    single_writer_key=single_writer_key,
    method_keys=("load", "write_mode", "method"),
    uses_wire_text=True,
    plan_load=plan_load,
    # Each split committed with its marker row in one transaction.
    durable=DurableFacet(writer=MysqlWriter, held=MysqlWriterPeriphery.durable_splits,
                         release=MysqlWriterPeriphery.release),
    # Staging tables and marker tables of crashed runs.
    leftovers=LeftoverFacet(find=MysqlWriterPeriphery.leftovers, clean=MysqlWriterPeriphery.clean_leftovers),
    add_written=MysqlWriterPeriphery.add_written,  # verify compares the table's count with the rows written
    # In Spark mode the row writers run in the executors, a split per partition, each made
    # durable with its marker row in one transaction: a retried task finds it there.
    spark_partitions=True,
)

PLUGIN = Plugin(
    name="mysql",
    description="MySQL/MariaDB tables: key-range split reads (sharded too); append, truncate or staging loads",
    source=SOURCE,
    sink=SINK,
)

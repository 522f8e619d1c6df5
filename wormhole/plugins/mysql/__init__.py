"""The mysql store (MySQL and MariaDB through pymysql): a dialect of the SQL store kit (:mod:`.dialect`) plus
its driver code; docs/manual/mysql.md says what it does."""

from __future__ import annotations

from wormhole.database.facet import CatalogFacet
from wormhole.plugins.base import Plugin
from wormhole.plugins.facets import DdlFacet, SnapshotFacet
from wormhole.plugins.mysql.ddl import MYSQL_DDL, open_session
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.mysql.options import MysqlReaderOptions, MysqlWriterOptions
from wormhole.plugins.mysql.passthrough import plan_load
from wormhole.plugins.mysql.periphery import MysqlReaderPeriphery, MysqlWriterPeriphery
from wormhole.plugins.mysql.reader import MysqlReader
from wormhole.plugins.mysql.snapshot import open_snapshot
from wormhole.plugins.mysql.splitter import MysqlSplitter
from wormhole.plugins.mysql.tables import open_catalog
from wormhole.plugins.mysql.writer import MysqlWriter
from wormhole.plugins.sql.roles import sink_role, source_role

# The kit's roles (:mod:`wormhole.plugins.sql.roles`) with the store's parts (busy_threads: Threads_running; a
# consistent snapshot taken under a brief global read lock, :mod:`.snapshot`), each built apart from the plugin so
# mypy checks its facets against the store's periphery.
SOURCE = source_role(MYSQL, options=MysqlReaderOptions, splitter=MysqlSplitter, reader=MysqlReader,
                     periphery=MysqlReaderPeriphery, spark_read="wormhole.plugins.mysql.spark:read",
                     catalog=CatalogFacet(open=open_catalog),  # a whole database (``tables``): :mod:`.tables`
                     snapshot=SnapshotFacet(open=open_snapshot))
SINK = sink_role(options=MysqlWriterOptions, periphery=MysqlWriterPeriphery, writer=MysqlWriter,
                 method_keys=("load", "write_mode", "method"), targets=("database", "table", "staging_table"),
                 uses_wire_text=True, plan_load=plan_load,
                 ddl=DdlFacet(dialect=MYSQL_DDL, open=open_session,
                              session_key=lambda o: o.endpoint),  # a database task creates its tables
                 # ON DUPLICATE KEY UPDATE, by INSERT (LOAD DATA cannot update a row in place)
                 upsert_params=lambda key: {"write_mode": "upsert", "method": "insert"})
PLUGIN = Plugin(
    name="mysql", source=SOURCE, sink=SINK,
    description="MySQL/MariaDB tables: key-range split reads (sharded too); append, truncate or staging loads")

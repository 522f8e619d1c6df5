"""The mysql store (MySQL and MariaDB through pymysql): split reads of tables or sharded tables, and
loads by LOAD DATA or multi-row INSERT with append, truncate or atomic staging-table replace.

:mod:`.capabilities` says what the store can do, :mod:`.options` holds the parameters users write (and
the source shapes they resolve to), :mod:`.splitter` and :mod:`.reader` the source role,
:mod:`.periphery` both roles' peripheries, :mod:`.staging` and :mod:`.writer` the sink role,
:mod:`.types` the type mapping, :mod:`.spark` the native Spark read and write (loaded in Spark mode
only).
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.mysql.bounds import bounds
from wormhole.plugins.mysql.capabilities import CAPABILITIES
from wormhole.plugins.mysql.options import MysqlReaderOptions, MysqlWriterOptions, single_writer_key
from wormhole.plugins.mysql.passthrough import plan_load
from wormhole.plugins.mysql.periphery import MysqlReaderPeriphery, MysqlWriterPeriphery
from wormhole.plugins.mysql.reader import MysqlReader
from wormhole.plugins.mysql.splitter import MysqlSplitter
from wormhole.plugins.mysql.writer import MysqlWriter

PLUGIN = Plugin(
    name="mysql",
    description="MySQL/MariaDB tables: key-range split reads (sharded too); append, truncate or staging loads",
    source=SourceRole(
        options=MysqlReaderOptions,
        splitter=MysqlSplitter,
        reader=MysqlReader,
        periphery=MysqlReaderPeriphery,
        spark_read="wormhole.plugins.mysql.spark:read",
        bounds=bounds,
    ),
    sink=SinkRole(
        options=MysqlWriterOptions,
        periphery=MysqlWriterPeriphery,
        writer=MysqlWriter,
        single_writer_key=single_writer_key,
        uses_wire_text=True,
        plan_load=plan_load,
    ),
    capabilities=CAPABILITIES,
)

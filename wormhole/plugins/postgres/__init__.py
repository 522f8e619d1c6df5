"""The postgres store (PostgreSQL 15, and Greenplum through the same protocol) through psycopg 3: split
reads by key range or physical block range with COPY TO STDOUT, and COPY FROM STDIN loads with
append, truncate, upsert or an atomic staging-table swap.

:mod:`.options` holds the connection keys both roles share and the naming rules, :mod:`.connection`
the sessions and error classes. The sink role: :mod:`.sink_options`, :mod:`.writer_periphery`,
:mod:`.writer` (with :mod:`.encoding`, :mod:`.markers`, :mod:`.staging` and :mod:`.ddl`).
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole
from wormhole.plugins.postgres.capabilities import CAPABILITIES
from wormhole.plugins.postgres.sink_options import PostgresWriterOptions, single_writer_key
from wormhole.plugins.postgres.writer import PostgresWriter
from wormhole.plugins.postgres.writer_periphery import PostgresWriterPeriphery, plan_load

PLUGIN = Plugin(
    name="postgres",
    description="PostgreSQL/Greenplum tables: key or block range split reads; COPY loads with staging swap",
    sink=SinkRole(
        options=PostgresWriterOptions,
        periphery=PostgresWriterPeriphery,
        writer=PostgresWriter,
        single_writer_key=single_writer_key,
        plan_load=plan_load,
    ),
    capabilities=CAPABILITIES,
)

"""The postgres store (PostgreSQL, and Greenplum through the same protocol, through psycopg 3): a dialect of
the SQL store kit (:mod:`.dialect`) plus its driver code; docs/manual/postgres.md says what it does."""

from __future__ import annotations

from wormhole.database.facet import CatalogFacet
from wormhole.plugins.base import Plugin
from wormhole.plugins.facets import DdlFacet, EncodedReadFacet, EncodedWriteFacet, SnapshotFacet
from wormhole.plugins.postgres.ddl import POSTGRES_DDL, open_session
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.postgres.options import PostgresReaderOptions, PostgresWriterOptions
from wormhole.plugins.postgres.passthrough import FORMAT as COPY_BINARY
from wormhole.plugins.postgres.periphery import PostgresReaderPeriphery, PostgresWriterPeriphery, plan_load
from wormhole.plugins.postgres.reader import PostgresReader
from wormhole.plugins.postgres.snapshot import open_snapshot
from wormhole.plugins.postgres.splitter import PostgresSplitter
from wormhole.plugins.postgres.tables import open_catalog
from wormhole.plugins.postgres.writer import PostgresWriter
from wormhole.plugins.sql.roles import sink_role, source_role

# The kit's roles (:mod:`wormhole.plugins.sql.roles`) with the store's parts (busy_threads: active backends in
# pg_stat_activity), binary COPY rows: read undecoded, loaded as they are by a target of the same types, and a
# consistent snapshot exported to every reader (:mod:`.snapshot`).
# Each role is built apart from the plugin so mypy checks its facets against the store's periphery.
SOURCE = source_role(POSTGRES, options=PostgresReaderOptions, splitter=PostgresSplitter, reader=PostgresReader,
                     periphery=PostgresReaderPeriphery, spark_read="wormhole.plugins.postgres.spark:read",
                     encoded=EncodedReadFacet(format=COPY_BINARY, reader=PostgresReader),
                     catalog=CatalogFacet(open=open_catalog),
                     snapshot=SnapshotFacet(open=open_snapshot))
SINK = sink_role(options=PostgresWriterOptions, periphery=PostgresWriterPeriphery, writer=PostgresWriter,
                 method_keys=("load", "write_mode"), plan_load=plan_load,
                 targets=("database", "schema", "table", "staging_table"),
                 encoded=EncodedWriteFacet(format=COPY_BINARY, takes=PostgresWriterPeriphery.takes_encoding),
                 ddl=DdlFacet(dialect=POSTGRES_DDL, open=open_session,
                              session_key=lambda o: o.endpoint(o.database)),  # a database task creates its tables
                 upsert_params=lambda key: {"write_mode": "upsert", "upsert_key": list(key)})
PLUGIN = Plugin(name="postgres", source=SOURCE, sink=SINK,
                description="PostgreSQL/Greenplum tables: key or block range split reads; COPY loads with staging swap")

"""The postgres store (PostgreSQL 15, and Greenplum through the same protocol) through psycopg 3: split
reads by key range or physical block range with COPY TO STDOUT, and COPY FROM STDIN loads with
append, truncate, upsert or an atomic staging-table swap.

:mod:`.options` holds the connection keys both roles share and the naming rules, :mod:`.connection`
the sessions and error classes. The source role: :mod:`.source_options` (its params and shapes),
:mod:`.catalog` (types), :mod:`.splitter`, :mod:`.reader`, :mod:`.periphery`, :mod:`.bounds`. The sink
role: :mod:`.sink_options`, :mod:`.writer_periphery`, :mod:`.writer` (with :mod:`.encoding`,
:mod:`.markers`, :mod:`.staging` and :mod:`.ddl`). :mod:`.spark` is the native Spark read (loaded in
Spark mode only).
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.facets import DurableFacet, EncodedReadFacet, EncodedWriteFacet, LeftoverFacet
from wormhole.plugins.postgres.bounds import bounds
from wormhole.plugins.postgres.passthrough import FORMAT as COPY_BINARY
from wormhole.plugins.postgres.periphery import PostgresReaderPeriphery
from wormhole.plugins.postgres.reader import PostgresReader
from wormhole.plugins.postgres.sink_options import PostgresWriterOptions, single_writer_key
from wormhole.plugins.postgres.source_options import PostgresReaderOptions
from wormhole.plugins.postgres.splitter import PostgresSplitter
from wormhole.plugins.postgres.writer import PostgresWriter
from wormhole.plugins.postgres.writer_periphery import PostgresWriterPeriphery, plan_load

SOURCE = SourceRole(
    options=PostgresReaderOptions,
    splitter=PostgresSplitter,
    reader=PostgresReader,
    periphery=PostgresReaderPeriphery,
    spark_read="wormhole.plugins.postgres.spark:read",
    bounds=bounds,
    pushdown="postgres",  # the reader ANDs the task's leading filters to its split queries
    busy_threads=PostgresReaderPeriphery.busy_threads,  # active backends in pg_stat_activity
    # Binary COPY rows, loaded undecoded by a target declaring the same types.
    encoded=EncodedReadFacet(format=COPY_BINARY, reader=PostgresReader),
)

SINK = SinkRole(
    options=PostgresWriterOptions,
    periphery=PostgresWriterPeriphery,
    writer=PostgresWriter,
    default_concurrency=3,  # as mysql: the server keeps busy while each writer encodes its next batch
    single_writer_key=single_writer_key,
    method_keys=("load", "write_mode"),
    plan_load=plan_load,
    # Each split committed with its marker row in one transaction.
    durable=DurableFacet(writer=PostgresWriter, held=PostgresWriterPeriphery.durable_splits,
                         release=PostgresWriterPeriphery.release),
    # Staging tables and marker rows of crashed runs.
    leftovers=LeftoverFacet(find=PostgresWriterPeriphery.leftovers,
                            clean=PostgresWriterPeriphery.clean_leftovers),
    add_written=PostgresWriterPeriphery.add_written,  # verify compares the table's count with the rows written
    encoded=EncodedWriteFacet(format=COPY_BINARY, takes=PostgresWriterPeriphery.takes_encoding),
    # In Spark mode the row writers run in the executors, a split per partition, each made durable
    # with its marker row in one transaction: a retried task finds it there.
    spark_partitions=True,
)

PLUGIN = Plugin(
    name="postgres",
    description="PostgreSQL/Greenplum tables: key or block range split reads; COPY loads with staging swap",
    source=SOURCE,
    sink=SINK,
)

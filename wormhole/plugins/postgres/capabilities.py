"""What the postgres store can do (:class:`~wormhole.plugins.capabilities.Capabilities`)."""

from __future__ import annotations

from wormhole.plugins.capabilities import Capabilities

CAPABILITIES = Capabilities(
    pushdown="postgres",  # the reader ANDs the task's leading filters to its split queries
    busy_threads=True,  # active backends in pg_stat_activity, which adaptive push-up asks
    default_concurrency=3,  # as mysql: the server keeps busy while each writer encodes its next batch
    durable_splits=True,  # each split committed with its marker row in one transaction
    leftovers=True,  # staging tables and marker rows of crashed runs
    counts_written=True,
    # Binary COPY rows from a postgres source, loaded undecoded by a target declaring the same types.
    encoded_read="postgres.copy_binary",
    encoded_write="postgres.copy_binary",  # verify compares the table's count with the rows written
    # In Spark mode the row writers run in the executors, a split per partition, each made durable
    # with its marker row in one transaction: a retried task finds it there.
    spark_partitions=True,
)

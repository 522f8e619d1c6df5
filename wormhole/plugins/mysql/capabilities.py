"""What the mysql store can do (:class:`~wormhole.plugins.capabilities.Capabilities`)."""

from __future__ import annotations

from wormhole.plugins.capabilities import Capabilities

CAPABILITIES = Capabilities(
    pushdown="mysql",  # the reader ANDs the task's leading filters to its split queries
    busy_threads=True,  # MySQL's Threads_running, which adaptive push-up asks
    # Three connections keep the server busy while each writer encodes its next piece; one
    # leaves the server idle half the time (make bench).
    default_concurrency=3,
    durable_splits=True,  # each split committed with its marker row in one transaction
    leftovers=True,  # staging tables and marker tables of crashed runs
    counts_written=True,  # verify compares the table's count with the rows written
    # In Spark mode the row writers run in the executors, a split per partition, each made
    # durable with its marker row in one transaction: a retried task finds it there.
    spark_partitions=True,
)

"""What the sqlite store can do (:class:`~wormhole.plugins.capabilities.Capabilities`)."""

from __future__ import annotations

from wormhole.plugins.capabilities import Capabilities

CAPABILITIES = Capabilities(
    pushdown="sqlite",  # the reader adds the task's leading filters to its query
    durable_splits=True,  # each split's staged rows committed with its marker row
    leftovers=True,  # staging and marker tables of crashed runs
    # One writer: the destination holds the file's write lock. In Spark mode its rows are written on
    # the driver (no spark_partitions).
)

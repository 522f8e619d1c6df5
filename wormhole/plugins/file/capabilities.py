"""What the file store can do (:class:`~wormhole.plugins.capabilities.Capabilities`)."""

from __future__ import annotations

from wormhole.plugins.capabilities import Capabilities

CAPABILITIES = Capabilities(
    durable_splits=True,  # a split's part is renamed into its final name when the split ends
    leftovers=True,  # temporary and set-aside directories of crashed runs
    spark_partitions=True,  # a part per partition, created afresh: a retried partition replaces it
)

"""What the stream store can do (:class:`~wormhole.plugins.capabilities.Capabilities`)."""

from __future__ import annotations

from wormhole.plugins.capabilities import Capabilities

CAPABILITIES = Capabilities(
    spark_partitions=True,  # the null sink keeps nothing: a retried partition is counted once by Spark
)

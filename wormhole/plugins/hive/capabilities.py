"""What the hive store can do (:class:`~wormhole.plugins.capabilities.Capabilities`)."""

from __future__ import annotations

from wormhole.plugins.capabilities import Capabilities

CAPABILITIES = Capabilities(
    spark_only=True,  # tables are read by spark.table only
    needs_spark=True,  # the catalog needs a SparkSession in both engines, so auto picks Spark
)

"""Native Spark writes of the file store (``SinkRole.spark_write``); the mysql store's native read
and write live with it, in :mod:`wormhole.plugins.mysql.spark`.

Parquet files are written by Spark into the file store's temporary directory, which the periphery
renames into place on commit, exactly as in local mode.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from wormhole.plugins.base import WriteContext
from wormhole.spark.types import canonical, exact_columns


def file_write(frame: DataFrame, options: Any, ctx: WriteContext, periphery: Any) -> bool:
    """Parquet through Spark into the temporary directory; csv and jsonl use the row writer (False),
    so their text is the same whichever engine wrote it."""
    if options.format != "parquet" or exact_columns(frame.schema):
        return False  # exact text: the parquet writer rejects what does not fit, as in local mode
    canonical(frame, ctx.schema).write.mode("overwrite").option("compression", "snappy").parquet(periphery.tmp_dir)
    return True

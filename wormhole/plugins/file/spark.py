"""The file store's native Spark write (``SinkRole.spark_write``), loaded only in Spark mode.

Parquet is written by Spark into the periphery's temporary directory, which the periphery renames
into place on commit, exactly as in local mode. csv and jsonl keep the row writer, so their text is
the same whichever engine wrote it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from wormhole.plugins.base import WriteContext
from wormhole.plugins.file.options import FileWriterOptions
from wormhole.plugins.file.periphery import FileWriterPeriphery
from wormhole.plugins.spark_kit import canonical, exact_columns


def write(frame: DataFrame, options: FileWriterOptions, ctx: WriteContext, periphery: FileWriterPeriphery) -> bool:
    """Parquet through Spark into the temporary directory; False (the row writer) for csv and jsonl."""
    if options.format != "parquet" or exact_columns(frame.schema):
        return False  # exact text: the parquet writer rejects what does not fit, as in local mode
    canonical(frame, ctx.schema).write.mode("overwrite").option("compression", "snappy").parquet(periphery.tmp_dir)
    return True

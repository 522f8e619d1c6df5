"""The hive store's writer in local mode: the file store's parquet writer into the staging directory.

One part per writer thread in the periphery's staging directory (:mod:`.periphery`), loaded into the
table by the periphery's INSERT at commit. Spark mode writes the same directory with Spark's parquet
writer instead (:func:`wormhole.plugins.hive.spark.write`).
"""

from __future__ import annotations

from wormhole.plugins.base import WriteContext
from wormhole.plugins.file.options import FileWriterOptions
from wormhole.plugins.file.writer import FileWriter
from wormhole.plugins.hive.options import HiveWriterOptions
from wormhole.plugins.hive.periphery import HiveWriterPeriphery


def staging_writer(options: HiveWriterOptions, ctx: WriteContext, periphery: HiveWriterPeriphery,
                   worker: int) -> FileWriter:
    """The file store's parquet writer, one part per writer thread in the staging directory."""
    return FileWriter(FileWriterOptions(path=periphery.tmp_dir, format="parquet"), ctx, periphery, worker)  # type: ignore[arg-type]

"""The hive store's sink role: stage the rows as Parquet, load them with one INSERT at commit.

The staging directory is the run's own, beside the metastore (``<metastore>/../staging``). Local
mode stages through the file store's parquet writer (:func:`staging_writer`, one part per writer
thread); Spark mode through Spark's parquet writer (:func:`write`, ``SinkRole.spark_write``), whose
commit protocol makes task retries safe. Commit runs ``INSERT INTO|OVERWRITE TABLE ... [PARTITION
(static spec)] SELECT`` with each column cast to the table's type, matched by name; rollback removes
the staging directory, so a failed destination never touches the table. This module imports
pyspark: only the plugin entry's factories and Spark mode load it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from wormhole.errors import CommitError, PrepareError, StorageError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.file.options import FileWriterOptions
from wormhole.plugins.file.writer import FileWriter
from wormhole.plugins.hive.options import HiveWriterOptions
from wormhole.plugins.hive.sql import hive_type, partition_spec, quote, table_ref
from wormhole.spark import current_conf, spark_session
from wormhole.spark.session import describe_spark_error
from wormhole.spark.types import canonical, exact_columns, spark_schema

PLUGIN_NAME = "hive"


def _partition_problem(table: str, partition_cols: Sequence[str], given: dict[str, Any]) -> str | None:
    """Why the static ``partition`` does not fit the table's partition columns, or None."""
    if sorted(given) == sorted(c.lower() for c in partition_cols):
        return None
    if partition_cols:
        return (f"hive table {table} is partitioned by ({', '.join(partition_cols)}): partition must give a "
                f"value for each (only static partitions are written)")
    return f"hive table {table} is not partitioned; remove partition"


def _column_problem(table: str, data_cols: Sequence[Any], source: dict[str, str], given: dict[str, Any]) -> str | None:
    """Why the table's data columns and the source's (lower-case name -> name) differ, or None."""
    missing = [c.name for c in data_cols if c.name.lower() not in source]
    extra = sorted(set(source) - {c.name.lower() for c in data_cols} - set(given))
    if not missing and not extra:
        return None
    problems = []
    if missing:
        problems.append(f"table columns the source lacks: {', '.join(missing)}")
    if extra:
        problems.append(f"source columns the table lacks: {', '.join(source[e] for e in extra)}")
    return f"hive table {table} does not match the source ({'; '.join(problems)})"


class HiveWriterPeriphery:
    """Owns the destination's staging directory and the INSERT that loads it into the table."""

    def __init__(self, options: HiveWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        root = Path(current_conf().metastore_dir).resolve().parent / "staging"
        db = f"-{ctx.taskdb_id}" if ctx.taskdb_id else ""  # task and run ids repeat across task databases
        self.tmp_dir = str(root / f"{options.table}.{ctx.destination}.task-{ctx.task_id}-run-{ctx.run_id}{db}")
        self._select: list[str] = []
        self._committed = False
        self._created = False
        """prepare created the table: rollback drops it again (the target as it was before prepare)."""

    def _error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def prepare(self) -> None:
        spark = spark_session()
        opts = self.options
        if not spark.catalog.tableExists(opts.table):
            if not opts.create:
                raise self._error(PrepareError, f"hive table {opts.table} does not exist "
                                                f"(create: true creates it from the source's columns)")
            self._create(spark)
        columns = spark.catalog.listColumns(opts.table)
        given = {k.lower(): v for k, v in (opts.partition or {}).items()}
        source = {name.lower(): name for name in self.ctx.schema.names}
        data_cols = [c for c in columns if not c.isPartition]
        problem = (_partition_problem(opts.table, [c.name for c in columns if c.isPartition], given)
                   or _column_problem(opts.table, data_cols, source, given))
        if problem is not None:
            raise self._error(PrepareError, problem)
        # Matched by name (case-insensitive), each cast to the table's type.
        self._select = [f"CAST({quote(source[c.name.lower()])} AS {c.dataType}) AS {quote(c.name)}"
                        for c in data_cols]
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        os.makedirs(self.tmp_dir)

    def _create(self, spark: SparkSession) -> None:
        opts = self.options
        parts = {k.lower() for k in (opts.partition or {})}
        cols = ", ".join(f"{quote(c.name)} {hive_type(c)}" for c in self.ctx.schema.columns
                         if c.name.lower() not in parts)
        partitioned = ""
        if opts.partition:
            partitioned = " PARTITIONED BY (" + ", ".join(f"{quote(k)} STRING" for k in opts.partition) + ")"
        database = opts.table.split(".")[0]
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table_ref(opts.table)} ({cols}){partitioned} STORED AS PARQUET")
        self._created = True
        self.ctx.log.info("hive.table_created", table=opts.table, partitioned_by=list(opts.partition or ()))

    def _staged(self, spark: SparkSession) -> DataFrame:
        if os.path.isdir(self.tmp_dir) and any(Path(self.tmp_dir).glob("*.parquet")):
            return spark.read.parquet(self.tmp_dir)
        return spark.createDataFrame([], spark_schema(self.ctx.schema))

    def commit(self) -> None:
        if self._committed:
            return
        spark = spark_session()
        opts = self.options
        view = re.sub(r"\W", "_", f"wormhole_stage_{self.ctx.task_id}_{self.ctx.run_id}_{self.ctx.destination}")
        self._staged(spark).createOrReplaceTempView(view)
        verb = "OVERWRITE" if opts.mode == "overwrite" else "INTO"
        try:
            spark.sql(f"INSERT {verb} TABLE {table_ref(opts.table)}{partition_spec(opts.partition)} "
                      f"SELECT {', '.join(self._select)} FROM {view}")
        except Exception as exc:
            raise self._error(CommitError, f"loading {opts.table} failed: {describe_spark_error(exc)}") from exc
        finally:
            spark.catalog.dropTempView(view)
        self._committed = True
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def rollback(self) -> None:
        # Nothing reached the table before commit's INSERT, which Spark makes visible as a whole.
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        if self._created and not self._committed:
            spark = spark_session()
            table = self.options.table
            # Only an empty table: rows there now are someone else's, written since prepare.
            if spark.catalog.tableExists(table) and spark.table(table_ref(table)).limit(1).count() == 0:
                spark.sql(f"DROP TABLE IF EXISTS {table_ref(table)}")
                self.ctx.log.info("hive.table_dropped", table=table, reason="created by this run, rolled back")
            self._created = False


def staging_writer(options: HiveWriterOptions, ctx: WriteContext, periphery: HiveWriterPeriphery,
                   worker: int) -> FileWriter:
    """Local mode: the file store's parquet writer, one part per writer thread in the staging directory."""
    return FileWriter(FileWriterOptions(path=periphery.tmp_dir, format="parquet"), ctx, periphery, worker)  # type: ignore[arg-type]


def write(frame: DataFrame, options: HiveWriterOptions, ctx: WriteContext, periphery: HiveWriterPeriphery) -> bool:
    """Spark mode: Spark writes the staging Parquet (its commit protocol makes task retries safe);
    False (the parquet row writer on the driver, as in local mode) for a frame with exact-text
    columns, whose cast would fail the whole destination on one value that does not fit."""
    if exact_columns(frame.schema):
        return False
    canonical(frame, ctx.schema).write.mode("overwrite").option("compression", "snappy").parquet(periphery.tmp_dir)
    return True

"""The hive store's peripheries: the source table checked at prepare, the destination's staging and INSERT.

:class:`HiveReaderPeriphery` checks the source table exists. :class:`HiveWriterPeriphery` owns the
destination's staging directory, the run's own beside the metastore (``<metastore>/../staging``),
which the writers fill with Parquet (:mod:`.writer` in local mode, :func:`.spark.write` in Spark
mode). Commit runs ``INSERT INTO|OVERWRITE TABLE ... [PARTITION (static spec)] SELECT`` with each
column cast to the table's type, matched by name; rollback removes the staging directory, so a
failed destination never touches the table. The catalog is reached through the run's session, which
the context gives (``ctx.spark``); what is done with DataFrames is in :mod:`.spark`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wormhole.errors import CommitError, PrepareError, ReadError, StorageError
from wormhole.plugins.base import ReadContext, SourceInfo, SparkAccess, WriteContext
from wormhole.plugins.hive.options import HiveReaderOptions, HiveWriterOptions
from wormhole.plugins.hive.spark import staged
from wormhole.plugins.hive.sql import hive_type, partition_spec, quote, table_ref
from wormhole.plugins.spark_kit import describe_spark_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PLUGIN_NAME = "hive"


def run_spark(spark: SparkAccess | None, error: type[StorageError] = ReadError) -> SparkAccess:
    """The run's Spark from a context (the engine gives it to every context on the driver)."""
    if spark is None:
        raise error("the hive store needs the run's Spark session, which its context lacks", plugin=PLUGIN_NAME)
    return spark


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


class HiveReaderPeriphery:
    """The source table must exist (the schema and the rows come through Spark)."""

    def __init__(self, options: HiveReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.spark = run_spark(ctx.spark)

    def prepare(self) -> SourceInfo:
        if not self.spark.session().catalog.tableExists(self.options.table):
            raise ReadError(f"hive table {self.options.table} does not exist", plugin=PLUGIN_NAME)
        return SourceInfo()


class HiveWriterPeriphery:
    """Owns the destination's staging directory and the INSERT that loads it into the table."""

    def __init__(self, options: HiveWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        self.spark = run_spark(ctx.spark, PrepareError)
        root = Path(self.spark.metastore_dir).resolve().parent / "staging"
        db = f"-{ctx.taskdb_id}" if ctx.taskdb_id else ""  # task and run ids repeat across task databases
        self.tmp_dir = str(root / f"{options.table}.{ctx.destination}.task-{ctx.task_id}-run-{ctx.run_id}{db}")
        self._select: list[str] = []
        self._committed = False
        self._created = False
        """prepare created the table: rollback drops it again (the target as it was before prepare)."""

    def _error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def prepare(self) -> None:
        spark = self.spark.session()
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

    def commit(self) -> None:
        if self._committed:
            return
        spark = self.spark.session()
        opts = self.options
        view = re.sub(r"\W", "_", f"wormhole_stage_{self.ctx.task_id}_{self.ctx.run_id}_{self.ctx.destination}")
        staged(spark, self.tmp_dir, self.ctx.schema).createOrReplaceTempView(view)
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
            spark = self.spark.session()
            table = self.options.table
            # Only an empty table: rows there now are someone else's, written since prepare.
            if spark.catalog.tableExists(table) and spark.table(table_ref(table)).limit(1).count() == 0:
                spark.sql(f"DROP TABLE IF EXISTS {table_ref(table)}")
                self.ctx.log.info("hive.table_dropped", table=table, reason="created by this run, rolled back")
            self._created = False


"""The hive store's implementation (see :mod:`wormhole.plugins.hive` for the behaviour users rely on)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from wormhole.errors import CommitError, PrepareError, ReadError, SplitError
from wormhole.plugins.base import Schema, SourceInfo, Split, WriteContext
from wormhole.plugins.file.options import FileWriterOptions
from wormhole.plugins.file.writer import FileWriter
from wormhole.plugins.hive.options import HiveReaderOptions, HiveWriterOptions
from wormhole.spark import current_conf, spark_session
from wormhole.spark.session import describe_spark_error
from wormhole.spark.types import canonical, logical_schema, spark_schema

PLUGIN_NAME = "hive"

HIVE_TYPES = {"int": "BIGINT", "float": "DOUBLE", "decimal": "DECIMAL(38,18)", "string": "STRING",
              "bytes": "BINARY", "bool": "BOOLEAN", "date": "DATE", "datetime": "TIMESTAMP", "json": "STRING"}


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _table_ref(table: str) -> str:
    return ".".join(_quote(part) for part in table.split("."))


def _literal(value: Any) -> str:
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- source (Spark only) ----------------------------------------------------------------------


def read(spark: SparkSession, options: HiveReaderOptions, splits: list[Split], schema: Schema | None) -> DataFrame:
    try:
        frame = spark.table(_table_ref(options.table))
        if options.where:
            frame = frame.where(options.where)
        if options.columns:
            frame = frame.select([_quote(c) for c in options.columns])
    except Exception as exc:
        raise SplitError(f"cannot read hive table {options.table}: {describe_spark_error(exc)}",
                         plugin=PLUGIN_NAME) from exc
    return frame


class HiveSource:
    """Periphery, splitter and schema of a hive source; the rows are read by :func:`read` on Spark."""

    def __init__(self, options: HiveReaderOptions, ctx: Any) -> None:
        self.options = options

    def prepare(self) -> SourceInfo:
        spark = spark_session()
        if not spark.catalog.tableExists(self.options.table):
            raise ReadError(f"hive table {self.options.table} does not exist", plugin=PLUGIN_NAME)
        return SourceInfo()

    def split(self, advice: int) -> list[Split]:
        return [Split(id=self.options.table, resource_mark=f"hive:{self.options.table}")]

    def schema(self) -> Schema:
        return logical_schema(read(spark_session(), self.options, [], None).schema)

    def read(self, split: Split) -> Any:
        raise ReadError("hive tables are read by Spark only (settings.engine spark or auto)", plugin=PLUGIN_NAME)


# -- sink -------------------------------------------------------------------------------------


class HiveWriterPeriphery:
    """Owns the destination's staging directory and the INSERT that loads it into the table."""

    def __init__(self, options: HiveWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        root = Path(current_conf().metastore_dir).resolve().parent / "staging"
        self.tmp_dir = str(root / f"{options.table}.{ctx.destination}.task-{ctx.task_id}-run-{ctx.run_id}")
        self._select: list[str] = []
        self._committed = False

    def _error(self, cls: type[Exception], message: str) -> Exception:
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
        partition_cols = [c.name for c in columns if c.isPartition]
        given = {k.lower(): v for k, v in (opts.partition or {}).items()}
        if sorted(given) != sorted(c.lower() for c in partition_cols):
            if partition_cols:
                raise self._error(PrepareError, f"hive table {opts.table} is partitioned by "
                                                f"({', '.join(partition_cols)}): partition must give a value for "
                                                f"each (only static partitions are written)")
            raise self._error(PrepareError, f"hive table {opts.table} is not partitioned; remove partition")
        source = {name.lower(): name for name in self.ctx.schema.names}
        data_cols = [c for c in columns if not c.isPartition]
        missing = [c.name for c in data_cols if c.name.lower() not in source]
        extra = sorted(set(source) - {c.name.lower() for c in data_cols} - set(given))
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"table columns the source lacks: {', '.join(missing)}")
            if extra:
                problems.append(f"source columns the table lacks: {', '.join(source[e] for e in extra)}")
            raise self._error(PrepareError,
                              f"hive table {opts.table} does not match the source ({'; '.join(problems)})")
        self._select = [f"CAST({_quote(source[c.name.lower()])} AS {c.dataType}) AS {_quote(c.name)}"
                        for c in data_cols]
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        os.makedirs(self.tmp_dir)

    def _create(self, spark: SparkSession) -> None:
        opts = self.options
        parts = {k.lower() for k in (opts.partition or {})}
        cols = ", ".join(f"{_quote(c.name)} {HIVE_TYPES[c.type]}" for c in self.ctx.schema.columns
                         if c.name.lower() not in parts)
        partitioned = ""
        if opts.partition:
            partitioned = " PARTITIONED BY (" + ", ".join(f"{_quote(k)} STRING" for k in opts.partition) + ")"
        database = opts.table.split(".")[0]
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {_quote(database)}")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {_table_ref(opts.table)} ({cols}){partitioned} STORED AS PARQUET")

    def commit(self) -> None:
        if self._committed:
            return
        spark = spark_session()
        opts = self.options
        staged_files = [p for p in Path(self.tmp_dir).glob("*.parquet")] if os.path.isdir(self.tmp_dir) else []
        staged = (spark.read.parquet(self.tmp_dir) if staged_files
                  else spark.createDataFrame([], spark_schema(self.ctx.schema)))
        view = re.sub(r"\W", "_", f"wormhole_stage_{self.ctx.task_id}_{self.ctx.run_id}_{self.ctx.destination}")
        staged.createOrReplaceTempView(view)
        spec = ""
        if opts.partition:
            spec = " PARTITION (" + ", ".join(f"{_quote(k)}={_literal(v)}" for k, v in opts.partition.items()) + ")"
        verb = "OVERWRITE" if opts.mode == "overwrite" else "INTO"
        try:
            spark.sql(f"INSERT {verb} TABLE {_table_ref(opts.table)}{spec} SELECT {', '.join(self._select)} "
                      f"FROM {view}")
        except Exception as exc:
            raise self._error(CommitError, f"loading {opts.table} failed: {describe_spark_error(exc)}") from exc
        finally:
            spark.catalog.dropTempView(view)
        self._committed = True
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def rollback(self) -> None:
        # Nothing reached the table before commit's INSERT, which Spark makes visible as a whole.
        shutil.rmtree(self.tmp_dir, ignore_errors=True)


def staging_writer(options: HiveWriterOptions, ctx: WriteContext, periphery: HiveWriterPeriphery,
                   worker: int) -> FileWriter:
    """Local mode: the file store's parquet writer, one part per writer thread in the staging directory."""
    return FileWriter(FileWriterOptions(path=periphery.tmp_dir, format="parquet"), ctx, periphery, worker)  # type: ignore[arg-type]


def write(frame: DataFrame, options: HiveWriterOptions, ctx: WriteContext, periphery: HiveWriterPeriphery) -> bool:
    """Spark mode: Spark writes the staging Parquet (its commit protocol makes task retries safe)."""
    canonical(frame, ctx.schema).write.mode("overwrite").option("compression", "snappy").parquet(periphery.tmp_dir)
    return True

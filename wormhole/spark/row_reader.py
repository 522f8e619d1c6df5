"""A store's row reader run inside the executors, one split per partition: the source as a DataFrame
when its store has no native Spark read, or the read declined (:class:`~wormhole.plugins.spark_kit.RowReaderPlan`).

Each partition reads the split its one seed row names and hands its batches to Spark as Arrow record
batches (:func:`wormhole.spark.types.to_arrow_batches`); rows the reader or Arrow rejects travel back in
an accumulator, which Spark applies once per successful task.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from wormhole.errors import ReadError
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, Rejected, Schema, Split
from wormhole.plugins.batch import as_batch, rows_of
from wormhole.plugins.spark_kit import spark_schema
from wormhole.spark.accumulators import AccumulatedDirty
from wormhole.spark.types import to_arrow_batches
from wormhole.task_spec import SourceSpec


def row_reader_frame(spark: SparkSession, source: SourceSpec, splits: list[Split], schema: Schema,
                     exact: frozenset[str], acc: Any, ctx: ReadContext) -> DataFrame:
    """The splits read by the source's row reader in the executors; ``acc`` collects the rejected rows,
    ``exact`` names the columns that travel as their exact text."""
    plugin, options = source.plugin, source.options
    task_id, run_id, batch_rows = ctx.task_id, ctx.run_id, ctx.batch_rows  # not the dirty file
    count = max(len(splits), 1)

    def read_partition(seeds: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # One seed row per partition: the index of the split this partition reads.
        sink = AccumulatedDirty(acc)
        reader_ctx = ReadContext(task_id=task_id, run_id=run_id, batch_rows=batch_rows, dirty=sink)
        role = registry.get(plugin).source
        assert role is not None
        reader = role.reader(options, reader_ctx)
        for seed in seeds:
            for index in seed.column(0).to_pylist():
                split = splits[index]

                def reject(bad: list[Rejected], split_id: str = split.id) -> None:
                    sink.reject("source", bad, split_id)
                try:
                    yield from to_arrow_batches(schema, (rows_of(as_batch(b, schema)) for b in reader.read(split)),
                                                reject, exact)
                except ReadError:
                    raise
                except Exception as exc:
                    raise ReadError(f"reading split {split.id} failed: {exc}", plugin=plugin,
                                    split_id=split.id) from exc

    seeds = spark.range(0, len(splits), 1, numPartitions=count)
    return seeds.mapInArrow(read_partition, spark_schema(schema, transport=True, exact=exact))

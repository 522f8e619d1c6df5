"""Spark mode's write job reading the source itself: each task reads its split with the store's own reader
and hands the reader's batches to its destinations' writers (:mod:`wormhole.spark.partitions`), as local mode
does, in place of the store's native (JDBC) read. Chosen as the plan chooses it
(:func:`wormhole.planning.methods.reads_directly`); ``[spark] direct_read = false`` keeps the JDBC read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from wormhole.errors import ReadError
from wormhole.planning.methods import reads_directly, write_method
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, ReadContext, Schema, Split
from wormhole.plugins.batch import as_batch
from wormhole.spark.accumulators import AccumulatedDirty
from wormhole.spark.methods import source_exact_text
from wormhole.task_spec import SourceSpec


@dataclass(frozen=True, slots=True)
class DirectRead:
    """The source read inside the write job's tasks (pickled to the executors): each task reads the split its
    one seed row names with the store's own reader and hands the reader's batches to its lanes as they are,
    the data path of local mode (the Arrow fast path, and the wire text to a mysql destination declaring the
    same types); no row crosses to the JVM. Rows the reader rejects travel back in ``dirty``."""

    plugin: str
    options: Any
    splits: tuple[Split, ...]
    task_id: int
    run_id: int
    batch_rows: int
    batch_bytes: int
    keep_wire: bool
    dirty: Any
    """The accumulator of the source's rejected rows (:class:`~wormhole.spark.accumulators.AccumulatedDirty`)."""

    def batches(self, seeds: Iterator[pa.RecordBatch]) -> Iterator[Batch]:
        sink = AccumulatedDirty(self.dirty)
        ctx = ReadContext(task_id=self.task_id, run_id=self.run_id, batch_rows=self.batch_rows, dirty=sink,
                          batch_bytes=self.batch_bytes, plugin=self.plugin, keep_wire=self.keep_wire)
        role = registry.get(self.plugin).source
        assert role is not None
        reader = role.reader(self.options, ctx)
        for seed in seeds:
            for index in seed.column(0).to_pylist():
                split = self.splits[index]
                try:
                    for batch in reader.read(split):
                        yield as_batch(batch)
                except ReadError:
                    raise
                except Exception as exc:
                    raise ReadError(f"reading split {split.id} failed: {exc}", plugin=self.plugin,
                                    split_id=split.id) from exc


def direct_read(source: SourceSpec, splits: Sequence[Split], schema: Schema, destinations: Sequence[Any],
                transforms: Any, paced: bool, enabled: bool, ctx: ReadContext, dirty: Any) -> DirectRead | None:
    """What the write job's tasks read when they read the source themselves, else None: decided from the
    columns the store's JDBC read would carry as exact text (how each destination would be written), as
    the plan decides it. ``dirty``: the accumulator of the source's rejected rows."""
    if not splits:
        return None
    exact = source_exact_text(source.plugin, source.options, schema)
    if exact is None:
        return None
    methods = [write_method(d.plugin, d.options, exact) for d in destinations]
    if not reads_directly(source.plugin, methods, transforms, paced, enabled):
        return None
    return DirectRead(source.plugin, source.options, tuple(splits), ctx.task_id, ctx.run_id, ctx.batch_rows,
                      ctx.batch_bytes, ctx.keep_wire, dirty)

"""Spark mode for destinations whose writers make splits durable: the driver writes them split by split.

Each partition of the persisted source is one split (the row reader's frame, or a native read that
says its partitions' order, :func:`wormhole.plugins.base.with_split_order`). The driver streams only
the partitions of the splits the destination lacks, tagged with ``spark_partition_id()``, and writes
each through one SplitWriter: ``write_split`` per batch, ``end_split`` at the partition's end (durable
with its marker), then the coordinator records it (the checkpoint). A split the destination loses
(``SplitLost``) is streamed again, up to ``recovery.split_retries`` times.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from wormhole.config import EngineConf
from wormhole.counters import WriterCounters, record_limit, write_counted
from wormhole.dirty import DirtyFile
from wormhole.errors import DirtyLimitExceeded, SplitLost
from wormhole.plugins.base import Batch, Rejected, SplitWriter
from wormhole.plugins.spark_kit import exact_columns
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.recovery.lease import Lease
from wormhole.recovery.split_lane import SplitTarget
from wormhole.spark.types import from_spark_rows, naive_timestamps

PARTITION = "__wh_partition"
def check_record_limit(dest: Any, counters: WriterCounters) -> None:
    """Raise once the destination's rejected rows (``counters``: all of them) exceed its record limit."""
    verdict = record_limit(counters.rejected, dest.limit.record)
    if verdict is not None:
        raise DirtyLimitExceeded(verdict.message, limit=dest.limit.record, observed=counters.rejected,
                                 destination=dest.id)


def write_splits(frame: DataFrame, split_ids: list[str], dest: Any, counters: WriterCounters,
                 coordinator: SplitCoordinator, lease: Lease | None, dirty: DirtyFile, conf: EngineConf) -> None:
    """Write every split ``dest`` lacks, split by split, from the driver (each made durable only while
    ``lease``, the run's claim, is live)."""
    assert dest.ctx is not None
    wanted = {split_ids.index(s) for s in coordinator.missing(dest.id) if s in split_ids}
    writer: Any = dest.sink.writer(dest.options, dest.ctx, dest.periphery, 0)  # a Writer and a SplitWriter
    exact = exact_columns(frame.schema)
    tagged = frame.withColumn(PARTITION, F.spark_partition_id())
    attempts: dict[int, int] = {}
    try:
        writer.open()
        while wanted:
            rows = tagged.where(F.col(PARTITION).isin(sorted(wanted))).toLocalIterator(prefetchPartitions=True)
            seen: set[int] = set()
            lost: set[int] = set()
            for index, group in itertools.groupby(rows, key=lambda r: int(r[-1])):
                seen.add(index)
                if not _write_one(writer, split_ids[index], (r[:-1] for r in group), dest, counters, coordinator,
                                  lease, dirty, exact):
                    lost.add(index)
            for index in sorted(wanted - seen):  # an empty split: durable with no rows
                if not _write_one(writer, split_ids[index], iter(()), dest, counters, coordinator, lease, dirty, exact):
                    lost.add(index)
            for index in lost:
                attempts[index] = attempts.get(index, 0) + 1
                if attempts[index] > conf.recovery.split_retries:
                    raise SplitLost(f"split {split_ids[index]} was lost {attempts[index]} time(s)",
                                    destination=dest.id, plugin=dest.plugin, split_id=split_ids[index])
            wanted = lost
    finally:
        writer.close()


def _write_one(writer: SplitWriter, split_id: str, rows: Iterator[Any], dest: Any, counters: WriterCounters,
               coordinator: SplitCoordinator, lease: Lease | None, dirty: DirtyFile, exact: frozenset[str]) -> bool:
    """One split into the destination and made durable; False when the destination lost it."""
    ctx = dest.ctx
    part = WriterCounters()
    bad: list[Rejected] = []  # to the dirty file once the split is durable: a lost split's never
    try:
        for batch in from_spark_rows(ctx.schema, rows, ctx.batch_rows, exact):
            one = WriterCounters()
            write_counted(SplitTarget(writer, split_id), Batch.of_rows(batch, ctx.schema), one, bad.extend,
                          destination=dest.id, plugin=dest.plugin)
            for into in (part, counters):
                into.delivered += one.delivered
                into.written += one.written
                into.rejected += one.rejected
            check_record_limit(dest, counters)
        if lease is not None:
            lease.hold(f"split {split_id} of destination {dest.id}")
        writer.end_split(split_id, part.written)
    except SplitLost as exc:
        dest.log.warning("writer.split_discarded", split_id=split_id, error=str(exc))
        writer.abort_split(split_id)
        counters.delivered -= part.delivered
        counters.written -= part.written
        counters.rejected -= part.rejected
        return False
    except BaseException:
        if bad:  # the destination fails (over its record limit, say): its rejected rows are reported
            dirty.reject(dest.id, bad, split_id=split_id)
        raise
    if bad:
        dirty.reject(dest.id, bad, split_id=split_id)
    dest.sealed(split_id, part.written)
    coordinator.sealed(split_id, dest.id, part.written)
    return True


def write_on_driver(frame: DataFrame, dest: Any, counters: WriterCounters, dirty: DirtyFile) -> None:
    """Stores whose writes cannot be replayed per partition (a SQLite file): the rows come to the driver
    partition by partition, in order, and one writer writes them there."""
    writer = dest.sink.writer(dest.options, dest.ctx, dest.periphery, 0)
    try:
        writer.open()
        rows = naive_timestamps(frame).toLocalIterator(prefetchPartitions=True)
        exact = exact_columns(frame.schema)
        for batch in from_spark_rows(dest.ctx.schema, rows, dest.ctx.batch_rows, exact):
            if write_counted(writer, Batch.of_rows(batch, dest.ctx.schema), counters,
                             lambda bad: dirty.reject(dest.id, bad), destination=dest.id, plugin=dest.plugin):
                check_record_limit(dest, counters)
        writer.flush()
    finally:
        writer.close()

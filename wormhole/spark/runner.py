"""Spark execution of a task: the source as one persisted DataFrame, each destination one Spark job.

The engine keeps its roles: the source is prepared and split on the driver (``prepare_source``), the WriterManager
prepares, polls, commits and rolls back each destination, and the MonitorManager watches; only the
data plane moves to Spark (DESIGN §6):

- the source becomes a DataFrame: the store's native Spark read (``SourceRole.spark_read``), else
  its row reader run per split inside the executors; with several destinations it is persisted and
  counted before any write, so it is read once; a task with one destination written by row writers in
  the executors and a native read (nothing the read itself rejects) is read by that write job alone,
  neither persisted nor counted apart (:meth:`SparkExecution.streams`), its rows counted as its
  partitions hand them to the writers;
- each destination is one Spark job, submitted from its own driver thread in its own FAIR pool and
  job group: the store's native write (``SinkRole.spark_write``), else its row writer in
  ``foreachPartition`` (stores whose partitions can be replayed), else its row writer on the driver
  over ``toLocalIterator``. A failed job fails that destination only;
- counts and rejected rows come back through accumulators, which Spark applies once per successful
  task, so a retried partition is never counted twice.
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
from pyspark import StorageLevel, TaskContext
from pyspark.sql import DataFrame, SparkSession

from wormhole.config import EngineConf, SourceSpec
from wormhole.counters import Counters, WriterCounters, record_limit, write_counted
from wormhole.dirty import DirtyFile
from wormhole.errors import DirtyLimitExceeded, ReadError, TaskAborted, WriteError
from wormhole.exchange.throttle import ReadMeasure, Throttle
from wormhole.log import Logger
from wormhole.monitor import ReadState
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, Column, ReadContext, Rejected, Schema, Split, split_order
from wormhole.plugins.batch import as_batch
from wormhole.plugins.spark_kit import RowReaderPlan, describe_spark_error, exact_columns, logical_schema, spark_schema
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.recovery.lease import Lease
from wormhole.recovery.split_lane import SplitTarget
from wormhole.spark.accumulators import AccumulatedDirty, DirtyEntry, ListParam, Totals
from wormhole.spark.config import is_local
from wormhole.spark.methods import write_method
from wormhole.spark.preflight import check_executors
from wormhole.spark.session import default_jars, get_session, is_running, startup_s
from wormhole.spark.splits import check_record_limit, write_splits
from wormhole.spark.throttle import TokenServer, throttled
from wormhole.spark.transforms import account_filtered, apply_chain, count_rows, push_down
from wormhole.spark.types import from_spark_rows, naive_timestamps, to_arrow_batches, writer_batch
from wormhole.transform.plan import Placement, TransformPlan


def _write_rows(target: Any, batches: Iterator[pa.RecordBatch], schema: Schema, batch_rows: int,
                part: WriterCounters, reject: Callable[[tuple[Rejected, ...]], None], destination: str, plugin: str,
                limit: int | None, seen: list[int]) -> bool:
    """Write a partition's record batches ``batch_rows`` rows at a time (handed through as Arrow columns
    where Spark carries them in their own form: :func:`writer_batch`), until its own rejects exceed
    ``limit``: True then (the rest is not written). ``seen[0]`` counts the rows Spark handed over."""
    for record_batch in batches:
        seen[0] += record_batch.num_rows
        for start in range(0, record_batch.num_rows, batch_rows):
            write_counted(target, writer_batch(schema, record_batch.slice(start, batch_rows)), part, reject,
                          destination=destination, plugin=plugin)
            if record_limit(part.rejected, limit) is not None:
                return True
    return False


def load(target: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


class _FinishedRead:
    """The read side once Spark has read and counted the source: nothing left to poll."""

    error: BaseException | None = None

    def __init__(self, rows: int, stop: threading.Event) -> None:
        self.rows_sent = rows
        """Set after the write job when the source is read by it (:meth:`SparkExecution.streams`)."""
        self.stop = stop

    def poll(self) -> ReadState:
        return "done"

    def close_input(self) -> None:
        pass  # no queues: each destination's job reads the persisted source

    def join(self, deadline: float) -> bool:
        return True  # no reader thread: Spark read the source before this was made


class SparkExecution:
    """The ``Execution`` of Spark mode (see :mod:`wormhole.execution`)."""

    name = "spark"

    def __init__(self, conf: EngineConf, ctx: ReadContext, dirty: DirtyFile, counters: Counters,
                 source: SourceSpec, log: Logger, throttle: Throttle | None = None,
                 transforms: TransformPlan | None = None, destinations: Sequence[Any] = ()) -> None:
        """``transforms``: the run's transforms, run here as Spark Columns (None: the task has none);
        ``destinations``: the task's, whose needs the executors are checked for before any is prepared."""
        self._conf = conf
        self._ctx = ctx
        self._dirty = dirty
        self._counters = counters
        self._source = source
        self._log = log
        self._rows = 0
        self._groups: set[str] = set()
        fresh = not is_running()
        self.spark: SparkSession = get_session(conf.spark)
        self.startup_s = startup_s() if fresh else 0.0
        """What building the session cost this run (0 when an earlier task of the process built it)."""
        self.sc = self.spark.sparkContext
        self.group = f"wormhole-{ctx.task_id}-{ctx.run_id}"
        self.frame: DataFrame | None = None
        self.transforms = transforms
        self.partitions = 0
        self.split_ids: list[str] = []
        """The split of each partition of ``frame``, in order."""
        self._coordinator: SplitCoordinator | None = None
        self._lease: Lease | None = None
        self._source_dirty = self.sc.accumulator([], ListParam())
        self._totals: dict[str, Any] = {}
        self._split_rows: dict[str, int] | None = None  # after the task's operators, for destination chains
        self._placement: Placement = ()  # the task's operators pushed into the source's read
        self._cancelled = False
        self._throttle = throttle
        self._pacer: TokenServer | None = None
        """Serves the throttle to the executors while the run lasts (a lost cached partition is
        read again, at the same pace)."""
        self._read_s = 0.0
        self._destinations = tuple(destinations)
        self._row_reader = False
        self._streamed: tuple[_FinishedRead, Any, Any] | None = None
        """When the one destination's write job reads the source (:meth:`streams`): the read side, the
        reader's counters and the accumulator of the rows the job's partitions handed to the writers."""

    def describe(self) -> dict[str, Any]:
        return {"master": self.sc.master, "startup_s": self.startup_s, "version": self.spark.version,
                "partitions": self.partitions}

    # -- the Execution protocol -----------------------------------------------------------------

    def prepare_source(self, readers: Any) -> Schema:
        assert readers.schema is not None
        spark_conf = self._conf.spark
        if spark_conf.preflight and not is_local(self.sc.master or ""):  # before any destination is prepared
            jars = spark_conf.jars if spark_conf.jars is not None else default_jars()
            places = (str(Path(spark_conf.warehouse_dir).resolve()),
                      str(Path(spark_conf.metastore_dir).resolve().parent / "staging"))  # the hive store's
            check_executors(self.spark, self._destinations, jars, self._log, catalog_places=places)
        _, schema = self.source_frame(self._source, readers.ordered_splits(), readers.schema)
        return schema

    def start_reads(self, readers: Any, feed: Any) -> _FinishedRead:
        self._coordinator = feed.coordinator
        pending = set(feed.coordinator.pending())
        if len(pending) < len(readers.splits):
            # A resumed run reads only the splits some destination still lacks.
            self.source_frame(self._source, [s for s in readers.ordered_splits() if s.id in pending], readers.schema)
        stop = cast(threading.Event, self._ctx.stop)  # the engine's Event
        if self.streams():
            counters = self._counters.new_reader()
            counters.splits = len(readers.splits)
            reads = _FinishedRead(0, stop)
            self._streamed = (reads, counters, self.sc.accumulator(0))
            self._log.info("spark.source_streamed", partitions=self.partitions,
                           why="one destination written in the executors: its job reads the source")
            return reads
        try:
            rows = self.read()
        except Exception as exc:
            raise ReadError(describe_spark_error(exc), plugin=self._source.plugin) from exc
        counters = self._counters.new_reader()
        counters.rows, counters.splits = rows, len(readers.splits)
        self._rows = rows
        return _FinishedRead(rows, stop)

    def streams(self) -> bool:
        """Whether the one destination's write job reads the source itself: one destination, written by
        row writers in the executors (which count what they get), the store's native read (which
        rejects nothing) and no transforms. Persisting and counting the source first would read it, and
        write it to Spark's cache, once more than the write needs."""
        if len(self._destinations) != 1 or self.frame is None or self._row_reader or self.transforms is not None:
            return False
        dest = self._destinations[0]
        exact = exact_columns(self.frame.schema)
        return write_method(dest.plugin, dest.options, exact) == "partitions"

    def start_writes(self, writers: Any, coordinator: SplitCoordinator) -> None:
        self._lease = writers.lease
        writers.start_jobs(lambda dest, counters: self.write(dest, counters, self._rows), coordinator)

    def writes_whole(self, sink: Any, options: Any) -> bool:
        # A native write that replaces its whole output starts afresh every run (a crashed run's state is a leftover).
        return sink.spark_replaces is not None and bool(sink.spark_replaces(options))

    def handed(self, storage: Any, rows_sent: int) -> tuple[int, int]:
        return rows_sent, self._rows  # no queue: each destination's job reads the whole persisted source

    # -- read side -----------------------------------------------------------------------------

    def source_frame(self, source: SourceSpec, splits: list[Split], schema: Schema) -> tuple[DataFrame, Schema]:
        """The source as a DataFrame (not yet read) and the schema the writers get."""
        splits, schema, self._placement = push_down(self.transforms, splits, schema)
        role = registry.get(source.plugin).source
        assert role is not None
        # A resumed run whose every split is held everywhere reads nothing: the row reader's frame
        # over no split is empty with the reader's schema (a native read has no relation to union).
        native = role.spark_read if splits else None
        planned = load(native)(self.spark, source.options, splits, schema) if native else None
        extra: dict[str, Any] = {}
        self.split_ids = [s.id for s in splits]
        if planned is not None and not isinstance(planned, RowReaderPlan):
            frame = planned
            order = split_order(frame)
            if order is not None:
                self.split_ids = order
            # A store that says which split each partition is says how many there are: asking Spark
            # plans the query on the driver (.rdd), seconds on a loaded machine.
            self.partitions = len(order) if order is not None else frame.rdd.getNumPartitions()
            # What Spark's read produced, but a column carried as exact text keeps its reader's type,
            # and every column the reader's nullability (JDBC calls a derived table's columns nullable)
            # and, of the same type, its declaration (a decimal's shape, the source's own type), which
            # a destination's create_table makes the column of, as in local mode.
            reader_columns = {c.name: c for c in schema.columns}
            exact = exact_columns(frame.schema)
            schema = Schema(tuple(
                c if c.name not in reader_columns
                else reader_columns[c.name] if c.name in exact
                else _as_read(c, reader_columns[c.name])
                for c in logical_schema(frame.schema).columns))
            how = "native"
            self._row_reader = False
        else:
            # The reader's own schema stays: a json column is JSON text in Spark and values again
            # for the row writers, as in local mode.
            exact = planned.exact if planned is not None else frozenset()
            frame = self._row_reader_frame(source, splits, schema, exact)
            self.partitions = len(splits)
            how = "row_reader"
            self._row_reader = True
            if planned is not None:
                extra = {"reason": planned.reason, "exact": sorted(exact)}
        self.frame = frame = self._paced(frame)
        self._log.info("spark.source_planned", read=how, partitions=self.partitions, paced=self._pacer is not None,
                       **extra)
        return frame, schema

    def _paced(self, frame: DataFrame) -> DataFrame:
        """With a speed limit, the source read at the pace of the driver's throttle, before it is
        persisted (so each row is paced once, by whichever read built the frame)."""
        if self._throttle is None:
            return frame
        if self._pacer is None:
            self._pacer = TokenServer(self._throttle, self.sc.getConf().get("spark.driver.host"), self._log)
        return throttled(frame, self._pacer.client, self._ctx.batch_rows)

    def _row_reader_frame(self, source: SourceSpec, splits: list[Split], schema: Schema,
                          exact: frozenset[str]) -> DataFrame:
        plugin, options, acc = source.plugin, source.options, self._source_dirty
        task_id, run_id, batch_rows = self._ctx.task_id, self._ctx.run_id, self._ctx.batch_rows  # not the dirty file
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
                        yield from to_arrow_batches(schema, map(as_batch, reader.read(split)), reject, exact)
                    except ReadError:
                        raise
                    except Exception as exc:
                        raise ReadError(f"reading split {split.id} failed: {exc}", plugin=plugin,
                                        split_id=split.id) from exc

        seeds = self.spark.range(0, len(splits), 1, numPartitions=count)
        return seeds.mapInArrow(read_partition, spark_schema(schema, transport=True, exact=exact))

    def read(self) -> int:
        """Read the source once: persist and count. Source rejects go to the dirty file."""
        assert self.frame is not None
        self._groups.add(f"{self.group}:read")
        self.sc.setJobGroup(f"{self.group}:read", "wormhole: read the source", interruptOnCancel=True)
        if self.transforms is not None and self.transforms.task_ops:
            # The task's operators, once, before the fan-out (every one keeps a partition a split).
            self.frame = apply_chain(self.frame, self.transforms.residual(self._placement))
        self.frame = self.frame.persist(StorageLevel.MEMORY_AND_DISK)
        t0 = time.monotonic()
        per_split = self.transforms is not None and any(self.transforms.destinations.values())
        rows, self._split_rows = count_rows(self.frame, self.split_ids, per_split)
        self._read_s = time.monotonic() - t0
        entries: list[DirtyEntry] = self._source_dirty.value
        self._flush_dirty(entries)
        self._log.info("spark.source_read", rows=rows, elapsed_s=round(time.monotonic() - t0, 3),
                       rejected=len(entries))
        return rows

    def _flush_dirty(self, entries: list[DirtyEntry]) -> None:
        by_key: dict[tuple[str, str | None], list[Rejected]] = {}
        for origin, split_id, reason, row in entries:
            by_key.setdefault((origin, split_id), []).append(Rejected(tuple(row), reason))
        for (origin, split_id), rows in by_key.items():
            self._dirty.reject(origin, rows, split_id)

    # -- write side ----------------------------------------------------------------------------

    def write(self, dest: Any, counters: WriterCounters, rows: int) -> None:
        """One destination's Spark job, run from its own driver thread (the WriterManager's pool)."""
        assert self.frame is not None and dest.ctx is not None
        self._start_job(dest)
        chain = self.transforms.destination_chain(dest.id) if self.transforms is not None else None
        frame = apply_chain(self.frame, chain) if chain is not None else self.frame
        wanted = self._coordinator.missing(dest.id) if dest.durable and self._coordinator is not None else None
        t0 = time.monotonic()
        try:
            how = self._write_job(dest, counters, frame, rows if chain is None or not chain.ops else None)
            account_filtered(counters, chain, rows, self._split_rows, wanted)
        except (WriteError, DirtyLimitExceeded):
            raise
        except Exception as exc:
            if self._cancelled:  # the task is stopping: not this destination's failure
                raise TaskAborted(f"write of {dest.id} cancelled", reason="stopped") from exc
            raise WriteError(describe_spark_error(exc), destination=dest.id, plugin=dest.plugin) from exc
        finally:
            self.sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
        if self._streamed is not None:
            self._streamed_read(time.monotonic() - t0)
        if dest.sink.add_written is not None and how != "driver":  # the driver's writers told it
            dest.sink.add_written(dest.periphery, counters.written)
        dest.log.info("spark.destination_written", write=how, rows=counters.written,
                      rejected=counters.rejected, elapsed_s=round(time.monotonic() - t0, 3))

    def _streamed_read(self, seconds: float) -> None:
        """The read side's figures once the write job that read the source has ended."""
        assert self._streamed is not None
        reads, counters, seen = self._streamed
        self._rows = reads.rows_sent = counters.rows = int(seen.value)
        self._read_s = seconds
        self._log.info("spark.source_read", rows=self._rows, elapsed_s=round(seconds, 3), rejected=0, streamed=True)

    def _start_job(self, dest: Any) -> None:
        """The destination's job group and FAIR pool on this driver thread, unless a stop came first."""
        self._groups.add(f"{self.group}:{dest.id}")
        if self._cancelled:  # a stop came before this job started: it must not start
            raise TaskAborted(f"write of {dest.id} cancelled", reason="stopped")
        self.sc.setLocalProperty("spark.scheduler.pool", dest.id)
        self.sc.setJobGroup(f"{self.group}:{dest.id}", f"wormhole: write {dest.id}", interruptOnCancel=True)

    def _write_job(self, dest: Any, counters: WriterCounters, frame: DataFrame, rows: int | None) -> str:
        """Write the frame the first way the destination takes: durable splits, the store's native write, its row
        writers in the executors, or on the driver; return which. ``rows``: the frame's, None if not known."""
        if dest.durable:
            return self._write_durable(dest, counters, frame)
        native = dest.sink.spark_write
        if native is not None and load(native)(frame, dest.options, dest.ctx, dest.periphery):
            counters.delivered = counters.written = rows if rows is not None else frame.count()
            return "native"
        if dest.sink.spark_partitions:
            self._write_partitions(dest, counters, frame)
            return "partitions"
        self._write_on_driver(dest, counters, frame)
        return "driver"

    def _write_durable(self, dest: Any, counters: WriterCounters, frame: DataFrame) -> str:
        assert self._coordinator is not None
        if self.partitions != len(self.split_ids):  # a split's rows must be one partition's
            raise WriteError(f"the source's {self.partitions} partitions are not its "
                             f"{len(self.split_ids)} splits", destination=dest.id, plugin=dest.plugin)
        if dest.sink.spark_partitions:  # in the executors, a partition (a split) per task
            self._write_partitions(dest, counters, frame, self._coordinator)
            return "partitions"
        # A store with one writer (a SQLite file): split by split on the driver.
        write_splits(naive_timestamps(frame), self.split_ids, dest, counters, self._coordinator, self._lease,
                     self._dirty, self._conf)
        return "driver"

    def _write_partitions(self, dest: Any, counters: WriterCounters, frame: DataFrame,
                          coordinator: SplitCoordinator | None = None) -> None:
        """The row writers in the executors, one per partition. With ``coordinator`` (a destination that
        makes splits durable) each partition is one split the destination lacks, written with
        ``write_split`` and made durable by ``end_split`` in its task; a task that runs again finds the
        split durable (its record) and writes nothing."""
        assert self.frame is not None
        plugin, options, ctx, periphery = dest.plugin, dest.options, dest.ctx, dest.periphery
        schema, batch_rows, limit = ctx.schema, ctx.batch_rows, dest.limit.record
        totals = self._totals[dest.id] = self.sc.accumulator((0, 0, 0), Totals())
        dirty = self.sc.accumulator([], ListParam())
        sealed = self.sc.accumulator([], ListParam())
        ids = list(self.split_ids) if coordinator is not None else None
        wanted = set(coordinator.missing(dest.id)) if coordinator is not None else set()
        seen_acc = self._streamed[2] if self._streamed is not None else self.sc.accumulator(0)

        def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            task = TaskContext.get()
            worker = task.partitionId() if task is not None else 0
            split_id = ids[worker] if ids is not None else None
            if split_id is not None and split_id not in wanted:
                return
            if split_id is not None and split_id in (held := periphery.durable_splits()):
                sealed.add([(split_id, held[split_id])])  # an earlier attempt of this task made it durable
                return
            sink = registry.get(plugin).sink
            assert sink is not None
            writer: Any = sink.writer(options, ctx, periphery, worker)
            target: Any = writer if split_id is None else SplitTarget(writer, split_id)
            part = WriterCounters()
            bad: list[DirtyEntry] = []
            seen = [0]

            def reject(rejected: tuple[Rejected, ...]) -> None:
                bad.extend((ctx.destination, split_id, r.reason, r.row) for r in rejected)
            try:
                writer.open()
                # Over the limit, this partition's own rejects make the total exceed it too: the task stops
                # writing but ends normally, so its counts and rejected rows reach the driver (a failed
                # task's accumulators are dropped) and the driver fails the destination naming the total.
                over = _write_rows(target, batches, schema, batch_rows, part, reject, ctx.destination, plugin, limit,
                                   seen)
                if over:  # not durable: the destination fails, and is rolled back, on the driver
                    if split_id is not None:
                        writer.abort_split(split_id)
                elif split_id is None:
                    writer.flush()
                else:
                    writer.end_split(split_id, part.written)
                    sealed.add([(split_id, part.written)])
            except BaseException:
                if split_id is not None:
                    writer.abort_split(split_id)
                raise
            finally:
                writer.close()
            totals.add((part.delivered, part.written, part.rejected))
            dirty.add(bad)
            seen_acc.add(seen[0])
            yield from ()

        naive_timestamps(frame).mapInArrow(write_partition, "n long").collect()
        counters.delivered, counters.written, counters.rejected = totals.value
        self._flush_dirty(dirty.value)
        if coordinator is not None:
            for split_id, rows in sealed.value:
                dest.sealed(split_id, rows)
                coordinator.sealed(split_id, dest.id, rows)
        check_record_limit(dest, counters)

    def _write_on_driver(self, dest: Any, counters: WriterCounters, frame: DataFrame) -> None:
        # Stores whose writes cannot be replayed per partition (a SQLite file): the rows come to the
        # driver partition by partition, in order, and one writer writes them there.
        assert self.frame is not None
        writer = dest.sink.writer(dest.options, dest.ctx, dest.periphery, 0)
        try:
            writer.open()
            rows = naive_timestamps(frame).toLocalIterator(prefetchPartitions=True)
            exact = exact_columns(frame.schema)
            for batch in from_spark_rows(dest.ctx.schema, rows, dest.ctx.batch_rows, exact):
                if write_counted(writer, Batch.of_rows(batch), counters, lambda bad: self._dirty.reject(dest.id, bad),
                                 destination=dest.id, plugin=dest.plugin):
                    check_record_limit(dest, counters)
            writer.flush()
        finally:
            writer.close()

    # -- monitoring and the end ----------------------------------------------------------------

    def progress(self, dest_id: str) -> dict[str, Any]:
        """Tasks done of the destination's job so far (accumulators count only finished tasks)."""
        tracker = self.sc.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(f"{self.group}:{dest_id}"):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        info: dict[str, Any] = {"tasks_done": done, "tasks": total}
        if self._streamed is not None and not self._streamed[0].rows_sent:
            self._streamed[1].rows = int(self._streamed[2].value)  # rows of the finished tasks so far
        acc = self._totals.get(dest_id)
        if acc is not None:
            info["written"] = acc.value[1]
        return info

    def cancel(self) -> None:
        # stop() may run in a signal handler on the thread that is waiting in a Py4J call: cancel
        # from another thread, never re-entering that call's connection.
        self._cancelled = True
        if self._pacer is not None:
            self._pacer.stop()  # ends the executors' waits: they fail as stopped
        threading.Thread(target=self._cancel_groups, daemon=True, name="spark-cancel").start()

    def _cancel_groups(self) -> None:
        for group in list(self._groups):
            try:
                self.sc.cancelJobGroup(group)
            except Exception as exc:  # best effort: the session may be gone already (process exit)
                self._log.warning("spark.cancel_failed", group=group, error=str(exc)[:200])

    def measure(self) -> ReadMeasure:
        if self._throttle is not None:
            return self._throttle.measure()
        # No pacing stage, so no estimate of the bytes: the read job's wall time and its rows.
        return ReadMeasure(rows=self._rows, bytes=None, seconds=self._read_s)

    def release(self) -> None:
        if self._pacer is not None:
            self._pacer.stop()
        if self.frame is not None:
            self.frame.unpersist()
            self.frame = None


def _as_read(column: Column, read: Column) -> Column:
    """A native read's column with the nullability the reader says, and its declaration when the types agree."""
    if column.type != read.type:
        return dataclasses.replace(column, nullable=read.nullable)
    return dataclasses.replace(column, nullable=read.nullable, precision=read.precision, scale=read.scale,
                               native=read.native)

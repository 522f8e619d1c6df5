"""Spark execution of a task: the source as one persisted DataFrame, each destination one Spark job.

The engine keeps its roles: the source is prepared and split on the driver (``prepare_source``), the WriterManager
prepares, polls, commits and rolls back each destination, and the MonitorManager watches; only the
data plane moves to Spark (DESIGN §6):

- the source becomes a DataFrame: the store's native Spark read (``SourceRole.spark_read``), else
  its row reader run per split inside the executors; with several destinations it is persisted and
  counted before any write, so it is read once;
- each destination is one Spark job, submitted from its own driver thread in its own FAIR pool and
  job group: the store's native write (``SinkRole.spark_write``), else its row writers in the executors
  (:mod:`wormhole.spark.partitions`; stores whose partitions can be replayed), else its row writer on the
  driver over ``toLocalIterator``. A failed job fails that destination only;
- when every destination is written by row writers in the executors and there are no transforms, one job
  writes them all (:meth:`SparkExecution.streams`): each task reads its split once, with the store's own
  reader (:mod:`wormhole.spark.direct`) or its native read, and hands every batch to each destination's
  writer; nothing is persisted or counted apart, and a destination whose writer fails ends alone;
- counts and rejected rows come back through accumulators, which Spark applies once per successful
  task, so a retried partition is never counted twice.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from wormhole.config import EngineConf
from wormhole.counters import Counters, WriterCounters
from wormhole.dirty import DirtyFile
from wormhole.errors import DirtyLimitExceeded, ReadError, TaskAborted, WriteError
from wormhole.exchange.throttle import ReadMeasure, Throttle
from wormhole.log import Logger
from wormhole.monitor import ReadState
from wormhole.planning.methods import write_method
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, Rejected, Schema, Split, split_order
from wormhole.plugins.spark_kit import RowReaderPlan, describe_spark_error, exact_columns, logical_schema
from wormhole.recovery.coordinator import SplitCoordinator
from wormhole.recovery.lease import Lease
from wormhole.spark.accumulators import DirtyEntry, ListParam
from wormhole.spark.config import is_local
from wormhole.spark.direct import DirectRead, direct_read
from wormhole.spark.partitions import Accumulators, Member, SharedJob, partition_writer, task_attempts
from wormhole.spark.preflight import check_executors
from wormhole.spark.row_reader import row_reader_frame
from wormhole.spark.session import default_jars, get_session, is_running, startup_s
from wormhole.spark.splits import check_record_limit, write_on_driver, write_splits
from wormhole.spark.throttle import TokenServer, throttled
from wormhole.spark.transforms import account_filtered, apply_chain, count_rows, push_down
from wormhole.spark.types import as_read, naive_timestamps
from wormhole.task_spec import SourceSpec
from wormhole.transform.plan import Placement, TransformPlan


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
        """The report accumulator of each destination's job (:class:`wormhole.spark.partitions.Accumulators`)."""
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
        """When one job writes every destination and reads the source (:meth:`streams`): the read side,
        the reader's counters and the accumulator of the rows its tasks handed to the writers."""
        self._shared: SharedJob | None = None
        self._direct: DirectRead | None = None
        """When the write job's tasks read the source themselves (:func:`direct_read`), what they read."""
        self.wire_text = False  # only when they do: rows that crossed to the JVM carry no wire text

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
                           why="every destination written in the executors: one job reads the source and "
                               "writes them all")
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
        """Whether one write job reads the source and writes every destination: each written by row
        writers in the executors (which count what they get), the store's native read (which rejects
        nothing), its partitions its splits, and no transforms. Persisting and counting the source first
        would read it, and write it to Spark's cache, once more than the writes need."""
        if self._direct is not None:
            return True
        if (not self._destinations or self.frame is None or self._row_reader or self.transforms is not None
                or self.partitions != len(self.split_ids)):
            return False
        exact = exact_columns(self.frame.schema)
        return all(write_method(d.plugin, d.options, exact) == "partitions" for d in self._destinations)

    def start_writes(self, writers: Any, coordinator: SplitCoordinator) -> None:
        self._lease = writers.lease
        if self._streamed is not None:
            live = [d.id for d in writers.destinations.values() if d.live]
            self._shared = SharedJob(frozenset(live))
            self._groups.add(f"{self.group}:write")
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
        extra: dict[str, Any] = {}
        self.split_ids = [s.id for s in splits]
        self._direct = direct_read(source, splits, schema, self._destinations, self.transforms,
                                   self._throttle is not None, self._conf.spark.direct_read, self._ctx,
                                   self._source_dirty)
        self.wire_text = self._direct is not None
        planned = load(native)(self.spark, source.options, splits, schema) if native and not self._direct else None
        if self._direct is not None:
            # The write job's tasks read their splits themselves: the frame is one seed row per split.
            frame = self.spark.range(0, len(splits), 1, numPartitions=len(splits))
            self.partitions = len(splits)
            how = "direct"
            self._row_reader = True
        elif planned is not None and not isinstance(planned, RowReaderPlan):
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
                else as_read(c, reader_columns[c.name])
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
        return throttled(frame, self._pacer.client, self._throttle.batch_rows(self._ctx.batch_rows))

    def _row_reader_frame(self, source: SourceSpec, splits: list[Split], schema: Schema,
                          exact: frozenset[str]) -> DataFrame:
        return row_reader_frame(self.spark, source, splits, schema, exact, self._source_dirty, self._ctx)

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
            if self._shared is not None:
                how = self._write_shared(dest, counters, frame)
            else:
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
        if dest.sink.add_written is not None and how != "driver":  # the driver's writers told it
            dest.sink.add_written(dest.periphery, counters.written)
        dest.log.info("spark.destination_written", write=how, rows=counters.written,
                      rejected=counters.rejected, elapsed_s=round(time.monotonic() - t0, 3))

    def _write_shared(self, dest: Any, counters: WriterCounters, frame: DataFrame) -> str:
        """This destination's part of the one job that writes them all: the last destination thread to
        arrive runs it, the others wait for it; each then takes its own counts, or its own error."""
        shared = self._shared
        assert shared is not None and self._streamed is not None
        if shared.arrive(dest):
            t0 = time.monotonic()
            try:
                self.sc.setJobGroup(f"{self.group}:write", "wormhole: write every destination", interruptOnCancel=True)
                shared.acc = self._run_partitions(list(shared.arrived.values()), frame, self._coordinator, True)
            except BaseException as exc:
                shared.error = exc
            finally:
                reads, reader, seen = self._streamed
                self._rows = reads.rows_sent = reader.rows = int(seen.value)
                self._read_s = time.monotonic() - t0
                entries: list[DirtyEntry] = self._source_dirty.value  # the direct read's rejected rows
                self._log.info("spark.source_read", rows=self._rows, elapsed_s=round(self._read_s, 3),
                               rejected=len(entries), streamed=True)
                try:
                    self._flush_dirty(entries)
                except BaseException as exc:  # over the error limit: every destination fails
                    shared.error = shared.error or exc
                shared.finish()
        shared.wait()
        if shared.error is not None:
            raise shared.error
        assert shared.acc is not None
        self._settle(dest, counters, shared.acc, self._coordinator if dest.durable else None)
        return "partitions"

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
        write_on_driver(frame, dest, counters, self._dirty)
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
        """The destination's row writers in the executors, one per partition (its own job). With
        ``coordinator`` (a destination that makes splits durable) each partition is one split the
        destination lacks, written with ``write_split`` and made durable by ``end_split`` in its task; a
        task that runs again finds the split durable (its record) and writes nothing."""
        acc = self._run_partitions([dest], frame, coordinator, False)
        self._settle(dest, counters, acc, coordinator)

    def _run_partitions(self, dests: list[Any], frame: DataFrame, coordinator: SplitCoordinator | None,
                        isolate: bool) -> Accumulators:
        """One job writing every partition to each of ``dests`` (:mod:`wormhole.spark.partitions`)."""
        members = [Member(d.id, d.plugin, d.options, d.ctx, d.periphery, d.limit.record,
                          frozenset(coordinator.missing(d.id)) if d.durable and coordinator is not None else None,
                          d.durable_facet.held_now if d.durable_facet is not None else None)
                   for d in dests]
        ids = list(self.split_ids) if any(m.wanted is not None for m in members) else None
        seen = self._streamed[2] if self._streamed is not None else self.sc.accumulator(0)
        acc = Accumulators(report=self.sc.accumulator([], ListParam()), dirty=self.sc.accumulator([], ListParam()),
                           sealed=self.sc.accumulator([], ListParam()), failed=self.sc.accumulator([], ListParam()),
                           seen=seen)
        for d in dests:
            self._totals[d.id] = acc.report
        attempts = task_attempts(self.sc.master or "", self.sc.getConf().get("spark.task.maxFailures"))
        writer = partition_writer(members, ids, dests[0].ctx.batch_rows, acc, isolate, attempts,
                                  self._direct if self._shared is not None else None)
        naive_timestamps(frame).mapInArrow(writer, "n long").collect()
        return acc

    def _settle(self, dest: Any, counters: WriterCounters, acc: Accumulators,
                coordinator: SplitCoordinator | None) -> None:
        """The destination's counts, rejected rows and durable splits from its job; its error, if its writer failed."""
        failed = [error for d, error in acc.failed.value if d == dest.id]
        if failed:
            raise WriteError(failed[0], destination=dest.id, plugin=dest.plugin)
        reports = [r for r in acc.report.value if r[0] == dest.id]
        counters.delivered = sum(r[1] for r in reports)
        counters.written = sum(r[2] for r in reports)
        counters.rejected = sum(r[3] for r in reports)
        self._flush_dirty([e for e in acc.dirty.value if e[0] == dest.ctx.destination])
        if coordinator is not None:
            for d, split_id, rows in acc.sealed.value:
                if d == dest.id:
                    dest.sealed(split_id, rows)
                    coordinator.sealed(split_id, dest.id, rows)
        check_record_limit(dest, counters)

    # -- monitoring and the end ----------------------------------------------------------------

    def progress(self, dest_id: str) -> dict[str, Any]:
        """Tasks done of the destination's job so far (accumulators count only finished tasks)."""
        tracker = self.sc.statusTracker()
        done = total = 0
        group = f"{self.group}:write" if self._shared is not None else f"{self.group}:{dest_id}"
        for job_id in tracker.getJobIdsForGroup(group):
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
            info["written"] = sum(r[2] for r in acc.value if r[0] == dest_id)
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

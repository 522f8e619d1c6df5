"""Row writers in the executors: one Spark task writes its partition to one destination, or to several.

A partition is one split when the source's partitions are its splits. Each destination a task writes
is a :class:`Lane`: its store's writer, the split it writes (a destination that makes splits durable:
``write_split`` then ``end_split``, in the task), its counts and its rejected rows. The task reads the
partition's record batches once and hands each to every lane (as Arrow columns where Spark carries them
in their own form: :func:`wormhole.spark.types.writer_batch`, made once per batch for all of them); with
several lanes each writes from its own thread, so one destination's load overlaps another's (a MySQL
load waiting on its server while the Parquet lane encodes), and the task seals them once all have written.

What the driver learns comes back in accumulators, which Spark applies once per successful task: each
lane's counts (``report``), rejected rows (``dirty``), the splits made durable (``sealed``), the rows the
task handed over (``seen``). A writer's error fails the task, as any Spark task fails, and Spark runs it
again (every lane: a durable split was not made durable, other output is replaced as on any retry). With
``isolate`` (one job for several destinations), on the task's last attempt a lane whose writer fails
ends alone and the task goes on with the others: its error comes back in ``failed`` and fails that
destination only, as its own job's failure would.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext

from wormhole.counters import WriterCounters, record_limit, write_counted
from wormhole.errors import WormholeError
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, Rejected, Schema
from wormhole.recovery.split_lane import SplitTarget
from wormhole.spark.accumulators import DirtyEntry
from wormhole.spark.direct import DirectRead
from wormhole.spark.types import writer_batch


@dataclass(frozen=True, slots=True)
class Member:
    """What a task needs of one destination it writes (pickled to the executors)."""

    id: str
    plugin: str
    options: Any
    ctx: Any
    periphery: Any
    limit: int | None
    """Its record limit: over it the lane stops writing (the driver fails the destination)."""
    wanted: frozenset[str] | None
    """The splits it lacks (a destination that makes splits durable), else None."""
    held_now: Callable[[Any], Mapping[str, int]] | None = None
    """Its durable facet's ``held_now``: a task run again reads the splits held from the store."""


@dataclass(frozen=True, slots=True)
class Accumulators:
    report: Any
    """(destination, delivered, written, rejected) per lane that ended."""
    dirty: Any
    sealed: Any
    """(destination, split, rows) per split made durable (or found durable: an earlier attempt's)."""
    failed: Any
    """(destination, error) per lane whose writer failed (``isolate`` only)."""
    seen: Any


def described(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, WormholeError) else f"{type(exc).__name__}: {exc}"


class Lane:
    """One destination's writer in one task."""

    def __init__(self, member: Member, split_id: str | None, worker: int, isolate: bool) -> None:
        self.member = member
        self.split_id = split_id
        self.isolate = isolate
        sink = registry.get(member.plugin).sink
        assert sink is not None
        writer: Any = sink.writer(member.options, member.ctx, member.periphery, worker)  # also a SplitWriter
        self.writer = writer
        self.target: Any = writer if split_id is None else SplitTarget(writer, split_id)
        self.part = WriterCounters()
        self.bad: list[DirtyEntry] = []
        self.over = False
        self.error: BaseException | None = None
        self.opened = False
        self.sealed = False

    @property
    def alive(self) -> bool:
        return not self.over and self.error is None

    def reject(self, rejected: tuple[Rejected, ...]) -> None:
        self.bad.extend((self.member.ctx.destination, self.split_id, r.reason, r.row) for r in rejected)

    def attempt(self, step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception as exc:
            self.error = exc  # not alive: the task's own cleanup leaves it alone
            self.abort()
            if not self.isolate:
                raise

    def open(self) -> None:
        self.opened = True  # close() runs after an open that failed too, as the writer contract says
        self.attempt(self.writer.open)

    def write(self, batch: Batch) -> None:
        def step() -> None:
            write_counted(self.target, batch, self.part, self.reject, destination=self.member.ctx.destination,
                          plugin=self.member.plugin)
        self.attempt(step)
        # Over the limit, this task's own rejects make the total exceed it too: the lane stops writing
        # but ends normally, so its counts and rejected rows reach the driver (a failed task's
        # accumulators are dropped) and the driver fails the destination naming the total.
        if self.alive and record_limit(self.part.rejected, self.member.limit) is not None:
            self.over = True
            self.abort()  # not durable: the destination fails, and is rolled back, on the driver

    def seal(self) -> None:
        """Flush, or make the split durable (on the task's thread, once every lane has written)."""
        if not self.alive:
            return
        if self.split_id is None:
            self.attempt(self.writer.flush)
        else:
            self.attempt(lambda: self.writer.end_split(self.split_id, self.part.written))
            self.sealed = self.alive

    def report(self, acc: Accumulators) -> None:
        """What the driver learns of the lane (on the task's own thread: accumulators are not shared)."""
        if self.sealed:
            acc.sealed.add([(self.member.id, self.split_id, self.part.written)])
        if self.error is not None:
            acc.failed.add([(self.member.id, described(self.error))])
            return
        acc.report.add([(self.member.id, self.part.delivered, self.part.written, self.part.rejected)])
        acc.dirty.add(self.bad)

    def abort(self) -> None:
        if self.split_id is not None:
            try:
                self.writer.abort_split(self.split_id)
            except Exception:  # the split was not made durable either way: the first error is the one to report
                if not self.isolate:
                    raise

    def close(self) -> None:
        if not self.opened:
            return
        try:
            self.writer.close()
        except Exception as exc:
            if not self.isolate:
                raise
            if self.error is None:
                self.error = exc


Pieces = Iterator[tuple[int, dict[Schema, Batch]]]
"""Writer batches, one per schema the live lanes want (shared by them), with the rows each adds to those
handed over."""


def _pieces(lanes: Sequence[Lane], batches: Iterator[pa.RecordBatch], batch_rows: int,
            stop: Callable[[], bool]) -> Pieces:
    """The partition's record batches, ``batch_rows`` rows at a time, as one writer batch per schema the
    live lanes want (shared by them), with the rows each record batch adds to those handed over; until no
    lane is alive or ``stop`` says so."""
    for record_batch in batches:
        if stop() or not any(lane.alive for lane in lanes):
            break
        added = record_batch.num_rows
        for start in range(0, record_batch.num_rows, batch_rows):
            piece = record_batch.slice(start, batch_rows)
            made: dict[Schema, Batch] = {}
            for lane in lanes:
                schema = lane.member.ctx.schema
                if lane.alive and schema not in made:
                    made[schema] = writer_batch(schema, piece)
            yield added, made
            added = 0


def _read_pieces(lanes: Sequence[Lane], batches: Iterator[Batch], stop: Callable[[], bool]) -> Pieces:
    """The source reader's own batches (:class:`DirectRead`), handed to every lane as they are: the
    lanes' schema is the reader's (no transforms), so nothing is converted."""
    for batch in batches:
        if stop() or not any(lane.alive for lane in lanes):
            break
        yield len(batch), {lane.member.ctx.schema: batch for lane in lanes}


def _feed(lanes: list[Lane], pieces: Pieces) -> int:
    """Hand the partition's batches to every live lane in turn; the rows handed over."""
    seen = 0
    for added, made in pieces:
        seen += added
        for lane in lanes:
            if lane.alive:
                lane.write(made[lane.member.ctx.schema])
    return seen


QUEUED_BATCHES = 4
"""Batches a destination's thread may be behind the partition's read: what a slower one holds in memory."""

_END = object()
"""No more batches: the lane's thread ends."""


class _LaneThread:
    """A lane written from its own thread, fed the partition's batches through a bounded queue, so the
    destinations of a task write at the same time (one waits on its server while another encodes). The
    lane's writer is used by this thread only until it is joined; sealing and accounting stay on the task's
    thread, after every lane's writes, as without threads (a lane's error then fails the task before any
    lane makes its split durable)."""

    def __init__(self, lane: Lane) -> None:
        self.lane = lane
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUED_BATCHES)
        self.error: BaseException | None = None
        """What the lane raised (not ``isolate``): it fails the task."""
        self.thread = threading.Thread(target=self._run, name=f"wormhole-lane-{lane.member.id}", daemon=True)

    def _run(self) -> None:
        try:
            self.lane.open()
        except BaseException as exc:  # the task's thread raises it
            self.error = exc
        while (batch := self.queue.get()) is not _END:
            if self.error is not None or not self.lane.alive:
                continue  # taken and dropped: the feeder never waits on a lane that stopped
            try:
                self.lane.write(batch)
            except BaseException as exc:  # the task's thread raises it
                self.error = exc

    def wants(self) -> bool:
        return self.error is None and self.lane.alive


def _feed_concurrently(lanes: list[Lane], pieces: Callable[[Callable[[], bool]], Pieces]) -> int:
    """:func:`_feed` with a thread per lane (opened there too); the rows handed over. ``pieces`` makes the
    batches, until the stop it is given says so. The first error a lane raises is raised here once every
    lane's thread has ended (the task then aborts the others)."""
    threads = [_LaneThread(lane) for lane in lanes]
    for t in threads:
        t.thread.start()
    seen = 0
    try:
        for added, made in pieces(lambda: any(t.error is not None for t in threads)):
            seen += added
            for t in threads:
                if t.wants():
                    t.queue.put(made[t.lane.member.ctx.schema])
    finally:
        for t in threads:
            t.queue.put(_END)  # each thread drains its queue, so this never waits for long
        for t in threads:
            t.thread.join()
    error = next((t.error for t in threads if t.error is not None), None)
    if error is not None:
        raise error
    return seen


def _lanes(members: Sequence[Member], split_id: str | None, worker: int, acc: Accumulators,
           isolate: bool, again: bool) -> list[Lane]:
    """A lane per member that writes this partition: not a durable member that has the split already
    (``again``: this task ran before, and an earlier attempt may have made the split durable since prepare)."""
    lanes: list[Lane] = []
    for m in members:
        if m.wanted is None:
            lanes.append(Lane(m, None, worker, isolate))
            continue
        if split_id is None or split_id not in m.wanted:
            continue
        before = m.periphery.durable_splits()  # held when the destination was prepared
        held = m.held_now(m.periphery) if again and m.held_now is not None else before
        if split_id in held:  # an earlier attempt of this task made it durable
            acc.sealed.add([(m.id, split_id, held[split_id])])
            if split_id not in before:
                # Written in this run by an attempt whose accumulators Spark dropped with it: its rows count
                # here (rows it rejected are not known: the destination's counts then fail it, never silently).
                acc.report.add([(m.id, held[split_id], held[split_id], 0)])
            continue
        lanes.append(Lane(m, split_id, worker, isolate))
    return lanes


def _write_lanes(lanes: list[Lane], pieces: Callable[[Callable[[], bool]], Pieces], acc: Accumulators) -> int:
    """Write the partition to every lane, seal and report them (the task's part once its lanes are made); the
    rows handed over. Whatever fails, every live lane is aborted and every lane closed."""
    try:
        if len(lanes) > 1:  # opened and written each in its own thread
            seen = _feed_concurrently(lanes, pieces)
        else:
            for lane in lanes:
                lane.open()
            seen = _feed(lanes, pieces(lambda: False))
        for lane in lanes:
            lane.seal()
        for lane in lanes:
            lane.report(acc)
    except BaseException:
        for lane in lanes:
            if lane.alive:
                lane.abort()
        raise
    finally:
        for lane in lanes:
            lane.close()
    return seen


PartitionFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def partition_writer(members: Sequence[Member], split_ids: Sequence[str] | None, batch_rows: int,
                     acc: Accumulators, isolate: bool, attempts: int = 1,
                     source: DirectRead | None = None) -> PartitionFunction:
    """The ``mapInArrow`` function that writes each partition to every member (see the module's docstring).
    ``split_ids``: the split of each partition, when a member makes splits durable; ``attempts``: how
    many times Spark runs a failing task; ``source``: the partitions are seed rows, each task reads its
    split itself (:class:`DirectRead`)."""
    members = tuple(members)
    ids = list(split_ids) if split_ids is not None else None

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = TaskContext.get()
        worker = task.partitionId() if task is not None else 0
        last = task is None or task.attemptNumber() + 1 >= attempts
        again = task is not None and task.attemptNumber() > 0
        lanes = _lanes(members, ids[worker] if ids is not None else None, worker, acc, isolate and last, again)
        if not lanes:
            return

        def pieces(stop: Callable[[], bool]) -> Pieces:
            if source is not None:
                return _read_pieces(lanes, source.batches(batches), stop)
            return _pieces(lanes, batches, batch_rows, stop)

        seen = _write_lanes(lanes, pieces, acc)
        acc.seen.add(seen)
        yield from ()

    return write_partition


class SharedJob:
    """The one job that writes every live destination: their driver threads meet here."""

    def __init__(self, ids: frozenset[str]) -> None:
        self.ids = ids
        self.arrived: dict[str, Any] = {}
        self.acc: Accumulators | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()

    def arrive(self, dest: Any) -> bool:
        """True for the last destination to arrive: its thread runs the job."""
        with self._lock:
            self.arrived[dest.id] = dest
            return set(self.arrived) >= self.ids

    def finish(self) -> None:
        self._done.set()

    def wait(self) -> None:
        self._done.wait()


def task_attempts(master: str, max_failures: str | None) -> int:
    """How many times Spark runs a failing task: ``local[N, F]`` F times, ``local[N]`` once, a cluster
    ``spark.task.maxFailures`` (4 unless set)."""
    local = re.fullmatch(r"local\[[^,\]]*,\s*(\d+)\]", master.replace(" ", ""))
    if local:
        return int(local.group(1))
    if master.startswith("local"):
        return 1
    return int(max_failures or 4)

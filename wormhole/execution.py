"""The execution seam: where a task's rows move, behind one protocol for both engines.

The Engine runs the same steps whatever the engine (DESIGN §4): plan the read side, prepare the
destinations, start reading, start writing, watch, finalize. What differs is the data plane, and
that is an :class:`Execution`:

- :class:`LocalExecution`: reader threads push batches through the exchange (one bounded queue per
  destination) to each destination's writer threads;
- ``wormhole.spark.runner.SparkExecution``: the source becomes one persisted DataFrame, read once,
  and each destination is one Spark job.

Managers, monitor, verdicts and results are shared, so a task means the same in both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from wormhole.exchange import RAMStorage, StorageManager
from wormhole.exchange.throttle import ReadMeasure, Throttle
from wormhole.monitor import ReadSide
from wormhole.plugins.base import Schema, SinkRole
from wormhole.reader_manager import ReaderManager, ReaderSetup, ReadPlan, SplitFeed
from wormhole.recovery.coordinator import SplitCoordinator

if TYPE_CHECKING:
    from wormhole.writer_manager import WriterManager


class Reads(ReadSide, Protocol):
    """The read side once it started: what the monitor polls, and what the engine waits for at the end."""

    def join(self, deadline: float) -> bool:
        """Wait for the reading threads until ``deadline`` (monotonic); False if some still run."""


class Execution(Protocol):
    name: str
    """``local`` or ``spark``: stored in the result."""
    wire_text: bool
    """The writers may get the reader's own batches, with its wire text (:class:`~wormhole.destination.WritePlane`)."""

    def prepare_source(self, read: ReadPlan) -> Schema:
        """Ready the read of the planned splits; the schema the destinations get."""

    def start_reads(self, read: ReadPlan, feed: SplitFeed) -> Reads:
        """Start reading the splits ``feed`` hands out (Spark: read the pending ones once, now); what the
        monitor polls of it."""

    def start_writes(self, writers: WriterManager, coordinator: SplitCoordinator) -> None:
        """Start every prepared destination's writers (Spark: its job)."""

    def writes_whole(self, sink: SinkRole[Any], options: Any) -> bool:
        """The destination is written whole, not split by split, so it starts afresh every run (Spark:
        a native write that replaces its output)."""

    def handed(self, storage: RAMStorage, rows_sent: int) -> tuple[int, int]:
        """(rows sent to a destination, rows queued for it), judged against what it wrote (Spark: the
        source's count, both)."""

    def progress(self, destination: str) -> dict[str, Any]:
        """Extra keys for a running destination's progress line."""

    def cancel(self) -> None:
        """Stop moving rows, at once and without blocking (it may run inside a signal handler)."""

    def release(self) -> None:
        """Free what the run held (Spark: the persisted source)."""

    def describe(self) -> dict[str, Any] | None:
        """What the result records about the execution (Spark: master, start-up cost...)."""

    def measure(self) -> ReadMeasure:
        """What the read side moved and how fast (the result's ``speed``)."""


class LocalExecution:
    """Threads in this process: the ReaderManager's pool feeds the exchange, each destination's
    writer pool drains its own queue."""

    name = "local"
    wire_text = True

    def __init__(self, storage: StorageManager, readers: ReaderSetup, throttle: Throttle | None = None) -> None:
        """``readers``: what the reader threads are made with, once the reads start."""
        self._storage = storage
        self._setup = readers
        self._throttle = throttle
        self._readers: ReaderManager | None = None
        """The reader threads, once started (what ``measure`` reads)."""

    def prepare_source(self, read: ReadPlan) -> Schema:
        return read.schema

    def start_reads(self, read: ReadPlan, feed: SplitFeed) -> Reads:
        readers = self._readers = ReaderManager(read, self._setup, feed, self._storage.for_reader(), self._throttle)
        readers.start()
        return readers

    def start_writes(self, writers: WriterManager, coordinator: SplitCoordinator) -> None:
        writers.start(coordinator)

    def writes_whole(self, sink: SinkRole[Any], options: Any) -> bool:
        return False

    def handed(self, storage: RAMStorage, rows_sent: int) -> tuple[int, int]:
        return storage.rows_offered, storage.rows_in

    def progress(self, destination: str) -> dict[str, Any]:
        return {"queued_rows": len(self._storage.for_writer(destination))}

    def cancel(self) -> None:
        pass  # the stopped queues and the readers' stop signal end the threads

    def release(self) -> None:
        pass

    def describe(self) -> dict[str, Any] | None:
        return None

    def measure(self) -> ReadMeasure:
        return self._readers.measure(self._throttle) if self._readers is not None else ReadMeasure()

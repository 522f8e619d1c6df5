"""The split coordinator's failure paths, with real objects: a split lost, a destination failing while its
splits are in flight, a split reported durable twice, the run's claim lost before a split is sealed.

The coordinator tells its context (the run) what happened outside its lock: a handler that calls the
coordinator back from another thread would deadlock on a held lock, so every test's context does so.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
import structlog

from wormhole.counters import WriterCounters
from wormhole.errors import SplitLost, TaskAborted
from wormhole.exchange.double_queue import Parcel
from wormhole.planning.assign import TaskGroup
from wormhole.plugins.base import Row, Split, WriteResult
from wormhole.recovery.coordinator import RetryPolicy, SplitCoordinator
from wormhole.recovery.crash import NoCrash
from wormhole.recovery.lease import Lease
from wormhole.recovery.split_lane import LaneHooks, LaneOf, SplitLane

LOG = structlog.get_logger("test")


class Run:
    """A coordinator's context as the engine's is: a destination lost for good fails, and the failure is
    reported back to the coordinator (here from another thread, which a held lock would block)."""

    def __init__(self) -> None:
        self.coordinator: SplitCoordinator | None = None
        self.sealed: list[tuple[str, str, int]] = []
        self.lost: list[tuple[str, str]] = []

    def split_sealed(self, split_id: str, destination: str, rows: int) -> None:
        self.sealed.append((split_id, destination, rows))

    def destination_lost(self, destination: str, reason: str) -> None:
        self.lost.append((destination, reason))
        assert self.coordinator is not None
        other = threading.Thread(target=self.coordinator.destination_failed, args=(destination,))
        other.start()
        other.join(5)
        assert not other.is_alive(), "the context was called with the coordinator's lock held"


def board(run: Run, splits: int = 2, durable: Sequence[str] = ("db", "js"), fire: Sequence[str] = (),
          retries: int = 1, held: dict[str, list[str]] | None = None) -> SplitCoordinator:
    ids = [f"s{i}" for i in range(splits)]
    coordinator = SplitCoordinator([Split(id=i, resource_mark="r") for i in ids], [TaskGroup(0, 1, tuple(ids))],
                                   durable=durable, fire_and_forget=fire, held=held or {},
                                   retry=RetryPolicy(retries, 0), stop=threading.Event(), log=LOG, context=run)
    run.coordinator = coordinator
    return coordinator


def test_a_lost_split_is_read_again_for_the_destination_that_lost_it_then_fails_it_for_good() -> None:
    run = Run()
    coordinator = board(run, splits=1, retries=1)
    first = coordinator.request(0)
    assert first is not None and first.destinations == {"db", "js"}
    coordinator.sealed("s0", "db", 5)
    coordinator.lost("s0", "js", "deadlock")
    coordinator.read_done(first, 5)
    again = coordinator.request(0)
    assert again is not None and (again.split.id, again.destinations, again.attempt) == ("s0", {"js"}, 2)
    assert run.sealed == [("s0", "db", 5)] and run.lost == []
    coordinator.lost("s0", "js", "deadlock again")
    coordinator.read_done(again, 5)
    assert run.lost == [("js", "split s0 was lost 2 time(s), the last: deadlock again")]
    assert coordinator.request(0) is None  # js failed: nobody lacks the split any more
    assert coordinator.missing("js") == [] and coordinator.remaining == 0
    assert coordinator.stats.retried == 1 and coordinator.stats.rows_reread == 5


def test_a_destination_failing_while_its_splits_are_in_flight_is_waited_for_no_more() -> None:
    run = Run()
    coordinator = board(run, splits=2)
    reading = coordinator.request(0)
    assert reading is not None and reading.split.id == "s0"
    coordinator.destination_failed("js")  # s0 is being read, s1 is queued
    coordinator.sealed("s0", "db", 3)
    coordinator.read_done(reading, 3)  # js never reports s0: nobody waits for it
    queued = coordinator.request(0)
    assert queued is not None and (queued.split.id, queued.destinations) == ("s1", {"db"})
    coordinator.sealed("s1", "db", 4)
    coordinator.read_done(queued, 4)
    assert coordinator.request(0) is None and coordinator.missing("js") == [] and coordinator.missing("db") == []
    assert run.sealed == [("s0", "db", 3), ("s1", "db", 4)]


def test_a_queued_split_only_the_failed_destination_lacked_is_dropped() -> None:
    run = Run()
    coordinator = board(run, splits=2, held={"db": ["s1"]})
    assert coordinator.stats.resumed == 1
    coordinator.destination_failed("js")
    reading = coordinator.request(0)
    assert reading is not None and reading.split.id == "s0"
    coordinator.sealed("s0", "db", 1)
    coordinator.read_done(reading, 1)
    assert coordinator.request(0) is None and coordinator.remaining == 0  # s1: nobody lacks it now


def test_a_split_reported_durable_twice_is_settled_once() -> None:
    """A duplicate marker (a Spark task run again finds the split durable and reports it again)."""
    run = Run()
    coordinator = board(run, splits=1, durable=("db",))
    first = coordinator.request(0)
    assert first is not None
    coordinator.sealed("s0", "db", 7)
    coordinator.read_done(first, 7)
    coordinator.sealed("s0", "db", 7)
    assert coordinator.request(0) is None and coordinator.remaining == 0
    assert coordinator.stats.retried == 0 and coordinator.missing("db") == []
    assert run.sealed == [("s0", "db", 7), ("s0", "db", 7)]  # the checkpoint's write is idempotent


class SplitStore:
    """A SplitWriter keeping each split's rows apart until it is durable."""

    def __init__(self, lose: set[str] | None = None) -> None:
        self.open: dict[str, list[Row]] = {}
        self.durable: dict[str, int] = {}
        self.lose = lose or set()

    def write_split(self, split_id: str, rows: Sequence[Row]) -> WriteResult:
        if split_id in self.lose:
            self.lose.discard(split_id)
            raise SplitLost(f"lost {split_id}", split_id=split_id)
        self.open.setdefault(split_id, []).extend(rows)
        return WriteResult(written=len(rows))

    def end_split(self, split_id: str, rows: int) -> None:
        self.durable[split_id] = len(self.open.pop(split_id, []))

    def abort_split(self, split_id: str) -> None:
        self.open.pop(split_id, None)


def lane(coordinator: SplitCoordinator, store: SplitStore, lease: Lease | None,
         sealed: dict[str, int]) -> SplitLane:
    hooks = LaneHooks(reject=lambda *a, **k: None, sealed=sealed.__setitem__, check_limit=lambda: None,
                      crash=NoCrash(), lease=lease)
    return SplitLane(LaneOf("db", "test", LOG, 0), store, WriterCounters(), coordinator, hooks)  # type: ignore[arg-type]


def test_a_split_lost_in_the_lane_is_reported_and_written_again() -> None:
    run = Run()
    coordinator = board(run, splits=1, durable=("db",), retries=2)
    store, sealed = SplitStore(lose={"s0"}), {}
    writer = lane(coordinator, store, None, sealed)
    first = coordinator.request(0)
    assert first is not None
    writer.take(Parcel(((1,), (2,)), 16, split_id="s0"))
    writer.take(Parcel((), 0, split_id="s0", control="end"))
    coordinator.read_done(first, 2)
    assert writer.counters.written == 0 and store.durable == {}
    again = coordinator.request(0)
    assert again is not None and again.attempt == 2
    writer.take(Parcel(((1,), (2,)), 16, split_id="s0"))
    writer.take(Parcel((), 0, split_id="s0", control="end"))
    coordinator.read_done(again, 2)
    assert store.durable == {"s0": 2} and sealed == {"s0": 2} and run.sealed == [("s0", "db", 2)]
    assert writer.counters.written == 2 and coordinator.request(0) is None


def test_a_lost_lease_leaves_the_split_not_durable() -> None:
    run = Run()
    coordinator = board(run, splits=1, durable=("db",))
    lease = Lease(60.0, LOG)
    store, sealed = SplitStore(), {}
    writer = lane(coordinator, store, lease, sealed)
    first = coordinator.request(0)
    assert first is not None
    writer.take(Parcel(((1,),), 8, split_id="s0"))
    lease.lose()  # another process took the task over
    with pytest.raises(TaskAborted, match="claim was taken over"):
        writer.take(Parcel((), 0, split_id="s0", control="end"))
    assert store.durable == {} and sealed == {} and run.sealed == []
    assert coordinator.missing("db") == ["s0"]
    writer.close()  # the lane ends: the split's writes are undone
    assert store.open == {}

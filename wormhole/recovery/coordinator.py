"""SplitCoordinator: hands splits to reader threads and takes them back (seed 002, BitSail's
SourceSplitCoordinator, for a bounded source).

- ``request(group)`` is handleSplitRequest: a channel of task group ``group`` gets its group's next
  split, else the last waiting split of the busiest group (a slow shard never leaves threads idle),
  with the destinations that still lack it. It blocks while nothing is ready but splits are in flight
  (one may come back) and returns None once every split is settled: signalNoMoreSplits.
- ``read_failed`` is addSplitsBack for a reader whose read broke mid-split: the split is offered again
  after a backoff, into the same destinations (each discarded what it had of the split), until
  ``split_retries`` is spent; then the read side fails.
- Destinations whose writers make splits durable report each split: ``sealed`` (durable: the
  checkpoint is written) or ``lost`` (its transaction was lost; it discarded the split). A lost split is
  read again for the destinations that lost it, once every destination of that attempt has reported;
  after ``split_retries`` the destination fails, not the task.
- Destinations without durable splits (``fire_and_forget``) get every split and are never waited for;
  they cannot discard a partial split, so a read that breaks after rows reached them fails them.

Split state is kept per split and destination, so a resumed run starts from what each destination
already holds (BitSail's restore) and the checkpoint records what each one holds now (snapshotState).

What the run must hear of (a split became durable somewhere; a destination lost a split for good) goes
to the run's :class:`CoordinatorContext` (SeaTunnel's enumerator ``Context``): events are queued under
the coordinator's lock and delivered after it is released, in order, by one thread at a time, so a
handler may call the coordinator again (``destination_failed``) without a re-entrant call chain.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from wormhole.log import Logger
from wormhole.planning.assign import TaskGroup
from wormhole.plugins.base import Split

MAX_RETRY_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class Assignment:
    """One attempt at reading a split: into ``destinations``, the ``attempt``-th time (from 1)."""

    split: Split
    destinations: frozenset[str]
    attempt: int
    planned_group: int


@dataclass(eq=False)
class _SplitState:
    split: Split
    group: int
    lacking: set[str]
    """Durable destinations that do not hold the split yet."""
    attempt: int = 0
    reading: bool = False
    read_done: bool = False
    waiting_on: set[str] = field(default_factory=set)
    """Destinations of the current attempt that have not reported it yet."""
    lost: dict[str, str] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    """Lost attempts per destination (a destination's own retry budget)."""
    read_failures: int = 0
    not_before: float = 0.0
    done: bool = False
    fire_sent: bool = False
    """The fire-and-forget destinations got the split (they are never sent it again)."""


class CoordinatorContext(Protocol):
    """What the coordinator tells the run; called outside the coordinator's lock, in the order it happened."""

    def split_sealed(self, split_id: str, destination: str, rows: int) -> None:
        """``destination`` made the split durable (the checkpoint records it)."""

    def destination_lost(self, destination: str, reason: str) -> None:
        """``destination`` lost a split more than ``split_retries`` times: it fails (and the run then tells
        the coordinator, ``destination_failed``)."""


class NoContext:
    """A coordinator nobody listens to (tests, a run without checkpoints that never loses a split)."""

    def split_sealed(self, split_id: str, destination: str, rows: int) -> None:
        pass

    def destination_lost(self, destination: str, reason: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Sealed:
    split_id: str
    destination: str
    rows: int

    def send(self, context: CoordinatorContext) -> None:
        context.split_sealed(self.split_id, self.destination, self.rows)


@dataclass(frozen=True, slots=True)
class _Lost:
    destination: str
    reason: str

    def send(self, context: CoordinatorContext) -> None:
        context.destination_lost(self.destination, self.reason)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a split is read again, and how long the first wait is (doubling, at most 30 s)."""

    retries: int
    wait_s: float


@dataclass(slots=True)
class CoordinatorStats:
    splits: int = 0
    skipped: int = 0
    """Splits every destination already held when the run started (a resumed run reads none of them)."""
    resumed: int = 0
    """Splits some (not all) destinations already held: read again only for the others."""
    retried: int = 0
    """Re-reads after a failure (a reader's or a destination's)."""
    rows_reread: int = 0
    """Rows read by retries (a split's second and later reads in this run)."""


class SplitCoordinator:
    def __init__(self, splits: Sequence[Split], groups: Sequence[TaskGroup], *, durable: Collection[str],
                 fire_and_forget: Collection[str], held: Mapping[str, Collection[str]], retry: RetryPolicy,
                 stop: threading.Event, log: Logger, context: CoordinatorContext | None = None) -> None:
        """``held``: destination -> ids of splits it already holds durably (its own record, on resume);
        ``context``: who hears of sealed splits and destinations lost for good."""
        self._durable = set(durable)
        self._fire = set(fire_and_forget)
        self._retries = retry.retries
        self._wait_s = retry.wait_s
        self._stop = stop
        self._log = log
        self._context: CoordinatorContext = context if context is not None else NoContext()
        self._cond = threading.Condition()
        self._events: deque[_Sealed | _Lost] = deque()
        self._delivering = threading.Lock()
        self.stats = CoordinatorStats(splits=len(splits))
        self.error: str | None = None
        """Why the read side failed (a split's reads failed ``retries`` + 1 times), else None."""
        by_id = {s.id: s for s in splits}
        self._states: dict[str, _SplitState] = {}
        self._queues: dict[int, deque[str]] = {}
        for g in groups:
            queue = self._queues[g.id] = deque()
            for split_id in g.splits:
                lacking = {d for d in self._durable if split_id not in held.get(d, ())}
                state = _SplitState(by_id[split_id], g.id, lacking)
                self._states[split_id] = state
                if not lacking and not self._fire:
                    state.done = True
                    self.stats.skipped += 1
                    continue
                if len(lacking) < len(self._durable):
                    self.stats.resumed += 1
                queue.append(split_id)

    # -- reader side (handleSplitRequest / addSplitsBack) -----------------------------------------

    def request(self, group: int) -> Assignment | None:
        """The next split for a channel of ``group``; None when no split is left (or the task stops)."""
        with self._cond:
            while True:
                if self._stop.is_set() or self.error is not None:
                    return None
                now = time.monotonic()
                found = self._pick(group, now)
                if found is not None and self._needed_by_nobody(self._states[found]):
                    self._drop(self._states[found])
                    continue
                if found is not None:
                    state = self._states[found]
                    state.attempt += 1
                    state.reading, state.read_done = True, False
                    state.waiting_on = set(state.lacking)
                    state.lost = {}
                    fire = set() if state.fire_sent else self._fire
                    state.fire_sent = True
                    return Assignment(state.split, frozenset(state.lacking | fire), state.attempt, state.group)
                if all(s.done for s in self._states.values()):
                    return None
                waits = [s.not_before - now for s in self._states.values() if self._ready_later(s)]
                self._cond.wait(min([0.2, *waits]) if waits else 0.2)

    def _ready_later(self, state: _SplitState) -> bool:
        return not state.done and not state.reading and state.not_before > 0

    def _pick(self, group: int, now: float) -> str | None:
        own = self._queues.get(group)
        order = ([own] if own else []) + sorted((q for g, q in self._queues.items() if g != group),
                                                key=len, reverse=True)
        for queue in order:
            # Own group: first ready split; another group's: its last (the one it would reach last).
            for split_id in (queue if queue is own else reversed(queue)):
                if self._states[split_id].not_before <= now:
                    queue.remove(split_id)
                    return split_id
        return None

    def read_done(self, assignment: Assignment, rows: int) -> None:
        """The reader sent every row (``rows``) of the split and its end marker."""
        with self._cond:
            if assignment.attempt > 1:
                self.stats.rows_reread += rows
            state = self._states[assignment.split.id]
            state.reading, state.read_done = False, True
            self._settle(state)
        self._deliver()

    def read_failed(self, assignment: Assignment, error: str, rows_sent: bool) -> None:
        """addSplitsBack: the read broke (after some rows were sent, or not); every destination of the
        attempt discards the split. Destinations that cannot discard fail when rows had reached them;
        the split is read again for the others (for all of them when no row had been sent)."""
        with self._cond:
            state = self._states[assignment.split.id]
            state.reading = False
            state.read_failures += 1
            state.waiting_on = set()  # every destination discards the attempt (the abort marker)
            if not rows_sent:
                state.fire_sent = False
            elif not state.lacking:  # nobody left who can take it again
                state.done = True
                self._cond.notify_all()
                return
            if state.read_failures > self._retries:
                self.error = (f"reading split {state.split.id} failed {state.read_failures} time(s), the last: "
                              f"{error}")
                self._log.error("coordinator.split_failed", split_id=state.split.id, attempts=state.read_failures,
                                error=error)
            else:
                self._requeue(state, f"read failed: {error}", state.read_failures)
            self._cond.notify_all()

    # -- writer side -----------------------------------------------------------------------------

    def sealed(self, split_id: str, destination: str, rows: int) -> None:
        """``destination`` made the split durable (its own record is written)."""
        with self._cond:
            state = self._states[split_id]
            state.lacking.discard(destination)
            state.waiting_on.discard(destination)
            self._events.append(_Sealed(split_id, destination, rows))
            self._settle(state)
        self._deliver()

    def lost(self, split_id: str, destination: str, reason: str) -> None:
        """``destination`` lost its transaction of the split and discarded what it had."""
        with self._cond:
            state = self._states[split_id]
            state.waiting_on.discard(destination)
            state.lost[destination] = reason
            self._settle(state)
        self._deliver()

    def destination_failed(self, destination: str) -> None:
        """A failed destination is waited for no more (its rows are rolled back with it)."""
        with self._cond:
            self._durable.discard(destination)
            self._fire.discard(destination)
            for state in self._states.values():
                state.lacking.discard(destination)
                state.waiting_on.discard(destination)
                state.lost.pop(destination, None)
                if state.done or state.reading:
                    continue
                if not state.read_done and self._needed_by_nobody(state):
                    self._drop(state)  # queued for a re-read only this destination needed
                else:
                    self._settle(state)
            self._cond.notify_all()
        self._deliver()

    def _needed_by_nobody(self, state: _SplitState) -> bool:
        """No destination would get the split: every one that lacked it failed, and the others have it."""
        return not state.lacking and (state.fire_sent or not self._fire)

    def _drop(self, state: _SplitState) -> None:
        state.done = True
        queue = self._queues[state.group]
        if state.split.id in queue:
            queue.remove(state.split.id)
        self._log.info("coordinator.split_dropped", split_id=state.split.id,
                       reason="every destination that lacked it has failed")

    def _settle(self, state: _SplitState) -> None:
        """Once the read is done and every destination of the attempt has reported: done, or again."""
        if state.done or state.reading or not state.read_done or state.waiting_on:
            return
        failed_for_good: list[tuple[str, str]] = []
        for dest, reason in state.lost.items():
            state.failures[dest] = state.failures.get(dest, 0) + 1
            if state.failures[dest] > self._retries:
                failed_for_good.append((dest, reason))
        state.lost = {}
        for dest, reason in failed_for_good:
            state.lacking.discard(dest)
            self._events.append(_Lost(dest, f"split {state.split.id} was lost {state.failures[dest]} time(s), "
                                            f"the last: {reason}"))
        if state.lacking:
            self._requeue(state, "lost by " + ", ".join(sorted(state.lacking)), max(state.failures.values()))
        else:
            state.done = True
        self._cond.notify_all()

    def _requeue(self, state: _SplitState, why: str, failures: int) -> None:
        wait = min(self._wait_s * 2 ** (failures - 1), MAX_RETRY_WAIT_S) if self._wait_s else 0.0
        state.read_done = False
        state.not_before = time.monotonic() + wait
        self._queues[state.group].appendleft(state.split.id)
        self.stats.retried += 1
        self._log.warning("coordinator.split_retry", split_id=state.split.id, why=why, attempt=state.attempt + 1,
                          wait_s=round(wait, 3), destinations=sorted(state.lacking | self._fire))

    def _deliver(self) -> None:
        """Hand the queued events to the context, outside the lock. One thread delivers at a time (in
        order); a call made from a handler, or by another thread meanwhile, leaves its events to it."""
        while True:
            if not self._delivering.acquire(blocking=False):
                return  # the deliverer checks the queue again after it lets go
            try:
                while True:
                    with self._cond:
                        if not self._events:
                            break
                        event = self._events.popleft()
                    event.send(self._context)
            finally:
                self._delivering.release()
            with self._cond:
                if not self._events:
                    return

    def missing(self, destination: str) -> list[str]:
        """Splits ``destination`` still lacks (none, once every split is settled and it did not fail)."""
        with self._cond:
            return [s.split.id for s in self._states.values() if destination in s.lacking]

    def pending(self) -> list[str]:
        """Splits not settled yet, in plan order (Spark reads only these)."""
        with self._cond:
            return [s.split.id for s in self._states.values() if not s.done]

    @property
    def remaining(self) -> int:
        with self._cond:
            return sum(not s.done for s in self._states.values())

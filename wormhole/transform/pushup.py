"""Adaptive push-up (seed 004): move the task's leading filters into the source when it pays.

Each reader thread runs its own :class:`~wormhole.transform.chain.ChainRunner`, whose counters only
it writes. A scheduler thread bumps a generation every ``interval_s``; each reader thread, seeing
the new generation after a batch, offers a snapshot of its counters to a queue (taken in its own
thread, so nothing is locked on the hot path). The scheduler sums the latest snapshots and, per
operator, computes selectivity = rows in / rows out and cost = nanoseconds per input row; efficiency
is selectivity / cost. When the source has spare capacity, the filters of the next ordering group
that reduce the data (selectivity >= ``min_selectivity``) move into the source, the most efficient
first; when the source is busy, everything moves back out.

A placement changes only between splits: :meth:`PushUp.placement_for` fixes a split's placement
when a reader first starts it, and the split keeps it to its end and in every later read of it (a
read that failed and is tried again, a resumed run): it is recorded with the split's checkpoint and
in the result, so no row is filtered twice or skipped, and a resumed run re-reads each split some
destination holds under the placement it was read under (:func:`restore_placements`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from wormhole.log import Logger
from wormhole.transform.chain import ChainRunner, OpMetrics
from wormhole.transform.conf import PushUpConf
from wormhole.transform.plan import Placement, TransformPlan, placement_id


def total(snapshots: list[dict[str, tuple[int, int, int, int]]]) -> dict[str, OpMetrics]:
    """Each operator's counters summed over the threads' snapshots."""
    sums: dict[str, list[int]] = {}
    for snap in snapshots:
        for op_id, values in snap.items():
            acc = sums.setdefault(op_id, [0, 0, 0, 0])
            for i, v in enumerate(values):
                acc[i] += v
    return {k: OpMetrics(*v) for k, v in sums.items()}


class PushUp:
    """The placement of the task's operators, split by split."""

    def __init__(self, plan: TransformPlan, conf: PushUpConf, log: Logger, *, channels: int,
                 probe: Callable[[], int | None] | None = None, start: Placement | None = None,
                 pinned: Mapping[str, Placement] | None = None) -> None:
        """``pinned``: split -> the placement an earlier run of the chain read it under (a resumed run)."""
        self.plan = plan
        self.conf = conf
        self._log = log
        self._channels = channels
        self._probe = probe
        self.placement: Placement = start if start is not None else plan.initial()
        self.generation = 0
        self._offers: queue.SimpleQueue[tuple[tuple[int, str], dict[str, tuple[int, int, int, int]]]] = \
            queue.SimpleQueue()
        self._latest: dict[tuple[int, str], dict[str, tuple[int, int, int, int]]] = {}
        self._restored = frozenset(pinned or ())
        self._fixed: dict[str, Placement] = dict(pinned or {})
        self.splits: dict[str, str] = {}
        """Split id -> the id of the placement it was read under."""
        self.reproduced: list[str] = []
        """Splits read again under the placement a crashed run of the chain read them under."""
        self.moves: list[dict[str, Any]] = []
        self.placements: dict[str, list[str]] = {}
        """Placement id -> the ids of the operators it runs in the source, in order."""
        self.runners: list[ChainRunner] = []
        """Every reader thread's chain runners (one per placement it read under): their metrics."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False

    @property
    def adaptive(self) -> bool:
        return self.plan.mode == "adaptive" and bool(self.plan.widest())

    # -- reader threads ------------------------------------------------------------------------

    def placement_for(self, split_id: str) -> Placement:
        """The placement split ``split_id`` is read under: fixed at its first start (in this run or, for a
        resumed run, in the run that read it first), the same in every read of it."""
        placement = self._fixed.get(split_id)
        if placement is None:
            placement = self._fixed[split_id] = self.placement
        elif split_id in self._restored and split_id not in self.splits:
            self.reproduced.append(split_id)
        pid = placement_id(self.plan, placement)
        self.splits[split_id] = pid
        if pid not in self.placements:
            self.placements[pid] = [self.plan.task_ops[i].id for i in placement]
        return placement

    def record(self, split_id: str) -> dict[str, Any] | None:
        """What a split's checkpoint records: the placement it was read under."""
        plan = self.splits.get(split_id)
        return None if plan is None else {"plan": plan, "pushed": self.placements.get(plan, [])}

    def offer(self, thread: int, runner: ChainRunner) -> None:
        """A reader thread's snapshot of its runner's counters (called in that thread)."""
        self._offers.put(((thread, runner.chain.id), runner.snapshot()))

    # -- the scheduler -------------------------------------------------------------------------

    def start(self) -> None:
        if not self.adaptive:
            return
        self._thread = threading.Thread(target=self._loop, name="pushup-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(self.conf.interval_s):
            try:
                self.decide()
            except Exception as exc:  # a decision that failed leaves the placement as it is
                self._log.warning("pushup.decision_failed", error=f"{type(exc).__name__}: {exc}")

    def stats(self) -> dict[str, OpMetrics]:
        while True:
            try:
                key, snap = self._offers.get_nowait()
            except queue.Empty:
                break
            self._latest[key] = snap
        return total(list(self._latest.values()))

    def decide(self) -> None:
        """One round: take the latest snapshots, and move operators if it pays."""
        self.generation += 1
        stats = self.stats()
        busy = self._busy()
        if busy is not None and busy > self.conf.busy_threads:
            if self.placement:
                self._move((), f"the source is busy ({busy} other threads running)", stats)
            elif not self._held:  # said once per busy spell, not every round
                self._log.info("pushup.held", busy_threads=busy, limit=self.conf.busy_threads)
            self._held = True
            return
        self._held = False
        chosen = self._candidates(stats)
        if chosen:
            self._move((*self.placement, *chosen), "selective and cheap enough to run in the source", stats)

    def _busy(self) -> int | None:
        if self._probe is None:
            return None
        running = self._probe()
        return None if running is None else max(running - self._channels, 0)

    def _candidates(self, stats: dict[str, OpMetrics]) -> list[int]:
        plan = self.plan
        pushed = set(self.placement)
        widest = set(plan.widest())
        chosen: list[int] = []
        for group in plan.groups:
            rest = [i for i in group if i not in pushed]
            if not rest:
                continue
            ready = []
            for i in rest:
                if i not in widest:
                    continue
                op = plan.task_ops[i]
                if op.spec.operator.free_in_source:
                    ready.append((float("inf"), i))
                    continue
                s = stats.get(op.id)
                if s is not None and s.rows_in >= self.conf.min_rows and s.selectivity >= self.conf.min_selectivity:
                    ready.append((s.efficiency, i))
            ready.sort(reverse=True)
            chosen.extend(i for _, i in ready)
            if len(ready) < len(rest):
                break  # the group stays partly in wormhole: nothing after it may move
            pushed.update(rest)
        return chosen

    def _move(self, to: Placement, why: str, stats: dict[str, OpMetrics]) -> None:
        before = self.placement
        self.placement = to
        move = {"from": placement_id(self.plan, before), "to": placement_id(self.plan, to),
                "pushed": [self.plan.task_ops[i].id for i in to], "why": why,
                "stats": {self.plan.task_ops[i].id: stats[self.plan.task_ops[i].id].to_dict()
                          for i in (*before, *to) if self.plan.task_ops[i].id in stats}}
        self.moves.append(move)
        self._log.info("pushup.moved", **move)


def restore_placements(plan: TransformPlan, recorded: Mapping[str, Mapping[str, Any]],
                       log: Logger) -> dict[str, Placement]:
    """Split -> the placement the checkpoint records it was read under, as this run's plan's operator
    indices. A record this plan cannot reproduce (the task's transforms or the source's dialect changed
    since) is logged and the split placed afresh: its output is the same under any placement."""
    index = {op.id: i for i, op in enumerate(plan.task_ops)}
    out: dict[str, Placement] = {}
    refused: dict[str, str] = {}
    for split_id, record in recorded.items():
        pushed = record.get("pushed") or []
        placement = tuple(index.get(op_id, -1) for op_id in pushed)
        if -1 in placement or any(i not in plan.pushable for i in placement):
            refused[split_id] = f"operators {pushed} are not all in this run's plan, or not pushable"
        elif placement_id(plan, placement) != record.get("plan"):
            refused[split_id] = f"placement {record.get('plan')} does not match operators {pushed}"
        else:
            out[split_id] = placement
    if refused:
        log.warning("pushup.not_reproduced", splits=len(refused), first=next(iter(refused.items())))
    if out:
        log.info("pushup.restored", splits=len(out),
                 placements=sorted({placement_id(plan, p) for p in out.values()}))
    return out

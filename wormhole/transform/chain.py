"""Operator chaining: adjacent operators with one placement fuse into one batch function.

As Flink chains operators that need no exchange between them (isChainable), the operators of one
placement (the task's, run in each reader thread before the fan-out; or one destination's, run in
its writer threads) run as one function over a batch: the batch is taken as Arrow columns once
(:meth:`~wormhole.plugins.batch.Batch.arrow`, shared with every destination), each operator's Arrow
form works on the columns it needs (:class:`~wormhole.transform.frame.Frame`), and the batch leaves
as Arrow columns of the chain's output schema.

Each thread runs its own :class:`ChainRunner`, whose per-operator metrics (calls, rows in and out,
nanoseconds) are plain counters that only that thread writes: no lock on the hot path (seed 004).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from wormhole.plugins.base import Row, Schema
from wormhole.plugins.batch import Batch, as_batch
from wormhole.transform.frame import Frame, arrow_input
from wormhole.transform.operators import BoundOp


@dataclass(frozen=True, slots=True)
class Chain:
    """Operators that run together in one place; ``id`` is stable across runs of the same task."""

    placement: str
    """``source`` (pushed into the source query), ``task`` (reader threads) or ``destination:<id>``."""
    ops: tuple[BoundOp, ...]
    input: Schema

    @property
    def id(self) -> str:
        text = self.placement + ":" + ",".join(op.id for op in self.ops)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def output(self) -> Schema:
        return self.ops[-1].output if self.ops else self.input

    def describe(self) -> dict[str, Any]:
        """What ``wormhole plan`` shows; ``runs_on``: where each operator computes (``arrow``, or
        ``python`` for an expression without an exact Arrow form)."""
        return {"chain": self.id, "placement": self.placement,
                "operators": [{**op.describe(), "runs_on": op.spec.operator.target(op)} for op in self.ops]}

    def runner(self) -> ChainRunner:
        return ChainRunner(self)


@dataclass(slots=True)
class OpMetrics:
    """One operator's counters: in one thread (seed 004's MetricsRecorder), written by that thread only;
    or summed over the threads' snapshots (:func:`wormhole.transform.pushup.total`)."""

    calls: int = 0
    rows_in: int = 0
    rows_out: int = 0
    nanos: int = 0

    @property
    def selectivity(self) -> float:
        return self.rows_in / self.rows_out if self.rows_out else float(self.rows_in or 1)

    @property
    def cost_ns(self) -> float:
        return self.nanos / self.rows_in if self.rows_in else 0.0

    @property
    def efficiency(self) -> float:
        return self.selectivity / max(self.cost_ns, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "rows_in": self.rows_in, "rows_out": self.rows_out,
                "selectivity": round(self.selectivity, 4), "ns_per_row": round(self.cost_ns, 1)}


class ChainRunner:
    """A chain's one batch function, with this thread's metrics."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self._names = chain.input.names
        self._steps = [op.spec.operator.arrow(op) for op in chain.ops]
        self.metrics = [OpMetrics() for _ in chain.ops]

    def run(self, rows: Batch | Collection[Row]) -> Batch:
        """The batch through the chain: Arrow columns of ``chain.output`` (tuples when a value without an
        Arrow form rides along: :mod:`~wormhole.transform.frame`)."""
        if not self._steps:
            return as_batch(rows, self.chain.input)
        frame = Frame(self._names, *arrow_input(rows, self.chain.input), len(rows))
        clock = time.perf_counter_ns
        for step, m in zip(self._steps, self.metrics, strict=True):
            before = frame.n
            t0 = clock()
            step(frame)
            m.nanos += clock() - t0
            m.calls += 1
            m.rows_in += before
            m.rows_out += frame.n
            if not frame.n:
                return Batch.empty()
        return frame.output(self.chain.output)

    def snapshot(self) -> dict[str, tuple[int, int, int, int]]:
        """This thread's counters by operator id (taken in the thread that runs the chain)."""
        return {op.id: (m.calls, m.rows_in, m.rows_out, m.nanos)
                for op, m in zip(self.chain.ops, self.metrics, strict=True)}

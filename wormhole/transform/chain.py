"""Operator chaining: adjacent operators with one placement fuse into one batch function.

As Flink chains operators that need no exchange between them (isChainable), the operators of one
placement (the task's, run in each reader thread before the fan-out; or one destination's, run in
its writer threads) run as one function over a batch: the batch is turned column-wise once, each
operator works on the columns it needs, and rows are rebuilt once at the end.

Each thread runs its own :class:`ChainRunner`, whose per-operator metrics (calls, rows in and out,
nanoseconds) are plain counters that only that thread writes: no lock on the hot path (seed 004).
"""

from __future__ import annotations

import hashlib
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

from wormhole.plugins.base import Row, Schema
from wormhole.transform.operators import BoundOp
from wormhole.transform.pyfn import cast_function, compile_py, mask_hash


class Frame:
    """One batch on its way through a chain: row-wise until an operator needs columns."""

    __slots__ = ("cache", "cols", "index", "n", "names", "rows")

    def __init__(self, names: Sequence[str], rows: Sequence[Row]) -> None:
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.rows: Sequence[Row] | None = rows
        self.cols: list[list[Any]] | None = None
        self.cache: dict[int, list[Any]] = {}
        self.n = len(rows)

    def get(self, name: str) -> list[Any]:
        i = self.index[name]
        if self.cols is not None:
            return self.cols[i]
        found = self.cache.get(i)
        if found is None:
            assert self.rows is not None
            found = self.cache[i] = [r[i] for r in self.rows]
        return found

    def columns(self) -> list[list[Any]]:
        if self.cols is None:
            assert self.rows is not None
            self.cols = [list(c) for c in zip(*self.rows, strict=True)] if self.rows else [[] for _ in self.names]
            self.rows = None
            self.cache = {}
        return self.cols

    def keep(self, mask: list[Any]) -> None:
        flags = [m is True for m in mask]
        if self.cols is not None:
            self.cols = [list(compress(c, flags)) for c in self.cols]
        else:
            assert self.rows is not None
            self.rows = list(compress(self.rows, flags))
            self.cache = {}
        self.n = sum(flags)

    def select(self, keep: tuple[int, ...]) -> None:
        names = [self.names[i] for i in keep]
        if self.cols is not None:
            self.cols = [self.cols[i] for i in keep]
        else:
            assert self.rows is not None
            if len(keep) == 1:
                only = keep[0]
                self.rows = [(r[only],) for r in self.rows]
            else:
                self.rows = list(map(operator.itemgetter(*keep), self.rows))
            self.cache = {}
        self.rename(names)

    def rename(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}

    def set_column(self, name: str, values: list[Any]) -> None:
        cols = self.columns()
        at = self.index.get(name)
        if at is None:
            cols.append(values)
            self.rename([*self.names, name])
        else:
            cols[at] = values

    def to_rows(self) -> list[Row]:
        if self.cols is None:
            assert self.rows is not None
            return self.rows if isinstance(self.rows, list) else list(self.rows)
        return list(zip(*self.cols, strict=True)) if self.cols else [() for _ in range(self.n)]


Step = Callable[[Frame], None]


def _step(op: BoundOp) -> Step:
    kind = op.kind
    if kind == "filter":
        ((_, e),) = op.spec.exprs
        pred = compile_py(e, op.typed[0])
        return lambda f: f.keep(pred(f))
    if kind == "project":
        keep: tuple[int, ...] = op.detail["keep"]
        return lambda f: f.select(keep)
    if kind == "rename":
        names: tuple[str, ...] = op.detail["names"]
        return lambda f: f.rename(names)
    if kind == "cast":
        fns = [(name, cast_function(source, to)) for name, (source, to) in op.detail["casts"].items()]

        def cast(f: Frame) -> None:
            for name, fn in fns:
                f.set_column(name, [None if v is None else fn(v) for v in f.get(name)])
        return cast
    if kind == "derive":
        exprs = [(name, compile_py(e, t)) for (name, e), t in zip(op.spec.exprs, op.typed, strict=True)]

        def derive(f: Frame) -> None:
            values = [(name, fn(f)) for name, fn in exprs]  # every expression sees the input row
            for name, column in values:
                f.set_column(name, column)
        return derive
    return _mask_step(op)


def _mask_step(op: BoundOp) -> Step:
    d = op.detail
    columns: tuple[str, ...] = d["columns"]
    fn = mask_function(d["method"], d["salt"], d["keep"], d["with"])

    def mask(f: Frame) -> None:
        for name in columns:
            f.set_column(name, [None if v is None else fn(v) for v in f.get(name)])
    return mask


def mask_function(method: str, salt: str, keep: int, replacement: str) -> Callable[[Any], str]:
    if method == "hash":
        return mask_hash(salt)
    if method == "redact":
        return lambda v: replacement
    # partial: the last `keep` characters stay, the rest become '*'; a value no longer than `keep`
    # is masked whole (else a short value would be shown entire).
    return lambda s: "*" * (len(s) - keep) + s[len(s) - keep:] if len(s) > keep else "*" * len(s)


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
        return {"chain": self.id, "placement": self.placement,
                "operators": [{"id": op.id, "kind": op.kind, "path": op.spec.path} for op in self.ops]}

    def runner(self) -> ChainRunner:
        return ChainRunner(self)


@dataclass(slots=True)
class OpMetrics:
    """One operator's counters in one thread (seed 004's MetricsRecorder): written by that thread only."""

    calls: int = 0
    rows_in: int = 0
    rows_out: int = 0
    nanos: int = 0


class ChainRunner:
    """A chain's one batch function, with this thread's metrics."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self._names = chain.input.names
        self._steps = [_step(op) for op in chain.ops]
        self.metrics = [OpMetrics() for _ in chain.ops]

    def run(self, rows: Sequence[Row]) -> list[Row]:
        if not self._steps:
            return rows if isinstance(rows, list) else list(rows)
        frame = Frame(self._names, rows)
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
                break
        return frame.to_rows() if frame.n else []

    def snapshot(self) -> dict[str, tuple[int, int, int, int]]:
        """This thread's counters by operator id (taken in the thread that runs the chain)."""
        return {op.id: (m.calls, m.rows_in, m.rows_out, m.nanos)
                for op, m in zip(self.chain.ops, self.metrics, strict=True)}

"""The task's transforms in the reader path: a reader thread reads splits through a :class:`SplitSource`.

Mirrors :mod:`.writer` (the destination's chain in front of its writer): :func:`transforming_reader`
wraps a store's :class:`~wormhole.plugins.base.Reader` so that the reader manager only reads. With
the task's transforms, each split's placement is fixed when the thread starts it (push-up,
:class:`~wormhole.transform.pushup.PushUp`), the pushed part goes into the split's query
(``split.params["pushdown"]``) and the rest runs as the thread's chain over every batch; when the
push-up scheduler asks, the thread offers its counters after a batch (in its own thread: no lock).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator
from typing import Protocol

from wormhole.plugins.base import Batch, Reader, Row, Split
from wormhole.transform.chain import ChainRunner
from wormhole.transform.plan import Placement
from wormhole.transform.pushup import PushUp

Batches = Iterator[tuple[int, Batch | Collection[Row]]]
"""Each batch as (rows read from the source, rows to send on)."""


class SplitSource(Protocol):
    def read(self, split: Split) -> Batches: ...


class PlainSource:
    """A reader without transforms: every row read goes on."""

    def __init__(self, inner: Reader) -> None:
        self.inner = inner

    def read(self, split: Split) -> Batches:
        for batch in self.inner.read(split):
            yield len(batch), batch


class TransformingReader:
    """A reader with the task's chain behind it, placed split by split; one per reader thread."""

    def __init__(self, inner: Reader, pushup: PushUp, worker: int) -> None:
        self.inner = inner
        self.pushup = pushup
        self.worker = worker
        self._runners: dict[Placement, ChainRunner] = {}
        self._seen = -1

    def read(self, split: Split) -> Batches:
        # The split's placement is fixed here, when the thread starts it, and kept to its end.
        placement = self.pushup.placement_for(split.id)
        pushed = self.pushup.plan.pushed_query(placement)
        if pushed is not None:
            split = dataclasses.replace(split, params={**split.params, "pushdown": pushed})
        runner = self._runners.get(placement)
        if runner is None:
            runner = self._runners[placement] = self.pushup.plan.residual(placement).runner()
            self.pushup.runners.append(runner)
        return self._batches(split, runner)

    def _batches(self, split: Split, runner: ChainRunner) -> Batches:
        pushup = self.pushup
        for batch in self.inner.read(split):
            out = runner.run(batch)
            if pushup.generation != self._seen:  # the scheduler asks: this thread's counters, offered here
                self._seen = pushup.generation
                pushup.offer(self.worker, runner)
            yield len(batch), out


def transforming_reader(inner: Reader, pushup: PushUp | None, worker: int) -> SplitSource:
    """``inner`` with the task's transforms behind it (read as it is without them)."""
    return PlainSource(inner) if pushup is None else TransformingReader(inner, pushup, worker)

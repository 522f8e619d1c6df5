"""What Spark's executors send back to the driver: accumulators, which Spark applies once per successful
task, so a retried partition is never counted twice."""

from __future__ import annotations

from typing import Any

from pyspark import AccumulatorParam

from wormhole.plugins.base import Row

DirtyEntry = tuple[str, str | None, str, Row]
"""(origin, split id, reason, row): a rejected row on its way from an executor to the dirty file."""


class ListParam(AccumulatorParam):  # type: ignore[type-arg]
    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, a: list[Any], b: list[Any]) -> list[Any]:
        a.extend(b)
        return a


class Totals(AccumulatorParam):  # type: ignore[type-arg]
    """(delivered, written, rejected) summed over successful tasks."""

    def zero(self, value: tuple[int, int, int]) -> tuple[int, int, int]:
        return (0, 0, 0)

    def addInPlace(self, a: tuple[int, int, int], b: tuple[int, int, int]) -> tuple[int, int, int]:
        return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


class AccumulatedDirty:
    """The DirtySink of readers running inside executors: rejected rows travel in an accumulator."""

    def __init__(self, acc: Any) -> None:
        self._acc = acc

    def reject(self, origin: str, rows: Any, split_id: str | None = None) -> None:
        self._acc.add([(origin, split_id, r.reason, r.row) for r in rows])

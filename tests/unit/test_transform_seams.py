"""The transforms' seams: one class per operator kind in one registry, and the reader side's wrapper.

A reader thread reads through ``transforming_reader`` (as a destination writes through
``transforming``): each split's placement is fixed when the thread starts it, the pushed part goes
into the split's query, the rest runs over each batch, and the manager is told the rows read and
handed the rows to send.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import structlog

from tests.unit.test_pushup import SOURCE, plan
from wormhole.options import Problems
from wormhole.plugins.base import Row, Schema, Split
from wormhole.plugins.batch import rows_of
from wormhole.transform.conf import PushUpConf
from wormhole.transform.operators import KINDS, OPERATORS, Operator, bind, parse_transforms
from wormhole.transform.pushup import PushUp
from wormhole.transform.reader import PlainSource, TransformingReader, transforming_reader
from wormhole.transform.sqlgen import NotPushable


class ListReader:
    """A store's reader over rows in memory; remembers the splits it was asked for."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.asked: list[Split] = []

    def schema(self) -> Schema:
        return SOURCE

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        self.asked.append(split)
        yield self.rows[:3]
        yield self.rows[3:]


ROWS: list[Row] = [(i, i % 4, f"n{i}") for i in range(8)]


def test_every_kind_is_one_class_in_the_registry() -> None:
    assert KINDS == ("filter", "project", "rename", "cast", "derive", "mask")
    for kind, op in OPERATORS.items():
        assert op.kind == kind and type(op) is not Operator
        for form in ("parse", "bind", "arrow", "spark"):  # each kind has its own; sql may say "not pushable"
            assert getattr(type(op), form) is not getattr(Operator, form), (kind, form)


def test_a_kind_without_a_source_form_says_why() -> None:
    problems = Problems()
    ops = bind(parse_transforms([{"derive": {"n2": "id * 2"}}], "transforms", "task", problems), SOURCE, problems)
    assert not problems.items
    with pytest.raises(NotPushable, match="a derive runs in wormhole"):
        ops[0].spec.operator.sql(ops[0], "sqlite")


def test_without_transforms_every_row_read_is_sent() -> None:
    source = transforming_reader(ListReader(ROWS), None, worker=0)
    assert isinstance(source, PlainSource)
    assert list(source.read(Split("s1", "m"))) == [(3, ROWS[:3]), (5, ROWS[3:])]


def test_the_chain_runs_behind_the_reader_and_the_pushed_part_goes_into_the_split() -> None:
    p = plan([{"filter": "grp = 3"}, {"derive": {"n2": "id * 2"}}], pushup="static")
    pushup = PushUp(p, PushUpConf(), structlog.get_logger(), channels=1)
    inner = ListReader([r for r in ROWS if r[1] == 3])  # what the source gives with the filter pushed
    source: Any = transforming_reader(inner, pushup, worker=0)
    assert isinstance(source, TransformingReader)
    got = [(n, list(rows_of(b))) for n, b in source.read(Split("s1", "m"))]
    assert got == [(2, [(3, 3, "n3", 6), (7, 3, "n7", 14)]), (0, [])]  # read, then sent with the derived column
    assert inner.asked[0].params["pushdown"].where is not None  # the filter went into the split's query
    assert pushup.splits == {"s1": pushup.splits["s1"]} and pushup.splits["s1"] != "none"
    assert len(pushup.runners) == 1  # the thread's runner, for the result's metrics


def test_rows_the_residual_chain_drops_are_read_but_not_sent() -> None:
    p = plan([{"filter": "grp = 3"}], pushup="off")
    pushup = PushUp(p, PushUpConf(), structlog.get_logger(), channels=1)
    source = transforming_reader(ListReader(ROWS), pushup, worker=0)
    got = [(n, list(rows_of(b))) for n, b in source.read(Split("s1", "m"))]
    assert got == [(3, []), (5, [(3, 3, "n3"), (7, 3, "n7")])]
    assert pushup.runners[0].snapshot()[p.task_ops[0].id][1:3] == (8, 2)  # rows in, rows out

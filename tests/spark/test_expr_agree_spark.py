"""Property test: Spark computes what the Python batch function computes, for random expressions.

The strategies and comparisons are tests/integration/test_expr_agree.py's (SQLite and MariaDB are
compared there); here each example is one DataFrame of all its rows, every expression evaluated in
one ``select``, and the first predicate also as a ``filter``, on the test run's one SparkSession
(ANSI mode, Spark 4's default: an expression that would raise fails the test).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from tests.integration.test_expr_agree import (
    CASES,
    ROWS,
    SCALE,
    SETTINGS,
    Case,
    assert_agree,
    assert_filter_agrees,
    python_values,
)
from wormhole.transform.check import int_bound
from wormhole.transform.expr import Expr, children

pytestmark = [pytest.mark.spark]

SPARK_SCHEMA = ("id long, i long, j long, f double, m decimal(38, 18), s string, t string, b boolean, d date, "
                "ts timestamp")


def _in_spark_range(c: Case) -> bool:
    """Spark computes integer arithmetic in 38 digits and holds a decimal as DECIMAL(38, 18) (README): an
    int that may reach 10^20 (a product of two BIGINTs) is beyond what it casts to a decimal exactly."""
    todo: list[Expr] = [c.tree]
    while todo:
        e = todo.pop()
        if c.typed.of(e) == "int" and int_bound(e, c.typed, 2**63) >= 10**20:
            return False
        todo.extend(children(e))
    return True


@settings(max_examples=int(40 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=ROWS)
def test_spark_agrees_with_python(spark_session: Any, cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    """On the rows of the SQL tests, BIGINT's limits included (not the MariaDB-only DECIMAL(65,30) and zero dates)."""
    from wormhole.transform.spark import compile_spark

    cases = [c for c in cases if _in_spark_range(c)]
    if not cases:
        return

    df = spark_session.createDataFrame(rows, SPARK_SCHEMA)
    columns = [compile_spark(c.tree, c.typed) for c in cases]
    got = df.select("id", *(col.alias(f"e{k}") for k, col in enumerate(columns))).orderBy("id").collect()
    assert [r[0] for r in got] == [r[0] for r in rows]
    for k, c in enumerate(cases):
        assert_agree("spark", c, rows, python_values(c, rows), [r[k + 1] for r in got])
    predicate = next((k for k, c in enumerate(cases) if c.typed.type == "bool"), None)
    if predicate is not None:
        c = cases[predicate]
        kept = df.filter(columns[predicate]).select("id").orderBy("id").collect()
        assert_filter_agrees("spark", c, rows, python_values(c, rows), [r[0] for r in kept])


def test_the_deepest_expressions_compile_and_run(spark_session: Any) -> None:
    from wormhole.transform.check import check
    from wormhole.transform.expr import MAX_DEPTH, parse
    from wormhole.transform.spark import compile_spark

    df = spark_session.createDataFrame([(1,), (150,), (None,)], "i long")
    for text, expected in ((" + ".join(["i"] * MAX_DEPTH), [MAX_DEPTH, 150 * MAX_DEPTH, None]),
                           (" OR ".join(f"i = {k}" for k in range(2, 300)), [False, True, None])):
        tree = parse(text)
        column = compile_spark(tree, check(tree, {"i": "int"}))
        assert [r[0] for r in df.select(column).collect()] == expected

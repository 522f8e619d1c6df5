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

pytestmark = [pytest.mark.spark]

SPARK_SCHEMA = ("id long, i long, j long, f double, m decimal(38, 18), s string, t string, b boolean, d date, "
                "ts timestamp")


@settings(max_examples=int(40 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=ROWS)
def test_spark_agrees_with_python(spark_session: Any, cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    from wormhole.transform.spark import compile_spark

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

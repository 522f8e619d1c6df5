"""Property test: Spark computes what the Python batch function computes, for random expressions.

The strategies and comparisons are tests/integration/test_expr_agree.py's (SQLite and MariaDB are
compared there); here each example is one DataFrame of all its rows, every expression evaluated in
one ``select``, and the first predicate also as a ``filter``, on the test run's one SparkSession
(ANSI mode, Spark 4's default: an expression that would raise fails the test).
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
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
from wormhole.transform.tree import Binary, Col, Expr, Lit, children

pytestmark = [pytest.mark.spark]

SPARK_SCHEMA = ("id long, i long, j long, f double, m decimal(38, 18), s string, t string, b boolean, d date, "
                "ts timestamp")


_DECIMAL_COLUMN = 10**3
"""The largest magnitude of the rows' decimal column ``m`` (ROWS keeps DECIMAL(65,30)'s edges out of Spark)."""


def _magnitude(e: Expr, c: Case) -> int:
    """An upper bound of ``|value|`` of a numeric expression, for the DECIMAL(38, 18) check below."""
    if c.typed.of(e) == "int":
        return int_bound(e, c.typed, 2**63)
    if isinstance(e, Lit):
        return int(abs(e.value)) + 1 if isinstance(e.value, (int, Decimal)) and not isinstance(e.value, bool) else 1
    if isinstance(e, Col):
        return _DECIMAL_COLUMN
    if isinstance(e, Binary) and e.op in ("+", "-", "*", "/", "%"):
        a, b = _magnitude(e.a, c), _magnitude(e.b, c)
        # A quotient grows by the divisor's smallest non-zero value (a literal or m's 0.001): 10^4 at most.
        return {"*": a * b, "/": a * 10**4, "%": min(a, b)}.get(e.op, a + b)
    return max((_magnitude(x, c) for x in children(e)), default=1)


def _in_spark_range(c: Case) -> bool:
    """Spark computes integer arithmetic in 38 digits and holds a decimal as DECIMAL(38, 18) (README): an
    int that may reach 10^20 (a product of two BIGINTs) is beyond what it casts to a decimal exactly, and a
    decimal that may reach 10^20 (``10.9 * i`` at BIGINT's limit) overflows it (NUMERIC_VALUE_OUT_OF_RANGE)."""
    todo: list[Expr] = [c.tree]
    while todo:
        e = todo.pop()
        if c.typed.of(e) == "int" and int_bound(e, c.typed, 2**63) >= 10**20:
            return False
        if c.typed.of(e) == "decimal" and _magnitude(e, c) >= 10**20:
            return False
        todo.extend(children(e))
    return True


@settings(max_examples=int(40 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=ROWS)
def test_spark_agrees_with_python(spark_session: Any, cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    """On the rows of the SQL tests, BIGINT's limits included (not the MariaDB-only DECIMAL(65,30) and zero dates)."""
    from wormhole.spark.transforms import compile_spark

    cases = [c for c in cases if _in_spark_range(c)]
    if not cases:
        return

    df = spark_session.createDataFrame(rows, SPARK_SCHEMA)
    columns = [compile_spark(c.tree, c.typed) for c in cases]
    # Sorted here, not by an orderBy: the shuffle it plans would double each example's Spark work.
    got = sorted(df.select("id", *(col.alias(f"e{k}") for k, col in enumerate(columns))).collect(),
                 key=lambda r: r[0])
    assert [r[0] for r in got] == [r[0] for r in rows]
    for k, c in enumerate(cases):
        assert_agree("spark", c, rows, python_values(c, rows), [r[k + 1] for r in got])
    predicate = next((k for k, c in enumerate(cases) if c.typed.type == "bool"), None)
    if predicate is not None:
        c = cases[predicate]
        kept = sorted(r[0] for r in df.filter(columns[predicate]).select("id").collect())
        assert_filter_agrees("spark", c, rows, python_values(c, rows), kept)


def test_the_deepest_expressions_compile_and_run(spark_session: Any) -> None:
    from wormhole.spark.transforms import compile_spark
    from wormhole.transform.check import check
    from wormhole.transform.expr import parse
    from wormhole.transform.tree import MAX_DEPTH

    df = spark_session.createDataFrame([(1,), (150,), (None,)], "i long")
    for text, expected in ((" + ".join(["i"] * MAX_DEPTH), [MAX_DEPTH, 150 * MAX_DEPTH, None]),
                           (" OR ".join(f"i = {k}" for k in range(2, 300)), [False, True, None])):
        tree = parse(text)
        column = compile_spark(tree, check(tree, {"i": "int"}))
        assert [r[0] for r in df.select(column).collect()] == expected


def test_zero_dates_carried_as_text_are_null_as_in_local_mode(spark_session: Any) -> None:
    """Issue 23 item 9: a mysql source's DATE/DATETIME columns reach Spark as text (zero dates kept); an
    expression reads a zero or partial date (and the year 0, which Spark alone would take) as NULL."""
    from wormhole.options import Problems
    from wormhole.plugins.base import Column, Schema
    from wormhole.spark.transforms import apply_chain
    from wormhole.transform.chain import Chain
    from wormhole.transform.operators import bind, parse_transforms
    from wormhole.transform.pyfn import compile_py

    schema = Schema((Column("id", "int"), Column("d", "date"), Column("ts", "datetime")))
    exprs = {"y": "year(d)", "n": "d IS NULL", "s": "CAST(d AS string)", "late": "ts > TIMESTAMP '2000-01-01 00:00:00'"}
    problems = Problems()
    ops = bind(parse_transforms([{"derive": exprs}], "t", "task", problems), schema, problems)
    assert not problems.items
    texts = [(1, "2024-01-05", "2024-01-05 10:00:00.000000"), (2, "0000-00-00", "0000-00-00 00:00:00"),
             (3, "2024-00-10", "2024-01-00 10:00:00"), (4, "0000-01-01", "0000-01-01 00:00:00"), (5, None, None)]
    frame = spark_session.createDataFrame(texts, "id long, d string, ts string")
    got = apply_chain(frame, Chain("task", ops, schema)).select("id", *exprs).orderBy("id").collect()
    assert [tuple(r) for r in got] == [(1, 2024, False, "2024-01-05", True)] + [
        (k, None, True, None, None) for k in (2, 3, 4, 5)]
    # The local placement, on the values the mysql reader gives (real dates as dates, zero dates as text).
    local = [(1, date(2024, 1, 5), datetime(2024, 1, 5, 10))] + [r for r in texts if r[0] > 1]
    ((_, tree), *_), typed = ops[0].spec.exprs, ops[0].typed
    cols = {"id": [r[0] for r in local], "d": [r[1] for r in local], "ts": [r[2] for r in local]}
    batch = type("B", (), {"n": len(local), "get": staticmethod(cols.__getitem__)})()
    assert compile_py(tree, typed[0])(batch) == [2024, None, None, None, None]

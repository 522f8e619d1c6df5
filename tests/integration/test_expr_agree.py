"""Property test: every compiler of the expression language computes the same thing.

Random well-typed expressions over a small schema, on random rows full of NULLs, evaluated by the
Python batch function (the reference: it is what check.py documents), by Arrow compute (local mode's
chains: exactly the same values), by SQLite (in memory) and by MariaDB as ``SELECT <expr>`` and as
``WHERE <expr>``. Where sqlgen says NotPushable, that dialect is
skipped for that expression. The Spark side is tests/spark/test_expr_agree_spark.py, on these
same strategies.
"""

from __future__ import annotations

import math
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wormhole.plugins.base import Column, Schema
from wormhole.transform.arrowfn import compile_arrow
from wormhole.transform.check import Typed, check
from wormhole.transform.expr import parse
from wormhole.transform.frame import Frame, arrow_input
from wormhole.transform.pyfn import compile_py
from wormhole.transform.sqlgen import NotPushable, compile_sql
from wormhole.transform.tree import Expr

SCHEMA = {"i": "int", "j": "int", "f": "float", "m": "decimal", "s": "string", "t": "string", "b": "bool",
          "d": "date", "ts": "datetime"}
COLUMNS = tuple(SCHEMA)
ALPHABET = "aAbB %_!é\\'ßΣİ\n"
NUMERIC_TEXTS = ("12", " -7 ", "1.5", "1e3", ".5", "+3", "0", "007", "-0.0", "1.5d", "0x10", "\t8\n", "٣", "1,5",
                 "99999999999999999999", "1e400", "inf", "NaN", "2.675", "0.1234567890123456789")
DATE_TEXTS = ("2024-02-29", "2023-02-29", "2024-01-05 10:30", "2024-01-05T10:30:15.25", "2024-1-5", "2024",
              " 2024-01-05", "2024-01-05 x", "0000-01-01", "0000-01-01 10:00", "2024-13-01", "2024-01-05\n")
BOOL_TEXTS = ("true", " Yes", "f", "N", "TRUE ", "1", "0", "no", "on", "t\t")
SCALE = float(os.environ.get("WORMHOLE_EXPR_EXAMPLES", "1"))
"""Multiplies every test's number of examples (a longer hunt: WORMHOLE_EXPR_EXAMPLES=50). The defaults keep
the suite within ``make test``'s 20 minutes on a 2-core machine; the hunt itself is the longer run's job."""
SETTINGS = {"deadline": None, "database": None, "print_blob": True,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                      HealthCheck.data_too_large, HealthCheck.filter_too_much]}


# ---------------------------------------------------------------------------------------------
# Rows

def _nullable(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values, values)


_ints = st.one_of(st.integers(-10**6 + 1, 10**6 - 1), st.sampled_from([0, 1, -1, 2, -2, 7, -7, 10]))
_floats = st.one_of(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).filter(lambda x: x == 0 or
                                                                                          abs(x) > 1e-6),
                    st.sampled_from([0.0, -0.0, 0.5, 1.5, -2.5, 3.0, 0.1]))
# At most 3 places, as decimal literals: a product of two has at most 6, all Spark keeps of a product of
# DECIMAL(38, 18) values (its precision-loss rule; check.py's docstring says so).
_decimals = st.one_of(st.integers(0, 3).flatmap(lambda places: st.decimals(-10**6 + 1, 10**6 - 1, places=places,
                                                                            allow_nan=False)),
                      st.sampled_from([Decimal("0"), Decimal("0.1"), Decimal("-2.50"), Decimal("1.001")]))
_texts = st.one_of(st.text(alphabet=ALPHABET, max_size=6), st.sampled_from(NUMERIC_TEXTS + DATE_TEXTS + BOOL_TEXTS))
_moments = st.one_of(st.datetimes(datetime(1990, 1, 1), datetime(2040, 1, 1)),
                     st.sampled_from([datetime(2024, 2, 29, 23, 59, 59, 999999), datetime(2000, 1, 1)]))
_dates = st.one_of(st.dates(date(1900, 1, 1), date(2100, 12, 31)),
                   st.sampled_from([date(2024, 2, 29), date(2000, 1, 1), date(1999, 12, 31)]))
# Edge values (issue 23): BIGINT's limits in every engine; DECIMAL(65,30)'s extremes and zero or partial
# dates (a mysql source's zero_dates: keep carries their text) where the store holds them: MariaDB.
INT_EDGES = (2**63 - 1, -(2**63), -(2**63) + 1, 2**62)
DECIMAL_EDGES = (Decimal("1E-30"), Decimal("-1E-30"), Decimal("-0"),
                 Decimal("123456789012345678901234567890.123456789012345678901234567891"),
                 Decimal("-99999999999999999999999999999999999.999999999999999999999999999999"))
ZERO_DATES = ("0000-00-00", "2024-00-10")
ZERO_MOMENTS = ("0000-00-00 00:00:00", "2024-01-00 10:00:00")


def row_strategy(edges: bool = True, wide: bool = False) -> st.SearchStrategy[tuple[Any, ...]]:
    """A row; ``edges``: with BIGINT's limits, ``wide``: with DECIMAL(65,30) values and zero dates too."""
    ints = st.one_of(_ints, st.sampled_from(INT_EDGES)) if edges else _ints
    decimals = st.one_of(_decimals, st.sampled_from(DECIMAL_EDGES)) if wide else _decimals
    dates = st.one_of(_dates, st.sampled_from(ZERO_DATES)) if wide else _dates
    moments = st.one_of(_moments, st.sampled_from(ZERO_MOMENTS)) if wide else _moments
    return st.tuples(_nullable(ints), _nullable(ints), _nullable(_floats), _nullable(decimals), _nullable(_texts),
                     _nullable(_texts), _nullable(st.booleans()), _nullable(dates), _nullable(moments))


ROW = row_strategy()
BASE_ROWS: list[tuple[Any, ...]] = [
    (None, None, None, None, None, None, None, None, None),
    (0, 0, 0.0, Decimal("0"), "", "", False, date(2024, 2, 29), datetime(2024, 2, 29, 12, 0)),
    (7, -2, -2.5, Decimal("0.1"), "aB", "ab", True, date(2000, 1, 1), datetime(2000, 1, 1)),
    (-7, 2, 1.5, Decimal("-2.50"), "a ", "a", True, date(1999, 12, 31), datetime(1999, 12, 31, 23, 59, 59, 500)),
    (1, None, 0.1, Decimal("1.001"), "é%_", "É", None, None, None),
    (None, 3, None, None, " 12 ", "2024-01-05", False, date(2024, 1, 5), datetime(2024, 1, 5, 10, 30)),
]
EDGE_ROWS: list[tuple[Any, ...]] = [
    (2**63 - 1, -(2**63), -0.0, Decimal("0.001"), "A", "a", None, None, None),
    (-(2**63), -1, 0.0, Decimal("-0"), "ß", "SS", False, None, None),
]
WIDE_ROWS: list[tuple[Any, ...]] = [
    (1, 2**63 - 1, None, DECIMAL_EDGES[3], "x", "X", True, "0000-00-00", "0000-00-00 00:00:00"),
    (None, 0, 1.5, DECIMAL_EDGES[4], None, "", None, "2024-00-10", "2024-01-00 10:00:00"),
]


def rows_strategy(edges: bool = True, wide: bool = False) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    base = BASE_ROWS + (EDGE_ROWS if edges else []) + (WIDE_ROWS if wide else [])
    return st.lists(row_strategy(edges, wide), max_size=20).map(
        lambda extra: [(k, *r) for k, r in enumerate(base + extra)])


ROWS = rows_strategy()
"""Rows as tuples: id first, then the columns of SCHEMA in order (with BIGINT's limits)."""
WIDE = rows_strategy(wide=True)
"""Also DECIMAL(65,30) extremes and zero dates: MariaDB's rows."""


# ---------------------------------------------------------------------------------------------
# Expressions: text drawn per type, so every one checks

KINDS = ("int", "float", "decimal", "string", "bool", "date", "datetime")
NUMBERS = ("int", "float", "decimal")
COMPARABLE = [("int", "int"), ("int", "float"), ("float", "decimal"), ("int", "decimal"), ("decimal", "decimal"),
              ("float", "float"), ("string", "string"), ("date", "date"), ("bool", "bool"),
              ("datetime", "datetime")]


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _float_text(x: float) -> str:
    r = repr(x)
    return r if "e" in r else r + "e0"


@st.composite
def literal(draw: st.DrawFn, kind: str) -> str:
    if kind == "int":
        return str(draw(_ints))
    if kind == "float":
        return _float_text(draw(_floats))
    if kind == "decimal":
        return str(draw(st.decimals(-1000, 1000, places=draw(st.integers(1, 3)), allow_nan=False)))
    if kind == "string":
        return _quote(draw(_texts))
    if kind == "bool":
        return draw(st.sampled_from(["TRUE", "FALSE"]))
    if kind == "date":
        return f"DATE '{draw(_dates).isoformat()}'"
    moment = draw(st.datetimes(datetime(1990, 1, 1), datetime(2040, 1, 1))).replace(microsecond=0)
    return f"TIMESTAMP '{moment.isoformat(' ')}'"


def _leaf(draw: st.DrawFn, kind: str) -> str:
    columns = [c for c, k in SCHEMA.items() if k == kind]
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return "NULL" if draw(st.booleans()) else f"CAST(NULL AS {kind})"
    if columns and choice >= 4:
        return draw(st.sampled_from(columns))
    return draw(literal(kind))


@st.composite
def expr(draw: st.DrawFn, kind: str, depth: int = 3, top: bool = False) -> str:
    """The text of an expression of ``kind`` (or NULL), at most ``depth`` operators deep."""
    if depth <= 0 or (not top and draw(st.integers(0, 3)) == 0):
        return _leaf(draw, kind)
    sub: Callable[[str], str] = lambda k: draw(expr(k, depth - 1))  # noqa: E731
    rules = PRODUCTIONS[kind](draw, sub, depth)
    if draw(st.integers(0, 4)) == 0:  # the forms of every type, now and then
        rules = [lambda: f"CASE WHEN {sub('bool')} THEN {sub(kind)} ELSE {sub(kind)} END",
                 lambda: f"CASE WHEN {sub('bool')} THEN {sub(kind)} WHEN {sub('bool')} THEN {sub(kind)} END",
                 lambda: f"coalesce({sub(kind)}, {sub(kind)})"]
        if kind in ORDERED_CASE:
            rules.append(lambda: f"CASE {sub(kind)} WHEN {_leaf(draw, kind)} THEN {sub(kind)} "
                                 f"ELSE {sub(kind)} END")
    return draw(st.sampled_from(rules))()


ORDERED_CASE = frozenset({"int", "string", "date"})


def _int_rules(draw: st.DrawFn, sub: Callable[[str], str], depth: int) -> list[Callable[[], str]]:
    num = st.sampled_from(["int", "int", "float", "decimal"])
    return [lambda: f"({sub('int')} + {sub('int')})", lambda: f"({sub('int')} - {sub('int')})",
            # Products of leaves only: Spark holds integer arithmetic in 38 digits (README).
            lambda: f"({_leaf(draw, 'int')} * {_leaf(draw, 'int')})",
            lambda: f"({sub('int')} % {sub('int')})", lambda: f"-({sub('int')})", lambda: f"abs({sub('int')})",
            lambda: f"length({sub('string')})", lambda: f"{draw(st.sampled_from(['year', 'month', 'day']))}"
                                                        f"({sub(draw(st.sampled_from(['date', 'datetime'])))})",
            lambda: f"CAST({sub(draw(st.sampled_from(['float', 'string', 'bool', 'decimal'])))} AS int)",
            lambda: f"CAST({sub(draw(num))} AS int)"]


def _float_rules(draw: st.DrawFn, sub: Callable[[str], str], depth: int) -> list[Callable[[], str]]:
    num = st.sampled_from(NUMBERS)
    return [lambda: f"({sub(draw(num))} / {sub(draw(num))})", lambda: f"({sub('float')} + {sub(draw(num))})",
            lambda: f"({sub(draw(num))} - {sub('float')})", lambda: f"({_leaf(draw, 'float')} * {_leaf(draw, 'int')})",
            lambda: f"-({sub('float')})", lambda: f"abs({sub('float')})",
            lambda: f"CAST({sub(draw(st.sampled_from(['int', 'string', 'decimal'])))} AS float)",
            lambda: f"coalesce({sub('float')}, {sub('int')})"]


def _decimal_rules(draw: st.DrawFn, sub: Callable[[str], str], depth: int) -> list[Callable[[], str]]:
    exact = st.sampled_from(["int", "decimal"])
    return [lambda: f"({sub('decimal')} + {sub(draw(exact))})", lambda: f"({sub(draw(exact))} - {sub('decimal')})",
            lambda: f"({_leaf(draw, 'decimal')} * {_leaf(draw, draw(exact))})", lambda: f"-({sub('decimal')})",
            lambda: f"abs({sub('decimal')})",
            lambda: f"CAST({sub(draw(st.sampled_from(['int', 'string'])))} AS decimal)",
            lambda: f"coalesce({sub('int')}, {sub('decimal')})"]


def _string_rules(draw: st.DrawFn, sub: Callable[[str], str], depth: int) -> list[Callable[[], str]]:
    return [lambda: f"{draw(st.sampled_from(['lower', 'upper', 'trim', 'ltrim', 'rtrim']))}({sub('string')})",
            lambda: f"substr({sub('string')}, {draw(st.integers(1, 4))})",
            lambda: f"substr({sub('string')}, {draw(st.integers(1, 4))}, {draw(st.integers(0, 3))})",
            lambda: f"concat({sub('string')}, {sub('string')})",
            lambda: f"concat({sub('string')}, {sub('string')}, {sub('string')})",
            lambda: f"CAST({sub(draw(st.sampled_from(['int', 'bool', 'date', 'decimal'])))} AS string)"]


def _like_pattern(draw: st.DrawFn) -> str:
    return _quote(draw(st.text(alphabet="aAb %_\\é'", max_size=5)))


def _bool_rules(draw: st.DrawFn, sub: Callable[[str], str], depth: int) -> list[Callable[[], str]]:
    def compare() -> str:
        a, b = draw(st.sampled_from(COMPARABLE))
        a, b = (a, b) if draw(st.booleans()) else (b, a)
        return f"({sub(a)} {draw(st.sampled_from(['=', '!=', '<>', '<', '<=', '>', '>=']))} {sub(b)})"

    def in_list() -> str:
        a, b = draw(st.sampled_from(COMPARABLE))
        items = [draw(literal(draw(st.sampled_from([a, b])))) for _ in range(draw(st.integers(1, 4)))]
        if draw(st.integers(0, 3)) == 0:
            items.append("NULL")
        return f"({sub(a)} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(items)}))"

    def between() -> str:
        a, b = draw(st.sampled_from(COMPARABLE))
        return f"({sub(a)} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN {sub(b)} AND {sub(b)})"

    return [compare, compare, in_list, between,
            lambda: f"({sub('bool')} AND {sub('bool')})", lambda: f"({sub('bool')} OR {sub('bool')})",
            lambda: f"(NOT {sub('bool')})",
            lambda: f"({sub(draw(st.sampled_from(KINDS)))} IS {draw(st.sampled_from(['', 'NOT ']))}NULL)",
            lambda: f"({sub('string')} {draw(st.sampled_from(['', 'NOT ']))}LIKE {_like_pattern(draw)})",
            lambda: f"CAST({sub(draw(st.sampled_from(['string', 'int'])))} AS bool)"]


def _date_rules(draw: st.DrawFn, sub: Callable[[str], str], depth: int) -> list[Callable[[], str]]:
    return [lambda: f"date({sub(draw(st.sampled_from(['date', 'datetime'])))})",
            lambda: f"CAST({sub(draw(st.sampled_from(['string', 'datetime'])))} AS date)"]


def _datetime_rules(draw: st.DrawFn, sub: Callable[[str], str], depth: int) -> list[Callable[[], str]]:
    return [lambda: f"CAST({sub(draw(st.sampled_from(['string', 'date'])))} AS datetime)"]


PRODUCTIONS: dict[str, Callable[[st.DrawFn, Callable[[str], str], int], list[Callable[[], str]]]] = {
    "int": _int_rules, "float": _float_rules, "decimal": _decimal_rules, "string": _string_rules,
    "bool": _bool_rules, "date": _date_rules, "datetime": _datetime_rules}


@dataclass(frozen=True)
class Case:
    text: str
    tree: Expr
    typed: Typed


@st.composite
def case(draw: st.DrawFn, kinds: Sequence[str] = KINDS) -> Case:
    kind = draw(st.sampled_from(kinds))
    text = draw(expr(kind, draw(st.integers(1, 4)), top=True))
    tree = parse(text)
    typed = check(tree, SCHEMA)
    assert not typed.problems, (text, typed.problems)
    # A NULL operand can make a number of another kind: NULL + CAST(NULL AS int) is an int.
    assert typed.type in (kind, "null") or {kind, typed.type} <= set(NUMBERS), (text, typed.type)
    return Case(text, tree, typed)


CASES = st.lists(case(("bool", "bool", *KINDS)), min_size=2, max_size=6)
"""A few expressions per example (mostly predicates), all evaluated on the same rows."""


# ---------------------------------------------------------------------------------------------
# Evaluation and comparison


class Batch:
    """The rows column-wise, as pyfn reads a batch."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.n = len(rows)
        self.cols = {name: [r[k + 1] for r in rows] for k, name in enumerate(COLUMNS)}

    def get(self, name: str) -> list[Any]:
        return self.cols[name]


def python_values(c: Case, rows: list[tuple[Any, ...]]) -> list[Any]:
    return compile_py(c.tree, c.typed)(Batch(rows))


def normal(value: Any, kind: str, engine: str) -> Any:
    """A value as every engine can agree on it: bools from 1/0, SQLite's dates from ISO text."""
    if value is None:
        return None
    if kind == "bool":
        assert value in (0, 1), value
        return bool(value)
    if kind == "date" and engine == "sqlite":
        return date.fromisoformat(value)
    if kind == "string" and isinstance(value, bytes):
        return value.decode()
    return value


def same(a: Any, b: Any, kind: str, engine: str) -> bool:
    a, b = normal(a, kind, "python"), normal(b, kind, engine)
    if a is None or b is None:
        return a is None and b is None
    if kind in ("float", "decimal") or isinstance(a, float) or isinstance(b, float):
        if isinstance(a, Decimal) and isinstance(b, Decimal):
            return a == b
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if kind == "int":
        return bool(a == b) and int(a) == a and int(b) == b
    return bool(a == b) and type(a) is type(b)


def assert_agree(engine: str, c: Case, rows: list[tuple[Any, ...]], expected: list[Any], got: list[Any]) -> None:
    assert len(got) == len(expected), (engine, c.text)
    for row, want, have in zip(rows, expected, got, strict=True):
        assert same(want, have, c.typed.type, engine), (
            f"{engine} disagrees with Python on {c.text!r} ({c.typed.type}): row {row} gives {have!r}, "
            f"Python {want!r}")


def assert_filter_agrees(engine: str, c: Case, rows: list[tuple[Any, ...]], expected: list[Any],
                         kept: list[int]) -> None:
    want = [r[0] for r, v in zip(rows, expected, strict=True) if v is True]
    assert kept == want, f"{engine} keeps rows {kept} for WHERE {c.text!r}, Python {want}"


# ---------------------------------------------------------------------------------------------
# Arrow: the batch as local mode's chains take it (a zero date's cell NULL, its text riding beside)


def arrow_schema_of(decimal: tuple[int, int] | None) -> Schema:
    return Schema(tuple(Column(n, k, precision=decimal[0] if decimal and k == "decimal" else None,  # type: ignore[arg-type]
                               scale=decimal[1] if decimal and k == "decimal" else None) for n, k in SCHEMA.items()))


def arrow_values(c: Case, rows: list[tuple[Any, ...]], schema: Schema) -> list[Any]:
    arrays, carried = arrow_input([r[1:] for r in rows], schema)
    got = compile_arrow(c.tree, c.typed)(Frame(COLUMNS, arrays, carried, len(rows)))
    return got if isinstance(got, list) else got.to_pylist()


def identical(want: Any, have: Any, kind: str, decimals: bool) -> bool:
    """Arrow's value is Python's: floats to the last bit (and the sign of zero, but where a decimal took
    part: Python's decimals have a negative zero, Arrow's, MySQL's and Spark's do not), decimals and
    ints equal (an int beyond 64 bits comes as a decimal of scale 0, which the chain's derive makes an int)."""
    if want is None or have is None:
        return want is None and have is None
    if isinstance(want, float) or kind == "float":
        if not isinstance(have, float):
            return False
        if math.isnan(want) or math.isnan(have):
            return math.isnan(want) and math.isnan(have)
        return want == have and (decimals or math.copysign(1, want) == math.copysign(1, have))
    if kind in ("int", "decimal"):
        return bool(want == have)
    return bool(want == have) and type(want) is type(have)


def _no_negative_zero(v: Any) -> Any:
    return Decimal(0) if isinstance(v, Decimal) and v.is_zero() else v


def check_arrow(cases: list[Case], rows: list[tuple[Any, ...]], schema: Schema) -> None:
    # A decimal has no negative zero in Arrow (nor in MySQL or Spark): -0 arrives as 0, which Python takes.
    rows = [tuple(_no_negative_zero(v) for v in r) for r in rows]
    for c in cases:
        expected = python_values(c, rows)
        got = arrow_values(c, rows, schema)
        assert len(got) == len(expected), c.text
        for row, want, have in zip(rows, expected, got, strict=True):
            assert identical(want, have, c.typed.type, "decimal" in c.typed.types.values()), (
                f"arrow disagrees with Python on {c.text!r} ({c.typed.type}): row {row} gives {have!r}, "
                f"Python {want!r}")
        if c.typed.type in ("bool", "null"):
            kept = [r[0] for r, v in zip(rows, got, strict=True) if v is True]
            assert_filter_agrees("arrow", c, rows, expected, kept)


@pytest.mark.slow  # hundreds of examples: started first under make test, not left for the end
@settings(max_examples=int(300 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=ROWS)
def test_arrow_agrees_with_python(cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    check_arrow(cases, rows, arrow_schema_of(None))


@pytest.mark.slow  # hundreds of examples: started first under make test, not left for the end
@settings(max_examples=int(180 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=WIDE)
def test_arrow_agrees_with_python_on_mysql_values(cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    """DECIMAL(65, 30) values and zero dates, as a mysql source gives them: in a column that declares
    DECIMAL(65, 30) (decimal256), and in one that declares no precision (decimal128(38, 18), which holds
    none of the extremes: the chain computes with them in a wider decimal)."""
    check_arrow(cases, rows, arrow_schema_of((65, 30)))
    check_arrow(cases, rows, arrow_schema_of(None))


# ---------------------------------------------------------------------------------------------
# SQL engines

SQL_TYPES = {"sqlite": ("INTEGER", "INTEGER", "REAL", "REAL", "TEXT", "TEXT", "INTEGER", "TEXT", "TEXT"),
             "mysql": ("BIGINT", "BIGINT", "DOUBLE", "DECIMAL(65, 30)", "VARCHAR(64) COLLATE utf8mb4_general_ci",
                       "VARCHAR(64) COLLATE utf8mb4_unicode_ci", "BOOLEAN", "DATE", "DATETIME(6)")}
"""The string columns have case-insensitive collations (two different ones) on purpose."""
TABLE = "x_rows"


def create_table(execute: Callable[[str], Any], dialect: str, quote: str) -> None:
    cols = ", ".join(f"{quote}{n}{quote} {t}" for n, t in zip(COLUMNS, SQL_TYPES[dialect], strict=True))
    execute(f"CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, {cols})")


def sql_rows(rows: list[tuple[Any, ...]], dialect: str) -> list[tuple[Any, ...]]:
    if dialect == "mysql":
        return rows
    return [tuple(v.isoformat() if isinstance(v, date) else int(v) if isinstance(v, bool) else
                  float(v) if isinstance(v, Decimal) else v for v in r) for r in rows]


def check_sql(dialect: str, cases: list[Case], rows: list[tuple[Any, ...]],
              query: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]], placeholder: str) -> None:
    for c in cases:
        try:
            sql = compile_sql(c.tree, c.typed, dialect)  # type: ignore[arg-type]
        except NotPushable:
            continue
        text = sql.render(placeholder, escape_percent=dialect in ("mysql", "postgres"))
        expected = python_values(c, rows)
        got = query(f"SELECT id, {text} FROM {TABLE} ORDER BY id", sql.args)
        assert [r[0] for r in got] == [r[0] for r in rows]
        assert_agree(dialect, c, rows, expected, [r[1] for r in got])
        if c.typed.type in ("bool", "null"):
            kept = query(f"SELECT id FROM {TABLE} WHERE {text} ORDER BY id", sql.args)
            assert_filter_agrees(dialect, c, rows, expected, [r[0] for r in kept])


@pytest.fixture(name="sqlite_conn")
def fixture_sqlite_conn() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    create_table(conn.execute, "sqlite", '"')
    yield conn
    conn.close()


@pytest.mark.slow  # hundreds of examples: started first under make test, not left for the end
@settings(max_examples=int(300 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=ROWS)
def test_sqlite_agrees_with_python(sqlite_conn: sqlite3.Connection, cases: list[Case],
                                   rows: list[tuple[Any, ...]]) -> None:
    sqlite_conn.execute(f"DELETE FROM {TABLE}")
    marks = ", ".join("?" * (len(COLUMNS) + 1))
    sqlite_conn.executemany(f"INSERT INTO {TABLE} VALUES ({marks})", sql_rows(rows, "sqlite"))
    check_sql("sqlite", cases, rows, lambda q, args: sqlite_conn.execute(q, args).fetchall(), "?")


@pytest.fixture(name="mysql_conn")
def fixture_mysql_conn() -> Iterator[Any]:
    from tests.conftest import mysql_or_skip

    conn = mysql_or_skip()
    name = f"wh_expr_{uuid.uuid4().hex[:8]}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        cur.execute(f"USE `{name}`")
        create_table(cur.execute, "mysql", "`")
    try:
        yield conn
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


@pytest.mark.mysql
@pytest.mark.slow  # hundreds of examples: started first under make test, not left for the end
@settings(max_examples=int(250 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=WIDE)
def test_mysql_agrees_with_python(mysql_conn: Any, cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    check_mysql(mysql_conn, cases, rows)


def check_mysql(mysql_conn: Any, cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    """``rows`` into the MariaDB table, then every case computed there as Python computes it."""
    def query(text: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with mysql_conn.cursor() as cur:
            cur.execute(text, args)
            return list(cur.fetchall())

    with mysql_conn.cursor() as cur:
        cur.execute(f"DELETE FROM {TABLE}")
        cur.executemany(f"INSERT INTO {TABLE} VALUES ({', '.join(['%s'] * (len(COLUMNS) + 1))})", rows)
    check_sql("mysql", cases, rows, query, "%s")


@pytest.mark.mysql
def test_an_int_case_or_coalesce_with_a_null_from_arithmetic_stays_exact_in_mysql(mysql_conn: Any) -> None:
    """MariaDB types arithmetic and functions of NULL as DOUBLE, which made a CASE or coalesce of an int a
    double: 2^63 - 1 came back as 9223372036854776000 (found by test_mysql_agrees_with_python)."""
    texts = ("(i + CASE WHEN b THEN j ELSE (CAST(NULL AS int) + CAST(NULL AS int)) END)",
             "coalesce(j, -(CAST(NULL AS int)))", "CASE WHEN b THEN j ELSE abs(CAST(NULL AS int)) END",
             "coalesce(CAST(NULL AS int) * 2, j)")
    cases = []
    for text in texts:
        tree = parse(text)
        cases.append(Case(text, tree, check(tree, SCHEMA)))
    rows = [(k, *r) for k, r in enumerate(BASE_ROWS + WIDE_ROWS)]
    check_mysql(mysql_conn, cases, rows)
    assert any(r[2] == 2**63 - 1 for r in rows)  # the row that showed it



@pytest.mark.mysql
def test_a_float_coalesce_of_an_int_and_a_null_adds_as_doubles_in_mysql(mysql_conn: Any) -> None:
    """coalesce(CAST(NULL AS float), 1) is a float; MySQL typed it BIGINT (its float branch a bare NULL), so
    adding a column's 2^63 - 1 overflowed there (found by test_mysql_agrees_with_python)."""
    texts = ("(coalesce(CAST(NULL AS float), 1) + j)", "CASE WHEN j > 0 THEN 1 ELSE CAST(NULL AS float) END + j")
    trees = [parse(t) for t in texts]
    cases = [Case(t, tree, check(tree, SCHEMA)) for t, tree in zip(texts, trees, strict=True)]
    rows = [(k, *r) for k, r in enumerate(BASE_ROWS + WIDE_ROWS)]
    check_mysql(mysql_conn, cases, rows)
    assert any(r[2] == 2**63 - 1 for r in rows)  # j, the value that overflowed

def test_arrow_truncates_a_negative_decimal_next_to_the_64_bit_limit_as_python() -> None:
    """Arrow's decimal rescale made -9223372036854775807.999 -9223372036854775806, so CAST(... AS int) was 1
    off (found by test_arrow_agrees_with_python)."""
    texts = ("(i + CAST((m + j) AS int))", "CAST((m + j) AS int)", "CAST((m - 0.5) AS int)")
    trees = [parse(t) for t in texts]
    cases = [Case(t, tree, check(tree, SCHEMA)) for t, tree in zip(texts, trees, strict=True)]
    rows = [(0, 2**63 - 1, -(2**63), None, Decimal("0.001"), None, None, None, None, None),
            (1, 5, -7, None, Decimal("-2.999"), None, None, None, None, None)]
    check_arrow(cases, rows, arrow_schema_of(None))
    assert arrow_values(cases[0], rows, arrow_schema_of(None))[0] == 0


SQL_TYPES["postgres"] = ("BIGINT", "BIGINT", "DOUBLE PRECISION", "NUMERIC", "TEXT", 'TEXT COLLATE "POSIX"', "BOOLEAN",
                         "DATE", "TIMESTAMP")


@pytest.fixture(name="pg_conn")
def fixture_pg_conn() -> Iterator[Any]:
    from tests.pg_helpers import pg_or_skip

    conn = pg_or_skip()
    name = f"wh_expr_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE SCHEMA "{name}"')
    conn.execute(f'SET search_path = "{name}"')
    create_table(conn.execute, "postgres", '"')
    try:
        yield conn
    finally:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.close()


@pytest.mark.postgres
@pytest.mark.slow  # hundreds of examples: started first under make test, not left for the end
@settings(max_examples=int(150 * SCALE), **SETTINGS)  # type: ignore[arg-type]
@given(cases=CASES, rows=ROWS)
def test_postgres_agrees_with_python(pg_conn: Any, cases: list[Case], rows: list[tuple[Any, ...]]) -> None:
    pg_conn.execute(f"DELETE FROM {TABLE}")
    with pg_conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {TABLE} VALUES ({', '.join(['%s'] * (len(COLUMNS) + 1))})", rows)
    check_sql("postgres", cases, rows, lambda q, args: pg_conn.execute(q, args).fetchall(), "%s")

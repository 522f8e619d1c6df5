"""Spark's transforms: expressions compiled to Spark Columns, and transform chains on a DataFrame.

Imported only in Spark mode (and by tests): it needs pyspark, which only ``wormhole/spark`` imports.

Expressions (:func:`compile_spark`) mean what :mod:`wormhole.transform.pyfn` computes. Spark's own
semantics are steered where they would differ: integer literals are 64-bit, division is in doubles
with NULL for a zero divisor (also under ANSI mode), LIKE is a case-sensitive regular expression
anchored at both ends, and casts from text are ``try_cast`` (NULL when the text does not convert).

Chains (:func:`apply_chain`): each operator's Spark form
(:meth:`wormhole.transform.operators.base.Operator.spark`) builds on the :class:`Kit` given here. The
task's chain runs on the source's DataFrame before it is persisted (once, before the fan-out); a
destination's chain on that destination's view of it. Every operator is a narrow transformation,
so each partition stays one split (durable destinations rely on it). A column the frame carries as
text (exact values, decimals from a row reader) is handed to expressions in its logical type (an
integer as DECIMAL(38, 0), which holds one beyond 64 bits). A derived integer Spark computed as
DECIMAL(38, 0) (arithmetic that may leave 64 bits) is carried as its exact text, as local mode carries
Python's int: a cast to long would fail the task under ANSI mode (CAST_OVERFLOW) where local mode writes
the value, and every writer reads the text back as the integer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from wormhole.counters import WriterCounters
from wormhole.plugins.base import Schema, Split
from wormhole.plugins.spark_kit import EXACT
from wormhole.transform.chain import Chain
from wormhole.transform.check import Typed, int_bound
from wormhole.transform.operators import BoundOp
from wormhole.transform.plan import Placement, TransformPlan
from wormhole.transform.pyfn import TEXT_PATTERNS
from wormhole.transform.tree import Between, Binary, Case, Cast, Col, Expr, Func, In, IsNull, Like, Lit, Neg, Not

SPARK_TYPES: dict[str, T.DataType] = {
    "int": T.LongType(), "float": T.DoubleType(), "decimal": T.DecimalType(38, 18), "string": T.StringType(),
    "bool": T.BooleanType(), "date": T.DateType(), "datetime": T.TimestampType(), "bytes": T.BinaryType(),
    "json": T.StringType()}

Resolve = Callable[[str], Column]
WIDE_INT = T.DecimalType(38, 0)
"""Integer arithmetic that could leave 64 bits (ANSI mode raises there, Python's ints do not): exact to
38 digits."""


def column(name: str) -> Column:
    """A column by name, whatever characters it holds (a dot is no struct access here)."""
    return F.col("`" + name.replace("`", "``") + "`")


def compile_spark(e: Expr, typed: Typed, resolve: Resolve = column) -> Column:
    """The Spark Column of a checked expression; ``resolve`` gives each source column (so a frame
    that carries a column as text can hand it over in its logical type)."""
    return _Gen(typed, resolve).col(e)


class _Gen:
    def __init__(self, typed: Typed, resolve: Resolve) -> None:
        self.typed = typed
        self.resolve = resolve

    def as_type(self, e: Expr, kind: str) -> Column:
        c = self.col(e)
        return c if self.typed.of(e) == kind else c.cast(SPARK_TYPES[kind])

    def col(self, e: Expr) -> Column:
        return _COLUMN[type(e)](self, e)

    def _literal(self, e: Lit) -> Column:
        return _literal(e.value)

    def _column(self, e: Col) -> Column:
        return self.resolve(e.name)

    def _neg(self, e: Neg) -> Column:
        return -self.wide(e.x, e)

    def _not(self, e: Not) -> Column:
        return ~self.col(e.x)

    def _is_null(self, e: IsNull) -> Column:
        x = self.col(e.x)
        return x.isNotNull() if e.negated else x.isNull()

    def _in(self, e: In) -> Column:
        kinds = {self.typed.of(e.x), *(self.typed.of(i) for i in e.items)}
        as_double = "float" in kinds and bool(kinds & {"decimal", "int"})
        x = self.col(e.x).cast("double") if as_double else self.col(e.x)
        items = [_literal(float(i.value) if as_double and i.value is not None else i.value) for i in e.items]
        found = x.isin(*items)
        return ~found if e.negated else found

    def _between(self, e: Between) -> Column:
        inside = self._compare(">=", e.x, e.low) & self._compare("<=", e.x, e.high)
        return ~inside if e.negated else inside

    def _like(self, e: Like) -> Column:
        found = self.col(e.x).rlike(e.regex())
        return ~found if e.negated else found

    def _case(self, e: Case) -> Column:
        kind = self.typed.of(e)
        out: Any = F
        for cond, value in e.whens:
            out = out.when(self.col(cond) == F.lit(True), self.as_type(value, kind) if kind != "null" else
                           self.col(value))
        default = self.as_type(e.default, kind) if e.default is not None and kind != "null" else \
            F.lit(None).cast(SPARK_TYPES.get(kind, T.StringType()))
        return out.otherwise(default)

    def wide(self, e: Expr, result: Expr) -> Column:
        """``e`` as an operand of ``result``: as DECIMAL(38, 0) when ``result`` is an int that may leave 64 bits."""
        c = self.col(e)
        if self.widened(result) and not self.widened(e):  # one cast per operand, not per level
            return c.cast(WIDE_INT)
        return c

    def widened(self, e: Expr) -> bool:
        """Whether ``e`` is integer arithmetic computed as DECIMAL(38, 0)."""
        arithmetic = isinstance(e, Neg) or (isinstance(e, Binary) and e.op in "+-*") or (
            isinstance(e, Func) and e.name == "abs")
        return arithmetic and self.typed.of(e) == "int" and int_bound(e, self.typed, 2**63) >= 2**63

    def _compare(self, op: str, a: Expr, b: Expr) -> Column:
        x, y = self.col(a), self.col(b)
        kinds = {self.typed.of(a), self.typed.of(b)}
        if "float" in kinds and kinds <= {"decimal", "float", "int"}:
            x, y = x.cast("double"), y.cast("double")
        if op == "=":
            return x == y
        if op == "!=":
            return x != y
        if op == "<":
            return x < y
        if op == "<=":
            return x <= y
        if op == ">":
            return x > y
        return x >= y

    def _binary(self, e: Binary) -> Column:
        op = e.op
        if op == "AND":
            return self.col(e.a) & self.col(e.b)
        if op == "OR":
            return self.col(e.a) | self.col(e.b)
        if op in ("=", "!=", "<", "<=", ">", ">="):
            return self._compare(op, e.a, e.b)
        if op == "/":
            b = self.col(e.b)
            return F.when(b == 0, F.lit(None)).otherwise(self.col(e.a).cast("double") / b.cast("double"))
        if op == "%":
            b = self.col(e.b)
            return F.when(b == 0, F.lit(None)).otherwise(self.col(e.a) % b)
        kind = self.typed.of(e)
        if kind == "int":
            a, b = self.wide(e.a, e), self.wide(e.b, e)
        else:
            a, b = self.as_type(e.a, kind), self.as_type(e.b, kind)
        out = a + b if op == "+" else a - b if op == "-" else a * b
        return out if kind != "decimal" else out.cast(SPARK_TYPES["decimal"])

    def _func(self, e: Func) -> Column:
        name = e.name
        if name == "coalesce":
            kind = self.typed.of(e)
            return F.coalesce(*(self.as_type(a, kind) if kind != "null" else self.col(a) for a in e.args))
        args = [self.wide(a, e) if name == "abs" else self.col(a) for a in e.args]
        if name == "concat":
            return F.concat(*args)
        if name == "substr":
            start = e.args[1].value  # type: ignore[attr-defined]
            length = e.args[2].value if len(e.args) > 2 else 2**31 - 1  # type: ignore[attr-defined]
            return F.substring(args[0], start, length)
        one: dict[str, Callable[[Column], Column]] = {
            "lower": F.lower, "upper": F.upper, "length": F.char_length, "trim": F.trim, "ltrim": F.ltrim,
            "rtrim": F.rtrim, "abs": F.abs, "year": F.year, "month": F.month, "day": F.dayofmonth,
            "date": lambda c: c.cast("date")}
        out = one[name](args[0])
        return out.cast("long") if name in ("length", "year", "month", "day") else out

    def _cast(self, e: Cast) -> Column:
        source, to = self.typed.of(e.x), e.to
        x = self.col(e.x)
        if source == to:
            return x
        none = F.lit(None).cast(SPARK_TYPES[to])
        if source == "string" and to == "bool":
            t = F.lower(F.trim(x, F.lit(" \t\n\r")))
            return F.when(t.isin("true", "t", "yes", "y", "1"), F.lit(True)) \
                .when(t.isin("false", "f", "no", "n", "0"), F.lit(False)).otherwise(none)
        if source == "string":
            # Only the texts pyfn takes: try_cast alone reads ' 2024-1-5 x' as a date, '1.5d' as a number.
            value = F.when(x.rlike(f"^(?:{TEXT_PATTERNS[to]})\\z"), x.try_cast(SPARK_TYPES[to])).otherwise(none)
            return F.when(F.abs(value) == float("inf"), none).otherwise(value) if to == "float" else value
        if source == "float" and to == "int":  # NULL outside the 64-bit range, as -2^63 <= x < 2^63 in pyfn
            return F.when(F.isnan(x) | (x < -9.223372036854775808e18) | (x >= 9.223372036854775808e18), none) \
                .otherwise(x.cast("long"))
        if source == "decimal" and to == "string":  # pyfn.decimal_text: no trailing zeros after the point
            return F.regexp_replace(F.regexp_replace(x.cast("string"), r"(\.[0-9]*?)0+$", "$1"), r"\.$", "")
        return x.try_cast(SPARK_TYPES[to])  # a decimal beyond 64 bits to int: NULL, not an error


_COLUMN: dict[type[Expr], Callable[[Any, Any], Column]] = {
    Lit: _Gen._literal, Col: _Gen._column, Neg: _Gen._neg, Binary: _Gen._binary, Not: _Gen._not,
    IsNull: _Gen._is_null, In: _Gen._in, Between: _Gen._between, Like: _Gen._like, Func: _Gen._func,
    Case: _Gen._case, Cast: _Gen._cast}
"""Each node's Spark Column: a type-dispatch table."""


def _literal(value: Any) -> Column:
    if isinstance(value, bool) or value is None:
        return F.lit(value)
    if isinstance(value, int):
        return F.lit(value).cast("long")
    if isinstance(value, datetime):
        # From text, read in the session's time zone as a timestamp column is: F.lit(datetime) would
        # read it in the driver process's zone, and TIMESTAMP '2024-01-05 10:00' could shift by hours.
        return F.lit(value.isoformat(" ")).cast(T.TimestampType())
    return F.lit(value)


# -- transform chains on a DataFrame -------------------------------------------------------


class Kit:
    """What an operator's Spark form builds with (:class:`~wormhole.transform.operators.base.SparkKit`):
    for one operator on one DataFrame, its input columns in their logical types."""

    F = F

    def __init__(self, frame: DataFrame, op: BoundOp) -> None:
        self._frame = frame
        self._carried = {f.name: f.dataType for f in frame.schema.fields}
        self._logical = {c.name: c.type for c in op.input.columns}

    def value(self, name: str) -> Column:
        c = column(name)
        kind = self._logical.get(name)
        if isinstance(self._carried.get(name), T.StringType) and kind not in (None, "string", "json"):
            if kind in ("date", "datetime"):
                # A zero or partial date (and the year 0, which Spark would take) is NULL, as in pyfn.
                return F.when(c.rlike(f"^(?:{TEXT_PATTERNS[kind]})"), c.try_cast(SPARK_TYPES[kind]))
            return c.try_cast(WIDE_INT if kind == "int" else SPARK_TYPES[kind])  # an exact int may pass 64 bits
        return c

    def expr(self, e: Expr, typed: Typed) -> Column:
        return compile_spark(e, typed, self.value)

    def result(self, name: str, e: Expr, typed: Typed) -> Column:
        c = self.expr(e, typed)
        if typed.type == "int" and isinstance(self._frame.select(c).schema.fields[0].dataType, T.DecimalType):
            return c.cast(T.StringType()).alias(name, metadata={EXACT: True})  # computed as DECIMAL(38, 0)
        return c.cast(SPARK_TYPES[typed.type]).alias(name)

    def ref(self, name: str) -> Column:
        return column(name)

    def type(self, kind: str) -> T.DataType:
        return SPARK_TYPES[kind]


def apply_chain(frame: DataFrame, chain: Chain) -> DataFrame:
    for op in chain.ops:
        frame = op.spec.operator.spark(op, frame, Kit(frame, op))
    return frame


def push_down(plan: TransformPlan | None, splits: list[Split],
              schema: Schema) -> tuple[list[Split], Schema, Placement]:
    """The splits with the task's pushed-down filters and projection (``pushdown``: the source's Spark
    read, or its row reader, evaluates them as local mode's reader does), the schema they read, and the
    placement (``()`` when nothing is pushed). Spark has no per-thread measurements: ``adaptive`` pushes
    what ``static`` does."""
    if plan is None or plan.dialect is None or plan.mode == "off":
        return splits, schema, ()
    placement = plan.widest()
    pushed = plan.pushed_query(placement)
    if pushed is None:
        return splits, schema, ()
    return ([dataclasses.replace(s, params={**s.params, "pushdown": pushed}) for s in splits],
            Schema(tuple(schema.columns[k] for k in pushed.keep)), placement)


def count_rows(frame: DataFrame, split_ids: list[str], per_split: bool) -> tuple[int, dict[str, int] | None]:
    """The frame's rows, and with ``per_split`` (when each partition is one split) each split's: what a
    destination whose chain filters is offered of each split it writes."""
    if not per_split or frame.rdd.getNumPartitions() != len(split_ids):
        return frame.count(), None
    counts = {split_ids[int(r[0])]: int(r[1]) for r in frame.groupBy(F.spark_partition_id()).count().collect()}
    return sum(counts.values()), counts


def account_filtered(counters: WriterCounters, chain: Chain | None, rows: int, split_rows: dict[str, int] | None,
                     wanted: list[str] | None) -> None:
    """What a destination's own filters dropped: the rows offered to it (every row of the source; for a
    destination written split by split, the rows of each split it wrote) minus those its writers got."""
    if chain is None or not chain.ops:
        return
    if wanted is not None:
        if split_rows is None:
            return  # not known per split: the destination reports no filtered rows
        rows = sum(split_rows.get(s, 0) for s in wanted)
    counters.filtered = rows - counters.delivered
    counters.delivered = rows

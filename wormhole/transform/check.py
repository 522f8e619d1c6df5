"""Type checking of expressions against a schema: every problem at once, and each node's type.

The logical types are the schema's (DESIGN §2) plus ``null`` for a bare NULL literal. The rules are
the ones every compiler implements (:mod:`.pyfn`, :mod:`.sqlgen`, :mod:`.spark`):

- ``+ - *``: numbers; int with int is int (unbounded: SQL and Spark widen it, see :func:`int_bound`),
  anything with float is float, else decimal (exact, every digit kept: pyfn.EXACT; but
  Spark holds a decimal as DECIMAL(38, 18) and rounds a product of two to 6 places: its precision-loss
  rule, which no cast avoids without losing range);
- ``/`` is always float division, and ``%`` takes ints (the remainder has the dividend's sign); a
  zero divisor gives NULL;
- comparisons, IN and BETWEEN: numbers with numbers (an int or decimal with a float as doubles), else
  the same type (a zero date is NULL; strings compare by code
  point, case-sensitive: never by a database collation);
- AND, OR, NOT: SQL's three-valued logic; a filter keeps the rows whose predicate is TRUE.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from wormhole.transform.tree import (
    Between,
    Binary,
    Case,
    Cast,
    Col,
    Expr,
    Func,
    In,
    IsNull,
    Like,
    Lit,
    Neg,
    Not,
    children,
)

NUMERIC = frozenset({"int", "float", "decimal"})
ORDERED = frozenset({"string", "date", "datetime", "bool"})

CASTS: dict[str, frozenset[str]] = {
    # Only conversions whose result is the same in Python, SQL and Spark (float to text is not:
    # every engine prints doubles its own way).
    "int": frozenset({"float", "decimal", "string", "bool"}),
    "float": frozenset({"int"}),
    "decimal": frozenset({"float", "int", "string"}),
    "string": frozenset({"int", "float", "decimal", "date", "datetime", "bool"}),
    "bool": frozenset({"int", "string"}),
    "date": frozenset({"string", "datetime"}),
    "datetime": frozenset({"date"}),
    "null": frozenset({"int", "float", "decimal", "string", "bool", "date", "datetime"}),
}


@dataclass(frozen=True, slots=True)
class Signature:
    """A whitelisted function: argument types accepted and the result type."""

    name: str
    args: tuple[frozenset[str], ...]
    result: str | None
    """None: the result has the (unified) type of the arguments."""
    variadic: bool = False
    literal_args: tuple[int, ...] = ()
    """Positions that must be integer literals (substr's start and length)."""


_STR = frozenset({"string"})
_TEMPORAL = frozenset({"date", "datetime"})
FUNCTIONS: dict[str, Signature] = {s.name: s for s in (
    Signature("lower", (_STR,), "string"),
    Signature("upper", (_STR,), "string"),
    Signature("length", (_STR,), "int"),
    Signature("trim", (_STR,), "string"),
    Signature("ltrim", (_STR,), "string"),
    Signature("rtrim", (_STR,), "string"),
    Signature("substr", (_STR, frozenset({"int"}), frozenset({"int"})), "string", literal_args=(1, 2)),
    Signature("concat", (_STR,), "string", variadic=True),
    Signature("coalesce", (frozenset({"*"}),), None, variadic=True),
    Signature("abs", (NUMERIC,), None),
    Signature("year", (_TEMPORAL,), "int"),
    Signature("month", (_TEMPORAL,), "int"),
    Signature("day", (_TEMPORAL,), "int"),
    Signature("date", (_TEMPORAL,), "date"),
)}


_LITERALS: tuple[tuple[type, str], ...] = (
    (type(None), "null"), (bool, "bool"), (int, "int"), (float, "float"), (Decimal, "decimal"), (str, "string"),
    (datetime, "datetime"), (date, "date"))
"""A literal's Python type -> its type, the first that matches (a bool is an int, a datetime a date)."""


def literal_type(value: Any) -> str:
    for kind, name in _LITERALS:
        if isinstance(value, kind):
            return name
    raise TypeError(f"no literal of {type(value).__name__}")


def promote(a: str, b: str) -> str:
    """The result type of arithmetic on ``a`` and ``b`` (numbers or null)."""
    if a == "null":
        return b if b != "null" else "int"
    if b == "null":
        return a
    if "float" in (a, b):
        return "float"
    if "decimal" in (a, b):
        return "decimal"
    return "int"


def comparable(a: str, b: str) -> bool:
    if "null" in (a, b):
        return True
    if a in NUMERIC and b in NUMERIC:
        return True
    return a == b and a in ORDERED


def unify(types: list[str]) -> str | None:
    """The one type a CASE or coalesce yields over ``types``, or None when they do not agree."""
    known = [t for t in types if t != "null"]
    if not known:
        return "null"
    if all(t in NUMERIC for t in known):
        out = known[0]
        for t in known[1:]:
            out = promote(out, t)
        return out
    return known[0] if all(t == known[0] for t in known) else None


@dataclass
class Typed:
    """The result of checking one expression: its type and every node's (by identity)."""

    type: str
    types: dict[int, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def of(self, e: Expr) -> str:
        return self.types[id(e)]


def check(e: Expr, schema: Mapping[str, str]) -> Typed:
    """Type ``e`` against ``schema`` (column name -> logical type); problems are listed, not raised."""
    out = Typed("null")
    out.type = _Checker(schema, out).visit(e)
    return out


class _Checker:
    def __init__(self, schema: Mapping[str, str], out: Typed) -> None:
        self.schema = schema
        self.out = out

    def problem(self, message: str) -> str:
        self.out.problems.append(message)
        return "?"

    def visit(self, e: Expr) -> str:
        t = self._type(e)
        self.out.types[id(e)] = t
        return t

    def _type(self, e: Expr) -> str:
        if isinstance(e, Lit):
            return self._literal(e)
        if isinstance(e, Col):
            return self._column(e)
        kids = [self.visit(c) for c in children(e)]
        if "?" in kids:
            return "?"
        return _NODES[type(e)](self, e, kids)

    def _literal(self, e: Lit) -> str:
        if isinstance(e.value, Decimal) and len(e.value.as_tuple().digits) > 38:
            return self.problem(f"the number {e.value} has more than 38 digits (write it with an exponent "
                                "for a float)")
        return literal_type(e.value)

    def _column(self, e: Col) -> str:
        found = self.schema.get(e.name)
        if found is None:
            shown = ", ".join(list(self.schema)[:20])
            return self.problem(f"unknown column {e.name!r} (columns: {shown})")
        return found

    def _neg(self, e: Neg, kids: list[str]) -> str:
        return kids[0] if kids[0] in NUMERIC | {"null"} else self.problem(f"cannot negate a {kids[0]}")

    def _not(self, e: Not, kids: list[str]) -> str:
        return self._boolean("NOT", kids)

    def _range(self, e: In | Between, kids: list[str]) -> str:
        for other in kids[1:]:
            if not comparable(kids[0], other):
                word = "IN" if isinstance(e, In) else "BETWEEN"
                return self.problem(f"{word} compares a {kids[0]} with a {other}")
        return "bool"

    def _like(self, e: Like, kids: list[str]) -> str:
        return "bool" if kids[0] in ("string", "null") else self.problem(f"LIKE needs a string, not a {kids[0]}")

    def _cast(self, e: Cast, kids: list[str]) -> str:
        if kids[0] != e.to and e.to not in CASTS.get(kids[0], frozenset()):
            return self.problem(f"cannot CAST a {kids[0]} to {e.to}")
        return e.to

    def _boolean(self, op: str, kids: list[str]) -> str:
        for k in kids:
            if k not in ("bool", "null"):
                return self.problem(f"{op} needs booleans, not a {k}")
        return "bool"

    def _binary(self, e: Binary, kids: list[str]) -> str:
        op, a, b = e.op, kids[0], kids[1]
        if op in ("AND", "OR"):
            return self._boolean(op, [a, b])
        if op in ("=", "!=", "<", "<=", ">", ">="):
            return "bool" if comparable(a, b) else self.problem(f"cannot compare a {a} with a {b} ({op})")
        if a not in NUMERIC | {"null"} or b not in NUMERIC | {"null"}:
            return self.problem(f"'{op}' needs numbers, not a {a} and a {b}")
        if op == "/":
            return "float"
        if op == "%":
            return "int" if a in ("int", "null") and b in ("int", "null") else self.problem("'%' needs integers")
        return promote(a, b)

    def _func(self, e: Func, kids: list[str]) -> str:
        sig = FUNCTIONS.get(e.name)
        if sig is None:
            return self.problem(f"unknown function {e.name}() (functions: {', '.join(sorted(FUNCTIONS))})")
        if sig.variadic:
            if not kids:
                return self.problem(f"{e.name}() needs at least one argument")
            wanted = [sig.args[0]] * len(kids)
        else:
            optional = 1 if e.name == "substr" else 0
            if not len(sig.args) - optional <= len(kids) <= len(sig.args):
                return self.problem(f"{e.name}() takes {len(sig.args)} argument(s), not {len(kids)}")
            wanted = list(sig.args[:len(kids)])
        for i, (got, allowed) in enumerate(zip(kids, wanted, strict=True)):
            if "*" not in allowed and got not in allowed and got != "null":
                return self.problem(f"{e.name}() argument {i + 1} must be {' or '.join(sorted(allowed))}, not {got}")
        for i in sig.literal_args:
            if i < len(e.args):
                arg = e.args[i]
                if not (isinstance(arg, Lit) and isinstance(arg.value, int) and not isinstance(arg.value, bool)
                        and arg.value >= (1 if i == 1 else 0)):
                    return self.problem(f"{e.name}() argument {i + 1} must be an integer literal "
                                        f"{'>= 1' if i == 1 else '>= 0'}")
        if sig.result is not None:
            return sig.result
        unified = unify(kids)
        return unified if unified is not None else self.problem(f"{e.name}() mixes {', '.join(kids)}")

    def _case(self, e: Case, kids: list[str]) -> str:
        for cond, _ in e.whens:
            t = self.out.types[id(cond)]
            if t not in ("bool", "null"):
                return self.problem(f"CASE WHEN needs a boolean condition, not a {t}")
        results = [self.out.types[id(v)] for _, v in e.whens]
        if e.default is not None:
            results.append(self.out.types[id(e.default)])
        unified = unify(results)
        return unified if unified is not None else self.problem(f"CASE results mix {', '.join(results)}")



_NODES: dict[type[Expr], Callable[[Any, Any, list[str]], str]] = {
    Neg: _Checker._neg, Binary: _Checker._binary, Not: _Checker._not, IsNull: lambda _c, _e, _k: "bool",
    In: _Checker._range, Between: _Checker._range, Like: _Checker._like, Func: _Checker._func,
    Case: _Checker._case, Cast: _Checker._cast}
"""The type of each inner node, from its children's types: a type-dispatch table."""


def int_bound(e: Expr, typed: Typed, column: int) -> int:
    """An upper bound of ``|value|`` of an int expression, every int column at most ``column`` (the store's
    widest integer): where a SQL or Spark compiler must widen its integers to compute what Python's
    unbounded ints compute (an int made by a CAST is 64-bit; wormhole's functions give small ones)."""
    if isinstance(e, Lit):
        return abs(e.value) if isinstance(e.value, int) else 1
    if isinstance(e, Col):
        return column
    if typed.of(e) not in ("int", "null"):
        return 1 if typed.of(e) == "bool" else column
    bound = _BOUNDS.get(type(e))
    return bound(e, typed, column) if bound is not None else 2**63  # a CAST to int: 64-bit, or NULL


def _binary_bound(e: Binary, typed: Typed, column: int) -> int:
    a, b = int_bound(e.a, typed, column), int_bound(e.b, typed, column)
    return a * b if e.op == "*" else min(a, b) if e.op == "%" else a + b


def _func_bound(e: Func, typed: Typed, column: int) -> int:
    if e.name == "abs":
        return int_bound(e.args[0], typed, column)
    if e.name == "coalesce":
        return max(int_bound(a, typed, column) for a in e.args)
    return 2**32  # length(), year(), month(), day()


def _case_bound(e: Case, typed: Typed, column: int) -> int:
    return max(int_bound(v, typed, column) for v in [v for _, v in e.whens] + [e.default] if v is not None)


_BOUNDS: dict[type[Expr], Callable[[Any, Typed, int], int]] = {
    Neg: lambda e, typed, column: int_bound(e.x, typed, column), Binary: _binary_bound, Func: _func_bound,
    Case: _case_bound}
"""The bound of each int node with children, from theirs: a type-dispatch table."""

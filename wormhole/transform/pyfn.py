"""Expressions compiled to vectorised Python: one closure per node, each computing a whole column.

A compiled expression takes a :class:`Columns` view of a batch and returns the list of its values,
one per row. Nothing is evaluated from text: the closures are built from the checked tree, and
literals are captured values. NULL is ``None`` and follows SQL (three-valued logic, NULL in gives
NULL out) as :mod:`wormhole.transform.check` states.
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
from collections.abc import Callable
from datetime import date, datetime
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any, Protocol

from wormhole.options import INT64
from wormhole.transform.check import Typed
from wormhole.transform.tree import Between, Binary, Case, Cast, Col, Expr, Func, In, IsNull, Like, Lit, Neg, Not


class Columns(Protocol):
    """A batch seen column-wise: ``n`` rows, ``get(name)`` one column's values."""

    n: int

    def get(self, name: str) -> list[Any]: ...


Vector = Callable[[Columns], list[Any]]

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
"""Decimal ``+ - *``, negation and abs are exact: every digit of the operands is kept (Python's default
context would round to 28 significant digits). No decimal is divided here (``/`` is in doubles)."""
_DECIMAL_OPS: dict[str, Callable[[Any, Any], Any]] = {"+": EXACT.add, "-": EXACT.subtract, "*": EXACT.multiply}
_NUMBER_OPS: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _negate(v: Any) -> Any:
    return EXACT.minus(v) if isinstance(v, Decimal) else -v


def _abs(v: Any) -> Any:
    return EXACT.abs(v) if isinstance(v, Decimal) else abs(v)


def _temporal(v: Any) -> Any:
    """A date or datetime column's value in an expression: a zero or partial date (``0000-00-00``,
    which a mysql source with ``zero_dates: keep`` carries as its text) is NULL, in every placement."""
    return None if type(v) is str else v


def compile_py(e: Expr, typed: Typed) -> Vector:
    """The vectorised function of a checked expression."""
    return _Compiler(typed).build(e)


def _numeric(kind: str) -> Callable[[Any], Any]:
    if kind == "float":
        return float
    if kind == "decimal":
        return lambda v: v if isinstance(v, Decimal) else Decimal(v) if isinstance(v, int) else Decimal(str(v))
    return lambda v: v


# Truthiness, not identity with True/False: a bool column may hold 1 and 0 (MySQL's TINYINT(1)).
def _kleene_and(a: Any, b: Any) -> Any:
    if (a is not None and not a) or (b is not None and not b):
        return False
    if a is None or b is None:
        return None
    return True


def _kleene_or(a: Any, b: Any) -> Any:
    if (a is not None and a) or (b is not None and b):
        return True
    if a is None or b is None:
        return None
    return False


def _remainder(a: int, b: int) -> int | None:
    if b == 0:
        return None
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def like_regex(parts: tuple[str | None, ...]) -> str:
    """The regular expression (for ``re.fullmatch`` with DOTALL) of a LIKE pattern's pieces."""
    return "".join(".*" if p is None else "." if p == "" else re.escape(p) for p in parts)


class _Compiler:
    def __init__(self, typed: Typed) -> None:
        self.typed = typed

    def build(self, e: Expr) -> Vector:
        return _BUILD[type(e)](self, e)

    def _literal(self, e: Lit) -> Vector:
        value = e.value
        return lambda cols: [value] * cols.n

    def _column(self, e: Col) -> Vector:
        name = e.name
        if self.typed.of(e) in ("date", "datetime"):
            return lambda cols: list(map(_temporal, cols.get(name)))
        return lambda cols: cols.get(name)

    def _neg(self, e: Neg) -> Vector:
        x = self.build(e.x)
        return lambda cols: [None if v is None else _negate(v) for v in x(cols)]

    def _not(self, e: Not) -> Vector:
        x = self.build(e.x)
        return lambda cols: [None if v is None else not v for v in x(cols)]

    def _is_null(self, e: IsNull) -> Vector:
        x = self.build(e.x)
        if e.negated:
            return lambda cols: [v is not None for v in x(cols)]
        return lambda cols: [v is None for v in x(cols)]

    def _cast(self, e: Cast) -> Vector:
        x = self.build(e.x)
        fn = cast_function(self.typed.of(e.x), e.to)
        return lambda cols: [None if v is None else fn(v) for v in x(cols)]

    def _binary(self, e: Binary) -> Vector:
        a, b = self.build(e.a), self.build(e.b)
        op = e.op
        if op == "AND":
            return lambda cols: list(map(_kleene_and, a(cols), b(cols)))
        if op == "OR":
            return lambda cols: list(map(_kleene_or, a(cols), b(cols)))
        if op in _COMPARE:
            return self._compare(op, e.a, e.b)
        result = self.typed.of(e)
        if op == "/":
            return lambda cols: [None if x is None or y is None or y == 0 else float(x) / float(y)
                                 for x, y in zip(a(cols), b(cols))]
        if op == "%":
            return lambda cols: [None if x is None or y is None else _remainder(x, y) for x, y in zip(a(cols), b(cols))]
        conv = _numeric(result)
        fn = (_DECIMAL_OPS if result == "decimal" else _NUMBER_OPS)[op]
        return lambda cols: [None if x is None or y is None else fn(conv(x), conv(y)) for x, y in zip(a(cols), b(cols))]

    def _compare(self, op: str, ea: Expr, eb: Expr) -> Vector:
        a, b = self.build(ea), self.build(eb)
        cmp = _COMPARE[op]
        fa, fb = self._comparable_values(self.typed.of(ea), self.typed.of(eb))
        if isinstance(eb, Lit):  # the common case, a column against a literal: no second list
            c = None if eb.value is None else fb(eb.value)
            if c is None:
                return lambda cols: [None] * cols.n
            return lambda cols: [None if v is None else cmp(fa(v), c) for v in a(cols)]
        return lambda cols: [None if x is None or y is None else cmp(fa(x), fb(y)) for x, y in zip(a(cols), b(cols))]

    @staticmethod
    def _comparable_values(ta: str, tb: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        # A decimal or an int against a float compares as doubles, as MySQL and Spark do (Python would
        # compare 2**63 - 1 with 2.0**63 exactly).
        if "float" in (ta, tb) and {ta, tb} <= {"decimal", "float", "int"}:
            return float, float
        same: Callable[[Any], Any] = _same
        return same, same

    def _in(self, e: In) -> Vector:
        x = self.build(e.x)
        values = [i.value for i in e.items]
        kinds = {self.typed.of(e.x), *(self.typed.of(i) for i in e.items)}
        if "float" in kinds and kinds & {"decimal", "int"}:
            values = [None if v is None else float(v) for v in values]
            conv: Callable[[Any], Any] = float
        else:
            conv = _same
        known = frozenset(v for v in values if v is not None)
        has_null = any(v is None for v in values)  # not len(known) < len(values): IN (0, 0) has no NULL
        miss = None if has_null else False
        negated = e.negated

        def test(v: Any) -> Any:
            if v is None:
                return None
            found = True if conv(v) in known else miss
            return found if not negated or found is None else not found
        return lambda cols: list(map(test, x(cols)))

    def _between(self, e: Between) -> Vector:
        ge = self._compare(">=", e.x, e.low)
        le = self._compare("<=", e.x, e.high)
        negated = e.negated

        def run(cols: Columns) -> list[Any]:
            out = list(map(_kleene_and, ge(cols), le(cols)))
            return [None if v is None else not v for v in out] if negated else out
        return run

    def _like(self, e: Like) -> Vector:
        x = self.build(e.x)
        match = re.compile(like_regex(e.parts()), re.DOTALL).fullmatch
        negated = e.negated
        return lambda cols: [None if v is None else (match(v) is None) == negated for v in x(cols)]

    def _func(self, e: Func) -> Vector:
        args = [self.build(a) for a in e.args]
        name = e.name
        if name == "coalesce":
            conv = _numeric(self.typed.of(e)) if self.typed.of(e) in ("float", "decimal") else _same

            def first(*vs: Any) -> Any:
                for v in vs:
                    if v is not None:
                        return conv(v)
                return None
            return lambda cols: list(map(first, *(a(cols) for a in args)))
        if name == "substr":
            start = e.args[1].value - 1  # type: ignore[attr-defined]
            length = e.args[2].value if len(e.args) > 2 else None  # type: ignore[attr-defined]
            end = None if length is None else start + length
            s = args[0]
            return lambda cols: [None if v is None else v[start:end] for v in s(cols)]
        if name == "concat":
            return lambda cols: [None if None in vs else "".join(vs) for vs in zip(*(a(cols) for a in args))]
        fn = _SCALAR[name]
        x = args[0]
        return lambda cols: [None if v is None else fn(v) for v in x(cols)]

    def _case(self, e: Case) -> Vector:
        conds = [self.build(c) for c, _ in e.whens]
        conv = _numeric(self.typed.of(e)) if self.typed.of(e) in ("float", "decimal") else _same
        values = [self.build(v) for _, v in e.whens]
        default = self.build(e.default) if e.default is not None else None

        def run(cols: Columns) -> list[Any]:
            # A copy: a column's own list must not be written to (the default may be a column).
            out: list[Any] = list(default(cols)) if default is not None else [None] * cols.n
            done = [False] * cols.n
            for cond, value in zip(conds, values, strict=True):
                c, v = cond(cols), value(cols)
                for i in range(cols.n):
                    if not done[i] and c[i] is not None and c[i]:
                        out[i] = v[i]
                        done[i] = True
            return [None if v is None else conv(v) for v in out]
        return run



_BUILD: dict[type[Expr], Callable[[Any, Any], Vector]] = {
    Lit: _Compiler._literal, Col: _Compiler._column, Neg: _Compiler._neg, Binary: _Compiler._binary,
    Not: _Compiler._not, IsNull: _Compiler._is_null, In: _Compiler._in, Between: _Compiler._between,
    Like: _Compiler._like, Func: _Compiler._func, Case: _Compiler._case, Cast: _Compiler._cast}
"""Each node's batch function: a type-dispatch table."""

def _same(v: Any) -> Any:
    return v


_SCALAR: dict[str, Callable[[Any], Any]] = {
    "lower": str.lower, "upper": str.upper, "length": len,
    "trim": lambda s: s.strip(" "), "ltrim": lambda s: s.lstrip(" "), "rtrim": lambda s: s.rstrip(" "),
    "abs": _abs,
    "year": lambda d: d.year, "month": lambda d: d.month, "day": lambda d: d.day,
    "date": lambda d: d.date() if isinstance(d, datetime) else d,
}

# The texts each cast accepts (anything else is NULL); Spark's compiler checks the same patterns
# before its try_cast, which alone would take far more (' 2024-1-5 x' as a date, '1.5d', '٣').
_WS = "[ \t\n\r]*"
TEXT_PATTERNS = {
    "int": f"{_WS}[+-]?[0-9]+{_WS}",
    "float": f"{_WS}[+-]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][+-]?[0-9]+)?{_WS}",
    # Not the year 0, which Python's dates do not have (Spark's do).
    "date": "(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}",
    "datetime": "(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\\.[0-9]{1,6})?)?",
}
TEXT_PATTERNS["decimal"] = TEXT_PATTERNS["float"]
_INT_TEXT, _NUMBER_TEXT, _DATE_TEXT, _DATETIME_TEXT = (
    re.compile(TEXT_PATTERNS[k]) for k in ("int", "float", "date", "datetime"))
DECIMAL_SCALE = 18
"""A decimal made by a CAST is DECIMAL(38, 18), as Spark holds it: rounded half up to 18 places, and
NULL from 10^20 on."""
_TRUE = frozenset({"true", "t", "yes", "y", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "0"})


def _int64(v: int) -> int | None:
    return v if INT64[0] <= v <= INT64[1] else None


def _parse(pattern: re.Pattern[str], parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(s: str) -> Any:
        if pattern.fullmatch(s) is None:
            return None
        try:
            return parse(s.strip())
        except (ValueError, InvalidOperation, OverflowError):
            return None
    return convert


def _bool_text(s: str) -> bool | None:
    t = s.strip(" \t\n\r").lower()
    return True if t in _TRUE else False if t in _FALSE else None


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def to_decimal(v: Decimal) -> Decimal | None:
    """A decimal as a CAST makes it (:data:`DECIMAL_SCALE`)."""
    try:
        q = v.quantize(Decimal(1).scaleb(-DECIMAL_SCALE), ROUND_HALF_UP, Context(prec=80))
    except InvalidOperation:
        return None
    return q if abs(q) < 10**20 else None


def decimal_text(v: Decimal) -> str:
    """A decimal as text: plain digits, no trailing zeros after the point (the scale is each engine's own)."""
    text = format(v, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _float_to_int(v: float) -> int | None:
    if v != v or v in (float("inf"), float("-inf")):
        return None
    return _int64(int(v))


_CASTS: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("int", "float"): float, ("int", "decimal"): Decimal, ("int", "string"): str, ("int", "bool"): bool,
    ("float", "int"): _float_to_int,
    ("decimal", "float"): float, ("decimal", "int"): lambda v: _int64(int(v)), ("decimal", "string"): decimal_text,
    ("string", "int"): _parse(_INT_TEXT, lambda s: _int64(int(s))),
    ("string", "float"): _parse(_NUMBER_TEXT, lambda s: _finite(float(s))),
    ("string", "decimal"): _parse(_NUMBER_TEXT, lambda s: to_decimal(Decimal(s))),
    ("string", "date"): _parse(_DATE_TEXT, date.fromisoformat),
    ("string", "datetime"): _parse(_DATETIME_TEXT, datetime.fromisoformat),
    ("string", "bool"): _bool_text,
    ("bool", "int"): int, ("bool", "string"): lambda b: "true" if b else "false",
    ("date", "string"): date.isoformat, ("date", "datetime"): lambda d: datetime(d.year, d.month, d.day),
    ("datetime", "date"): lambda d: d.date(),
}


def cast_function(source: str, target: str) -> Callable[[Any], Any]:
    """How a non-NULL value of ``source`` becomes ``target``; a value that does not convert is None."""
    if source == target or source == "null":
        return _same
    return _CASTS[(source, target)]


def mask_hash(salt: str) -> Callable[[Any], str]:
    """Deterministic pseudonym: SHA-256 of the salt and the value's text, hex (as Spark's ``sha2``)."""
    prefix = salt.encode()

    def digest(v: Any) -> str:
        text = v if isinstance(v, str) else v.isoformat() if isinstance(v, date) else str(v)
        return hashlib.sha256(prefix + text.encode()).hexdigest()
    return digest

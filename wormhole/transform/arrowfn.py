"""Expressions compiled to Arrow compute: one closure per node, each computing a whole Arrow array.

The third target beside SQL (:mod:`.sqlgen`) and Spark (:mod:`wormhole.spark.transforms`), with the
semantics :mod:`.check` states and :mod:`.pyfn` implements: NULL in gives NULL out, three-valued
logic, integer arithmetic that never overflows (64-bit while it fits, then exact decimals), division
in doubles with NULL for a zero divisor, exact decimals, strings by code point.

Where an expression has no exact Arrow form, that one expression runs in its Python form over the
columns it reads (:func:`compile_arrow` says so: ``target`` is ``python``, with the reason): statically
for casts from text to numbers and dates (their accepted texts use look-aheads RE2 lacks); per batch
when the values need it (lower or upper of non-ASCII text, decimals wider than 76 digits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.transform import arrowkit as K
from wormhole.transform.arrowkit import BOOL, INT, STRING, Fallback, unify, unify_numbers
from wormhole.transform.check import NUMERIC, Typed
from wormhole.transform.pyfn import compile_py
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


class ArrowColumns(Protocol):
    """A batch as Arrow columns: ``n`` rows, ``get(name)`` one column."""

    n: int

    def get(self, name: str) -> pa.Array: ...


ArrowVector = Callable[[ArrowColumns], pa.Array]
Values: TypeAlias = "pa.Array | list[Any]"
"""An expression's values: an Arrow array, or (its Python form's values, when no Arrow type holds them:
a decimal of more than 76 digits) a list the chain's derive carries beside the batch."""


@dataclass(frozen=True, slots=True)
class Compiled:
    """A checked expression's batch function, and where it runs."""

    run: Callable[[ArrowColumns], Values]
    target: str
    """``arrow``, or ``python`` (its Python form over the columns it reads; ``why`` says why)."""
    why: str | None = None

    def __call__(self, cols: ArrowColumns) -> Values:
        return self.run(cols)


def compile_arrow(e: Expr, typed: Typed) -> Compiled:
    python = _python_form(e, typed)
    why = _python_only(e, typed)
    if why is not None:
        return Compiled(python, "python", why)
    arrow = _Compiler(typed).build(e)

    def run(cols: ArrowColumns) -> Values:
        try:
            return arrow(cols)
        except Fallback:
            return python(cols)  # this batch's values: rare (see the module's docstring)
    return Compiled(run, "arrow")


def _python_only(e: Expr, typed: Typed) -> str | None:
    for node in _walk(e):
        if isinstance(node, Cast):
            pair = (typed.of(node.x), node.to)
            if pair[0] != pair[1] and pair[0] != "null" and pair not in K.CASTS:
                return f"CAST from {pair[0]} to {pair[1]} has no exact Arrow form"
    return None


def _walk(e: Expr) -> list[Expr]:
    out, todo = [], [e]
    while todo:
        node = todo.pop()
        out.append(node)
        todo.extend(children(node))
    return out


class _PyView:
    """The columns an expression's Python form reads, as Python values (each converted once; an int
    column that came as a wider decimal, as ints)."""

    def __init__(self, cols: ArrowColumns, ints: frozenset[str]) -> None:
        self.n = cols.n
        self._cols = cols
        self._ints = ints
        self._seen: dict[str, list[Any]] = {}

    def get(self, name: str) -> list[Any]:
        found = self._seen.get(name)
        if found is None:
            array = self._cols.get(name)
            found = array.to_pylist()
            if name in self._ints and pa.types.is_decimal(array.type):
                found = [None if v is None else int(v) for v in found]
            self._seen[name] = found
        return found


def _python_form(e: Expr, typed: Typed) -> Callable[[ArrowColumns], Values]:
    fn = compile_py(e, typed)
    kind = typed.of(e)
    ints = frozenset(n.name for n in _walk(e) if isinstance(n, Col) and typed.of(n) == "int")

    def run(cols: ArrowColumns) -> Values:
        values = fn(_PyView(cols, ints))
        try:
            return K.from_python(values, kind, cols.n)
        except (pa.ArrowException, OverflowError):
            return values
    return run


_COMPARE = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
            ">=": pc.greater_equal}
_CHECKED = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}
_PLAIN = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}


def _nulls_of(kind: str) -> ArrowVector:
    t = K.arrow_of(kind)
    return lambda cols: K.null_array(cols.n, t)


class _Compiler:
    def __init__(self, typed: Typed) -> None:
        self.typed = typed

    def build(self, e: Expr) -> ArrowVector:
        if self.typed.of(e) == "null":
            return lambda cols: K.null_array(cols.n)  # always NULL, whatever it reads
        return _BUILD[type(e)](self, e)

    def numeric(self, *es: Expr) -> bool:
        return all(self.typed.of(x) in NUMERIC | {"null"} for x in es)

    def _literal(self, e: Lit) -> ArrowVector:
        value = e.value
        scalar = pa.scalar(value, K.arrow_of(self.typed.of(e)) if not isinstance(value, Decimal) else None)
        return lambda cols: pa.repeat(scalar, cols.n)

    def _column(self, e: Col) -> ArrowVector:
        name = e.name
        return lambda cols: cols.get(name)

    def _neg(self, e: Neg) -> ArrowVector:
        x = self.build(e.x)
        return lambda cols: _exact_unary(x(cols), pc.negate_checked, pc.negate)

    def _not(self, e: Not) -> ArrowVector:
        x = self.build(e.x)
        return lambda cols: pc.invert(_bool(x(cols)))

    def _is_null(self, e: IsNull) -> ArrowVector:
        x = self.build(e.x)
        test = pc.is_valid if e.negated else pc.is_null
        return lambda cols: test(x(cols))

    def _cast(self, e: Cast) -> ArrowVector:
        x = self.build(e.x)
        source, to = self.typed.of(e.x), e.to
        if source == to:
            return x
        if source == "null":
            return _nulls_of(to)
        fn = K.CASTS[(source, to)]
        return lambda cols: fn(x(cols))

    def _binary(self, e: Binary) -> ArrowVector:
        a, b = self.build(e.a), self.build(e.b)
        op = e.op
        if op in ("AND", "OR"):
            fn = pc.and_kleene if op == "AND" else pc.or_kleene
            return lambda cols: fn(*_booleans(a(cols), b(cols)))
        if op in _COMPARE:
            return self._compare(op, e.a, e.b)
        if "null" in (self.typed.of(e.a), self.typed.of(e.b)):
            return _nulls_of(self.typed.of(e))
        if op == "/":
            return lambda cols: _divide(a(cols), b(cols))
        if op == "%":
            return lambda cols: _remainder(a(cols), b(cols))
        kind = self.typed.of(e)
        return lambda cols: _arithmetic(op, kind, a(cols), b(cols))

    def _compare(self, op: str, ea: Expr, eb: Expr) -> ArrowVector:
        if "null" in (self.typed.of(ea), self.typed.of(eb)):
            return _nulls_of("bool")
        a, b = self.build(ea), self.build(eb)
        cmp = _COMPARE[op]
        numeric = self.numeric(ea, eb)
        return lambda cols: cmp(*unify([a(cols), b(cols)], numeric))

    def _in(self, e: In) -> ArrowVector:
        if self.typed.of(e.x) == "null":
            return _nulls_of("bool")
        x = self.build(e.x)
        values = [i.value for i in e.items if i.value is not None]
        miss = None if len(values) < len(e.items) else False
        kinds = {self.typed.of(e.x), *(self.typed.of(i) for i in e.items)}
        numeric = kinds <= NUMERIC | {"null"}
        as_float = numeric and "float" in kinds
        if as_float:
            items = pa.array([float(v) + 0.0 for v in values], K.FLOAT)
        elif numeric:
            items = pa.array([Decimal(v) for v in values]) if values and kinds & {"decimal"} else \
                pa.array(values, INT)
        else:
            items = pa.array(values, K.arrow_of(self.typed.of(e.x)))
        negated = e.negated

        def run(cols: ArrowColumns) -> pa.Array:
            v = x(cols)
            if v.type == pa.null():
                return K.null_array(cols.n, BOOL)
            v, found_in = unify([v, items], numeric) if numeric else (v, items)
            if v.type == K.FLOAT:
                v = pc.add(v, 0.0)  # -0.0 is found where 0.0 is (Python's sets: -0.0 == 0.0), not by its bits
            found = pc.is_in(v, value_set=found_in)
            out = pc.if_else(found, True, pa.scalar(miss, BOOL))
            out = pc.if_else(pc.is_null(v), pa.scalar(None, BOOL), out)
            return pc.invert(out) if negated else out
        return run

    def _between(self, e: Between) -> ArrowVector:
        ge, le = self._compare(">=", e.x, e.low), self._compare("<=", e.x, e.high)
        negated = e.negated

        def run(cols: ArrowColumns) -> pa.Array:
            out = pc.and_kleene(*_booleans(ge(cols), le(cols)))
            return pc.invert(out) if negated else out
        return run

    def _like(self, e: Like) -> ArrowVector:
        x = self.build(e.x)
        pattern = e.regex()
        negated = e.negated

        def run(cols: ArrowColumns) -> pa.Array:
            found = pc.match_substring_regex(_text(x(cols)), pattern=pattern)
            return pc.invert(found) if negated else found
        return run

    def _func(self, e: Func) -> ArrowVector:
        args = [self.build(a) for a in e.args]
        name = e.name
        if name == "coalesce":
            numeric = self.numeric(*e.args)
            return lambda cols: pc.coalesce(*unify([a(cols) for a in args], numeric))
        if name == "concat":
            return lambda cols: pc.binary_join_element_wise(*(_text(a(cols)) for a in args), "")
        if name == "substr":
            start = e.args[1].value - 1  # type: ignore[attr-defined]
            stop = start + e.args[2].value if len(e.args) > 2 else 2**62  # type: ignore[attr-defined]
            s = args[0]
            return lambda cols: pc.utf8_slice_codeunits(_text(s(cols)), start=start, stop=stop)
        fn = _SCALAR[name]
        x = args[0]
        out = K.arrow_of(self.typed.of(e))

        def one(cols: ArrowColumns) -> pa.Array:
            v = x(cols)
            return K.null_array(cols.n, out) if v.type == pa.null() else fn(v)
        return one

    def _case(self, e: Case) -> ArrowVector:
        conds = [self.build(c) for c, _ in e.whens]
        values = [self.build(v) for _, v in e.whens] + ([self.build(e.default)] if e.default is not None else [])
        numeric = self.typed.of(e) in NUMERIC
        names = [str(i) for i in range(len(conds))]

        def run(cols: ArrowColumns) -> pa.Array:
            flags = [pc.fill_null(_bool(c(cols)), False) for c in conds]
            picked = unify([v(cols) for v in values], numeric)
            if picked[0].type == pa.null():
                picked = [p.cast(K.arrow_of(self.typed.of(e))) for p in picked]
            return pc.case_when(pc.make_struct(*flags, field_names=names), *picked)
        return run


def _bool(a: pa.Array) -> pa.Array:
    return a if a.type == BOOL else a.cast(BOOL)


def _booleans(a: pa.Array, b: pa.Array) -> tuple[pa.Array, pa.Array]:
    return _bool(a), _bool(b)


def _text(a: pa.Array) -> pa.Array:
    return a if a.type == STRING else a.cast(STRING)


def _wide(a: pa.Array, extra: int) -> pa.Array:
    """An integer as a decimal of scale 0 with ``extra`` more digits than it holds."""
    whole, scale = K.shape(a.type)
    return a.cast(K.decimal_type(whole + extra, scale))


def _exact_unary(a: pa.Array, checked: Callable[[pa.Array], pa.Array],
                 plain: Callable[[pa.Array], pa.Array]) -> pa.Array:
    if a.type == INT:
        try:
            return checked(a)
        except pa.ArrowInvalid:  # -(-2^63): Python's ints go on, so do these (as decimals)
            return plain(_wide(a, 1))
    if a.type == pa.uint64():
        return plain(_wide(a, 0))
    return plain(a)


def _arithmetic(op: str, kind: str, a: pa.Array, b: pa.Array) -> pa.Array:
    if kind == "float":
        return _PLAIN[op](K.as_float(a), K.as_float(b))
    if a.type == INT and b.type == INT:
        try:
            return _CHECKED[op](a, b)
        except pa.ArrowInvalid:
            pass  # beyond 64 bits: exact, as decimals
    (wa, sa), (wb, sb) = K.shape(a.type), K.shape(b.type)
    if op == "*":
        whole, scale = wa + wb + 1, sa + sb
    else:
        whole, scale = max(wa, wb) + 1, max(sa, sb)
    K.decimal_type(whole, scale)  # Fallback when no decimal holds the result
    wide = whole + scale > 38
    x, y = (v.cast((pa.decimal256 if wide else pa.decimal128)(*_digits(v.type))) for v in (a, b))
    return _PLAIN[op](x, y)


def _digits(t: pa.DataType) -> tuple[int, int]:
    whole, scale = K.shape(t)
    return whole + scale, scale


def _divide(a: pa.Array, b: pa.Array) -> pa.Array:
    x, y = K.as_float(a), K.as_float(b)
    return pc.if_else(pc.equal(y, 0.0), pa.scalar(None, K.FLOAT), pc.divide(x, y))


def _remainder(a: pa.Array, b: pa.Array) -> pa.Array:
    if a.type != INT or b.type != INT:
        raise Fallback("a remainder beyond 64 bits")
    # Truncated division (Arrow's integer divide) gives the dividend's sign; a divisor of 0 or -1 is
    # divided as 1 (no -2^63 / -1 overflow), and 0 gives NULL.
    odd = pc.or_(pc.equal(b, 0), pc.equal(b, -1))
    divisor = pc.if_else(odd, 1, b)
    out = pc.subtract(a, pc.multiply(pc.divide(a, divisor), divisor))
    return pc.if_else(pc.equal(b, 0), pa.scalar(None, INT), out)


def _case_map(ascii_fn: Callable[[pa.Array], pa.Array]) -> Callable[[pa.Array], pa.Array]:
    """lower() and upper() as Python maps case (ß to SS, İ to i̇): Arrow's only in ASCII."""
    def run(a: pa.Array) -> pa.Array:
        a = _text(a)
        if pc.all(pc.string_is_ascii(a)).as_py() is False:
            raise Fallback("case of non-ASCII text")
        return ascii_fn(a)
    return run


def _abs(a: pa.Array) -> pa.Array:
    return _exact_unary(a, pc.abs_checked, pc.abs)


def _part(fn: Callable[[pa.Array], pa.Array]) -> Callable[[pa.Array], pa.Array]:
    return lambda a: fn(a).cast(INT)


_SCALAR: dict[str, Callable[[pa.Array], pa.Array]] = {
    "lower": _case_map(pc.ascii_lower), "upper": _case_map(pc.ascii_upper),
    "length": lambda a: pc.utf8_length(_text(a)).cast(INT),
    "trim": lambda a: pc.utf8_trim(_text(a), characters=" "),
    "ltrim": lambda a: pc.utf8_ltrim(_text(a), characters=" "),
    "rtrim": lambda a: pc.utf8_rtrim(_text(a), characters=" "),
    "abs": _abs, "year": _part(pc.year), "month": _part(pc.month), "day": _part(pc.day),
    "date": lambda a: a if a.type == pa.date32() else a.cast(pa.date32(), safe=False),
}

_BUILD: dict[type[Expr], Callable[[Any, Any], ArrowVector]] = {
    Lit: _Compiler._literal, Col: _Compiler._column, Neg: _Compiler._neg, Binary: _Compiler._binary,
    Not: _Compiler._not, IsNull: _Compiler._is_null, In: _Compiler._in, Between: _Compiler._between,
    Like: _Compiler._like, Func: _Compiler._func, Case: _Compiler._case, Cast: _Compiler._cast}
"""Each node's batch function: a type-dispatch table."""

__all__ = ["ArrowColumns", "Compiled", "Fallback", "compile_arrow", "unify_numbers"]

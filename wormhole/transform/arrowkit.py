"""Arrow building blocks of :mod:`.arrowfn`: numeric type unification, exact conversions, and casts.

Every function here computes what :mod:`.pyfn` computes for the same values, or raises
:class:`Fallback` when this batch's values have no exact Arrow computation (a decimal wider than 76
digits): the caller then evaluates that one expression with its Python form.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.options import INT64
from wormhole.plugins.batch import DEFAULT_DECIMAL

FLOAT = pa.float64()
INT = pa.int64()
BOOL = pa.bool_()
STRING = pa.string()
MAX_DIGITS = 76
"""decimal256's precision: wider exact arithmetic is left to Python."""


class Fallback(Exception):
    """This batch's values have no exact Arrow computation: the expression runs in its Python form."""


def null_array(n: int, kind: pa.DataType | None = None) -> pa.Array:
    return pa.nulls(n, kind or pa.null())


def shape(t: pa.DataType) -> tuple[int, int]:
    """(digits before the point, scale) a numeric Arrow type holds exactly."""
    if pa.types.is_decimal(t):
        return t.precision - t.scale, t.scale
    if t == pa.uint64():
        return 20, 0
    return 19, 0


def decimal_type(whole: int, scale: int) -> pa.DataType:
    digits = max(whole + scale, 1)
    if digits > MAX_DIGITS:
        raise Fallback(f"a decimal of {digits} digits")
    return pa.decimal128(digits, scale) if digits <= 38 else pa.decimal256(digits, scale)


def is_float(t: pa.DataType) -> bool:
    return pa.types.is_floating(t)


def as_float(a: pa.Array) -> pa.Array:
    """Numbers as doubles, each the nearest to its exact value (as Python's float()): a decimal through
    its text, since Arrow's own decimal-to-double conversion can be a unit in the last place off."""
    t = a.type
    if is_float(t):
        return a
    if pa.types.is_decimal(t):
        return a.cast(STRING).cast(FLOAT)
    return a.cast(FLOAT, safe=False)


def as_decimal(a: pa.Array, whole: int, scale: int) -> pa.Array:
    return a.cast(decimal_type(whole, scale))


def unify_numbers(arrays: Sequence[pa.Array]) -> list[pa.Array]:
    """Numbers in one Arrow type, as Python compares and combines them: doubles when one is a float,
    else exact (int64 when every one is, else a decimal wide enough for all)."""
    typed = [a for a in arrays if a.type != pa.null()]
    if not typed:
        return list(arrays)
    if any(is_float(a.type) for a in typed):
        target = FLOAT
        return [null_array(len(a), FLOAT) if a.type == pa.null() else as_float(a) for a in arrays]
    if all(a.type == INT for a in typed):
        target = INT
    else:
        shapes = [shape(a.type) for a in typed]
        target = decimal_type(max(w for w, _ in shapes), max(s for _, s in shapes))
    return [a if a.type == target else a.cast(target) for a in arrays]


def unify(arrays: Sequence[pa.Array], numeric: bool) -> list[pa.Array]:
    """Values of one logical type in one Arrow type (a NULL operand takes the others' type)."""
    if numeric:
        return unify_numbers(arrays)
    kinds = {a.type for a in arrays} - {pa.null()}
    if len(kinds) != 1:
        return list(arrays)
    (target,) = kinds
    return [a if a.type == target else a.cast(target) for a in arrays]


def fits_int64(a: pa.Array) -> pa.Array:
    """Whether each integer (a decimal of scale 0, or uint64) is in the 64-bit range."""
    if a.type == INT:
        return pc.is_valid(a)
    if a.type == pa.uint64():
        return pc.less_equal(a, pa.scalar(INT64[1], pa.uint64()))
    if a.type.precision < 19:
        return pc.is_valid(a)
    low, high = (pa.scalar(Decimal(v)).cast(a.type) for v in INT64)
    return pc.and_(pc.greater_equal(a, low), pc.less_equal(a, high))


def fix_cells(a: pa.Array, where: pa.Array, fn: Callable[[Any], Any]) -> pa.Array:
    """``a`` with the values at ``where`` (a few) replaced by ``fn`` of their Python value."""
    at = pc.indices_nonzero(where).to_pylist()
    if not at:
        return a
    values = a.to_pylist()
    for i in at:
        values[i] = None if values[i] is None else fn(values[i])
    return pa.array(values, a.type)


def from_python(values: list[Any], kind: str, n: int) -> pa.Array:
    """An expression's Python values (its fallback form) as an Arrow array of its logical type."""
    if kind == "null":
        return null_array(n)
    if kind == "int":
        try:
            return pa.array(values, INT)
        except (OverflowError, pa.ArrowException):
            return pa.array([None if v is None else Decimal(v) for v in values])
    if kind == "decimal":
        out = pa.array([None if v is None else Decimal(v) for v in values])
        return out if out.type != pa.null() else null_array(n, pa.decimal128(*DEFAULT_DECIMAL))
    return pa.array(values, _PLAIN[kind])


_PLAIN: dict[str, pa.DataType] = {
    "float": FLOAT, "string": STRING, "bool": BOOL, "date": pa.date32(), "datetime": pa.timestamp("us"),
    "bytes": pa.binary(), "json": STRING}


def arrow_of(kind: str) -> pa.DataType:
    """The Arrow type an expression of ``kind`` computes in (ints and decimals may come wider)."""
    if kind == "int":
        return INT
    if kind == "decimal":
        return pa.decimal128(*DEFAULT_DECIMAL)
    if kind == "null":
        return pa.null()
    return _PLAIN[kind]


# -- casts ------------------------------------------------------------------------------------


def _float_to_int(a: pa.Array) -> pa.Array:
    # NULL for NaN, infinities and outside -2^63 <= x < 2^63, else truncated (pyfn._float_to_int).
    inside = pc.and_(pc.greater_equal(a, -9.223372036854775808e18), pc.less(a, 9.223372036854775808e18))
    return pc.if_else(inside, pc.trunc(a), None).cast(INT)


def _decimal_to_int(a: pa.Array) -> pa.Array:
    whole = a
    if a.type.scale:
        # Truncated through its text: Arrow's own decimal rescale (a cast, round towards zero) is wrong for
        # some negative values (-9223372036854775807.999 became -9223372036854775806 in pyarrow 26).
        text = a.cast(STRING)
        text = pc.if_else(pc.match_substring(text, "E"), "0", pc.replace_substring_regex(text, r"\..*$", ""))
        whole = text.cast(decimal_type(shape(a.type)[0] + 1, 0))
    return pc.if_else(fits_int64(whole), whole, None).cast(INT, safe=False)


def decimal_text(a: pa.Array) -> pa.Array:
    """pyfn.decimal_text: plain digits, no trailing zeros after the point."""
    from wormhole.transform import pyfn

    text = a.cast(STRING)
    # Arrow writes values below 10^-6 with an exponent (1E-30): those few as Python writes them.
    text = fix_cells(text, pc.match_substring(text, "E"), lambda s: pyfn.decimal_text(Decimal(s)))
    if not a.type.scale:
        return text
    text = pc.replace_substring_regex(text, r"(\.[0-9]*?)0+$", r"\1")
    return pc.replace_substring_regex(text, r"\.$", "")


def _int_to_bool(a: pa.Array) -> pa.Array:
    zero = pa.scalar(Decimal(0)).cast(a.type) if pa.types.is_decimal(a.type) else pa.scalar(0, a.type)
    return pc.not_equal(a, zero)


def _text_to_bool(a: pa.Array) -> pa.Array:
    # Python lowers the stripped text; only ASCII letters can lower to a word of these sets.
    t = pc.ascii_lower(pc.utf8_trim(a, characters=" \t\n\r"))
    truth = pc.is_in(t, value_set=pa.array(["true", "t", "yes", "y", "1"]))
    false = pc.is_in(t, value_set=pa.array(["false", "f", "no", "n", "0"]))
    return pc.if_else(truth, True, pc.if_else(false, False, pa.scalar(None, BOOL)))


CASTS: dict[tuple[str, str], Callable[[pa.Array], pa.Array]] = {
    ("int", "float"): as_float,
    ("int", "decimal"): lambda a: a if pa.types.is_decimal(a.type) else a.cast(decimal_type(*shape(a.type))),
    ("int", "string"): lambda a: a.cast(STRING),
    ("int", "bool"): _int_to_bool,
    ("float", "int"): _float_to_int,
    ("decimal", "float"): as_float,
    ("decimal", "int"): _decimal_to_int,
    ("decimal", "string"): decimal_text,
    ("string", "bool"): _text_to_bool,
    ("bool", "int"): lambda a: a.cast(INT),
    ("bool", "string"): lambda a: a.cast(STRING),
    ("date", "string"): lambda a: a.cast(STRING),
    ("date", "datetime"): lambda a: a.cast(pa.timestamp("us")),
    ("datetime", "date"): lambda a: a.cast(pa.date32(), safe=False),
}
"""Each cast with an exact Arrow form; the others (text to numbers and dates, whose accepted texts
pyfn.TEXT_PATTERNS states with look-aheads RE2 lacks) run in Python."""

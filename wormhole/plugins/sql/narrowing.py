"""Values a narrower target column would change: found before they are written, so their rows are refused.

A table the user made may declare a column that holds less than the source's values carry, and MySQL and
PostgreSQL round or cut such a value instead of refusing it (most of them without an error, even in
MySQL's strict mode): more decimal places than a DECIMAL/numeric's scale, more fractional-second digits
than a DATETIME(n)/timestamp(n) keeps, a fraction into an integer column, a number a FLOAT/real (single
precision) or a DOUBLE does not read back as. Each store reads its target's declared types once at prepare
(:func:`mysql_target`, :func:`postgres_target`) and asks :func:`narrowing` which written columns can carry
such a value, from the source column's logical type and declared digits: only those are checked, each batch
with a few Arrow compute passes (:func:`refused`), and only when the batch's Arrow type can exceed the target
(a DECIMAL(10,2) column's values into DECIMAL(10,2) are never scanned). A value found refuses its row with a
reason naming the value and the target type (:func:`reason`); trailing zeros lose nothing and pass.

The rule for a float target: accept a value when what is stored reads back as the same number by its shortest
round-trip text (a decimal 0.1 into DOUBLE or FLOAT, whose shortest text is 0.1), refuse it otherwise (a
double 0.30000000000000004 into FLOAT reads back 0.3; a 20-digit decimal into DOUBLE loses digits).

A string longer than a VARCHAR(n)/CHAR(n) column is the server's own error (MySQL's strict session,
PostgreSQL), named in its words, but for one longer by trailing spaces alone, which both cut with a note at
most: that one is refused here (only a column whose strings may be longer than n bytes is measured).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.arrow_form import column_values, exact_codec, free_scale
from wormhole.plugins.arrow_text import decimal_text
from wormhole.plugins.schema import Column, Schema
from wormhole.plugins.values import plain_decimal

Family = Literal["decimal", "integer", "single", "double", "time", "text"]
Kind = Literal["places", "integer", "fraction", "single", "double", "length"]


@dataclass(frozen=True, slots=True)
class TargetType:
    """A target column's declared type, as far as what it can hold of a value goes."""

    family: Family
    declared: str
    """As the target declares it (``decimal(10,2)``, ``timestamp(3) without time zone``), for a reason."""
    digits: int = 0
    """A decimal's scale; a date-time's fractional-second digits; a string's characters."""


@dataclass(frozen=True, slots=True)
class Narrowing:
    """A written column whose values may not fit its target column: what to check (``kind``) against."""

    kind: Kind
    declared: str
    digits: int
    store: str
    """The target's server, for a reason (``MySQL``, ``PostgreSQL``)."""


_MYSQL = re.compile(r"(decimal|tinyint|smallint|mediumint|int|bigint|float|double|datetime|timestamp|time)"
                    r"(?:\((\d+)(?:,(\d+))?\))?(?: unsigned)?(?: zerofill)?$")
_MYSQL_FAMILY: dict[str, Family] = {"decimal": "decimal", "float": "single", "double": "double",
                                    **dict.fromkeys(("datetime", "timestamp", "time"), "time"),
                                    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "bigint"), "integer")}


_MYSQL_TEXT = re.compile(r"(?:var)?char\((\d+)\)")


def mysql_target(native: str) -> TargetType | None:
    """A MySQL column's ``COLUMN_TYPE`` (``decimal(10,2)``, ``int(10) unsigned``, ``datetime(3)``) as a
    :class:`TargetType`; None for a type nothing here narrows into. DATETIME, TIMESTAMP and TIME without a
    precision keep whole seconds; FLOAT(M,D) and DOUBLE(M,D) (deprecated) are taken as FLOAT and DOUBLE."""
    found = _MYSQL.match(native)
    if found is None:
        text = _MYSQL_TEXT.match(native)
        return None if text is None else TargetType("text", native.split(" ")[0], int(text[1]))
    name, first, second = found.groups()
    family = _MYSQL_FAMILY[name]
    digits = int(second or 0) if family == "decimal" else int(first or 0) if family == "time" else 0
    return TargetType(family, native, digits)


_POSTGRES = re.compile(r"(numeric|smallint|integer|bigint|real|double precision|timestamp|time)"
                       r"(?:\((\d+)(?:,(\d+))?\))?(?: with(?:out)? time zone)?$")
_POSTGRES_FAMILY: dict[str, Family] = {"numeric": "decimal", "real": "single", "double precision": "double",
                                       "timestamp": "time", "time": "time",
                                       **dict.fromkeys(("smallint", "integer", "bigint"), "integer")}


_POSTGRES_TEXT = re.compile(r"(?:character varying|character)\((\d+)\)$")


def postgres_target(declared: str) -> TargetType | None:
    """A PostgreSQL column's ``format_type`` as a :class:`TargetType`; None for a type nothing here narrows
    into (a ``numeric`` of no declared scale, a ``timestamp`` of the full 6 digits, text, ...)."""
    found = _POSTGRES.match(declared)
    if found is None:
        text = _POSTGRES_TEXT.match(declared)
        return None if text is None else TargetType("text", declared, int(text[1]))
    name, first, second = found.groups()
    family = _POSTGRES_FAMILY[name]
    if family == "decimal":
        return None if first is None else TargetType(family, declared, int(second or 0))
    if family == "time":
        return None if first is None else TargetType(family, declared, int(first))
    return TargetType(family, declared)


_NATIVE_DIGITS = re.compile(r"(?:datetime|timestamp|time)(?:\((\d)\))?$")


def _places(column: Column, target: TargetType) -> Kind | None:
    if column.type not in ("decimal", "float", "string"):
        return None
    return None if column.type == "decimal" and column.scale is not None and column.scale <= target.digits \
        else "places"


def _integer(column: Column, target: TargetType) -> Kind | None:
    if column.type not in ("decimal", "float", "string"):
        return None
    return None if column.type == "decimal" and column.scale == 0 else "integer"


def _float(column: Column, target: TargetType) -> Kind | None:
    single = target.family == "single"
    if column.type not in ("decimal", "float", "int") or (column.type == "float" and (
            not single or (column.native or "").startswith("float"))):  # a MySQL FLOAT source: single already
        return None
    safe = 6 if single else 15  # every decimal of so many digits reads back the same
    if column.type == "decimal" and column.precision is not None and column.precision <= safe:
        return None
    return "single" if single else "double"


def _fraction(column: Column, target: TargetType) -> Kind | None:
    if target.digits >= 6 or column.type not in ("datetime", "string"):
        return None
    source = _NATIVE_DIGITS.match(column.native or "")
    if source is not None and int(source[1] or 0) <= target.digits:
        return None  # the source declares no more digits (a MySQL source's DATETIME(n), TIME(n))
    return "fraction"


_NATIVE_LENGTH = re.compile(r"(?:var)?char\((\d+)\)")


def _length(column: Column, target: TargetType) -> Kind | None:
    if column.type != "string":
        return None
    source = _NATIVE_LENGTH.match(column.native or "")
    return None if source is not None and int(source[1]) <= target.digits else "length"  # a MySQL VARCHAR(n)


_DECIDE = {"decimal": _places, "integer": _integer, "single": _float, "double": _float, "time": _fraction,
           "text": _length}


def narrowing(column: Column, target: TargetType | None, store: str) -> Narrowing | None:
    """What to check of ``column``'s values written into ``target``; None when its declared type cannot
    exceed the target's (nothing is checked, ever)."""
    kind = None if target is None else _DECIDE[target.family](column, target)
    if kind is None or target is None:
        return None
    return Narrowing(kind, target.declared, target.digits if kind in ("places", "fraction", "length") else 0, store)


def narrowings(schema: Schema, targets: Sequence[TargetType | None], store: str) -> tuple[Narrowing | None, ...]:
    """:func:`narrowing` of each column of ``schema`` into the target column of the same position."""
    return tuple(narrowing(c, t, store) for c, t in zip(schema.columns, targets, strict=True))


# -- checking a batch's column -------------------------------------------------------------------------


_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _may_exceed(field: pa.Field, n: Narrowing) -> bool:
    """Whether the column's Arrow type lets some value exceed ``n`` (an exact column, whose values are each
    their own, may)."""
    t = field.type
    if exact_codec(field) is not None or free_scale(field):
        return True
    if pa.types.is_decimal(t):
        if n.kind in ("places", "integer"):
            return bool(t.scale > n.digits)
        return bool(t.precision > (6 if n.kind == "single" else 15))
    if pa.types.is_integer(t):
        return n.kind in ("single", "double") and t.bit_width > (16 if n.kind == "single" else 32)
    if pa.types.is_timestamp(t):
        return _UNIT_DIGITS[t.unit] > n.digits
    return pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


def _beyond(digits: int) -> str:
    """A regex for a number's or a time's text with a non-zero digit more than ``digits`` after its point."""
    return rf"\.\d{{{digits}}}\d*[1-9]"


def _mask(values: pa.Array, field: pa.Field, n: Narrowing) -> pa.Array | None:
    """True where a value of a column in its own Arrow type would change; None when the column needs its
    values one by one (:func:`_python_refused`)."""
    t = values.type
    if pa.types.is_decimal(t) and n.kind in ("places", "integer"):
        return pc.match_substring_regex(decimal_text(values), _beyond(n.digits))
    if (pa.types.is_string(t) or pa.types.is_large_string(t)) and n.kind == "length":
        longest = pc.max(pc.binary_length(values)).as_py()  # bytes: no fewer than characters, and free to tell
        if longest is None or longest <= n.digits:
            return pa.nulls(len(values), pa.bool_())
        # Longer by spaces alone: cut without an error (longer by more is the server's own error, named there)
        return pc.and_(pc.greater(pc.utf8_length(values), n.digits),
                       pc.less_equal(pc.utf8_length(pc.utf8_rtrim(values, " ")), n.digits))
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # a number's or a time's text
        return pc.match_substring_regex(values, _beyond(n.digits)) if n.kind != "single" else None
    if pa.types.is_timestamp(t):
        ticks = pc.cast(values, pa.int64())
        step = 10 ** (_UNIT_DIGITS[t.unit] - n.digits)
        return pc.not_equal(pc.multiply(pc.divide(ticks, step), step), ticks)
    if pa.types.is_floating(t):
        v = pc.cast(values, pa.float64())
        if n.kind == "places":
            changed = pc.not_equal(pc.round(v, n.digits), v)
        elif n.kind == "integer":
            changed = pc.not_equal(pc.trunc(v), v)
        else:  # single: a float32 the same value, or whose shortest text reads back as it
            single = pc.cast(v, pa.float32(), safe=False)
            back = pc.cast(pc.cast(single, pa.string()), pa.float64())
            changed = pc.and_(pc.not_equal(pc.cast(single, pa.float64()), v), pc.not_equal(back, v))
        return pc.and_(pc.is_finite(v), changed)  # NaN and infinities are not this check's to refuse
    if pa.types.is_integer(t) and n.kind in ("single", "double"):
        as_float = pc.cast(values, pa.float32() if n.kind == "single" else pa.float64(), safe=False)
        return pc.not_equal(pc.cast(as_float, t, safe=False), values)
    return None


def _changed_value(v: Any, n: Narrowing) -> bool:
    """Whether one value (a Python value of an exact column, or of a decimal into a float) would change."""
    if isinstance(v, str):
        if n.kind == "length":
            return len(v) > n.digits >= len(v.rstrip(" "))
        return n.kind != "single" and re.search(_beyond(n.digits), v) is not None
    if isinstance(v, datetime):
        return n.kind == "fraction" and v.microsecond % 10 ** (6 - n.digits) != 0
    if isinstance(v, bool) or not isinstance(v, int | float | Decimal):
        return False
    if isinstance(v, float | Decimal) and not (v == v and abs(v) != float("inf")):
        return False  # NaN, infinities: not this check's
    if n.kind in ("places", "integer"):
        if isinstance(v, Decimal):
            return re.search(_beyond(n.digits), plain_decimal(v)) is not None
        return isinstance(v, float) and round(v, n.digits) != v
    if n.kind in ("single", "double"):
        stored = np.float32(v) if n.kind == "single" else float(v)
        exact = Decimal(v if not isinstance(v, float) else repr(v))
        return Decimal(str(stored)) != exact and Decimal(float(stored)) != exact
    return False


def shown(v: Any) -> str:
    """A value as a reason shows it."""
    if isinstance(v, Decimal):
        return plain_decimal(v)
    if isinstance(v, datetime):
        return v.isoformat(" ")
    return repr(v) if isinstance(v, float) else str(v)


def reason(n: Narrowing, value: Any) -> str:
    """Why ``value`` is refused for its column's target (without the column's name)."""
    if n.kind == "length":
        return (f"a string of {len(value)} characters ({value[:20]!r}{'...' if len(value) > 20 else ''}) is "
                f"longer than {n.declared} holds ({n.store} would cut its trailing spaces)")
    text = shown(value)
    if n.kind == "places":
        return f"{text} has more decimal places than {n.declared} holds ({n.store} would round it)"
    if n.kind == "integer":
        return f"{text} has a fraction, which {n.declared} cannot hold"  # MySQL rounds it, PostgreSQL refuses
    if n.kind == "fraction":
        return (f"{text} has more fractional-second digits than {n.declared} holds ({n.store} would round or "
                f"truncate it)")
    return f"{text} does not read back as the same number from {n.declared} ({n.store} would round it)"


def refused(batch: pa.RecordBatch, i: int, n: Narrowing) -> list[tuple[int, Any]]:
    """The rows of column ``i`` whose value ``n``'s target would change, with the value; nothing is scanned
    when the column's Arrow type cannot exceed the target's."""
    field = batch.schema.field(i)
    if not _may_exceed(field, n):
        return []
    values = batch.column(i)
    mask = None if exact_codec(field) is not None or free_scale(field) else _mask(values, field, n)
    if mask is None:
        return [(r, v) for r, v in enumerate(column_values(batch, i)) if v is not None and _changed_value(v, n)]
    mask = pc.fill_null(mask, False)
    if not pc.any(mask).as_py():
        return []
    rows = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    found = column_values(batch.take(pa.array(rows)), i)
    return list(zip(rows.tolist(), found, strict=True))


def check_column(batch: pa.RecordBatch, i: int, n: Narrowing | None) -> None:
    """Raise ValueError (the reason) for the first value of column ``i`` that ``n``'s target would change."""
    if n is not None and (found := refused(batch, i, n)):
        raise ValueError(reason(n, found[0][1]))


def refused_rows(batch: pa.RecordBatch, checks: Sequence[Narrowing | None]) -> dict[int, str]:
    """Row index -> the reason (naming the first such column) for each row holding a value its target would
    change."""
    bad: dict[int, str] = {}
    for i, n in enumerate(checks):
        if n is not None:
            for row, value in refused(batch, i, n):
                bad.setdefault(row, f"column {batch.schema.field(i).name}: {reason(n, value)}")
    return bad


def as_integers(batch: pa.RecordBatch, checks: Sequence[Narrowing | None]) -> pa.RecordBatch:
    """The batch with each column checked for an integer target (its values whole, :func:`refused_rows`) as
    int64, whose text an integer column's input reads (PostgreSQL's reads no ``2.00``); a column that does not
    cast (a value beyond int64) stays as it is, for the server to refuse."""
    arrays, fields, changed = list(batch.columns), list(batch.schema), False
    for i, n in enumerate(checks):
        field = fields[i]
        if n is None or n.kind != "integer" or exact_codec(field) is not None or free_scale(field) or not (
                pa.types.is_decimal(field.type) or pa.types.is_floating(field.type)):
            continue
        try:
            arrays[i] = pc.cast(arrays[i], pa.int64())
        except (pa.ArrowException, ValueError):
            continue
        fields[i] = pa.field(field.name, pa.int64(), field.nullable)
        changed = True
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)) if changed else batch

"""Typed Arrow columns from text by vectorised casts, holding exactly the values the row readers' Python
parsers make (``int``, ``float``, ``Decimal``, ``date.fromisoformat``, ...), shared by the stores whose
values arrive as text (the file store's csv and jsonl, sqlite's TEXT columns).

Arrow's parsers and Python's do not take the same texts (Arrow reads ``0x10`` as an int and ``+5`` as no
int, Python the other way round), so a column is cast only when every text has a form both read alike,
checked by one regular expression over the column; otherwise, or when the cast fails, these raise
:class:`Unfit` and the caller converts the column (or the batch) by the Python parsers as before. A
decimal column without a declared scale (every file's and sqlite's) holds each value at scale 18 and gives
it back at the smallest scale that holds it (:func:`wormhole.plugins.batch.free_scale`), so only texts
already in that form (no trailing zero after the point, no negative zero) are cast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.batch import arrow_type, trimmed
from wormhole.plugins.schema import Column
from wormhole.plugins.values import json_dumps, json_parse

FAILED = (pa.ArrowException, ValueError, TypeError, ArithmeticError, RecursionError)
"""What a cast of a column holding a value with no form in the column's type raises (Unfit too)."""


class Unfit(ValueError):
    """A column has a value these casts do not read exactly as the Python parser does."""


_INT = r"^-?[0-9]+$"
_FLOAT = r"^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$"
_TRIMMED_DECIMAL = r"^-?[0-9]+(\.[0-9]*[1-9])?$"
_NEGATIVE_ZERO = r"^-0+$"
_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DATETIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?)?)?$"
_BOOL_TEXT = pa.array(["true", "false", "1", "0"])

_EPOCH = date(1970, 1, 1)
_DAYS = ((date.min - _EPOCH).days, (date.max - _EPOCH).days)
_MICROS = (_DAYS[0] * 86_400_000_000, (_DAYS[1] + 1) * 86_400_000_000 - 1)


def _all(mask: pa.Array) -> bool:
    # Nulls are skipped: a NULL is no text to check.
    return bool(pc.all(mask).as_py() is not False)


def _guard(text: pa.Array, pattern: str) -> None:
    if not _all(pc.match_substring_regex(text, pattern)):
        raise Unfit(f"a value outside {pattern}")


def _in_range(arr: pa.Array, storage: pa.DataType, low: int, high: int) -> pa.Array:
    # Arrow holds year 0 and years beyond 9999; Python's date and datetime do not.
    bounds = pc.min_max(arr.view(storage))
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if lo is not None and (lo < low or hi > high):
        raise Unfit("a date beyond Python's years 1 to 9999")
    return arr


def ints(text: pa.Array, column: Column) -> pa.Array:
    _guard(text, _INT)
    return pc.cast(text, pa.uint64() if column.unsigned else pa.int64())  # checked: a bigger int fails


def floats(text: pa.Array, column: Column) -> pa.Array:
    _guard(text, _FLOAT)  # both parsers round correctly; inf, nan, '+' and '_' go to Python
    return pc.cast(text, pa.float64())


def free_decimals(text: pa.Array, column: Column) -> pa.Array:
    if column.precision is not None:
        raise Unfit("a declared scale: the column gives every value at it")
    _guard(text, _TRIMMED_DECIMAL)
    if not _all(pc.invert(pc.match_substring_regex(text, _NEGATIVE_ZERO))):
        raise Unfit("a negative zero")
    return pc.cast(text, arrow_type(column))  # checked: more than 20 + 18 digits fails


def bools(text: pa.Array, column: Column) -> pa.Array:
    # ascii_lower leaves other letters as they are: a text in the set after it was ASCII, as Python reads it.
    lowered = pc.ascii_lower(text)
    if not _all(pc.is_in(lowered, _BOOL_TEXT)):
        raise Unfit("a boolean text other than true/false/1/0")
    return pc.or_(pc.equal(lowered, "true"), pc.equal(lowered, "1"))


def dates(text: pa.Array, column: Column) -> pa.Array:
    _guard(text, _DATE)
    return _in_range(pc.cast(text, pa.date32()), pa.int32(), *_DAYS)


def datetimes(text: pa.Array, column: Column) -> pa.Array:
    _guard(text, _DATETIME)
    return _in_range(pc.cast(text, pa.timestamp("us")), pa.int64(), *_MICROS)


def json_texts(values: Sequence[Any]) -> pa.Array:
    """JSON texts (None for NULL) as the text of the value each parses to (``json_dumps``): what the row
    path's writers write; raises ValueError for a text that is not JSON."""
    return pa.array([None if v is None else json_dumps(json_parse(v)) for v in values], pa.string())


TEXT_CASTS: dict[str, Callable[[pa.Array, Column], pa.Array]] = {
    "int": ints, "float": floats, "decimal": free_decimals, "bool": bools, "date": dates, "datetime": datetimes,
}
"""logical type -> a column of texts as its Arrow array (raises :class:`Unfit` or an Arrow error)."""


_PYTHON: dict[str, type] = {"int": int, "float": float, "string": str, "bytes": bytes, "bool": bool,
                            "date": date, "datetime": datetime, "decimal": Decimal}
_NONE = type(None)


def python_array(column: Column, values: Sequence[Any]) -> pa.Array:
    """A column of the row path's Python values as Arrow, when Arrow gives each back as it is (a value
    by value conversion's result: only a column that failed the casts comes here); raises Unfit when not:
    an int beyond int64, an aware datetime, a decimal at a scale of its own, a value of another type."""
    kinds = set(map(type, values)) - {_NONE}
    if column.type == "json":
        return pa.array([None if v is None else json_dumps(v) for v in values], pa.string())
    if not kinds <= {_PYTHON[column.type]}:
        raise Unfit(f"values of {sorted(k.__name__ for k in kinds)} in a {column.type} column")
    if column.type == "datetime" and any(v.tzinfo is not None for v in values if v is not None):
        raise Unfit("an aware datetime: Arrow would hold it in UTC")
    if column.type == "decimal" and column.precision is None and any(
            v.as_tuple() != trimmed(v).as_tuple() for v in values if v is not None):
        raise Unfit("a decimal at a scale of its own")
    return pa.array(values, arrow_type(column), from_pandas=False)

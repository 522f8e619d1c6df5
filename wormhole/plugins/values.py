"""Values every store writes alike: JSON null apart from SQL NULL, decimals in plain notation, and
the Arrow form of the logical types (the file store's parquet and Spark share it, neither imports the other).

A json column's value is the parsed JSON (dict, list, str, number, bool); SQL NULL is ``None``. The
JSON literal ``null`` is :data:`JSON_NULL`, so a column holding it is not taken for a NULL column
(MySQL's ``js IS NULL`` is false for it): readers that parse JSON map ``null`` to it
(:func:`json_column`), and :func:`json_dumps` writes it back as ``null``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from types import ModuleType
from typing import Any


class JsonNull:
    """The type of :data:`JSON_NULL`: one instance, kept by pickling (Spark executors, processes)."""

    __slots__ = ()
    _instance: JsonNull | None = None

    def __new__(cls) -> JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self) -> tuple[Callable[[], JsonNull], tuple[()]]:
        return JsonNull, ()

    def __repr__(self) -> str:
        return "JSON_NULL"


JSON_NULL = JsonNull()
"""The JSON literal ``null`` as a json column's value (SQL NULL stays ``None``)."""


def json_default(v: Any) -> Any:
    """``default`` of a JSON encoder: JSON_NULL is written as ``null``."""
    if v is JSON_NULL:
        return None
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


_DUMPS = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=json_default).encode


def json_dumps(v: Any) -> str:
    """A json column's value as its JSON text (JSON_NULL as ``null``; NaN refused)."""
    return _DUMPS(v)


def json_loads(text: str | bytes) -> Any:
    """JSON text as a json column's value: ``null`` is JSON_NULL, not SQL NULL."""
    v = json.loads(text)
    return JSON_NULL if v is None else v


def json_column(values: Iterable[Any]) -> list[Any]:
    """Parsed JSON values of one column with ``null`` made JSON_NULL: one C-level scan when none is."""
    out = list(values)
    if None in out:
        out = [JSON_NULL if v is None else v for v in out]
    return out


def plain_decimal(v: Decimal) -> str:
    """A decimal's text without an exponent (0E-18 is 0.000000000000000000), negative zero as zero
    (MySQL and Spark have none): what every text writer writes."""
    if not v and v.is_signed():
        v = v.copy_abs()
    return format(v, "f")


def plain_decimals(values: Sequence[Any]) -> list[Any]:
    """:func:`plain_decimal` of a column (None stays None). ``str`` is faster and the same text but for
    an exponent or a negative zero: the column takes the careful path only when its text shows one."""
    present = [v for v in values if v is not None] if None in values else values
    texts = list(map(str, present))
    joined = "".join(texts)
    if "E" in joined or "-0" in joined:
        texts = list(map(plain_decimal, present))
    if len(texts) == len(values):
        return texts
    it = iter(texts)
    return [None if v is None else next(it) for v in values]


def arrow_types(pa: ModuleType) -> dict[str, Any]:
    """Logical type -> Arrow type of a parquet column: the contract Spark-written parquet shares."""
    return {
        "int": pa.int64(),
        "float": pa.float64(),
        "decimal": pa.decimal128(38, 18),
        "string": pa.string(),
        "bytes": pa.binary(),
        "bool": pa.bool_(),
        "date": pa.date32(),
        "datetime": pa.timestamp("us"),  # naive; pyarrow converts an aware value to UTC first
        "json": pa.string(),
    }


def json_text(v: Any) -> Any:
    """A json value as parquet (and Spark) hold it: its JSON text; a str is taken as text already."""
    return v if v is None or isinstance(v, str) else json_dumps(v)

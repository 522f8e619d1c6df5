"""MySQL column types -> the reader's kinds (how a column's values travel) -> wormhole's logical types
(docs/manual/mysql.md, *Types*), and the value-by-value conversions of raw wire bytes."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pymysql.constants import FIELD_TYPE

from wormhole.plugins.base import LogicalType
from wormhole.plugins.values import json_loads

KIND_TYPES: dict[str, LogicalType] = {
    "int": "int", "uint64": "int", "bit": "int", "decimal": "decimal", "float": "float", "float32": "float",
    "string": "string", "bytes": "bytes",
    "date": "date", "datetime": "datetime", "json": "json",
}

_DATA_TYPE_KINDS: dict[str, str] = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"), "int"),
    "bit": "bit",
    **dict.fromkeys(("decimal", "numeric", "dec", "fixed"), "decimal"),
    "float": "float32",
    **dict.fromkeys(("double", "real", "double precision"), "float"),
    "date": "date",
    **dict.fromkeys(("datetime", "timestamp"), "datetime"),
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point",
                     "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                     "geometrycollection"), "bytes"),
    "json": "json",
}
"""information_schema DATA_TYPE -> kind; anything else (char, text, enum, set, time, uuid, inet6) is a string."""


def kind_of_data_type(data_type: str, is_json: bool = False, unsigned: bool = False) -> str:
    if is_json:
        return "json"
    if unsigned and data_type.lower() == "bigint":
        return "uint64"
    return _DATA_TYPE_KINDS.get(data_type.lower(), "string")


def wide_unsigned(kind: str, bits: int) -> bool:
    """Whether a column of ``kind`` (``bits`` wide: a BIT(n)'s n) holds ints up to 2**64 - 1, beyond int64:
    BIGINT UNSIGNED and BIT(64). Such a column is ``unsigned`` (uint64 in Arrow and parquet)."""
    return kind == "uint64" or (kind == "bit" and bits == 64)


_FIELD_KINDS: dict[int, str] = {
    **dict.fromkeys((FIELD_TYPE.TINY, FIELD_TYPE.SHORT, FIELD_TYPE.LONG, FIELD_TYPE.LONGLONG, FIELD_TYPE.INT24,
                     FIELD_TYPE.YEAR), "int"),
    FIELD_TYPE.BIT: "bit",
    FIELD_TYPE.DECIMAL: "decimal", FIELD_TYPE.NEWDECIMAL: "decimal",
    FIELD_TYPE.FLOAT: "float32", FIELD_TYPE.DOUBLE: "float",
    FIELD_TYPE.DATE: "date", FIELD_TYPE.NEWDATE: "date",
    FIELD_TYPE.DATETIME: "datetime", FIELD_TYPE.TIMESTAMP: "datetime",
    FIELD_TYPE.JSON: "json",
    FIELD_TYPE.GEOMETRY: "bytes",
}
_BINARY_CHARSET = 63


def kind_of_field(type_code: int, charsetnr: int, unsigned: bool = False) -> str:
    """The kind of a result-set column (for ``query`` sources, where no table describes it)."""
    if unsigned and type_code == FIELD_TYPE.LONGLONG:
        return "uint64"
    kind = _FIELD_KINDS.get(type_code)
    if kind is not None:
        return kind
    return "bytes" if charsetnr == _BINARY_CHARSET else "string"


def select_expr(quoted: str, kind: str) -> str:
    """How a split query selects a column (``quoted``): a FLOAT as ``CAST AS DOUBLE``, the stored single exactly
    where the text protocol sends 6 digits (docs/manual/types.md), under its own name for pushed-down SQL."""
    return f"CAST({quoted} AS DOUBLE) AS {quoted}" if kind == "float32" else quoted


JSON_CHECK = re.compile(r"json_valid\(`((?:[^`]|``)+)`\)", re.IGNORECASE)
"""MariaDB's JSON is LONGTEXT with a ``json_valid(`col`)`` CHECK: that is how a JSON column is known."""


# ---------------------------------------------------------------------------------------------
# Reading: raw bytes from the wire -> Python values


class ZeroDate(ValueError):
    """A date MySQL allows and Python cannot hold (``0000-00-00``, ``2020-00-10``)."""


def _decimal(v: bytes) -> Decimal:
    return Decimal(v.decode("ascii"))


def _date(v: bytes) -> date:
    try:
        return date.fromisoformat(v.decode("ascii"))
    except ValueError:
        raise ZeroDate(v.decode("ascii")) from None


def _datetime(v: bytes) -> datetime:
    try:
        return datetime.fromisoformat(v.decode("ascii"))
    except ValueError:
        raise ZeroDate(v.decode("ascii")) from None


def _bit(v: bytes) -> int:
    return int.from_bytes(v, "big")


def _utf8(v: bytes) -> str:
    return v.decode("utf-8")


READ_CONVERTERS: dict[str, Callable[[bytes], Any]] = {
    "int": int, "uint64": int, "bit": _bit, "decimal": _decimal, "float": float, "float32": float, "string": _utf8,
    "bytes": lambda v: v, "date": _date, "datetime": _datetime,
    "json": lambda v: json_loads(v.decode("utf-8")),  # the text tuples will parse: UTF-8, never sniffed as UTF-16
}
"""kind -> the value of one raw value (a column whose fast cast failed is converted value by value)."""


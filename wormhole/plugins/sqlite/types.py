"""The sqlite store's types: declared column types to logical types and back, and value conversions.

SQLite returns int, float, str, bytes and None, each value of its own type whatever its column declares:
reading checks (and converts where the logical type differs) every value; writing converts the columns
whose logical type sqlite3 does not bind as wanted (date, datetime, decimal, json).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from wormhole.plugins.values import from_text, json_dumps, json_loads, plain_decimal

LogicalName = Literal["int", "float", "decimal", "string", "bytes", "bool", "date", "datetime", "json"]

_DECLARED: tuple[tuple[tuple[str, ...], LogicalName], ...] = (
    (("BOOL",), "bool"), (("DATETIME", "TIMESTAMP"), "datetime"), (("DATE",), "date"), (("JSON",), "json"),
    (("DEC", "NUMERIC"), "decimal"), (("INT",), "int"), (("CHAR", "CLOB", "TEXT"), "string"), (("BLOB",), "bytes"),
    (("REAL", "FLOA", "DOUB"), "float"))
"""What a declared type's name holds -> its logical type, the first that matches."""


def logical_type(declared: str) -> LogicalName:
    """The logical type of a declared column type (a string when nothing matches).

    The specific names come first, so ``DATETIME`` is not a ``DATE`` and the ``DECIMAL TEXT``-style
    types earlier versions of this store created (``DATE TEXT``, ``JSON TEXT``, ...) still read back
    as what was written.
    """
    t = declared.upper()
    return next((kind for marks, kind in _DECLARED if any(m in t for m in marks)), "string")


def as_read(declared: str) -> str | None:
    """:attr:`Column.as_read` of a column: ``""`` (no SQL gives its value as read, so an expression reading it
    is not pushed) for a string column without TEXT affinity (no declared type, ``NUMBER``, ...), which may
    hold integers and reals: the reader gives them as their text (a real's shortest exact text), SQLite
    compares them as numbers (``1 = '1'`` is false there) and has no such text of a real."""
    t = declared.upper()
    text_affinity = "INT" not in t and ("CHAR" in t or "CLOB" in t or "TEXT" in t)
    return "" if logical_type(declared) == "string" and not text_affinity else None


DECLARED_TYPES: dict[str, str] = {
    "int": "INTEGER",
    "float": "REAL",
    "string": "TEXT",
    "bytes": "BLOB",
    "bool": "BOOLEAN",  # bound as 0/1, stored as integers
    # NUMERIC affinity leaves ISO dates and datetimes as text: "2024-02-29" is no number.
    "date": "DATE",
    "datetime": "DATETIME",
    # TEXT affinity, so the stored text is exactly what was written: NUMERIC affinity would turn
    # "1.10" into the REAL 1.1 (and lose digits beyond 15), and the JSON text "12.5" into a REAL.
    "decimal": "TEXT",
    "json": "TEXT",
}
"""Declared types of the columns of a table this store creates: plain SQLite types, so any tool reads
the table as it expects. Read back by this store, decimal and json columns are strings (TEXT)."""


# -- reading: SQLite value -> logical type ----------------------------------------------------
# SQLite keeps each value's own type whatever the column declares (a column with no declared type holds
# anything, an INTEGER column keeps a text that is no number): a value is kept as it is where its column's
# logical type holds it exactly (an integer or real in a string column as its text), else its row is
# rejected with a reason naming its SQLite type and value. A value is never changed.

_SQLITE_TYPES = {int: "integer", float: "real", str: "text", bytes: "blob"}


def _value(v: Any) -> str:
    """A value as a reason names it: its SQLite type and (the start of) its Python form."""
    shown = repr(v)
    return f"the {_SQLITE_TYPES.get(type(v), type(v).__name__)} {shown[:60]}{'...' if len(shown) > 60 else ''}"


def _to_int(v: Any) -> int:
    if type(v) is int:
        return v
    raise ValueError(f"{_value(v)} is no integer")


def _to_float(v: Any) -> float:
    if type(v) is float:
        return v
    if type(v) is int and -2**53 <= v <= 2**53:  # a double holds it exactly
        return float(v)
    raise ValueError(f"{_value(v)} is no real")


def _to_string(v: Any) -> str:
    if type(v) is str:
        return v
    if type(v) is int:
        return str(v)
    if type(v) is float:
        return repr(v)  # the shortest text that reads back as the same double: 0.30000000000000004, not 0.3
    raise ValueError(f"{_value(v)} is no text (a string column takes text, and integers and reals as their text)")


def _to_bytes(v: Any) -> bytes:
    if type(v) is bytes:
        return v
    if type(v) is str:
        return v.encode()  # the bytes SQLite itself gives (CAST(v AS BLOB))
    raise ValueError(f"{_value(v)} is no blob")


def _to_decimal(v: Any) -> Decimal:
    try:
        # repr of a float is its shortest round-trip text: 0.1 reads as Decimal("0.1"), not 0.1000...055
        return Decimal(v if type(v) in (str, int) else repr(v))
    except InvalidOperation:
        raise ValueError(f"{_value(v)} is no decimal") from None


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False, "t": True, "f": False}


def _to_bool(v: Any) -> bool:
    if type(v) is int and v in (0, 1):
        return v == 1
    if type(v) is str and v.strip().lower() in _BOOL_TEXT:
        return _BOOL_TEXT[v.strip().lower()]
    raise ValueError(f"{_value(v)} is no boolean (0 or 1, or true, false, t, f as text)")


def _to_json(v: Any) -> Any:
    if type(v) in (str, bytes):
        return json_loads(v)
    return v  # a number stored under NUMERIC affinity is already the JSON value


def _from_text(parse: Callable[[str], Any], what: str) -> Callable[[Any], Any]:
    return from_text(parse, lambda v: f"{_value(v)} is no {what} text")


READ_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "float": _to_float,
    "string": _to_string,
    "bytes": _to_bytes,
    "decimal": _to_decimal,
    "bool": _to_bool,
    "date": _from_text(date.fromisoformat, "ISO date"),
    "datetime": _from_text(datetime.fromisoformat, "ISO datetime"),
    "json": _to_json,
}
"""SQLite value -> logical type: every type has one, since any column may hold a value of any SQLite type
(the Arrow path, :mod:`.arrow_columns`, takes a column whose values need none)."""


# -- writing: logical type -> a value sqlite3 binds ----------------------------------------------


def _zero_date(v: str) -> ValueError:
    # A mysql source's zero or partial date, kept as its text (zero_dates: keep): SQLite's dates are ISO
    # text of real dates, so the row is rejected with this reason.
    return ValueError(f"the zero date {v[:40]!r} has no SQLite value (a mysql source's zero_dates: null "
                      "reads it as NULL)")


def _iso_date(v: Any) -> Any:
    if type(v) is str:
        raise _zero_date(v)
    return v.isoformat()


def _iso_datetime(v: Any) -> Any:
    if type(v) is str:
        raise _zero_date(v)
    return v.isoformat(" ")


def _json_text(v: Any) -> Any:
    return json_dumps(v)


WRITE_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "date": _iso_date,
    "datetime": _iso_datetime,
    "decimal": plain_decimal,
    "json": _json_text,
}
"""Values sqlite3 cannot bind as wanted. bool needs nothing: it is an int, bound as 0/1."""

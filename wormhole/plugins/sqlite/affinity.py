"""Values a target column's type affinity would change: found before they are written, refused with a reason.

SQLite converts a value to its column's affinity when it stores it (https://www.sqlite.org/datatype3.html):
under NUMERIC, INTEGER or REAL affinity a text that reads as a number becomes that number (the decimal
``123456789012345678901234567890.123456789012`` becomes the REAL ``1.2345678901234568e+29``, the string
``'007'`` the INTEGER 7), under REAL affinity a large integer becomes a double, under TEXT affinity a real
becomes its text. A table this store creates declares the affinity each logical type keeps
(:data:`~.types.DECLARED_TYPES`); a table the user made may not. Such a column is guarded: its values go
through a scratch in-memory table declared like the target (SQLite's own conversion, not an imitation), and
a value that would read back as another value rejects its row, never a silent change. A value that reads
back equal is kept (a decimal ``1.50`` stored as the REAL 1.5 is the same number, its scale is not kept).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from wormhole.plugins.base import Schema
from wormhole.plugins.sql import quote

_BOUND_AS_TEXT = frozenset({"string", "decimal", "date", "datetime", "json"})


def affinity(declared: str) -> str:
    """The affinity SQLite gives a column of this declared type (its rules, in their order)."""
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "TEXT"
    if "BLOB" in t or not t:
        return "BLOB"
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return "REAL"
    return "NUMERIC"


def _may_change(logical: str, column_affinity: str) -> bool:
    if logical in _BOUND_AS_TEXT:
        return column_affinity in ("NUMERIC", "INTEGER", "REAL")
    if logical == "float":
        return column_affinity == "TEXT"
    if logical == "int":
        return column_affinity == "REAL"  # beyond 2**53 a double is not the integer
    return False


def _as_text(v: Any) -> str:
    # The text this store's reader gives of a stored value: a real as its shortest round-trip text.
    return repr(v) if type(v) is float else str(v)


def _same_decimal(stored: Any, bound: Any) -> bool:
    try:
        return Decimal(_as_text(stored)) == Decimal(str(bound))
    except InvalidOperation:
        return False


def _same_float(stored: Any, bound: Any) -> bool:
    try:
        return float(stored) == bound
    except (TypeError, ValueError):
        return False


_SAME: dict[str, Callable[[Any, Any], bool]] = {
    "decimal": _same_decimal,
    "float": _same_float,
    "int": lambda stored, bound: stored == bound,  # an int and a float compare exactly
}
"""Whether a stored value reads back as the bound one; the rest (text) must read back as the same text."""


@dataclass(frozen=True, slots=True)
class _Guarded:
    index: int
    name: str
    logical: str
    declared: str
    affinity: str


class AffinityGuard:
    """The target's columns whose affinity may change a value, checked through a scratch table."""

    def __init__(self, columns: Sequence[_Guarded]) -> None:
        self.columns = tuple(columns)
        self._scratch = sqlite3.connect(":memory:", check_same_thread=False)
        defs = ", ".join(f"{quote(f'c{i}')} {c.declared}" for i, c in enumerate(self.columns))
        self._scratch.execute(f"CREATE TABLE scratch ({defs})")
        self._insert = f"INSERT INTO scratch VALUES ({', '.join('?' * len(self.columns))})"

    @classmethod
    def of(cls, schema: Schema, names: Sequence[str], declared: dict[str, str]) -> AffinityGuard | None:
        """The guard of a target whose declared types (lower-case name -> type) ``declared`` are, written
        as ``names`` from ``schema``'s columns; None when no column's affinity can change a value."""
        guarded = []
        for i, (column, name) in enumerate(zip(schema.columns, names, strict=True)):
            decl = declared[name.lower()]
            if _may_change(column.type, affinity(decl)):
                guarded.append(_Guarded(i, name, column.type, decl, affinity(decl)))
        return cls(guarded) if guarded else None

    def changed(self, params: Sequence[Sequence[Any]]) -> dict[int, str]:
        """Row position -> why, for each row of bound parameters a column's affinity would change."""
        conn = self._scratch
        conn.execute("DELETE FROM scratch")
        conn.executemany(self._insert, [tuple(row[c.index] for c in self.columns) for row in params])
        stored = conn.execute("SELECT * FROM scratch ORDER BY rowid").fetchall()
        reasons: dict[int, str] = {}
        for position, (row, back) in enumerate(zip(params, stored, strict=True)):
            for c, value in zip(self.columns, back, strict=True):
                bound = row[c.index]
                if bound is None or (bound == value and type(bound) is type(value)):
                    continue
                same = _SAME.get(c.logical)
                if same(value, bound) if same is not None else _as_text(value) == bound:
                    continue
                kind = {int: "integer", float: "real", str: "text", bytes: "blob"}.get(type(value), "value")
                reasons.setdefault(position, (
                    f"column {c.name}: {_shown(bound)} would be stored by SQLite as the {kind} {_shown(value)} "
                    f"under the column's {c.affinity} affinity (declared {c.declared!r}) and read back as another "
                    "value; declare the column TEXT, or let this store create the table, to keep it exactly"))
                break
        return reasons

    def close(self) -> None:
        self._scratch.close()


def _shown(v: Any) -> str:
    shown = repr(v)
    return shown if len(shown) <= 60 else f"{shown[:57]}..."

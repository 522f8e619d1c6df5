"""The sqlite store's options and its identifier/type helpers shared by reader and writer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wormhole.options import Problems, join_path, opt


@dataclass(frozen=True, slots=True, kw_only=True)
class SqliteReaderOptions:
    path: str = opt(nonempty=True)
    """The database file (opened read-only)."""
    table: str = opt(nonempty=True)
    """The table to read."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Columns to read, in this order; default every column of the table."""
    where: str | None = opt(None, nonempty=True)
    """An SQL condition appended as ``WHERE <where>`` (trusted text from the task author)."""

    def check(self, path: str, problems: Problems) -> None:
        _check_names(self.columns, join_path(path, "columns"), problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class SqliteWriterOptions:
    path: str = opt(nonempty=True)
    """The database file; it and its missing parent directories are created when needed."""
    table: str = opt(nonempty=True)
    """The target table."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Target column names, positionally matching the source schema; default the source's names."""
    write_mode: Literal["insert", "replace", "upsert"] = "insert"
    """``insert`` (a duplicate key rejects the row), ``replace`` (INSERT OR REPLACE) or ``upsert``
    (INSERT ... ON CONFLICT(key) DO UPDATE)."""
    key: tuple[str, ...] | None = opt(None, min_items=1)
    """The conflict key for ``upsert`` (a PRIMARY KEY or UNIQUE index); the primary key of a created table."""
    create: bool = True
    """Create the table from the source schema when it does not exist."""

    def check(self, path: str, problems: Problems) -> None:
        _check_names(self.columns, join_path(path, "columns"), problems)
        _check_names(self.key, join_path(path, "key"), problems)
        if self.write_mode == "upsert" and self.key is None:
            problems.add(join_path(path, "key"), "is required when write_mode is 'upsert'")
        if self.key is not None and self.columns is not None:
            missing = [k for k in self.key if k.lower() not in {c.lower() for c in self.columns}]
            if missing:
                problems.add(join_path(path, "key"), f"names columns not in columns: {', '.join(missing)}")


def _check_names(names: tuple[str, ...] | None, path: str, problems: Problems) -> None:
    if names is None:
        return
    for i, name in enumerate(names):
        if not name:
            problems.add(join_path(path, i), "must not be empty")
    # SQLite identifiers are case-insensitive, so "Id" and "id" are the same column.
    lowered = [n.lower() for n in names]
    if len(set(lowered)) != len(lowered):
        problems.add(path, "names must be unique")


def quote(identifier: str) -> str:
    """An SQLite identifier, quoted (inner quotes doubled), so any name is safe in SQL text."""
    return '"' + identifier.replace('"', '""') + '"'


def logical_type(declared: str) -> Literal["int", "float", "decimal", "string", "bytes", "bool", "date",
                                           "datetime", "json"]:
    """The logical type of a declared column type.

    The specific names come first, so ``DATETIME`` is not a ``DATE`` and the ``DECIMAL TEXT``-style
    types earlier versions of this store created (``DATE TEXT``, ``JSON TEXT``, ...) still read back
    as what was written.
    """
    t = declared.upper()
    if "BOOL" in t:
        return "bool"
    if "DATETIME" in t or "TIMESTAMP" in t:
        return "datetime"
    if "DATE" in t:
        return "date"
    if "JSON" in t:
        return "json"
    if "DEC" in t or "NUMERIC" in t:
        return "decimal"
    if "INT" in t:
        return "int"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "string"
    if "BLOB" in t:
        return "bytes"
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return "float"
    return "string"


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

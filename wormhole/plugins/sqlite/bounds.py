"""The sqlite source's incremental bounds (:mod:`wormhole.incremental`): the column's type, its maximum over
what the source reads, and this host's local clock (an SQLite file has no server: its writers' clock)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, SourceBounds, not_a_column
from wormhole.plugins.sql import quote
from wormhole.plugins.sqlite.connection import PLUGIN_NAME, connect_readonly
from wormhole.plugins.sqlite.options import SqliteReaderOptions
from wormhole.plugins.sqlite.reader import resolve_schema
from wormhole.plugins.sqlite.snapshot import of as snapshot_of
from wormhole.plugins.sqlite.types import READ_CONVERTERS


def bounds(options: SqliteReaderOptions, ctx: ReadContext, column: str) -> SourceBounds:
    now = datetime.now().replace(microsecond=0)
    snapshot = snapshot_of(ctx)
    if snapshot is not None:  # the window ends at the largest value the run's read transaction holds
        with snapshot.session(options.path) as conn:
            return _bounds(conn, options, column, now)
    conn = connect_readonly(options.path, SplitError)
    try:
        return _bounds(conn, options, column, now)
    finally:
        conn.close()


def _bounds(conn: sqlite3.Connection, options: SqliteReaderOptions, column: str, now: datetime) -> SourceBounds:
    try:
        schema = resolve_schema(conn, options, SplitError)
        found = {c.name.lower(): c for c in schema.columns}.get(column.lower())
        if found is None:
            raise not_a_column(column, f"{options.table} in {options.path}")
        return SourceBounds(kind=found.type, maximum=_maximum(conn, options, found.name, found.type), now=now)
    except sqlite3.Error as exc:
        raise SplitError(f"cannot read the incremental bound of {column} in {options.path}: {exc}",
                         plugin=PLUGIN_NAME) from exc


def _maximum(conn: sqlite3.Connection, options: SqliteReaderOptions, name: str, kind: str) -> Any:
    if kind not in ("int", "decimal"):
        return None  # a date or timestamp window ends at the clock, not at the largest value
    conditions = [f"({options.where})"] if options.where else []
    conditions.append(f"{quote(name)} IS NOT NULL")
    where = " WHERE " + " AND ".join(conditions)
    if kind == "int":
        return conn.execute(f"SELECT MAX({quote(name)}) FROM {quote(options.read_table)}{where}").fetchone()[0]
    # Decimals are kept as text, whose MAX would compare as text: the largest value is found as numbers.
    convert = READ_CONVERTERS["decimal"]
    values = conn.execute(f"SELECT {quote(name)} FROM {quote(options.read_table)}{where}")
    return max((convert(v) for (v,) in values), default=None)

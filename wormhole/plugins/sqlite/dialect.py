"""SQLite's dialect: how the sqlite store spells its SQL (quoting, the declared types a created table gets,
the table DDL, the write statement of each ``write_mode``, the split markers table).

SQLite's destination is one file under one connection's write lock (:mod:`.periphery`): it stages its rows
in the file itself and commits them in one transaction, so the server parts of the SQL store kit (sessions
to settle, table comments, a transaction per split on connections of their own) have no SQLite form.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from wormhole.plugins.schema import Schema
from wormhole.plugins.sql import quote
from wormhole.plugins.sqlite.connection import PLUGIN_NAME
from wormhole.plugins.sqlite.types import DECLARED_TYPES


class SqliteDialect:
    """The sqlite store's dialect (one instance, :data:`SQLITE`)."""

    # -- write side ------------------------------------------------------------------------------

    name = PLUGIN_NAME
    db_error: type[Exception] = sqlite3.Error
    markers_table = "_wh_splits"
    """The marker table: one row per split a destination holds durably in its staging table."""
    markers_ddl = (f"CREATE TABLE IF NOT EXISTS {markers_table} (taskdb TEXT NOT NULL DEFAULT '', "
                   f"task_id INTEGER NOT NULL, state_run INTEGER NOT NULL, destination TEXT NOT NULL, "
                   f"split_id TEXT NOT NULL, rows INTEGER NOT NULL, "
                   f"PRIMARY KEY (taskdb, task_id, state_run, destination, split_id))")
    marker_sql = (f"INSERT OR REPLACE INTO {markers_table} (taskdb, task_id, state_run, destination, split_id, rows) "
                  f"VALUES (?, ?, ?, ?, ?, ?)")
    """A marker row (or the committed row): args ``(taskdb, task_id, state_run, destination, split_id, rows)``."""

    quote = staticmethod(quote)

    def column_defs(self, names: Sequence[str], schema: Schema) -> list[str]:
        """The columns of a table created for ``schema``'s columns, written under ``names``."""
        return [f"{quote(name)} {DECLARED_TYPES[col.type]}{'' if col.nullable else ' NOT NULL'}"
                for name, col in zip(names, schema.columns, strict=True)]

    def create_table_sql(self, table: str, names: Sequence[str], schema: Schema, key: Sequence[str] | None) -> str:
        defs = self.column_defs(names, schema)
        if key is not None:
            defs.append(f"PRIMARY KEY ({', '.join(quote(k) for k in key)})")
        return f"CREATE TABLE {quote(table)} ({', '.join(defs)})"

    def write_sql(self, table: str, columns: Sequence[str], source: str, mode: str,
                  key: Sequence[str] | None) -> str:
        """The statement writing ``source`` (``VALUES (...)`` or a SELECT) to ``columns`` of ``table`` in
        ``mode``: ``insert``, ``replace`` (INSERT OR REPLACE) or ``upsert`` (ON CONFLICT (key) DO UPDATE)."""
        verb = "INSERT OR REPLACE" if mode == "replace" else "INSERT"
        sql = f"{verb} INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) {source}"
        if mode == "upsert":
            assert key is not None  # the options require it
            keys = {k.lower() for k in key}
            updates = [f"{quote(c)} = excluded.{quote(c)}" for c in columns if c.lower() not in keys]
            action = f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
            sql += f" ON CONFLICT ({', '.join(quote(k) for k in key)}) {action}"
        return sql

    # -- end of the write side -------------------------------------------------------------------


SQLITE = SqliteDialect()

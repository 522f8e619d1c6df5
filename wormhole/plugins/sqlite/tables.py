"""The catalog of an SQLite file for a database task (``tables``): its tables are in schema ``main``, read
through the ``pragma_*`` table functions (:mod:`wormhole.plugins.sql.tables` says what every SQL store's
does alike).

Row estimates are exact (``count(*)``: SQLite keeps no statistics of its own). Types are as declared (any text,
or none); an ``INTEGER PRIMARY KEY`` (the rowid) is auto-increment. SQLite names no foreign key: each is
called ``fk_<table>_<n>``; one that names no columns of its parent references the parent's primary key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from wormhole.database.facet import DatabaseSource
from wormhole.database.model import ColumnDef, TableRef
from wormhole.errors import SplitError
from wormhole.plugins.sql.tables import ForeignKeyPart, KeyPart, SqlCatalog, action
from wormhole.plugins.sqlite.connection import PLUGIN_NAME, connect_readonly
from wormhole.plugins.sqlite.dialect import SQLITE
from wormhole.plugins.sqlite.options import MAIN

DEFAULT_ACTIONS = ("NO ACTION",)


class SqliteCatalog(SqlCatalog):
    plugin = PLUGIN_NAME
    db_error = sqlite3.Error

    def schemas(self) -> list[str]:
        return [MAIN]

    def tables(self, schemas: Sequence[str]) -> list[tuple[str, str, Any, str | None]]:
        names = [str(n) for (n,) in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")]
        return [(MAIN, name, self.conn.execute(f"SELECT count(*) FROM {SQLITE.quote(name)}").fetchone()[0], None)
                for name in names]

    def find(self, ref: TableRef) -> tuple[Any, str | None] | None:
        if ref.schema != MAIN:
            return None
        row = self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?",
                                (ref.name,)).fetchone()
        return None if row is None else (None, None)

    def columns(self, ref: TableRef, handle: Any) -> list[ColumnDef]:
        rows = self.conn.execute('SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid',
                                 (ref.name,)).fetchall()
        rowid = [r for r in rows if r[4]]
        # The one column of the key, declared INTEGER, is the rowid: SQLite numbers the rows it inserts by it.
        alias = rowid[0][0] if len(rowid) == 1 and str(rowid[0][1]).upper() == "INTEGER" else None
        return [ColumnDef(str(name), str(declared or ""), not notnull, default, None, name == alias)
                for name, declared, notnull, default, _ in rows]

    def key_parts(self, ref: TableRef, handle: Any) -> list[KeyPart]:
        parts = [KeyPart("PRIMARY", name, True, True) for name in self._key(ref.name)]
        for index, unique, origin, partial in self.conn.execute(
                'SELECT name, "unique", origin, partial FROM pragma_index_list(?) ORDER BY name', (ref.name,)):
            if origin == "pk":
                continue  # the primary key, listed above from the columns (a rowid key has no index)
            skip = "a partial index" if partial else None
            for _, column in self.conn.execute("SELECT seqno, name FROM pragma_index_info(?) ORDER BY seqno",
                                               (index,)):
                parts.append(KeyPart(str(index), column, False, bool(unique), skip))
        return parts

    def _key(self, table: str) -> list[str]:
        """The primary key's columns of ``table``, in key order."""
        return [str(name) for (name,) in self.conn.execute(
            "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", (table,))]

    def foreign_key_parts(self, ref: TableRef, handle: Any) -> list[ForeignKeyPart]:
        rows = self.conn.execute('SELECT id, seq, "table", "from", "to", on_update, on_delete '
                                 "FROM pragma_foreign_key_list(?) ORDER BY id, seq", (ref.name,)).fetchall()
        parts = []
        for number, seq, parent, column, ref_column, update, delete in rows:
            if ref_column is None:  # REFERENCES parent, without columns: its primary key, in order
                keyed = self._key(parent)
                ref_column = keyed[seq] if seq < len(keyed) else column
            parts.append(ForeignKeyPart(f"fk_{ref.name}_{number}", str(column), TableRef(MAIN, str(parent)),
                                        str(ref_column), action(delete, DEFAULT_ACTIONS),
                                        action(update, DEFAULT_ACTIONS)))
        return parts


def open_catalog(options: DatabaseSource) -> SqliteCatalog:
    """The catalog of the source's file (read-only); SplitError when it cannot be opened."""
    path = options.params.path
    return SqliteCatalog(connect_readonly(path, SplitError), path)

"""Opening SQLite databases and asking them about their tables."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from wormhole.errors import StorageError

PLUGIN_NAME = "sqlite"

def connect_readonly(path: str, error: type[StorageError]) -> sqlite3.Connection:
    """A read-only connection: the source is never written, and a missing file is an error."""
    abspath = os.path.abspath(path)
    if not os.path.isfile(abspath):
        raise error(f"sqlite database {abspath} does not exist", plugin=PLUGIN_NAME)
    try:
        return sqlite3.connect(Path(abspath).as_uri() + "?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise error(f"cannot open sqlite database {abspath}: {exc}", plugin=PLUGIN_NAME) from exc


def table_columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """``(name, declared type)`` of each column of ``table``; empty when there is no such table."""
    return [(str(name), str(decl or "")) for name, decl in
            conn.execute("SELECT name, type FROM pragma_table_info(?) ORDER BY cid", (table,))]

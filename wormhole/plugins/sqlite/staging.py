"""The sqlite sink's staging table and its ``_wh_splits`` markers: names, DDL, resume and leftovers.

A destination stages its rows in ``_wh_stage_<task database id>_<task>_<state run>_<destination>`` (the
written columns plus ``_wh_split``) and records each durable split as one row of ``_wh_splits``, keyed
by the task database id too: task ids are only unique within one task database. These helpers run
inside the caller's transaction on the caller's connection; the periphery in ``writer.py`` decides
when to begin and commit. Apart from the writer because a resumed or fresh run reads and cleans these
tables without writing a row.
"""

from __future__ import annotations

import os
import re
import sqlite3

from wormhole.plugins.sql import quote
from wormhole.plugins.sqlite.connection import table_columns
from wormhole.plugins.sqlite.dialect import SQLITE

MARKERS = SQLITE.markers_table

COMMITTED = ""
"""The ``split_id`` of the row the final commit inserts: the destination's load is in the target. The
split markers stay with it until ``release`` (the task's outcome recorded), so a crash in between is
resumed without loading the rows again."""

SPLIT_COLUMN = "_wh_split"
STAGE_PREFIX = "_wh_stage_"

MarkerKey = tuple[str, int, int, str]
"""``(taskdb, task_id, state_run, destination)``: whose markers a row of ``_wh_splits`` is."""

Owner = tuple[str, int]
"""``(task database id, task id)``: whose leftovers are looked for."""

_OF_KEY = "taskdb = ? AND task_id = ? AND state_run = ? AND destination = ?"


def stage_name(key: MarkerKey) -> str:
    taskdb, task_id, state_run, destination = key
    return f"{_stage_prefix((taskdb, task_id))}{state_run}_{re.sub(r'[^0-9A-Za-z_]', '_', destination)}"


def _stage_prefix(owner: Owner) -> str:
    # Task database ids start with a letter, so no task id of a database without one reads as one.
    return f"{STAGE_PREFIX}{owner[0]}_{owner[1]}_" if owner[0] else f"{STAGE_PREFIX}{owner[1]}_"


def ensure_markers(conn: sqlite3.Connection) -> None:
    """Create ``_wh_splits``, or upgrade one made before task database ids (its rows keep ``''``)."""
    if has_table(conn, MARKERS) and "taskdb" not in {c for c, _ in table_columns(conn, MARKERS)}:
        conn.execute(f"ALTER TABLE {MARKERS} RENAME TO {MARKERS}_old")
        conn.execute(SQLITE.markers_ddl)
        conn.execute(f"INSERT INTO {MARKERS} (task_id, state_run, destination, split_id, rows) "
                     f"SELECT task_id, state_run, destination, split_id, rows FROM {MARKERS}_old")
        conn.execute(f"DROP TABLE {MARKERS}_old")
    conn.execute(SQLITE.markers_ddl)


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def drop_markers_if_empty(conn: sqlite3.Connection) -> None:
    if has_table(conn, MARKERS) and conn.execute(f"SELECT 1 FROM {MARKERS} LIMIT 1").fetchone() is None:
        conn.execute(f"DROP TABLE {MARKERS}")


def unique_keys(conn: sqlite3.Connection, table: str, columns: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The target's primary key and unique indexes that cover only written columns (as written)."""
    written = {c.lower(): c for c in columns}
    keys: list[tuple[str, ...]] = []
    pk = [name for _, name in sorted(
        (pos, name) for name, pos in conn.execute(
            "SELECT name, pk FROM pragma_table_info(?) WHERE pk > 0", (table,)))]
    if pk:
        keys.append(tuple(pk))
    for (index,) in conn.execute("SELECT name FROM pragma_index_list(?) WHERE \"unique\"",
                                 (table,)).fetchall():
        cols = [name for (name,) in conn.execute(
            "SELECT name FROM pragma_index_info(?) ORDER BY seqno", (index,))]
        if cols and None not in cols:
            keys.append(tuple(cols))
    unique = []
    for key in keys:
        if all(k.lower() in written for k in key):
            mapped = tuple(written[k.lower()] for k in key)
            if mapped not in unique:
                unique.append(mapped)
    return unique


def forget_run(conn: sqlite3.Connection, stage: str, key: MarkerKey) -> None:
    """An earlier attempt of this very run (a prepare retried): it starts again from nothing."""
    conn.execute(f"DROP TABLE IF EXISTS {quote(stage)}")
    if has_table(conn, MARKERS):
        conn.execute(f"DELETE FROM {MARKERS} WHERE {_OF_KEY}", key)


def resume_stage(conn: sqlite3.Connection, stage: str, key: MarkerKey) -> dict[str, int]:
    """The durable splits of a crashed run's staging table, ``{split id: rows}``; its other rows go."""
    # Rows of splits without a marker were committed along with another split's end.
    conn.execute(f"DELETE FROM {quote(stage)} WHERE {quote(SPLIT_COLUMN)} IS NULL OR "
                 f"{quote(SPLIT_COLUMN)} NOT IN (SELECT split_id FROM {MARKERS} WHERE {_OF_KEY})", key)
    return markers_of(conn, key)


def markers_of(conn: sqlite3.Connection, key: MarkerKey) -> dict[str, int]:
    """The split markers of ``key``, ``{split id: rows}`` (not the committed row)."""
    return {str(split): int(rows) for split, rows in conn.execute(
        f"SELECT split_id, rows FROM {MARKERS} WHERE {_OF_KEY} AND split_id <> ?", (*key, COMMITTED))}


def committed(conn: sqlite3.Connection, key: MarkerKey) -> bool:
    """The load of ``key`` was committed into the target (its outcome not recorded yet)."""
    return has_table(conn, MARKERS) and conn.execute(
        f"SELECT 1 FROM {MARKERS} WHERE {_OF_KEY} AND split_id = ?", (*key, COMMITTED)).fetchone() is not None


def mark_committed(conn: sqlite3.Connection, stage: str, key: MarkerKey, rows: int) -> None:
    """Inside the commit's transaction: the staging table goes, the markers stay, the committed row is added."""
    conn.execute(f"DROP TABLE IF EXISTS {quote(stage)}")
    conn.execute(SQLITE.marker_sql, (*key, COMMITTED, rows))


def has_markers(conn: sqlite3.Connection, key: MarkerKey) -> bool:
    return has_table(conn, MARKERS) and conn.execute(
        f"SELECT 1 FROM {MARKERS} WHERE {_OF_KEY} LIMIT 1", key).fetchone() is not None


def drop_stage(conn: sqlite3.Connection, stage: str, key: MarkerKey) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {quote(stage)}")
    if has_table(conn, MARKERS):
        conn.execute(f"DELETE FROM {MARKERS} WHERE {_OF_KEY}", key)
    drop_markers_if_empty(conn)


def find_leftovers(conn: sqlite3.Connection, path: str, owner: Owner,
                   keep_run: int | None) -> list[tuple[str, str | None, int]]:
    """``(description, staging table or None for marker rows, run)`` of the task's other runs."""
    found: list[tuple[str, str | None, int]] = []
    pattern = re.compile(rf"{re.escape(_stage_prefix(owner))}([0-9]+)_.*")
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        m = pattern.fullmatch(name)
        if m is None or int(m.group(1)) == keep_run:
            continue
        # The marker of a staging table is its split column: a user's table merely named alike has none.
        if SPLIT_COLUMN not in {c for c, _ in table_columns(conn, name)}:
            continue
        found.append((f"table {name} in {path} (staging of run {m.group(1)})", name, int(m.group(1))))
    if has_table(conn, MARKERS) and "taskdb" in {c for c, _ in table_columns(conn, MARKERS)}:
        for run, count in conn.execute(f"SELECT state_run, COUNT(*) FROM {MARKERS} WHERE taskdb = ? AND task_id = ? "
                                       f"GROUP BY state_run ORDER BY state_run", owner):
            if run != keep_run:
                found.append((f"{count} split marker(s) of run {run} in {path} ({MARKERS})", None, int(run)))
    return found


def clean(conn: sqlite3.Connection, path: str, owner: Owner, keep_run: int | None) -> list[str]:
    """Drop the leftovers inside the caller's transaction."""
    found = find_leftovers(conn, path, owner, keep_run)
    for _, table, run in found:
        if table is not None:
            conn.execute(f"DROP TABLE {quote(table)}")
        else:
            conn.execute(f"DELETE FROM {MARKERS} WHERE taskdb = ? AND task_id = ? AND state_run = ?", (*owner, run))
    drop_markers_if_empty(conn)
    return [description for description, _, _ in found]


def file_leftovers(path: str, owner: Owner, keep_run: int | None) -> list[str]:
    """The leftovers in the file at ``path`` (none when there is no file), read on a connection of its own."""
    if not os.path.isfile(path):
        return []
    conn = sqlite3.connect(path, timeout=30)
    try:
        return [d for d, _, _ in find_leftovers(conn, path, owner, keep_run)]
    finally:
        conn.close()


def clean_file(path: str, owner: Owner, keep_run: int | None) -> list[str]:
    """Drop the leftovers in the file at ``path`` in a transaction of their own; what went."""
    if not os.path.isfile(path):
        return []
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            removed = clean(conn, path, owner, keep_run)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return removed
    finally:
        conn.close()

"""A sqlite table the user made may declare a column whose affinity changes a value SQLite stores: a wide
decimal into NUMERIC becomes a REAL, a real into TEXT its 15-digit text, a large integer into REAL a double,
the string '007' into INTEGER the number 7. Such a row is rejected with a reason naming the column and what
SQLite would have stored; values that read back equal are written (a decimal 1.50 as the REAL 1.5)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.spark_helpers import run_task
from wormhole.config import EngineConf, PathsConf

WIDE = "123456789012345678901234567890.123456789012"
ROWS = [
    # id, a decimal, a real, an integer, a string: each value survives its target's affinity
    (1, "1.50", 0.5, 5, "7"),
    (2, WIDE, 0.5, 5, "7"),
    (3, "2.25", 0.30000000000000004, 5, "7"),
    (4, "2.25", 0.5, 2**53 + 1, "7"),
    (5, "2.25", 0.5, 5, "007"),
    (6, None, None, None, None),
]


def _db(path: Path, create: str, rows: list[tuple[object, ...]] | None = None) -> None:
    conn = sqlite3.connect(path)
    conn.execute(create)
    if rows:
        conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()


def test_a_value_the_target_columns_affinity_would_change_rejects_its_row_naming_the_column(
        tmp_path: Path) -> None:
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    # "DECIMAL TEXT": a decimal (logical type) kept as its text (TEXT affinity) in the source
    _db(src, "CREATE TABLE t (id INTEGER PRIMARY KEY, n \"DECIMAL TEXT\", f REAL, i INTEGER, s TEXT)", ROWS)
    _db(dst, "CREATE TABLE t (id INTEGER PRIMARY KEY, n NUMERIC(30, 10), f VARCHAR(40), i DOUBLE, s BIGINT)")
    result, _ = run_task(EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty"))), {
        "source": {"plugin": "sqlite", "params": {"path": str(src), "table": "t"}},
        "destinations": [{"id": "lite", "plugin": "sqlite", "params": {"path": str(dst), "table": "t"}}],
        "settings": {"error_limit": {"record": 10}}})
    assert result.exit_code == 201, result.result  # partial: rows rejected within the limit
    assert result.result["destinations"]["lite"]["rows_rejected"] == 4

    conn = sqlite3.connect(dst)
    stored = conn.execute("SELECT id, n, typeof(n), f, typeof(f), i, typeof(i), s, typeof(s) FROM t ORDER BY id")
    assert stored.fetchall() == [(1, 1.5, "real", "0.5", "text", 5.0, "real", 7, "integer"),
                                 (6, None, "null", None, "null", None, "null", None, "null")]
    conn.close()

    dirty = [json.loads(line) for path in (tmp_path / "dirty").rglob("*.jsonl") for line in path.open()]
    reasons = {row["row"][0]: row["reason"] for row in dirty}
    assert set(reasons) == {2, 3, 4, 5}
    assert reasons[2].startswith(f"column n: '{WIDE}' would be stored by SQLite as the real 1.2345678901234568e+29 "
                                 "under the column's NUMERIC affinity (declared 'NUMERIC(30, 10)')")
    assert reasons[3].startswith("column f: 0.30000000000000004 would be stored by SQLite as the text '0.3' "
                                 "under the column's TEXT affinity")
    assert reasons[4].startswith("column i: 9007199254740993 would be stored by SQLite as the real "
                                 "9007199254740992.0 under the column's REAL affinity")
    assert reasons[5].startswith("column s: '007' would be stored by SQLite as the integer 7 "
                                 "under the column's INTEGER affinity")


def test_a_table_this_store_creates_keeps_every_such_value(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.sqlite", tmp_path / "dst.sqlite"
    _db(src, "CREATE TABLE t (id INTEGER PRIMARY KEY, n \"DECIMAL TEXT\", f REAL, i INTEGER, s TEXT)", ROWS)
    result, _ = run_task(EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty"))), {
        "source": {"plugin": "sqlite", "params": {"path": str(src), "table": "t"}},
        "destinations": [{"id": "lite", "plugin": "sqlite", "params": {"path": str(dst), "table": "t"}}]})
    assert result.exit_code == 0, result.result
    conn = sqlite3.connect(dst)
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == ROWS
    conn.close()

"""Every store as a source of the transforms' test rows, and the three transformed destinations on the
mysql, csv and parquet stores, read back as typed tuples to compare with the independently computed
expected output (:mod:`tests.transform_helpers`)."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.mysql_helpers import Databases, Server, create_table, execute, insert_rows
from tests.transform_helpers import (
    EVEN_TRANSFORMS,
    HASH_TRANSFORMS,
    after_task,
    expected_all,
    expected_even,
    expected_hashes,
)

NAMES = ("id", "name", "amount", "status", "grp")
TYPES = ("int", "string", "float", "string", "int")
SOURCE_STORES = ("sqlite", "mysql", "jsonl", "csv", "parquet")


def make_source(store: str, rows: list[tuple[Any, ...]], root: Path, dbs: Databases) -> dict[str, Any]:
    """``rows`` in a ``store`` source, written with the store's own client library (not wormhole)."""
    if store == "sqlite":
        conn = sqlite3.connect(root / "src.db")
        conn.execute("CREATE TABLE src (id INTEGER PRIMARY KEY, name TEXT, amount REAL, status TEXT, grp INTEGER)")
        conn.executemany("INSERT INTO src VALUES (?, ?, ?, ?, ?)", rows)
        conn.commit()
        conn.close()
        return {"plugin": "sqlite", "params": {"path": str(root / "src.db"), "table": "src"}}
    if store == "mysql":
        db = dbs.create("tsrc")
        admin = dbs.server.connect()
        create_table(admin, db, "src", "id BIGINT PRIMARY KEY, name VARCHAR(40), amount DOUBLE, status VARCHAR(8), "
                                       "grp INT")
        insert_rows(admin, db, "src", NAMES, rows)
        admin.close()
        return {"plugin": "mysql", "params": dbs.server.params(db, table="src", split_pk="id")}
    path = root / "src" / f"part-0.{store}"
    path.parent.mkdir(parents=True)
    if store == "jsonl":
        path.write_text("".join(json.dumps(dict(zip(NAMES, r, strict=True))) + "\n" for r in rows))
        return {"plugin": "file", "params": {"path": str(path.parent), "format": "jsonl"}}
    if store == "csv":
        with path.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(NAMES)
            out.writerows(["" if v is None else v for v in r] for r in rows)
        # Written as other tools do, NULL an empty field: say so (wormhole's own default is \\N).
        return {"plugin": "file", "params": {"path": str(path.parent), "format": "csv", "null": "", "columns": [
            {"name": n, "type": t} for n, t in zip(NAMES, TYPES, strict=True)]}}
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()),
                        ("status", pa.string()), ("grp", pa.int64())])
    pq.write_table(pa.Table.from_pylist([dict(zip(NAMES, r, strict=True)) for r in rows], schema), path)
    return {"plugin": "file", "params": {"path": str(path.parent), "format": "parquet"}}


def store_destinations(root: Path, server: Server, db: str) -> list[dict[str, Any]]:
    """all (task transforms only) -> mysql; even -> csv; hashes -> parquet (each with its own transforms)."""
    admin = server.connect()
    create_table(admin, db, "all_rows", "id BIGINT PRIMARY KEY, name VARCHAR(40), amount DOUBLE, grp INT, "
                                        "amount2 DOUBLE")
    admin.close()
    return [{"id": "all", "plugin": "mysql", "params": server.params(db, table="all_rows")},
            {"id": "even", "plugin": "file", "params": {"path": str(root / "even"), "format": "csv"},
             "transforms": EVEN_TRANSFORMS},
            {"id": "hashes", "plugin": "file", "params": {"path": str(root / "hashes"), "format": "parquet"},
             "transforms": HASH_TRANSFORMS}]


def _csv_rows(directory: Path) -> list[tuple[Any, ...]]:
    out = []
    for part in sorted(directory.glob("*.csv")):
        with part.open(newline="") as f:
            lines = list(csv.reader(f))
        assert lines[0] == ["id", "who", "amount", "grp", "amount2"], lines[0]
        out += [(int(i), who, float(a), int(g), float(a2)) for i, who, a, g, a2 in lines[1:]]
    return sorted(out)


def check_store_destinations(rows: list[tuple[Any, ...]], root: Path, server: Server, db: str) -> None:
    conn = server.connect()
    try:
        got_all = sorted(execute(conn, f"SELECT id, name, amount, grp, amount2 FROM `{db}`.all_rows"))
    finally:
        conn.close()
    assert got_all == sorted(expected_all(rows))
    assert _csv_rows(root / "even") == sorted(expected_even(rows))
    table = pq.read_table(str(root / "hashes"))
    assert table.column_names == ["id", "name", "grp"]
    assert str(table.schema.field("grp").type) == "string"
    assert sorted(tuple(r.values()) for r in table.to_pylist()) == sorted(expected_hashes(rows))


def expected_filtered(rows: list[tuple[Any, ...]]) -> dict[str, int]:
    """Rows each destination's own filters drop (the rows after the task's transforms, less its output)."""
    offered = len(after_task(rows))
    return {"all": 0, "even": offered - len(expected_even(rows)), "hashes": offered - len(expected_hashes(rows))}

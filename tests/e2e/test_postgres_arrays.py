"""PostgreSQL arrays end to end, through the CLI on the real servers: copied PostgreSQL -> PostgreSQL exactly,
undecoded (binary rows, lower bounds included) and decoded (a fan-out to other stores makes every destination
get values: an array travels as its JSON array and a postgres array column reads it back as an array literal),
into an existing table and one ``create_table`` makes with the source's array types; the other stores get the
JSON array. Every destination is read back with the stores' own drivers (psycopg, pymysql, sqlite3, pyarrow).
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import log_events, make_workspace, run_task
from tests.e2e.test_postgres_e2e import mysql_dbs
from tests.mysql_helpers import Databases, Server, create_table, execute
from tests.pg_helpers import Schemas, from_src, pg_execute, pg_schemas, pg_store, qi

__all__ = ["mysql_dbs", "pg_schemas"]  # the fixtures, used by name

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

DDL = "id bigint PRIMARY KEY, t text[], i integer[], n numeric[], nq numeric(12,3)[], v varchar(5)[], m text[]"
COLUMNS = ("t", "i", "n", "nq", "v", "m")
# Row 1 holds the characters an array literal quotes or escapes; 2 and 3 two dimensions; 4 empty arrays, 5 NULL
# arrays; 6 lower bounds other than 1, which only the undecoded path keeps (to_json has no place for them).
INSERT = r"""
INSERT INTO {t} VALUES
(1, ARRAY['plain', 'a"b', E'back\\slash', '{{brace}}', 'com,ma', ' sp ', 'NULL', '', NULL, E'tab\tnl\n', 'é😀'],
    '{{1,NULL,-2147483648}}', '{{1.50,NULL,12345678901234567890.123456789,NaN,-0.000000000000000000001}}',
    '{{1.500,NULL}}', '{{ab,NULL}}', ARRAY[['a', 'b c'], [NULL, E'd\\e']]),
(2, '{{x}}', '{{{{1,2}},{{3,NULL}}}}', '{{{{1.0,2}},{{NULL,3.14}}}}', '{{{{-0.5}}}}', '{{{{q}}}}',
    ARRAY[['{{', '}}'], [',', '"']]),
(3, '{{NULL}}', '{{NULL}}', '{{NULL}}', '{{NULL}}', '{{NULL}}', '{{{{NULL}}}}'),
(4, '{{}}', '{{}}', '{{}}', '{{}}', '{{}}', '{{}}'),
(5, NULL, NULL, NULL, NULL, NULL, NULL),
(6, NULL, '[0:1]={{7,8}}', NULL, NULL, NULL, '[2:2][0:1]={{{{x,y}}}}')"""


def make_source(pg: Any, schema: str) -> str:
    name = f"{qi(schema)}.src"
    pg.execute(f"CREATE TABLE {name} ({DDL})")
    pg.execute(INSERT.format(t=name))
    return name


def row_texts(pg: Any, name: str, where: str = "TRUE") -> list[str]:
    """Every row as PostgreSQL's text of it, in key order: equal only if every value is the same."""
    return [r[0] for r in pg_execute(pg, f"SELECT t::text FROM {name} t WHERE {where} ORDER BY id")]


def declared(pg: Any, schema: str, table: str) -> list[str]:
    return [r[0] for r in pg_execute(pg, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                                         "to_regclass(%s) AND attnum > 0 ORDER BY attnum", (f"{qi(schema)}.{table}",))]


def test_arrays_are_copied_undecoded_exactly_into_an_existing_table_and_a_created_one(
        tmp_path: Path, pg_schemas: Schemas) -> None:
    pg = pg_schemas.conn
    schema = pg_schemas.create("arr")
    src = make_source(pg, schema)
    pg.execute(f"CREATE TABLE {qi(schema)}.dst ({DDL})")
    pg.execute(f"CREATE TABLE {qi(schema)}.checked ({DDL}, CHECK (cardinality(t) < 5))")
    server = pg_schemas.server
    ws = make_workspace(tmp_path)
    spec = from_src(server, schema, [
        {"id": "dst", **pg_store(server, schema, "dst", load="staging")},
        {"id": "made", **pg_store(server, schema, "made", create_table=True)},
        {"id": "checked", **pg_store(server, schema, "checked")},
    ], settings={"error_limit": {"record": 1}})
    code, task, stderr = run_task(ws, spec)
    assert code == 201, (task.get("error"), stderr[-3000:])  # success with a rejected row
    (chosen,) = [e for e in log_events(stderr) if e["event"] == "engine.rows_encoded"]
    assert sorted(chosen["destinations"]) == ["checked", "dst", "made"]
    assert declared(pg, schema, "made") == declared(pg, schema, "src")  # the same array types, typmods kept
    want = row_texts(pg, src)
    assert row_texts(pg, f"{qi(schema)}.dst") == want
    assert row_texts(pg, f"{qi(schema)}.made") == want
    assert row_texts(pg, f"{qi(schema)}.checked") == want[1:]
    assert pg_execute(pg, f"SELECT i::text, m::text FROM {qi(schema)}.made WHERE id = 6") == [
        ("[0:1]={7,8}", "[2:2][0:1]={{x,y}}")]
    # The refused row's values, decoded for the dirty-record file: its arrays as lists.
    (dirty,) = [json.loads(line) for line in (ws.root / task["result"]["dirty_file"]).open(encoding="utf-8")]
    assert dirty["origin"] == "checked" and "23514" in dirty["reason"]
    assert dirty["row"][:3] == [1, ["plain", 'a"b', "back\\slash", "{brace}", "com,ma", " sp ", "NULL", "", None,
                                    "tab\tnl\n", "é😀"], [1, None, -2147483648]]
    assert dirty["row"][3][:3] == ["1.50", None, "12345678901234567890.123456789"]


def test_arrays_are_copied_decoded_exactly_to_postgres_and_as_json_arrays_to_other_stores(
        tmp_path: Path, pg_schemas: Schemas, mysql_dbs: tuple[Server, Databases]) -> None:
    pg = pg_schemas.conn
    schema = pg_schemas.create("arrd")
    src = make_source(pg, schema)
    pg.execute(f"CREATE TABLE {qi(schema)}.dst ({DDL})")
    mysql, dbs = mysql_dbs
    db = dbs.create("arr")
    my = mysql.connect()
    create_table(my, db, "dst", "id INT PRIMARY KEY, " + ", ".join(f"{c} JSON NULL" for c in COLUMNS))
    server = pg_schemas.server
    out = tmp_path / "out"
    spec = from_src(server, schema, [
        {"id": "dst", **pg_store(server, schema, "dst", write_mode="upsert")},
        {"id": "made", **pg_store(server, schema, "made", create_table=True)},
        {"id": "my", "plugin": "mysql", "params": mysql.params(db, table="dst")},
        {"id": "lite", "plugin": "sqlite", "params": {"path": str(out / "t.db"), "table": "t"}},
        *({"id": f, "plugin": "file", "params": {"path": str(out / f), "format": f}}
          for f in ("jsonl", "csv", "parquet")),
    ])
    code, task, stderr = run_task(make_workspace(tmp_path), spec)
    assert code == 0, (task.get("error"), stderr[-3000:])
    assert not [e for e in log_events(stderr) if e["event"] == "engine.rows_encoded"]

    want = row_texts(pg, src, "id <> 6")
    for table in ("dst", "made"):
        assert row_texts(pg, f"{qi(schema)}.{table}", "id <> 6") == want, table
        assert pg_execute(pg, f"SELECT i::text, m::text FROM {qi(schema)}.{table} WHERE id = 6") == [
            ("{7,8}", "{{x,y}}")]  # the JSON array has no lower bounds
    assert declared(pg, schema, "made") == declared(pg, schema, "src")

    # Elsewhere: the JSON array PostgreSQL's to_json makes of it, strings and ints exact.
    arrays = ", ".join(f"to_json({c})::text" for c in COLUMNS)
    expected = {r[0]: tuple(None if v is None else _parsed(v) for v in r[1:])
                for r in pg_execute(pg, f"SELECT id, {arrays} FROM {src}")}
    lines = [json.loads(line) for part in sorted((out / "jsonl").glob("part-*")) for line in part.open()]
    with sqlite3.connect(out / "t.db") as lite:
        got = {
            "my": execute(my, f"SELECT id, {', '.join(COLUMNS)} FROM `{db}`.dst"),
            "lite": lite.execute(f"SELECT id, {', '.join(COLUMNS)} FROM t").fetchall(),
            "jsonl": [tuple(obj[c] for c in ("id", *COLUMNS)) for obj in lines],
            "csv": [tuple(row) for part in sorted((out / "csv").glob("part-*"))
                    for row in list(csv.reader(part.open(newline="")))[1:]],
            "parquet": [tuple(r.values()) for part in sorted((out / "parquet").glob("part-*"))
                        for r in pq.read_table(part).to_pylist()],
        }
    my.close()
    for store, rows in got.items():
        found = {int(r[0]): tuple(_as_json(v) for v in r[1:]) for r in rows}
        assert found == expected, store


def _parsed(text: str) -> Any:
    """JSON with its numbers as doubles: the stores' JSON text keeps them exactly as JSON numbers do."""
    return json.loads(text, parse_float=float)


def _as_json(value: Any) -> Any:
    if value is None or value == "\\N":  # csv: NULL is \N
        return None
    return json.loads(value) if isinstance(value, str) else value

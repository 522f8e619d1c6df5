"""PostgreSQL to PostgreSQL without decoding, end to end through the CLI on the real server.

When every destination is a postgres table declaring the source's column types, the source's binary COPY rows are
loaded as they are (``engine.rows_encoded``). These tests hold that path to what users rely on everywhere else:
every value lands bit for bit (the row's text in PostgreSQL compared, source against target), upsert and staging
loads work on it, a row the target refuses is rejected with PostgreSQL's reason and its values while the rest
load, a destination whose session dies fails alone, a source session killed mid-COPY has its split read again,
and a destination that declares other types gets values. (A SIGKILL then a takeover: tests/e2e/test_postgres_e2e.py,
"postgres_alone".)
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import log_events, make_workspace, run_task, wormhole_command
from tests.e2e.test_postgres_e2e import start_crashing, terminate_paused_writer
from tests.pg_helpers import Schemas, from_src, pg_execute, pg_schemas, pg_store, pg_tables, qi

__all__ = ["pg_schemas"]  # the fixture, used by name

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

ROWS = 2000
DDL = ("id bigint PRIMARY KEY, i2 smallint, i4 integer, q {schema}.qty, f double precision, n numeric(12,3), "
       "nf numeric, b boolean, d date, ts timestamp(6), t text, v varchar(40), c char(5), by bytea, j jsonb, js json, "
       "u uuid")
# Row g's values; rows 1-9 hold the values no other path keeps as they are (NaN, -0, infinities, BC dates,
# numerics of 40 digits, json's own spacing and repeated keys), one in each column, NULLs every 97th row.
INSERT = """
INSERT INTO {t} SELECT g, (g % 30000)::smallint, g * 1000, g % 50,
  CASE g WHEN 1 THEN 'NaN'::float8 WHEN 2 THEN '-0'::float8 WHEN 3 THEN '-Infinity'::float8
         WHEN 4 THEN 4.9e-324 ELSE g / 7.0 END,
  CASE g WHEN 1 THEN 'NaN'::numeric ELSE g / 8.0 END,
  CASE g WHEN 2 THEN 1234567890123456789012345678901234567890.0123456789
         WHEN 3 THEN 1e-40 ELSE g END,
  g % 3 = 0,
  CASE g WHEN 1 THEN 'infinity'::date WHEN 2 THEN '-infinity'::date WHEN 3 THEN '4713-01-01 BC'::date
         WHEN 4 THEN '20000-02-29'::date ELSE date '2020-01-01' + g END,
  CASE g WHEN 5 THEN 'infinity'::timestamp WHEN 6 THEN '0044-03-15 12:00:00 BC'::timestamp
         ELSE timestamp '2024-02-29 23:59:59.999999' + g * interval '1 second' END,
  CASE g WHEN 7 THEN E'tab\\there\\nnew\\\\back \\u00e9 \\U0001F600' WHEN 8 THEN '' ELSE 'r' || g END,
  'v' || g, CASE g WHEN 9 THEN 'ab' ELSE 'c' END, decode(lpad(to_hex(g), 8, '0'), 'hex') || '\\x00ff'::bytea,
  jsonb_build_object('g', g, 'l', jsonb_build_array(g, 'x', null)),
  CASE g WHEN 9 THEN '{{"a": 1,   "a" : [2]}}'::json ELSE json_build_object('g', g) END,
  md5(g::text)::uuid
FROM generate_series(1, {rows}) g"""


def make(pg: Any, schema: str, table: str, rows: int = 0) -> str:
    name = f"{qi(schema)}.{qi(table)}"
    pg.execute(f"CREATE TABLE {name} ({DDL.format(schema=qi(schema))})")
    if rows:
        pg.execute(INSERT.format(t=name, rows=rows))
        pg.execute(f"UPDATE {name} SET i2 = NULL, f = NULL, n = NULL, d = NULL, t = NULL, by = NULL, j = NULL "
                   "WHERE id % 97 = 0")
    return name


def id_v_table(pg: Any, schema: str, table: str, rows: int = 0) -> None:
    """``table`` of ``schema`` (id bigint PRIMARY KEY, v text NOT NULL) holding ids 1..rows, v ``'v<id>'``."""
    pg.execute(f"CREATE TABLE {qi(schema)}.{table} (id bigint PRIMARY KEY, v text NOT NULL)")
    pg.execute(f"INSERT INTO {qi(schema)}.{table} SELECT g, 'v' || g FROM generate_series(1, %s) g", (rows,))


def row_texts(pg: Any, name: str, where: str = "TRUE") -> list[str]:
    """Every row as PostgreSQL's text of it, in key order: equal only if every value is the same."""
    return [r[0] for r in pg_execute(pg, f"SELECT t::text FROM {name} t WHERE {where} ORDER BY id")]


def schema_with_domain(pg_schemas: Schemas, label: str) -> str:
    schema = pg_schemas.create(label)
    pg_schemas.conn.execute(f"CREATE DOMAIN {qi(schema)}.qty AS integer CHECK (VALUE >= 0)")
    return schema


def test_every_value_lands_bit_for_bit_in_each_destination_loaded_undecoded(tmp_path: Path,
                                                                            pg_schemas: Schemas) -> None:
    pg = pg_schemas.conn
    schema = schema_with_domain(pg_schemas, "pt")
    src = make(pg, schema, "src", ROWS)
    staged = make(pg, schema, "staged")
    upserted = make(pg, schema, "upserted")
    pg.execute(f"INSERT INTO {upserted} (id, t) VALUES (1, 'replaced'), (-5, 'kept')")
    server = pg_schemas.server
    spec = from_src(server, schema, [
        {"id": "staged", **pg_store(server, schema, "staged", load="staging")},
        {"id": "upserted", **pg_store(server, schema, "upserted", write_mode="upsert", batch_size=300)},
    ], settings={"speed": {"channel": 2}})
    code, task, stderr = run_task(make_workspace(tmp_path), spec)
    assert code == 0, (task.get("error"), stderr[-3000:])
    events = log_events(stderr)
    (chosen,) = [e for e in events if e["event"] == "engine.rows_encoded"]
    assert chosen["format"] == "postgres.copy_binary" and sorted(chosen["destinations"]) == ["staged", "upserted"]
    # each destination's writers loaded the binary rows as they are (through write_encoded, not write)
    assert {e["destination"] for e in events if e["event"] == "writer.load_encoded"} == {"staged", "upserted"}
    result = task["result"]
    assert result["source"]["rows_read"] == ROWS and result["source"]["rows_rejected"] == 0
    want = row_texts(pg, src)
    assert row_texts(pg, staged) == want
    assert row_texts(pg, upserted, "id > 0") == want  # row 1 replaced
    assert pg_execute(pg, f"SELECT t FROM {upserted} WHERE id = -5") == [("kept",)]
    specials = pg_execute(pg, f"SELECT f::text, n::text, d::text, ts::text FROM {staged} WHERE id <= 6 ORDER BY id")
    assert specials[0][:3] == ("NaN", "NaN", "infinity") and specials[1][0] == "-0"
    assert specials[4][3] == "infinity" and specials[2][2] == "4713-01-01 BC"
    assert sorted(pg_tables(pg, schema)) == ["src", "staged", "upserted", "wormhole_splits"]


def test_under_a_speed_limit_the_binary_rows_are_cut_to_one_second_of_it_and_land_bit_for_bit(
        tmp_path: Path, pg_schemas: Schemas) -> None:
    """One split of 2,000 rows read as one batch of COPY rows (its reader cuts at 4 MiB), paced at 800 rows/s:
    the exchange cuts it into pieces of 800 rows that are still binary COPY rows, and every value lands."""
    pg = pg_schemas.conn
    schema = schema_with_domain(pg_schemas, "paced")
    src = make(pg, schema, "src", ROWS)
    dst = make(pg, schema, "dst")
    server = pg_schemas.server
    spec = {"source": pg_store(server, schema, "src"),
            "destinations": [{"id": "pg", **pg_store(server, schema, "dst")}],
            "settings": {"speed": {"record": 800, "channel_record": 800}}}
    code, task, stderr = run_task(make_workspace(tmp_path), spec)
    assert code == 0, (task.get("error"), stderr[-3000:])
    events = log_events(stderr)
    assert [e["format"] for e in events if e["event"] == "engine.rows_encoded"] == ["postgres.copy_binary"]
    speed = task["result"]["speed"]
    assert speed["rows"] == ROWS and speed["waited_s"] > 1.0  # 2,000 rows at 800 a second
    assert row_texts(pg, dst) == row_texts(pg, src)


def test_rows_the_target_refuses_are_rejected_with_their_values_and_the_rest_load(tmp_path: Path,
                                                                                 pg_schemas: Schemas) -> None:
    pg = pg_schemas.conn
    schema = schema_with_domain(pg_schemas, "rej")
    src = make(pg, schema, "src", 300)
    dst = make(pg, schema, "dst")
    pg.execute(f"INSERT INTO {dst} (id, t) VALUES (1, 'already'), (11, 'already'), (250, 'already')")
    server = pg_schemas.server
    ws = make_workspace(tmp_path)
    spec = from_src(server, schema, [{"id": "pg", **pg_store(server, schema, "dst", batch_size=7)}],
                    settings={"error_limit": {"record": 5}})  # batch_size: pieces cut the batch
    code, task, stderr = run_task(ws, spec)
    assert code == 201, (task.get("error"), stderr[-3000:])  # success with rejected rows
    assert any(e["event"] == "engine.rows_encoded" for e in log_events(stderr))
    result = task["result"]
    assert result["destinations"]["pg"]["rows_written"] == 297 and result["destinations"]["pg"]["rows_rejected"] == 3
    assert row_texts(pg, dst, "id NOT IN (1, 11, 250)") == row_texts(pg, src, "id NOT IN (1, 11, 250)")
    assert pg_execute(pg, f"SELECT id, t FROM {dst} WHERE id IN (1, 11, 250) ORDER BY id") == [
        (1, "already"), (11, "already"), (250, "already")]
    with (ws.root / result["dirty_file"]).open(encoding="utf-8") as f:
        dirty = sorted((json.loads(line) for line in f), key=lambda d: d["row"][0])
    assert [(d["origin"], d["row"][0], d["row"][10], d["row"][11]) for d in dirty] == [
        ("pg", 1, "r1", "v1"), ("pg", 11, "r11", "v11"), ("pg", 250, "r250", "v250")]
    # Values Python has no form for, by PostgreSQL's names: row 1 holds NaN and an infinity date.
    assert (dirty[0]["row"][5], dirty[0]["row"][8]) == ("NaN", "infinity")
    dirty = dirty[1:]
    # The other values as the reader gives them: the domain's int, numeric text, the JSON parsed, the uuid's text.
    assert dirty[0]["row"][3] == 11 % 50 and dirty[0]["row"][5] == "1.375" and dirty[0]["row"][14] == \
        {"g": 11, "l": [11, "x", None]} and dirty[0]["row"][16] == str(uuid.UUID(hashlib.md5(b"11").hexdigest()))
    assert all("23505" in d["reason"] and "duplicate key" in d["reason"] for d in dirty), dirty


def test_a_destination_declaring_other_types_gets_values_and_says_why(tmp_path: Path, pg_schemas: Schemas) -> None:
    pg = pg_schemas.conn
    schema = pg_schemas.create("other")
    pg.execute(f"CREATE TABLE {qi(schema)}.src (id bigint PRIMARY KEY, v varchar(40), n numeric(12,3))")
    pg.execute(f"INSERT INTO {qi(schema)}.src SELECT g, 'v' || g, g / 8.0 FROM generate_series(1, 500) g")
    pg.execute(f"CREATE TABLE {qi(schema)}.same (id bigint PRIMARY KEY, v varchar(40), n numeric(12,3))")
    pg.execute(f"CREATE TABLE {qi(schema)}.wider (id bigint PRIMARY KEY, v text, n numeric(14,3))")
    server = pg_schemas.server
    spec = from_src(server, schema, [{"id": "same", **pg_store(server, schema, "same")},
                                     {"id": "wider", **pg_store(server, schema, "wider")}])
    code, task, stderr = run_task(make_workspace(tmp_path), spec)
    assert code == 0, (task.get("error"), stderr[-3000:])
    events = log_events(stderr)
    assert not [e for e in events if e["event"] == "engine.rows_encoded"]
    (decoded,) = [e for e in events if e["event"] == "engine.rows_decoded"]
    assert decoded["destinations"] == ["wider"] and decoded["reason"] == "column types differ"
    for table in ("same", "wider"):
        assert pg_execute(pg, f"SELECT COUNT(*), SUM(id), SUM(n), MAX(v) FROM {qi(schema)}.{table}") == \
            pg_execute(pg, f"SELECT COUNT(*), SUM(id), SUM(n), MAX(v) FROM {qi(schema)}.src")


def test_a_destination_whose_session_dies_fails_alone_while_the_other_commits(tmp_path: Path,
                                                                             pg_schemas: Schemas) -> None:
    pg = pg_schemas.conn
    schema = pg_schemas.create("die")
    id_v_table(pg, schema, "src", 20000)
    for table in ("fail", "keep"):
        id_v_table(pg, schema, table)
        pg.execute(f"INSERT INTO {qi(schema)}.{table} VALUES (-1, 'before')")
    server = pg_schemas.server
    ws = make_workspace(tmp_path)
    spec = from_src(server, schema, [{"id": "pg", **pg_store(server, schema, "fail", load="staging", retries=0)},
                                     {"id": "keep", **pg_store(server, schema, "keep")}],
                    settings={"speed": {"channel": 2}})
    task_id = ws.submit(spec)
    first = start_crashing(ws, task_id, "before_seal:pg:2:stop")  # paused inside pg's 2nd split, its COPY done
    terminate_paused_writer(pg, schema, "fail", first, ws)
    err = (ws.root / "first.err").read_text()
    assert first.returncode == 202, err[-3000:]
    assert any(e["event"] == "engine.rows_encoded" for e in log_events(err))
    result = ws.show(task_id)["result"]
    assert result["destinations"]["pg"]["status"] == "failed" and result["destinations"]["keep"]["status"] == "success"
    assert pg_execute(pg, f"SELECT id, v FROM {qi(schema)}.fail") == [(-1, "before")]
    kept = pg_execute(pg, f"SELECT COUNT(*), SUM(id) FROM {qi(schema)}.keep WHERE id > 0")
    assert kept == [(20000, 20000 * 20001 // 2)]
    assert [t for t in pg_tables(pg, schema) if t not in ("src", "fail", "keep", "wormhole_splits")] == []


def test_a_source_session_killed_mid_copy_rereads_its_split_and_loads_each_row_once(tmp_path: Path,
                                                                                   pg_schemas: Schemas) -> None:
    pg = pg_schemas.conn
    schema = pg_schemas.create("srckill")
    id_v_table(pg, schema, "base", 5000)
    # A view whose rows come slowly (0.1 ms each), so a split's COPY is still running when it is killed.
    pg.execute(f"CREATE FUNCTION {qi(schema)}.slow(t text) RETURNS text LANGUAGE plpgsql STABLE AS "
               "$$ BEGIN PERFORM pg_sleep(0.0001); RETURN t; END $$")
    pg.execute(f"CREATE VIEW {qi(schema)}.src AS SELECT id, {qi(schema)}.slow(v) AS v FROM {qi(schema)}.base")
    pg.execute(f"CREATE TABLE {qi(schema)}.dst (id bigint NOT NULL, v text NOT NULL)")
    ws = make_workspace(tmp_path)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  recovery={"retry_wait_s": 0.2})
    spec = {
        "source": {"plugin": "postgres",
                   "params": pg_schemas.server.params(schema, table="src", split_pk="id", split_factor=2)},
        "destinations": [{"id": "pg", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="dst")}],
        "settings": {"speed": {"channel": 2}},
    }
    task_id = ws.submit(spec)
    run = subprocess.Popen([*wormhole_command(), "--task-id", str(task_id)], cwd=ws.root, env=ws.env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        killed: list[int] = []
        while not killed:
            assert run.poll() is None and time.monotonic() < deadline, "no COPY of the source was seen running"
            killed = [r[0] for r in pg_execute(
                pg, "SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity WHERE state = 'active' "
                    "AND query LIKE 'COPY (SELECT%%' AND query LIKE %s AND pid <> pg_backend_pid()",
                (f"%{schema}%",)) if r[0]]
            time.sleep(0.02)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err[-3000:]
    events = log_events(err)
    assert any(e["event"] == "engine.rows_encoded" for e in events)
    assert [e for e in events if e["event"] == "reader.split_failed"], "no split was read again"
    count, distinct, total = pg_execute(pg, f"SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM {qi(schema)}.dst")[0]
    assert (count, distinct, total) == (5000, 5000, 5000 * 5001 // 2)


@pytest.mark.parametrize("other", ["bigint", "integer"], ids=["same_types", "one_shard_differs"])
def test_a_sharded_source_goes_undecoded_only_when_every_shard_declares_the_same_types(
        tmp_path: Path, pg_schemas: Schemas, other: str) -> None:
    pg = pg_schemas.conn
    schema = pg_schemas.create("shards")
    for table, key in (("a", "bigint"), ("b", other)):
        pg.execute(f"CREATE TABLE {qi(schema)}.{table} (id {key} PRIMARY KEY, v varchar(20))")
    pg.execute(f"INSERT INTO {qi(schema)}.a SELECT g, 'a' || g FROM generate_series(1, 1000) g")
    pg.execute(f"INSERT INTO {qi(schema)}.b SELECT g, 'b' || g FROM generate_series(1001, 1500) g")
    pg.execute(f"CREATE TABLE {qi(schema)}.dst (id bigint PRIMARY KEY, v varchar(20))")
    server = pg_schemas.server
    shard = {"host": server.host, "port": server.port, "database": server.database, "schema": schema,
             "tables": ["a", "b"]}
    spec = {
        "source": {"plugin": "postgres", "params": {"user": server.user, "connections": [shard], "split_pk": "id"}},
        "destinations": [{"id": "pg", "plugin": "postgres", "params": server.params(schema, table="dst")}],
    }
    code, task, stderr = run_task(make_workspace(tmp_path), spec)
    assert code == 0, (task.get("error"), stderr[-3000:])
    events = log_events(stderr)
    assert any(e["event"] == "engine.rows_encoded" for e in events) == (other == "bigint")
    assert any(e["event"] == "reader.types_differ" for e in events) == (other == "integer")
    assert pg_execute(pg, f"SELECT COUNT(*), SUM(id), MIN(v), MAX(v) FROM {qi(schema)}.dst") == [
        (1500, 1500 * 1501 // 2, "a1", "b1500")]

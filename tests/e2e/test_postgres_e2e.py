"""The postgres store end to end, through the CLI on the real servers: MySQL fanned out to PostgreSQL, MySQL and
parquet in one read; PostgreSQL fanned out to MySQL and jsonl; a SIGKILL between a PostgreSQL destination's splits
resumed by a takeover without a row twice; a PostgreSQL destination whose session is terminated fails alone and
leaves nothing.

Every destination is compared with its source value by value, read back with the databases' own drivers (pymysql,
psycopg) and pyarrow, never with wormhole's readers.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, crashing_command, log_events, make_workspace, run_task
from tests.mysql_helpers import Databases, Server, create_table, execute, insert_rows
from tests.pg_helpers import Schemas, pg_execute, pg_rows, pg_schemas, pg_tables, qi

__all__ = ["pg_schemas"]  # the fixture, used by name

pytestmark = [pytest.mark.mysql, pytest.mark.postgres, pytest.mark.e2e]

ROWS = 3000

MYSQL_SRC = ("id BIGINT NOT NULL PRIMARY KEY, u BIGINT UNSIGNED NULL, flag TINYINT(1) NULL, "
             "amount DECIMAL(20,6) NULL, f DOUBLE NULL, name VARCHAR(100) NULL, born DATE NULL, at DATETIME(6) NULL, "
             "doc JSON NULL, raw BLOB NULL, kind ENUM('a','b','c') NULL")
MYSQL_COLUMNS = ("id", "u", "flag", "amount", "f", "name", "born", "at", "doc", "raw", "kind")


def mysql_row(i: int) -> tuple[Any, ...]:
    if i % 97 == 0:
        return (i, None, None, None, None, None, None, None, None, None, None)
    name = {1: "tab\there \\ back\nnew \"dq\" 😀 中文", 2: "", 3: " padded "}.get(i % 50, f"row-{i}-é")
    return (i, 2**64 - 1 if i % 10 == 0 else i * 7, i % 2, Decimal(i).scaleb(-3) - 1, i / 8, name,
            date(2020, 1, 1 + i % 28),
            datetime(2024, 1 + i % 12, 1, i % 24, 0, i % 60, i % 1_000_000),
            json.dumps({"i": i, "tags": ["x", i % 3], "n": None}), bytes([i % 256, 0, 255, 92, 9]), "abc"[i % 3])


def canon(value: Any) -> Any:
    """One form for a value whichever driver read it: ints and integral decimals alike, JSON parsed and
    sorted, bytes as hex, times as ISO text."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else format(value.normalize(), "f")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def canon_rows(rows: list[tuple[Any, ...]], json_columns: tuple[int, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    for row in rows:
        values = [json.loads(v) if i in json_columns and isinstance(v, str) else v for i, v in enumerate(row)]
        out.append(tuple(canon(v) for v in values))
    return sorted(out, key=lambda r: r[0])


@pytest.fixture
def mysql_dbs() -> Iterator[tuple[Server, Databases]]:
    from tests.conftest import MYSQL_URL, mysql_or_skip

    mysql_or_skip().close()
    server = Server.from_url(MYSQL_URL)
    dbs = Databases(server, server.connect())
    try:
        yield server, dbs
    finally:
        dbs.drop_all()


def test_mysql_fans_out_to_postgres_mysql_and_parquet_in_one_read(
        tmp_path: Path, mysql_dbs: tuple[Server, Databases], pg_schemas: Schemas) -> None:
    server, dbs = mysql_dbs
    src, dst = dbs.create("pgsrc"), dbs.create("pgdst")
    conn = server.connect()
    create_table(conn, src, "src", MYSQL_SRC)
    insert_rows(conn, src, "src", MYSQL_COLUMNS, [mysql_row(i) for i in range(1, ROWS + 1)])
    create_table(conn, dst, "copy", MYSQL_SRC)
    schema = pg_schemas.create("fan")
    spec = {
        "source": {"plugin": "mysql", "params": server.params(src, table="src", split_pk="id")},
        "destinations": [
            {"id": "pg", "plugin": "postgres",
             "params": pg_schemas.server.params(schema, table="copy", create_table=True, load="staging")},
            {"id": "my", "plugin": "mysql", "params": server.params(dst, table="copy")},
            {"id": "pq", "plugin": "file", "params": {"path": str(tmp_path / "out" / "copy"), "format": "parquet"}},
        ],
        "settings": {"speed": {"channel": 2}},
    }
    code, task, stderr = run_task(make_workspace(tmp_path), spec)
    assert code == 0, (task.get("error"), stderr[-3000:])
    assert task["result"]["source"]["rows_read"] == ROWS

    want = canon_rows(execute(conn, f"SELECT {', '.join(MYSQL_COLUMNS)} FROM `{src}`.src"), json_columns=(8,))
    got_my = canon_rows(execute(conn, f"SELECT {', '.join(MYSQL_COLUMNS)} FROM `{dst}`.copy"), json_columns=(8,))
    conn.close()
    got_pg = canon_rows(pg_rows(pg_schemas.conn, schema, "copy", MYSQL_COLUMNS))
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "copy")
    got_pq = canon_rows([tuple(r[c] for c in MYSQL_COLUMNS) for r in table.to_pylist()], json_columns=(8,))
    assert got_my == want
    assert got_pq == want
    assert got_pg == want
    # The types create_table chose, as a user sees them in the catalog.
    types = dict(pg_execute(pg_schemas.conn, "SELECT column_name, data_type FROM information_schema.columns "
                                             "WHERE table_schema = %s AND table_name = 'copy'", (schema,)))
    assert types["u"] == "numeric" and types["doc"] == "jsonb" and types["raw"] == "bytea", types
    assert types["at"] == "timestamp without time zone" and types["amount"] == "numeric", types


PG_SRC = ("id bigint PRIMARY KEY, n numeric(12,3), t text, b bytea, ts timestamptz, d date, j jsonb, "
          "u uuid, arr integer[], flag boolean")
PG_COLUMNS = ("id", "n", "t", "b", "ts", "d", "j", "u", "arr", "flag")
MY_DST = ("id BIGINT PRIMARY KEY, n DECIMAL(12,3), t TEXT, b BLOB, ts DATETIME(6), d DATE, j JSON, u CHAR(36), "
          "arr JSON, flag BOOLEAN")


def test_postgres_fans_out_to_mysql_and_jsonl(tmp_path: Path, mysql_dbs: tuple[Server, Databases],
                                              pg_schemas: Schemas) -> None:
    server, dbs = mysql_dbs
    schema = pg_schemas.create("src")
    pg = pg_schemas.conn
    pg.execute(f"CREATE TABLE {qi(schema)}.src ({PG_SRC})")
    pg.execute(f"INSERT INTO {qi(schema)}.src SELECT g, g / 7.0, CASE WHEN g %% 50 = 0 THEN E'tab\\there\\nnl 😀' "
               f"WHEN g %% 97 = 0 THEN NULL ELSE 'r' || g END, decode(lpad(to_hex(g), 8, '0'), 'hex'), "
               "timestamptz '2024-03-01 12:00:00+02' + g * interval '1 minute 1.5 second', date '2020-01-01' + g, "
               "jsonb_build_object('g', g, 'l', jsonb_build_array(g, 'x')), md5(g::text)::uuid, ARRAY[g, g + 1], "
               "g %% 3 = 0 FROM generate_series(1, %s) g", (ROWS,))
    dst = dbs.create("frompg")
    conn = server.connect()
    create_table(conn, dst, "copy", MY_DST)
    spec = {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src", split_pk="id")},
        "destinations": [
            {"id": "my", "plugin": "mysql", "params": server.params(dst, table="copy", load="staging")},
            {"id": "js", "plugin": "file", "params": {"path": str(tmp_path / "out" / "js"), "format": "jsonl"}},
        ],
        "settings": {"speed": {"channel": 2}},
    }
    code, task, stderr = run_task(make_workspace(tmp_path), spec)
    assert code == 0, (task.get("error"), stderr[-3000:])

    src_rows = pg_execute(pg, f"SELECT id, n, t, b, ts AT TIME ZONE 'UTC', d, j, u::text, to_jsonb(arr), flag "
                              f"FROM {qi(schema)}.src")
    want = canon_rows(src_rows)
    got_my = canon_rows(execute(conn, f"SELECT {', '.join(PG_COLUMNS)} FROM `{dst}`.copy"), json_columns=(6, 8))
    conn.close()
    assert got_my == want
    lines = [json.loads(line) for part in sorted((tmp_path / "out" / "js").glob("part-*"))
             for line in part.read_text().splitlines()]
    assert len(lines) == ROWS
    got_js = canon_rows([jsonl_row(obj) for obj in lines])
    assert got_js == want


def jsonl_row(obj: dict[str, Any]) -> tuple[Any, ...]:
    """A jsonl line as the values it stands for: decimals as their text, bytes in base64, times in ISO text."""
    b = obj["b"]
    return (obj["id"], None if obj["n"] is None else Decimal(str(obj["n"])), obj["t"],
            None if b is None else base64.b64decode(b), obj["ts"] and datetime.fromisoformat(obj["ts"]),
            obj["d"] and date.fromisoformat(obj["d"]), obj["j"], obj["u"], obj["arr"], obj["flag"])


def start_crashing(ws: Workspace, task_id: int, crash: str) -> Any:
    import subprocess

    path = ws.root / "first.err"
    with path.open("w") as log:
        return subprocess.Popen([*crashing_command(crash), "--task-id", str(task_id)], cwd=ws.root, env=ws.env(),
                                stdout=subprocess.DEVNULL, stderr=log, text=True)


@pytest.mark.parametrize("alone", [False, True], ids=["with_jsonl", "postgres_alone"])
def test_sigkill_after_a_postgres_split_then_takeover_appends_each_row_once(tmp_path: Path, pg_schemas: Schemas,
                                                                            alone: bool) -> None:
    """Append into a table without a key: a split loaded twice would show as duplicate ids. With the postgres
    destination alone, the rows travel undecoded (README "PostgreSQL to PostgreSQL without decoding")."""
    schema = pg_schemas.create("kill")
    pg = pg_schemas.conn
    pg.execute(f"CREATE TABLE {qi(schema)}.src (id bigint PRIMARY KEY, v text NOT NULL)")
    pg.execute(f"INSERT INTO {qi(schema)}.src SELECT g, 'v' || g FROM generate_series(1, 20000) g")
    pg.execute(f"CREATE TABLE {qi(schema)}.dst (id bigint NOT NULL, v text NOT NULL)")
    ws = make_workspace(tmp_path)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0}, recovery={"retry_wait_s": 0.2})
    jsonl = {"id": "js", "plugin": "file", "params": {"path": str(tmp_path / "out"), "format": "jsonl"}}
    spec = {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src", split_pk="id")},
        "destinations": [{"id": "pg", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="dst")},
                         *([] if alone else [jsonl])],
        "settings": {"speed": {"channel": 2}},
    }
    task_id = ws.submit(spec)
    first = start_crashing(ws, task_id, "after_seal:pg:4")  # the 4th split committed in PostgreSQL, not checkpointed
    first.wait(timeout=120)
    err = (ws.root / "first.err").read_text()
    assert first.returncode == -signal.SIGKILL, err[-3000:]
    held = pg_execute(pg, f"SELECT COUNT(*) FROM {qi(schema)}.dst")[0][0]
    assert 0 < held < 20000
    time.sleep(2.5)  # stale_s = 2
    proc = ws.run("--task-id", str(task_id), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = {e["event"] for e in log_events(proc.stderr)}
    assert "task.resumed" in events
    encoded = {"engine.rows_encoded" in events, "engine.rows_encoded" in {e["event"] for e in log_events(err)}}
    assert encoded == {alone}  # both runs, or neither
    count, distinct, total = pg_execute(pg, f"SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM {qi(schema)}.dst")[0]
    assert (count, distinct, total) == (20000, 20000, 20000 * 20001 // 2)
    result = ws.show(task_id)["result"]
    assert result["destinations"]["pg"]["rows_resumed"] >= held, result
    assert pg_execute(pg, f"SELECT COUNT(*) FROM {qi(schema)}.wormhole_splits")[0][0] == 0
    assert sorted(pg_tables(pg, schema)) == ["dst", "src", "wormhole_splits"]


def test_a_postgres_destination_whose_session_is_terminated_fails_alone_and_leaves_nothing(
        tmp_path: Path, pg_schemas: Schemas) -> None:
    schema = pg_schemas.create("term")
    pg = pg_schemas.conn
    pg.execute(f"CREATE TABLE {qi(schema)}.src (id bigint PRIMARY KEY, v text NOT NULL)")
    pg.execute(f"INSERT INTO {qi(schema)}.src SELECT g, 'v' || g FROM generate_series(1, 20000) g")
    pg.execute(f"CREATE TABLE {qi(schema)}.dst (id bigint PRIMARY KEY, v text NOT NULL)")
    pg.execute(f"INSERT INTO {qi(schema)}.dst VALUES (-1, 'kept')")
    ws = make_workspace(tmp_path)
    spec = {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src", split_pk="id")},
        "destinations": [
            {"id": "pg", "plugin": "postgres",
             "params": pg_schemas.server.params(schema, table="dst", load="staging", retries=0)},
            {"id": "js", "plugin": "file", "params": {"path": str(tmp_path / "out"), "format": "jsonl"}}],
        "settings": {"speed": {"channel": 2}},
    }
    task_id = ws.submit(spec)
    # Paused inside pg's 2nd split: its rows are COPY'd into the staging table, the transaction still open.
    first = start_crashing(ws, task_id, "before_seal:pg:2:stop")
    terminate_paused_writer(pg, schema, "dst", first, ws)
    err = (ws.root / "first.err").read_text()
    assert first.returncode == 202, err[-3000:]  # partial: one destination failed, the other committed
    result = ws.show(task_id)["result"]
    assert result["destinations"]["pg"]["status"] == "failed", result
    assert result["destinations"]["js"]["status"] == "success", result
    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "out").glob("part-*"))
    assert lines == 20000
    assert pg_execute(pg, f"SELECT id, v FROM {qi(schema)}.dst") == [(-1, "kept")]
    left = [t for t in pg_tables(pg, schema) if t not in ("src", "dst", "wormhole_splits")]
    assert left == []
    if "wormhole_splits" in pg_tables(pg, schema):
        assert pg_execute(pg, f"SELECT COUNT(*) FROM {qi(schema)}.wormhole_splits")[0][0] == 0


def terminate_paused_writer(pg: Any, schema: str, tables: str, first: Any, ws: Workspace) -> None:
    """Once ``first`` has stopped itself inside a split: terminate its writer sessions (those idle in a
    transaction with a lock on a table of ``schema`` named ``tables...``: other tests' wormhole sessions share
    the database), let it go on, and wait for it. It is killed if anything here fails, so that it does not stay
    stopped holding locks on the schema the test drops."""
    try:
        deadline = time.monotonic() + 60
        while True:
            pids = [r[0] for r in pg_execute(
                pg, "SELECT DISTINCT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
                    "JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relname LIKE %s AND a.state LIKE 'idle in transaction%%'",
                (schema, tables + "%"))]
            if pids and os.path.exists(f"/proc/{first.pid}") and _stopped(first.pid):
                break
            assert first.poll() is None and time.monotonic() < deadline, (ws.root / "first.err").read_text()[-3000:]
            time.sleep(0.05)
        for pid in pids:
            pg.execute("SELECT pg_terminate_backend(%s)", (pid,))
        os.kill(first.pid, signal.SIGCONT)
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_destinations_whose_every_row_is_bad_stop_at_the_first_past_the_limit_and_name_its_reason(
        tmp_path: Path, mysql_dbs: tuple[Server, Databases], pg_schemas: Schemas) -> None:
    """postgres, mysql and sqlite targets already holding every id, error_limit 0: each destination tries
    rows until its first rejection (not one COPY or INSERT per row of the batch), and its error, in the
    result and the log, names that rejection's reason besides the count."""
    import sqlite3

    ids = [(i, f"n{i}") for i in range(1, 301)]
    src = sqlite3.connect(tmp_path / "src.db")
    with src:
        src.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
        src.executemany("INSERT INTO t VALUES (?, ?)", ids)
    src.close()
    dst = sqlite3.connect(tmp_path / "dst.db")
    with dst:
        dst.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
        dst.executemany("INSERT INTO t VALUES (?, ?)", ids)
    dst.close()
    server, dbs = mysql_dbs
    db = dbs.create("allbad")
    conn = server.connect()
    create_table(conn, db, "t", "id INT PRIMARY KEY, name VARCHAR(20)")
    insert_rows(conn, db, "t", ["id", "name"], ids)
    conn.close()
    schema = pg_schemas.create("allbad")
    pg_schemas.conn.execute(f"CREATE TABLE {qi(schema)}.t (id int PRIMARY KEY, name text)")
    pg_schemas.conn.execute(f"INSERT INTO {qi(schema)}.t SELECT i, 'n' || i FROM generate_series(1, 300) i")
    spec = {
        "source": {"plugin": "sqlite", "params": {"path": str(tmp_path / "src.db"), "table": "t"}},
        "destinations": [
            {"id": "pg", "plugin": "postgres", "concurrency": 1, "params": pg_schemas.server.params(schema, table="t")},
            {"id": "my", "plugin": "mysql", "concurrency": 1, "params": server.params(db, table="t")},
            {"id": "lite", "plugin": "sqlite", "concurrency": 1,
             "params": {"path": str(tmp_path / "dst.db"), "table": "t"}},
        ],
        "settings": {"speed": {"channel": 1}, "error_limit": {"record": 0}},
    }
    ws = make_workspace(tmp_path)
    code, task, stderr = run_task(ws, spec)
    assert code == 203, (task.get("error"), stderr[-3000:])  # no destination committed
    result = task["result"]
    with (ws.root / result["dirty_file"]).open(encoding="utf-8") as f:
        dirty = [json.loads(line) for line in f]
    failed = {e["destination"]: e["error"] for e in log_events(stderr) if e["event"] == "destination.failed"}
    for dest_id in ("pg", "my", "lite"):
        dest = result["destinations"][dest_id]
        assert dest["error_code"] == "DIRTY_LIMIT_EXCEEDED" and dest["rows_rejected"] == 1, dest
        lines = [d for d in dirty if d["origin"] == dest_id]
        assert len(lines) == 1 and dest["rows_written"] + 1 == dest["rows_delivered"], (lines, dest)
        assert dest["error"] == f"1 rejected rows exceed the record limit of 0; the first: {lines[0]['reason']}"
        assert failed[dest_id] == dest["error"]
    assert "(1062) Duplicate entry" in result["destinations"]["my"]["error"]
    assert "(23505) duplicate key value" in result["destinations"]["pg"]["error"]

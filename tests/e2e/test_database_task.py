"""Whole databases in one task: a MariaDB database's tables, selected by patterns, each read once and fanned
out to PostgreSQL, MySQL, sqlite and parquet, with ``wormhole --task-id N`` as a subprocess.

One source database (a second to make) holds tables whose names need quoting, a table without a
key and an excluded one; every test gives its destinations fresh names. Rows are compared in Python,
normalised to text (the tables are small).
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import MYSQL_URL, Workspace, crashing_command, log_events, mysql_or_skip, run_task
from tests.mysql_helpers import Server, execute, q
from tests.pg_helpers import PgServer, fresh_schemas, pg_execute, qi

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

SERVER = Server.from_url(MYSQL_URL)
PG = PgServer.from_url()

TABLES: dict[str, tuple[str, int]] = {
    # name -> (columns DDL, rows); "orders" is the largest, so it is read first.
    "orders": ("id INT NOT NULL PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(12,2) NULL, "
               "note VARCHAR(40) NULL COMMENT 'free text', made DATETIME(6) NOT NULL, KEY by_customer (customer)",
               3000),
    "lines": ("id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, order_id INT NOT NULL, qty SMALLINT NOT NULL DEFAULT 1, "
              "CONSTRAINT lines_order FOREIGN KEY (order_id) REFERENCES orders (id)", 60),
    "order": ("id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL", 40),
    "my table": ("id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL", 30),
    "dash-name": ("id BIGINT NOT NULL PRIMARY KEY, v DOUBLE NULL", 20),
    "ünï": ("id INT NOT NULL PRIMARY KEY, v TEXT NULL", 10),
    "nokey": ("a INT NULL, b VARCHAR(10) NULL", 7),
    "tmp_scratch": ("id INT NOT NULL PRIMARY KEY", 3),
}
SELECTED = [t for t in TABLES if t != "tmp_scratch"]
DESTINATIONS = ("pg", "lite", "lake", "rep")
ROWS_EACH = 4000
"""Accounts in each table of the snapshot test."""


def _fill(conn: Any, db: str, table: str, rows: int) -> None:
    columns = [c.split()[0] for c in TABLES[table][0].split(", ") if not c.startswith(("PRIMARY", "KEY", "CONSTRAINT"))]
    values = []
    for i in range(1, rows + 1):
        row: list[Any] = []
        for c in columns:
            if c == "id" or c == "a":
                row.append(i)
            elif c in ("customer", "order_id"):
                row.append(i % 17 + 1)
            elif c == "qty":
                row.append(i % 5)
            elif c == "amount":
                row.append(None if i % 11 == 0 else Decimal(i) / 100)
            elif c == "made":
                row.append(f"2026-01-{1 + i % 28:02d} 10:00:00.{i:06d}")
            elif table == "dash-name":
                row.append(None if i % 5 == 0 else i / 3)
            else:
                row.append(None if i % 7 == 0 else f"{table[:3]}-{i}")
        values.append(row)
    marks = ", ".join(["%s"] * len(columns))
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {q(db)}.{q(table)} ({', '.join(map(q, columns))}) VALUES ({marks})", values)


@pytest.fixture
def source_db() -> Iterator[str]:
    mysql_or_skip().close()
    db = f"wh_dbt_src_{uuid.uuid4().hex[:8]}"
    admin = SERVER.connect()
    execute(admin, f"CREATE DATABASE {q(db)} CHARACTER SET utf8mb4")
    try:
        for table, (ddl, rows) in TABLES.items():
            execute(admin, f"CREATE TABLE {q(db)}.{q(table)} ({ddl})")
            _fill(admin, db, table, rows)
        execute(admin, f"CREATE VIEW {q(db)}.v_orders AS SELECT id FROM {q(db)}.orders")
        execute(admin, f"ANALYZE TABLE {', '.join(f'{q(db)}.{q(t)}' for t in TABLES)}")
        yield db
    finally:
        execute(admin, f"DROP DATABASE IF EXISTS {q(db)}")
        admin.close()


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fresh MySQL database and PostgreSQL schema for the destinations, dropped after the test."""
    admin = SERVER.connect()
    rep = f"wh_dbt_rep_{uuid.uuid4().hex[:8]}"
    execute(admin, f"CREATE DATABASE {q(rep)} CHARACTER SET utf8mb4")
    schemas = fresh_schemas()
    pg = next(schemas)
    try:
        yield {"rep": rep, "pg": pg.create("dbt"), "lake": str(tmp_path / "lake"), "lite": str(tmp_path / "copy.db")}
    finally:
        execute(admin, f"DROP DATABASE IF EXISTS {q(rep)}")
        admin.close()
        schemas.close()


def database_task(src: str, where: dict[str, str], *, tables: list[str] | None = None,
                  **settings: Any) -> dict[str, Any]:
    return {
        "source": {"plugin": "mysql", "params": SERVER.params(src, tables=tables or ["*", "!tmp_*"])},
        "destinations": [
            {"id": "pg", "plugin": "postgres",
             "params": PG.params(where["pg"], table="{table}", create_table=True)},
            {"id": "lite", "plugin": "sqlite", "params": {"path": where["lite"], "table": "{table}"}},
            {"id": "lake", "plugin": "file", "params": {"path": where["lake"] + "/{table}", "format": "parquet"}},
            {"id": "rep", "plugin": "mysql", "params": SERVER.params(where["rep"], create_table=True)},
        ],
        "settings": {"speed": {"channel": 3}, "foreign_keys": True, **settings},
    }


def refused(ws: Workspace, spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A task the run refuses before it touches anything (exit 204), run in this process (no interpreter to
    start: the refusal is the same)."""
    task_id = ws.submit(spec)
    proc = ws.run_here("--task-id", str(task_id))
    return proc.returncode, ws.show(task_id)


def _text(value: Any, scale: bool) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal) and not scale:
        return format(value.normalize(), "f")
    return str(value)  # a decimal's scale kept: DECIMAL(12,2) reads 1.00 in every store that keeps it


def _rows(rows: list[tuple[Any, ...]], scale: bool = True) -> list[tuple[str | None, ...]]:
    return sorted((tuple(_text(v, scale) for v in r) for r in rows), key=repr)


def source_rows(db: str, table: str, scale: bool = True) -> list[tuple[str | None, ...]]:
    conn = SERVER.connect()
    try:
        return _rows(execute(conn, f"SELECT * FROM {q(db)}.{q(table)}"), scale)
    finally:
        conn.close()


def pg_rows(schema: str, table: str) -> list[tuple[str | None, ...]]:
    conn = PG.connect()
    try:
        return _rows(pg_execute(conn, f"SELECT * FROM {qi(schema)}.{qi(table)}"))
    finally:
        conn.close()


def sqlite_rows(path: str, table: str) -> list[tuple[str | None, ...]]:
    conn = sqlite3.connect(path)
    try:
        return _rows(conn.execute(f'SELECT * FROM "{table}"').fetchall())
    finally:
        conn.close()


def mysql_rows(db: str, table: str) -> list[tuple[str | None, ...]]:
    return source_rows(db, table)


def parquet_rows(directory: str) -> list[tuple[str | None, ...]]:
    """Compared without the decimals' scale: parquet holds every decimal as decimal(38,18) (docs/manual/types.md)."""
    data = pq.read_table(directory)
    return _rows([tuple(r.values()) for r in data.to_pylist()], scale=False)


def pair(db: str, dest: str, table: str) -> str:
    return f"{dest}/{db}.{table}"


def test_a_database_fans_out_table_by_table_to_every_destination_exactly(
        ws: Workspace, source_db: str, targets: dict[str, str]) -> None:
    code, task, stderr = run_task(ws, database_task(source_db, targets))
    result = task["result"]
    assert code == 0, (task.get("error"), result["destinations"])
    database = result["database"]
    assert database["tables"] == len(SELECTED) and database["tables_done"] == len(SELECTED)
    assert database["table_results"][0]["table"] == f"{source_db}.orders"  # the largest first
    assert set(result["destinations"]) == {pair(source_db, d, t) for d in DESTINATIONS for t in SELECTED}
    assert_exact(source_db, targets)
    # wormhole verify reads every (table, destination) pair back and finds each equal to its source table.
    verified = ws.run_here("--log-level", "warning", "verify", "--task-id", str(task["id"]), "--json")
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-2000:]
    compared = json.loads(verified.stdout)
    assert set(compared) == {pair(source_db, d, t) for d in DESTINATIONS for t in SELECTED}
    assert compared[pair(source_db, "pg", "orders")]["right"]["rows"] == TABLES["orders"][1]
    assert compared[pair(source_db, "pg", "nokey")]["key"] is None  # no primary key: rows as a multiset
    for table in SELECTED:
        for dest in DESTINATIONS:
            assert result["destinations"][pair(source_db, dest, table)]["rows_written"] == TABLES[table][1]
    assert result["source"]["rows_read"] == sum(TABLES[t][1] for t in SELECTED)  # each table read once
    events = log_events(stderr)
    done = [e for e in events if e["event"] == "database.pair_done"]
    assert len(done) == len(DESTINATIONS) * len(SELECTED) and {e["status"] for e in done} == {"success"}
    finished = next(e for e in events if e["event"] == "task.finished")
    assert len(finished["destinations"]) == len(DESTINATIONS) * len(SELECTED)
    assert_keys_and_indexes(source_db, targets)


def assert_keys_and_indexes(source_db: str, targets: dict[str, str]) -> None:
    """The tables created from the source's definitions: keys, the index after the load, the foreign key
    after every table, the comment, the sequence past the loaded maximum."""
    conn = PG.connect()
    try:
        schema = targets["pg"]
        indexes = dict(pg_execute(conn, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
                                        "AND tablename = 'orders'", (schema,)))
        assert any("(id)" in d and "UNIQUE" in d for d in indexes.values()), indexes  # the primary key
        assert any("(customer)" in d for d in indexes.values()), indexes
        fks = pg_execute(conn, "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_class t ON t.oid = "
                               "c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = %s AND "
                               "t.relname = 'lines' AND c.contype = 'f'", (schema,))
        assert len(fks) == 1 and fks[0][0].startswith("FOREIGN KEY (order_id) REFERENCES ") \
            and fks[0][0].endswith(".orders(id)"), fks
        assert pg_execute(conn, f"SELECT col_description('{qi(schema)}.orders'::regclass, 4)") == [("free text",)]
        pg_execute(conn, f"INSERT INTO {qi(schema)}.lines (order_id) VALUES (1)")
        assert pg_execute(conn, f"SELECT max(id) FROM {qi(schema)}.lines") == [(TABLES["lines"][1] + 1,)]
    finally:
        conn.close()
    admin = SERVER.connect()
    try:
        rep = targets["rep"]
        keys = execute(admin, "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE "
                              "TABLE_SCHEMA = %s AND TABLE_NAME = 'orders' ORDER BY 1", (rep,))
        assert set(keys) == {("PRIMARY", "id"), ("by_customer", "customer")}, keys
        refs = execute(admin, "SELECT REFERENCED_TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE "
                              "TABLE_SCHEMA = %s AND TABLE_NAME = 'lines' AND REFERENCED_TABLE_NAME IS NOT NULL",
                       (rep,))
        assert refs == [("orders",)], refs
        execute(admin, f"INSERT INTO {q(rep)}.lines (order_id) VALUES (1)")
        assert execute(admin, f"SELECT MAX(id) FROM {q(rep)}.lines") == [(TABLES["lines"][1] + 1,)]
    finally:
        admin.close()


def test_a_pair_that_fails_stops_neither_its_table_elsewhere_nor_other_tables_and_retry_finishes_it(
        ws: Workspace, source_db: str, targets: dict[str, str]) -> None:
    # The PostgreSQL target of `order` exists with a column the rows cannot go into.
    conn = PG.connect()
    try:
        pg_execute(conn, f'CREATE TABLE {qi(targets["pg"])}."order" (id integer PRIMARY KEY, v integer NOT NULL)')
        code, task, _ = run_task(ws, database_task(source_db, targets))
        assert code == 202, task.get("error")
        statuses = {k: v["status"] for k, v in task["result"]["destinations"].items()}
        failed = {k for k, s in statuses.items() if s != "success"}
        assert failed == {pair(source_db, "pg", "order")}, statuses
        assert sqlite_rows(targets["lite"], "order") == source_rows(source_db, "order")
        assert pg_rows(targets["pg"], "orders") == source_rows(source_db, "orders")
        assert pg_rows(targets["pg"], "order") == []  # rolled back
        # Fixed, the task is retried: only the failed pair is written, the others are not written twice.
        pg_execute(conn, f'DROP TABLE {qi(targets["pg"])}."order"')
        ws.run_here("task", "retry", str(task["id"]), check=True)
        retried = ws.run("--task-id", str(task["id"]), timeout=240)
        assert retried.returncode == 0, retried.stderr[-3000:]
        task = ws.show(task["id"])
        assert task["status"] == "success", task.get("error")
        assert_exact(source_db, targets)
    finally:
        conn.close()


def test_a_source_table_dropped_during_the_task_fails_that_table_alone(
        ws: Workspace, source_db: str, targets: dict[str, str]) -> None:
    admin = SERVER.connect()
    try:
        execute(admin, f"CREATE TABLE {q(source_db)}.zz_gone (id INT PRIMARY KEY)")
        execute(admin, f"INSERT INTO {q(source_db)}.zz_gone VALUES (1), (2)")
        spec = database_task(source_db, targets, tables=["orders", "zz_gone"])
        spec["settings"]["speed"] = {"channel": 1}  # one table at a time: orders (the largest) first
        # The first table's MySQL prepare drops the other table from the source (a user's DROP mid-task).
        spec["destinations"][3]["params"]["pre_sql"] = [f"DROP TABLE IF EXISTS {q(source_db)}.zz_gone"]
        code, task, _ = run_task(ws, spec)
        assert code == 202, task.get("error")
        statuses = {k: v["status"] for k, v in task["result"]["destinations"].items()}
        assert {k for k, s in statuses.items() if s == "success"} == {
            pair(source_db, d, "orders") for d in ("pg", "lite", "lake", "rep")}, statuses
        gone = task["result"]["destinations"][pair(source_db, "pg", "zz_gone")]
        assert "zz_gone" in (task["error"] or ""), (gone, task["result"]["source"])
        assert gone["status"] != "success"
        assert pg_rows(targets["pg"], "orders") == source_rows(source_db, "orders")
    finally:
        execute(admin, f"DROP TABLE IF EXISTS {q(source_db)}.zz_gone")
        admin.close()


@pytest.mark.parametrize(("change", "problem"), [
    ({"tables": ["orders", "nosuch_*"]}, "'nosuch_*' matches no table"),
    ({"tables": ["tmp_*", "!tmp_*"]}, "the excludes leave no table to read"),
])
def test_patterns_that_select_nothing_are_refused_naming_them(
        ws: Workspace, source_db: str, targets: dict[str, str], change: dict[str, Any], problem: str) -> None:
    code, task = refused(ws, database_task(source_db, targets) | {
        "source": {"plugin": "mysql", "params": SERVER.params(source_db, **change)}})
    assert code == 204 and problem in task["error"], task.get("error")
    assert not Path(targets["lite"]).exists() and not Path(targets["lake"]).exists()  # nothing touched


def test_bad_templates_are_refused_before_the_task_is_recorded(ws: Workspace, source_db: str,
                                                               targets: dict[str, str], tmp_path: Path) -> None:
    spec = database_task(source_db, targets)
    spec["destinations"][2]["params"]["path"] = str(tmp_path / "one")  # every table into one directory
    spec["destinations"][1]["params"]["table"] = "{tbl}"
    path = tmp_path / "task.json"
    path.write_text(json.dumps(spec))
    proc = ws.run("run", str(path))
    assert proc.returncode == 204
    assert "destinations[2].params: every table needs a target of its own: put {table} in path" in proc.stderr
    assert "destinations[1].params.table: '{tbl}' names '{tbl}': only {schema} and {table}" in proc.stderr


def test_two_tables_on_one_target_after_templating_are_refused(ws: Workspace, source_db: str,
                                                              targets: dict[str, str]) -> None:
    admin = SERVER.connect()
    try:
        execute(admin, f"CREATE TABLE {q(source_db)}.`Case` (id INT PRIMARY KEY)")
        execute(admin, f"CREATE TABLE {q(source_db)}.`case` (id INT PRIMARY KEY)")
        code, task = refused(ws, database_task(source_db, targets, tables=["?ase"]))
        assert code == 204, task.get("error")
        assert "two tables on one target" in task["error"] and "copy.db" in task["error"]
        assert not Path(targets["lite"]).exists()
    finally:
        execute(admin, f"DROP TABLE IF EXISTS {q(source_db)}.`Case`, {q(source_db)}.`case`")
        admin.close()


def assert_exact(source_db: str, targets: dict[str, str]) -> None:
    for table in SELECTED:
        expected = source_rows(source_db, table)
        assert pg_rows(targets["pg"], table) == expected, table
        assert sqlite_rows(targets["lite"], table) == expected, table
        assert parquet_rows(f"{targets['lake']}/{table}") == source_rows(source_db, table, scale=False), table
        assert mysql_rows(targets["rep"], table) == expected, table


def test_a_database_task_killed_between_commits_is_taken_over_and_every_pair_ends_exact(
        ws: Workspace, source_db: str, targets: dict[str, str]) -> None:
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0})
    spec = database_task(source_db, targets)
    spec["settings"]["speed"] = {"channel": 1}  # a table at a time: orders, then order, ...
    task_id = ws.submit(spec)
    # Killed right after `order` committed in PostgreSQL (an append target: loaded twice, it would double),
    # with `orders` committed everywhere and the smaller tables not started.
    crash = f"after_commit:{pair(source_db, 'pg', 'order')}:1"
    first = subprocess.run([*crashing_command(crash), "--task-id", str(task_id)], cwd=ws.root, env=ws.env(),
                           capture_output=True, text=True, timeout=240)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    time.sleep(2.5)  # stale_s = 2
    second = ws.run("--task-id", str(task_id), timeout=240)
    task = ws.show(task_id)
    assert second.returncode == 0, (task.get("error"), second.stderr[-3000:])
    result = task["result"]
    assert result["resumed_from_run"] is not None
    pairs = result["destinations"]
    # The tables done before the kill are not written again (their splits are held), the others are written.
    for table in ("orders", "order"):
        assert {(pairs[pair(source_db, d, table)]["rows_written"], pairs[pair(source_db, d, table)]["rows_resumed"])
                for d in DESTINATIONS} == {(0, TABLES[table][1])}, table
    assert pairs[pair(source_db, "pg", "nokey")]["rows_written"] == TABLES["nokey"][1]
    assert_exact(source_db, targets)


def test_a_type_with_no_exact_mapping_refuses_the_task_naming_the_column_and_the_choices(
        ws: Workspace, targets: dict[str, str]) -> None:
    conn = PG.connect()
    try:
        schema = targets["pg"]
        pg_execute(conn, f"CREATE TABLE {qi(schema)}.tagged (id integer PRIMARY KEY, tags integer[])")
        pg_execute(conn, f"CREATE TABLE {qi(schema)}.plain (id integer PRIMARY KEY)")
        spec = {"source": {"plugin": "postgres", "params": PG.params(schema, tables=["*"])},
                "destinations": [{"id": "rep", "plugin": "mysql",
                                  "params": SERVER.params(targets["rep"], create_table=True)}]}
        code, task = refused(ws, spec)
        assert code == 204, task.get("error")
        assert f"{schema}.tagged.tags: postgres type 'integer[]'" in task["error"]
        assert "column_types" in task["error"] and "json" in task["error"]
        admin = SERVER.connect()
        try:
            assert execute(admin, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
                           (targets["rep"],)) == [(0,)]  # refused before anything was created
        finally:
            admin.close()
        # The choice made, the same database goes through.
        spec["destinations"][0]["params"]["column_types"] = {"tagged.tags": "json"}
        pg_execute(conn, f"INSERT INTO {qi(schema)}.tagged VALUES (1, ARRAY[1, 2]), (2, NULL)")
        code, task, _ = run_task(ws, spec)
        assert code == 0, task.get("error")
        assert mysql_rows(targets["rep"], "tagged") == [("1", "[1,2]"), ("2", None)]
    finally:
        conn.close()


def test_a_destination_schema_that_does_not_exist_fails_that_destination_by_name(
        ws: Workspace, source_db: str, targets: dict[str, str]) -> None:
    spec = database_task(source_db, targets, tables=["order", "nokey"])
    spec["destinations"][0]["params"]["schema"] = "wh_no_such_schema"
    code, task, _ = run_task(ws, spec)
    assert code == 202, task.get("error")
    statuses = {k: v["status"] for k, v in task["result"]["destinations"].items()}
    assert {k for k, s in statuses.items() if s != "success"} == {pair(source_db, "pg", t) for t in ("order", "nokey")}
    assert "wh_no_such_schema" in task["result"]["destinations"][pair(source_db, "pg", "order")]["error"]
    assert sqlite_rows(targets["lite"], "order") == source_rows(source_db, "order")


def test_a_consistent_snapshot_keeps_a_total_moved_between_two_tables_during_the_copy(
        ws: Workspace, targets: dict[str, str]) -> None:
    mysql_or_skip().close()
    admin = SERVER.connect()
    src = f"wh_dbt_bank_{uuid.uuid4().hex[:8]}"
    execute(admin, f"CREATE DATABASE {q(src)}")
    stop = threading.Event()
    moved = [0]

    def move_money() -> None:
        conn = SERVER.connect(src)
        conn.autocommit(False)
        rng = random.Random(7)
        try:
            while not stop.is_set():
                a, b, amount = rng.randint(1, ROWS_EACH), rng.randint(1, ROWS_EACH), rng.randint(1, 9)
                with conn.cursor() as cur:
                    cur.execute("UPDATE acc_a SET bal = bal - %s WHERE id = %s", (amount, a))
                    cur.execute("UPDATE acc_b SET bal = bal + %s WHERE id = %s", (amount, b))
                conn.commit()
                moved[0] += 1
        finally:
            conn.close()

    try:
        for table in ("acc_a", "acc_b"):
            execute(admin, f"CREATE TABLE {q(src)}.{table} (id INT PRIMARY KEY, bal BIGINT NOT NULL)")
            execute(admin, f"INSERT INTO {q(src)}.{table} SELECT seq, 100 FROM {q(src)}.seq_1_to_{ROWS_EACH}")
        total = 2 * 100 * ROWS_EACH
        ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                      exchange={"batch_rows": 64})  # small batches: the copy lasts while the money moves
        spec = {"source": {"plugin": "mysql", "params": SERVER.params(src, tables=["acc_*"], split_factor=8)},
                "destinations": [{"id": "pg", "plugin": "postgres",
                                  "params": PG.params(targets["pg"], create_table=True)}],
                "settings": {"snapshot": "consistent", "speed": {"channel": 2}}}
        mover = threading.Thread(target=move_money, daemon=True)
        mover.start()
        while moved[0] < 20:
            time.sleep(0.01)
        before = moved[0]
        code, task, _ = run_task(ws, spec)
        during = moved[0] - before
        stop.set()
        mover.join(timeout=10)
        assert code == 0, task.get("error")
        assert during > 0  # the money moved while the tables were read
        conn = PG.connect()
        try:
            copied = pg_execute(conn, f"SELECT (SELECT SUM(bal) FROM {qi(targets['pg'])}.acc_a) + "
                                      f"(SELECT SUM(bal) FROM {qi(targets['pg'])}.acc_b)")[0][0]
        finally:
            conn.close()
        assert copied == total
        snapshot = task["result"]["snapshot"]
        assert snapshot["mode"] == "consistent" and snapshot["position"], snapshot  # binlog position, or "off"
    finally:
        stop.set()
        execute(admin, f"DROP DATABASE IF EXISTS {q(src)}")
        admin.close()

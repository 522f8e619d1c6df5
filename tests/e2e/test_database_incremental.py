"""An incremental database task (issue 38, item 7): every table that has the task's column is read past its
own watermarks, one per (table, destination) pair; a table without the column refuses the task, or is left
out of it (``without_column: skip``); a run killed between two pairs' commits resumes each table's own
recorded window, and the next run takes the rest, so every row reaches every destination once."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import MYSQL_URL, Workspace, crashing_command, mysql_or_skip
from tests.mysql_helpers import Server, execute, q
from tests.pg_helpers import PgServer, fresh_schemas, pg_execute, qi

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

SERVER = Server.from_url(MYSQL_URL)
PG = PgServer.from_url()

TABLES = {
    # name -> columns; the column the task follows is `n` (`N` in b: MySQL compares column names without case)
    "a": "id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL, v VARCHAR(20) NULL",
    "b": "id INT NOT NULL PRIMARY KEY, N BIGINT NOT NULL, v VARCHAR(20) NULL",
    "c": "id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL",
    "d": "id INT NOT NULL PRIMARY KEY, n VARCHAR(20) NULL",
}


@pytest.fixture
def source_db() -> Iterator[str]:
    mysql_or_skip().close()
    db = f"wh_dbi_src_{uuid.uuid4().hex[:8]}"
    admin = SERVER.connect()
    execute(admin, f"CREATE DATABASE {q(db)} CHARACTER SET utf8mb4")
    try:
        for table, ddl in TABLES.items():
            execute(admin, f"CREATE TABLE {q(db)}.{q(table)} ({ddl})")
        add(db, "a", range(1, 31))
        add(db, "b", range(1, 21))
        execute(admin, f"INSERT INTO {q(db)}.c VALUES (1, 'x')")
        yield db
    finally:
        execute(admin, f"DROP DATABASE IF EXISTS {q(db)}")
        admin.close()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    for schemas in fresh_schemas():
        yield schemas.create("dbi")


def add(db: str, table: str, ids: range) -> None:
    conn = SERVER.connect()
    try:
        execute(conn, f"INSERT INTO {q(db)}.{q(table)} VALUES "
                      + ", ".join(f"({i}, {i * 10}, '{table}-{i}')" for i in ids))
    finally:
        conn.close()


def spec(db: str, lite: str, pg: str, tables: list[str], **incremental: Any) -> dict[str, Any]:
    return {
        "name": "shop_sync",  # the watermarks' state key: every run of the job keeps to it
        "source": {"plugin": "mysql", "params": SERVER.params(db, tables=tables),
                   "incremental": {"column": "n", **incremental}},
        "destinations": [
            {"id": "lite", "plugin": "sqlite", "params": {"path": lite, "table": "{table}"}},
            {"id": "pg", "plugin": "postgres", "params": PG.params(pg, table="{table}", create_table=True)},
        ],
        "settings": {"speed": {"channel": 1}},  # a table at a time, the largest (a) first
    }


def ids(db: str, lite: str, pg: str, table: str) -> dict[str, list[int]]:
    """Each store's ids of ``table``, sorted, duplicates kept (a row written twice shows twice)."""
    conn = SERVER.connect()
    try:
        source = sorted(int(r[0]) for r in execute(conn, f"SELECT id FROM {q(db)}.{q(table)}"))
    finally:
        conn.close()
    lite_conn = sqlite3.connect(lite)
    try:
        copied = sorted(int(r[0]) for r in lite_conn.execute(f'SELECT id FROM "{table}"'))
    finally:
        lite_conn.close()
    pg_conn = PG.connect()
    try:
        pg_ids = sorted(int(r[0]) for r in pg_execute(pg_conn, f"SELECT id FROM {qi(pg)}.{qi(table)}"))
    finally:
        pg_conn.close()
    return {"source": source, "lite": copied, "pg": pg_ids}


def assert_each_row_once(db: str, lite: str, pg: str) -> None:
    for table in ("a", "b"):
        found = ids(db, lite, pg, table)
        assert found["lite"] == found["source"] and found["pg"] == found["source"], (table, found)


def test_a_table_without_the_column_or_with_a_column_no_watermark_follows_refuses_the_task(
        ws: Workspace, source_db: str, tmp_path: Any, pg_schema: str) -> None:
    lite = str(tmp_path / "copy.db")
    task_id = ws.submit(spec(source_db, lite, pg_schema, ["a", "b", "c"]))
    proc = ws.run_here("--task-id", str(task_id))
    assert proc.returncode == 204, proc.stderr
    error = ws.show(task_id)["error"]
    assert "source.incremental.column" in error and f"{source_db}.c" in error and "without_column" in error
    assert f"{source_db}.a" not in error and f"{source_db}.b" not in error
    task_id = ws.submit(spec(source_db, lite, pg_schema, ["a", "d"], without_column="skip"))
    proc = ws.run_here("--task-id", str(task_id))
    assert proc.returncode == 204, proc.stderr
    assert f"{source_db}.d.n is varchar(20)" in ws.show(task_id)["error"]
    assert not (tmp_path / "copy.db").exists()  # refused before anything was touched
    path = tmp_path / "skip.json"
    path.write_text(json.dumps(spec(source_db, lite, pg_schema, ["a", "b", "c"], without_column="skip")))
    shown = ws.run_here("plan", str(path), check=True).stdout
    assert f"skipped:        {source_db}.c: no column n" in shown and f"{source_db}.a:" in shown


def test_each_table_reads_past_its_own_watermarks_and_a_killed_run_resumes_each_tables_window(
        ws: Workspace, source_db: str, tmp_path: Any, pg_schema: str) -> None:
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0})
    lite = str(tmp_path / "copy.db")
    task = spec(source_db, lite, pg_schema, ["a", "b", "c"], without_column="skip")

    def run(crash: str | None = None) -> tuple[int, dict[str, Any]]:
        task_id = ws.submit(task)
        command = [*crashing_command(crash)] if crash else None
        if command is None:
            proc = ws.run("--task-id", str(task_id), timeout=180)
            return proc.returncode, ws.show(task_id)
        killed = subprocess.run([*command, "--task-id", str(task_id)], cwd=ws.root, env=ws.env(),
                                capture_output=True, text=True, timeout=180)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        return task_id, ws.show(task_id)

    code, first = run()
    assert code == 0, first.get("error")
    database = first["result"]["database"]
    assert database["skipped"] == {f"{source_db}.c": "no column n (source.incremental.without_column: skip)"}
    assert sorted(t["table"] for t in database["table_results"]) == [f"{source_db}.a", f"{source_db}.b"]
    windows = {t["table"]: t["incremental"] for t in database["table_results"]}
    assert windows[f"{source_db}.b"]["column"] == "N" and windows[f"{source_db}.a"]["to"] == "300"
    assert windows[f"{source_db}.b"]["destinations"][f"pg/{source_db}.b"]["now"] == "200"
    assert_each_row_once(source_db, lite, pg_schema)

    add(source_db, "a", range(31, 36))
    add(source_db, "b", range(21, 24))
    code, second = run()
    assert code == 0, second.get("error")
    assert second["result"]["source"]["rows_read"] == 8  # past each table's own watermarks
    assert_each_row_once(source_db, lite, pg_schema)

    # Killed right after table a committed in sqlite (before PostgreSQL): its window (up to 400) is recorded,
    # and rows added before the takeover are not a's to take now. b (two small tables share the one channel)
    # had recorded its window before the kill, or plans one of its own at the takeover: it keeps to either.
    add(source_db, "a", range(36, 41))
    add(source_db, "b", range(24, 27))
    task_id, _ = run(crash=f"after_commit:lite/{source_db}.a:1")
    add(source_db, "a", range(41, 46))
    add(source_db, "b", range(27, 29))
    time.sleep(2.5)  # stale_s = 2
    resumed = ws.run("--task-id", str(task_id), timeout=180)
    third = ws.show(task_id)
    assert resumed.returncode == 0, (third.get("error"), resumed.stderr[-3000:])
    result = third["result"]
    assert result["resumed_from_run"] is not None
    windows = {t["table"]: t["incremental"] for t in result["database"]["table_results"]}
    assert windows[f"{source_db}.a"]["to"] == "400" and windows[f"{source_db}.b"]["to"] in ("260", "280")
    b_upper = int(windows[f"{source_db}.b"]["to"]) // 10
    pairs = result["destinations"]
    assert (pairs[f"lite/{source_db}.a"]["rows_written"], pairs[f"lite/{source_db}.a"]["rows_resumed"]) == (0, 5)
    pg_a = pairs[f"pg/{source_db}.a"]  # the recorded window's rows, 36-40 (held before the kill, or written now)
    assert pg_a["status"] == "success" and pg_a["rows_written"] + pg_a["rows_resumed"] == 5, pg_a
    for table, upper in (("a", 40), ("b", b_upper)):
        found = ids(source_db, lite, pg_schema, table)
        assert found["pg"] == found["lite"] == list(range(1, upper + 1)), table  # the rest: the next run's
    code, fourth = run()
    assert code == 0, fourth.get("error")
    assert fourth["result"]["source"]["rows_read"] == 5 + 28 - b_upper
    assert_each_row_once(source_db, lite, pg_schema)


def test_job_variables_reach_every_tables_where_and_transforms(ws: Workspace, source_db: str, tmp_path: Any,
                                                               pg_schema: str) -> None:
    """Variables are filled in once per run, for the whole spec: the ``where`` and the transforms every table
    is read with (each table has the columns they name; one that lacks one fails alone, see
    test_database_task)."""
    lite = str(tmp_path / "vars.db")
    task = spec(source_db, lite, pg_schema, ["a", "b"])
    del task["source"]["incremental"]
    task["source"]["params"]["where"] = "n > ${min_n:int}"
    task["transforms"] = [{"filter": "id <= ${max_id:int}"}]
    path = tmp_path / "vars.json"
    path.write_text(json.dumps(task))
    proc = ws.run("run", str(path), "-p", "min_n=100", "-p", "max_id=25", timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for table, last in (("a", 25), ("b", 20)):
        found = ids(source_db, lite, pg_schema, table)
        assert found["lite"] == found["pg"] == list(range(11, last + 1)), table

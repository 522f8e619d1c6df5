"""Job variables (${name} in a spec): -p, the task row's params, the built-ins, escaping, exit 204 for an
unresolved one, the values recorded with the run and reused by a run resuming it, DataX's ${bizdate}."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace
from tests.mysql_helpers import Databases, Server, create_table, insert_rows
from tests.pg_helpers import Schemas, pg_execute, pg_schemas

__all__ = ["pg_schemas"]  # the fixture, used by name

DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")


def source_db(ws: Workspace) -> None:
    """10 rows a day over three days; row 99's note is the literal text ${day}."""
    conn = sqlite3.connect(ws.root / "src.db")
    with conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, day TEXT, note TEXT)")
        conn.executemany("INSERT INTO events VALUES (?, ?, ?)",
                         [(i, DAYS[i % 3], f"n{i}") for i in range(30)] + [(99, "2026-01-01", "${day}")])
    conn.close()


def spec(where: str, out: str = "out/${day}") -> dict[str, Any]:
    return {"name": "daily",
            "source": {"plugin": "sqlite", "params": {"path": "src.db", "table": "events", "where": where}},
            "destinations": [
                {"id": "lake", "plugin": "file", "params": {"path": out, "format": "jsonl"}},
                {"id": "db", "plugin": "sqlite", "params": {"path": "dw.db", "table": "events_${day}"}}]}


def jsonl_ids(path: Path) -> list[int]:
    return sorted(json.loads(line)["id"] for part in path.glob("*.jsonl") for line in part.open(encoding="utf-8"))


def table_ids(path: Path, table: str) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in conn.execute(f'SELECT id FROM "{table}"'))
    finally:
        conn.close()


def write(ws: Workspace, doc: dict[str, Any], name: str = "task.json") -> str:
    (ws.root / name).write_text(json.dumps(doc), encoding="utf-8")
    return name


def test_p_values_fill_the_where_and_the_destinations_of_a_fan_out_run(ws: Workspace) -> None:
    source_db(ws)
    file = write(ws, spec("day = '${day}' AND note <> '$${day}'"))
    proc = ws.run("run", file, "-p", "day=2026-01-02", "-p", "unused=1")
    assert proc.returncode == 0, proc.stderr
    expected = [i for i in range(30) if DAYS[i % 3] == "2026-01-02"]
    assert jsonl_ids(ws.root / "out" / "2026-01-02") == expected
    assert table_ids(ws.root / "dw.db", "events_2026-01-02") == expected
    (task,) = [e for e in log_events(proc.stderr) if e["event"] == "task.claimed"]
    assert task["variables"] == {"day": "2026-01-02"}
    shown = ws.show(1)
    # The row keeps the text with its placeholders, the -p values as params, the values used on the run.
    assert shown["spec"]["source"]["params"]["where"] == "day = '${day}' AND note <> '$${day}'"
    assert shown["params"] == {"day": "2026-01-02", "unused": "1"}
    assert [r["variables"] for r in shown["runs"]] == [{"day": "2026-01-02"}]
    # plan shows the variables it used (from the row, and -p over them for a look).
    planned = json.loads(ws.run("plan", "--task-id", "1", "--json", "-p", "day=2026-01-03", check=True).stdout)
    assert planned["variables"] == {"day": "2026-01-03"}
    assert "variables:      day=2026-01-02" in ws.run("plan", "--task-id", "1", check=True).stdout


def test_escaped_placeholder_is_literal_text(ws: Workspace) -> None:
    source_db(ws)
    proc = ws.run("run", write(ws, spec("note = '$${day}'", out="out/lit")), "-p", "day=x")
    assert proc.returncode == 0, proc.stderr
    assert jsonl_ids(ws.root / "out" / "lit") == [99]


def test_task_row_params_and_built_ins(ws: Workspace) -> None:
    source_db(ws)
    before = datetime.now(UTC)
    text = json.dumps(spec("day = '${day}'", out="out/${run_date}"))
    conn = sqlite3.connect(ws.root / "var" / "wormhole.db")
    with conn:  # an upstream system's INSERT, params included
        task_id = conn.execute("INSERT INTO wormhole_task (name, spec, params) VALUES (?, ?, ?)",
                               ("daily", text, '{"day": "2026-01-03"}')).lastrowid
    conn.close()
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr
    (run,) = ws.show(int(task_id or 0))["runs"]
    used = run["variables"]
    assert used["day"] == "2026-01-03" and used["run_date"] in {before.strftime("%Y-%m-%d"),
                                                                 datetime.now(UTC).strftime("%Y-%m-%d")}
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", run["variables"].get("run_ts", "2000-01-01 00:00:00"))
    assert jsonl_ids(ws.root / "out" / used["run_date"]) == [i for i in range(30) if DAYS[i % 3] == "2026-01-03"]


def test_a_param_overrides_a_built_in(ws: Workspace) -> None:
    source_db(ws)
    proc = ws.run("run", write(ws, spec("day = '${run_date}'", out="out/${run_date}")), "-p", "run_date=2026-01-01",
                  "-p", "day=unused")
    assert proc.returncode == 0, proc.stderr
    assert jsonl_ids(ws.root / "out" / "2026-01-01") == [i for i in range(30) if i % 3 == 0] + [99]


@pytest.mark.mysql
def test_task_submit_params_with_the_task_db_on_mariadb(tmp_path: Path, mysql_db: str) -> None:
    ws = make_workspace(tmp_path, task_db=mysql_db)
    source_db(ws)
    file = write(ws, spec("day = '${day}'", out="out/${day}"))
    task_id = int(ws.run("task", "submit", file, "-p", "day=2026-01-01", check=True).stdout)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr
    shown = ws.show(task_id)
    assert shown["params"] == {"day": "2026-01-01"}
    assert shown["runs"][0]["variables"] == {"day": "2026-01-01"}
    assert jsonl_ids(ws.root / "out" / "2026-01-01") == [i for i in range(30) if i % 3 == 0] + [99]


def test_unresolved_variable_exits_204_naming_it_and_its_path(ws: Workspace) -> None:
    source_db(ws)
    file = write(ws, spec("day = '${day}'"))
    proc = ws.run("run", file)
    assert proc.returncode == 204
    assert "source.params.where: unresolved variable ${day}" in proc.stderr
    assert "destinations[1].params.table: unresolved variable ${day}" in proc.stderr
    assert ws.run("task", "list", check=True).stdout.count("\n") == 1  # nothing recorded
    assert ws.run("validate", file).returncode == 204
    assert ws.run("validate", file, "-p", "day=2026-01-01", check=True).returncode == 0
    assert ws.run("run", file, "-p", "1day=x").returncode == 2  # not a name: bad usage
    # A task row without the value: the run ends failed, 204, the problem recorded.
    task_id = ws.submit(spec("day = '${day}' OR '${ bad }' = ''"))
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 204
    shown = ws.show(task_id)
    assert shown["status"] == "failed"
    problems = shown["result"]["problems"]
    assert any(p.startswith("source.params.where: unresolved variable ${day}") for p in problems)
    assert any(p.startswith("source.params.where: ${ bad } is not a variable name") for p in problems)


def test_a_resumed_run_uses_the_values_of_the_run_it_resumes(ws: Workspace) -> None:
    from wormhole.taskdb import open_store

    source_db(ws)
    with open_store(ws.task_db.replace("sqlite:///", f"sqlite:///{ws.root}/")) as store:
        task_id = store.submit("daily", json.dumps(spec("day = '${day}'", out="out/${run_date}")),
                               params='{"day": "2026-01-01"}')
        # A run that crashed yesterday: it recorded its values, and the task was reset to resume it.
        assert store.claim(task_id, "gone")
        crashed = store.start_run(task_id, "gone", variables='{"day": "2026-01-02", "run_date": "2020-05-06"}')
        # Heartbeats are kept to the millisecond: one older than 0 s needs the clock past the claim's.
        time.sleep(0.005)
        assert store.retry(task_id, force=True, stale_s=0.0)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr
    runs = ws.show(task_id)["runs"]
    assert [(r["status"], r["resumed_from"]) for r in runs] == [("crashed", None), ("success", crashed)]
    assert runs[1]["variables"] == {"day": "2026-01-02", "run_date": "2020-05-06"}
    assert jsonl_ids(ws.root / "out" / "2020-05-06") == [i for i in range(30) if DAYS[i % 3] == "2026-01-02"]


def test_datax_job_with_a_variable_in_where_imports_with_it_kept(ws: Workspace) -> None:
    job = {"job": {"setting": {"speed": {"channel": 1}}, "content": [{
        "reader": {"name": "mysqlreader", "parameter": {
            "username": "etl", "password": "", "column": ["id", "day"], "where": "gmt_create >= '${bizdate}'",
            "connection": [{"table": ["events"], "jdbcUrl": ["jdbc:mysql://db1:3306/shop"]}]}},
        "writer": {"name": "streamwriter", "parameter": {"print": False}}}]}}
    (ws.root / "job.json").write_text(json.dumps(job), encoding="utf-8")
    ws.run("import", "datax", "job.json", "-o", "task.json", check=True)
    task = json.loads((ws.root / "task.json").read_text(encoding="utf-8"))
    assert task["source"]["params"]["where"] == "gmt_create >= '${bizdate}'"
    proc = ws.run("validate", "task.json")
    assert proc.returncode == 204 and "source.params.where: unresolved variable ${bizdate}" in proc.stderr
    ws.run("validate", "task.json", "-p", "bizdate=20260101", check=True)


def test_sigkill_then_takeover_resumes_with_the_crashed_runs_values(ws: Workspace) -> None:
    """${run_ts} names the output directory: the run taking over (seconds later) must write the crashed
    run's directory, so what the crashed run committed there and what it writes add up exactly."""
    import signal
    import subprocess
    import time

    from tests.conftest import crashing_command

    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0})
    doc = {"source": {"plugin": "stream", "params": {"rows": 4000, "splits": 4}}, "settings": {"speed": {"channel": 1}},
           "destinations": [{"id": "lake", "plugin": "file", "params": {"path": "out/${run_ts}", "format": "jsonl"}}]}
    task_id = ws.submit(doc)
    first = subprocess.run([*crashing_command("after_seal:lake:2"), "--task-id", str(task_id)], cwd=ws.root,
                           env=ws.env(), capture_output=True, text=True, timeout=120)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    time.sleep(2.5)  # stale_s = 2, and run_ts moves on
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr
    crashed, resumed = ws.show(task_id)["runs"]
    assert resumed["resumed_from"] == crashed["id"] and resumed["variables"] == crashed["variables"]
    (out,) = (ws.root / "out").iterdir()
    assert out.name == crashed["variables"]["run_ts"]
    assert jsonl_ids(out) == list(range(4000))


# -- a value cannot rewrite the SQL it goes into --------------------------------------------------

def names_source(ws: Workspace, where: str, plugin: str, params: dict[str, Any]) -> str:
    """A file task reading ``people`` (``plugin`` with ``params``) with ``where`` into out/sel."""
    lake = {"id": "lake", "plugin": "file", "params": {"path": "out/sel", "format": "jsonl"}}
    return write(ws, {"source": {"plugin": plugin, "params": {**params, "where": where}},
                      "settings": {"speed": {"channel": 4}}, "destinations": [lake]}, "sel.json")


PEOPLE = [(i, "O'Brien" if i == 7 else "back\\slash" if i == 8 else f"p{i}") for i in range(1, 301)]


@pytest.mark.mysql
def test_a_value_that_is_no_sql_literal_cannot_widen_a_mysql_where(ws: Workspace, server: Server,
                                                                    dbs: Databases) -> None:
    """``id > ${n}`` with ``n=0) OR (1=1`` read every row in each of the 20 splits (6,000 rows from 300,
    exit 0); ``O'Brien`` broke the SQL. Now: a raw value is one literal or exit 204; typed ones are written
    as literals of MySQL; a where that closes more than it opens is refused too."""
    db = dbs.create("vars")
    conn = server.connect(db)
    create_table(conn, db, "people", "id INT PRIMARY KEY, name VARCHAR(20)")
    insert_rows(conn, db, "people", ("id", "name"), PEOPLE)
    conn.close()
    source = {"plugin": "mysql", "params": server.params(db, table="people", split_pk="id")}
    out = ws.root / "out" / "sel"

    proc = ws.run("run", names_source(ws, "id > ${n}", **source), "-p", "n=0) OR (1=1")
    assert proc.returncode == 204, proc.stderr[-2000:]
    assert "source.params.where: ${n} = '0) OR (1=1' is not one SQL literal" in proc.stderr
    assert not out.exists()
    # The guard without variables (and under ${n:sql}, trusted text): the where must stay one condition.
    for where, params in (("id > 0) OR (1=1", ()), ("id > ${n:sql}", ("-p", "n=0) OR (1=1"))):
        proc = ws.run("run", names_source(ws, where, **source), *params)
        assert proc.returncode == 204, proc.stderr[-2000:]
        assert "source.params.where: the ) at offset 6 closes a parenthesis it did not open" in proc.stderr
        assert not out.exists()
    proc = ws.run("run", names_source(ws, "id > ${n:int}", **source), "-p", "n=1 OR 1=1")
    assert proc.returncode == 204 and "${n:int} = '1 OR 1=1' is not an integer" in proc.stderr
    proc = ws.run("run", names_source(ws, "name = '${s}'", **source), "-p", "s=O'Brien")
    assert proc.returncode == 204 and "would end the string literal it stands in: declare it ${s:str}" in proc.stderr

    # A plain number is one literal, as before; typed strings are escaped for MySQL (a ' and a \).
    proc = ws.run("run", names_source(ws, "id > ${n} OR name IN (${a:str}, '${b:str}')", **source),
                  "-p", "n=295", "-p", "a=O'Brien", "-p", "b=back\\slash")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert jsonl_ids(out) == [7, 8, 296, 297, 298, 299, 300]


def test_a_sqlite_where_stays_one_condition_and_a_str_value_is_escaped(ws: Workspace) -> None:
    conn = sqlite3.connect(ws.root / "people.db")
    with conn:
        conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO people VALUES (?, ?)", PEOPLE)
    conn.close()
    source = {"plugin": "sqlite", "params": {"path": "people.db", "table": "people"}}
    proc = ws.run("run", names_source(ws, "id > ${n}", **source), "-p", "n=300 OR 1=1")
    assert proc.returncode == 204 and "${n} = '300 OR 1=1' is not one SQL literal" in proc.stderr
    proc = ws.run("run", names_source(ws, "id > 300) OR (1=1", **source))
    assert proc.returncode == 204 and "source.params.where: the ) at offset 8" in proc.stderr
    proc = ws.run("run", names_source(ws, "name = ${s:str} OR name = ${b:str}", **source),
                  "-p", "s=O'Brien", "-p", "b=back\\slash")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert jsonl_ids(ws.root / "out" / "sel") == [7, 8]


@pytest.mark.postgres
def test_typed_values_are_postgresql_literals(ws: Workspace, pg_schemas: Schemas) -> None:
    schema = pg_schemas.create("vars")
    pg_execute(pg_schemas.conn, f"CREATE TABLE {schema}.people (id int PRIMARY KEY, name text, born date)")
    for i, name in PEOPLE[:10]:
        pg_execute(pg_schemas.conn, f"INSERT INTO {schema}.people VALUES (%s, %s, %s)",
                   (i, name, f"2026-01-{i:02d}"))
    source = {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="people")}
    proc = ws.run("run", names_source(ws, "born > ${d}", **source), "-p", "d=2026-01-02")  # arithmetic: refused
    assert proc.returncode == 204 and "${d} = '2026-01-02' is not one SQL literal" in proc.stderr
    proc = ws.run("run", names_source(ws, "born >= ${d:date} OR name = ${s:str} OR name = E'${b:str}'", **source),
                  "-p", "d=2026-01-09", "-p", "s=O'Brien", "-p", "b=back\\slash")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert jsonl_ids(ws.root / "out" / "sel") == [7, 8, 9, 10]

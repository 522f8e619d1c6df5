"""Incremental reads of an SQLite source on a timestamp key: the window ends before the clock (a row stamped
later waits for a run after its time), `wormhole plan` shows it, and each run appends only the new rows."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime, timedelta

from tests.conftest import Workspace

SPEC = {"name": "events",
        "source": {"plugin": "sqlite", "params": {"path": "src.db", "table": "events"},
                   "incremental": {"column": "at", "initial": "2026-01-01 00:00:00"}},
        "destinations": [{"id": "js", "plugin": "file", "params": {"path": "out", "format": "jsonl", "mode": "append"}},
                         {"id": "db", "plugin": "sqlite", "params": {"path": "dw.db", "table": "events"}}]}


def add(ws: Workspace, rows: list[tuple[int, datetime]]) -> None:
    conn = sqlite3.connect(ws.root / "src.db")
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, at DATETIME, v TEXT)")
        conn.executemany("INSERT INTO events VALUES (?, ?, ?)", [(i, at.isoformat(sep=" "), f"v{i}") for i, at in rows])
    conn.close()


def delivered(ws: Workspace) -> tuple[list[int], list[int]]:
    lines = sorted(json.loads(line)["id"] for part in (ws.root / "out").glob("*.jsonl")
                   for line in part.read_text(encoding="utf-8").splitlines())
    conn = sqlite3.connect(ws.root / "dw.db")
    table = sorted(r[0] for r in conn.execute("SELECT id FROM events"))
    conn.close()
    return lines, table


def test_a_timestamp_key_takes_each_row_once_after_its_time(ws: Workspace) -> None:
    now = datetime.now().replace(microsecond=0)
    add(ws, [(1, datetime(2025, 12, 31)), (2, datetime(2026, 3, 1)), (3, now - timedelta(hours=1)),
             (4, now + timedelta(hours=1))])  # 1 is before `initial`, 4 is not due yet
    (ws.root / "task.json").write_text(json.dumps(SPEC), encoding="utf-8")
    shown = ws.run("plan", "task.json", check=True).stdout
    assert "incremental:    at (append, state key events) from 2026-01-01 00:00:00 (inclusive) to " in shown, shown
    assert "  js: from 2026-01-01 00:00:00 (watermark 2026-01-01 00:00:00)" in shown, shown
    ws.run("run", "task.json", check=True)
    assert delivered(ws) == ([2, 3], [2, 3])

    upper = datetime.fromisoformat(ws.show(1)["result"]["incremental"]["to"])
    # 5 is stamped at the first window's end (the next one starts there); 7 arrives late with an older stamp:
    # append never reads behind a watermark (lag_s is for writers whose stamps trail their commits).
    add(ws, [(5, upper), (6, now + timedelta(hours=2)), (7, upper - timedelta(seconds=1))])
    # The next window ends at the clock's whole second: a run within the first window's last second would read
    # an empty window and leave 5 for later (rightly). A quick machine gets there: wait for the next second.
    while datetime.now() < upper + timedelta(seconds=1):
        time.sleep(0.05)
    ws.run("run", "task.json", check=True)
    assert delivered(ws) == ([2, 3, 5], [2, 3, 5])
    watermarks = ws.show(2)["watermarks"]
    assert watermarks["state_key"] == "events" and set(watermarks["destinations"]) == {"js", "db"}
    assert datetime.fromisoformat(watermarks["destinations"]["js"]["value"]) >= now


def test_a_missing_or_unfit_column_is_a_bad_task_at_plan_and_run_and_plan_needs_no_task_database(
        ws: Workspace) -> None:
    add(ws, [(1, datetime(2026, 3, 1))])
    cases = (("nope", "source.incremental.column: nope is not a column of events in src.db"),
             ("v", "source.incremental.column: v is string; an incremental column must be"))
    for task_id, (column, problem) in enumerate(cases, 1):
        spec = {**SPEC, "source": {**SPEC["source"], "incremental": {"column": column}}}
        (ws.root / "task.json").write_text(json.dumps(spec), encoding="utf-8")
        submitted = ws.run_here("task", "submit", "task.json")  # the source answers: checked now, nothing recorded
        assert submitted.returncode == 204 and problem in submitted.stderr, (column, submitted.stderr)
        planned = ws.run_here("plan", "task.json")
        assert planned.returncode == 204 and problem in planned.stderr, (column, planned.stderr)
        ran = ws.run_here("run", "task.json")
        assert ran.returncode == 204, (column, ran.returncode)  # not 203: nothing failed to read
        assert problem in ws.show(task_id)["error"]
    # A source that does not answer now (a server down) is checked when a run plans: the task is recorded.
    down = {**SPEC, "source": {"plugin": "mysql", "incremental": {"column": "nope"}, "params": {
        "host": "127.0.0.1", "port": 1, "user": "root", "database": "d", "table": "t", "connect_retries": 1}}}
    (ws.root / "down.json").write_text(json.dumps(down), encoding="utf-8")
    assert ws.run_here("task", "submit", "down.json").returncode == 0
    # Without a task database, `plan FILE` shows every destination starting from `initial`.
    (ws.root / "task.json").write_text(json.dumps(SPEC), encoding="utf-8")
    shown = ws.run_here("plan", "task.json", "--task-db", "sqlite:///nowhere/none.db")
    assert shown.returncode == 0, shown.stderr
    assert "  js: from 2026-01-01 00:00:00 (watermark 2026-01-01 00:00:00)" in shown.stdout, shown.stdout
    assert "no watermark read (every destination from initial)" in shown.stdout
    assert not (ws.root / "nowhere").exists()

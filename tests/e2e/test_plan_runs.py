"""Planning on real stores: `wormhole plan`, the channel count, task groups, work stealing, and
concurrent readers on different databases (issue 11; seed 000, DataX's job planning).

The expected task groups are computed here, independently of wormhole's code, by DataX's algorithm
(JobAssignUtil.doAssign) applied to the split list the plan itself shows.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MYSQL_URL, Workspace, log_events, run_task
from tests.e2e.test_progress import run_on_a_terminal
from tests.mysql_helpers import (
    Databases,
    Server,
    count,
    create_table,
    execute,
    fill_from_sequence,
    fingerprint,
    q,
)
from tests.pg_helpers import Schemas, pg_schemas

__all__ = ["pg_schemas"]  # the fixture, used by name

SERVER = Server.from_url(MYSQL_URL)
DDL = "id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NULL, amount INT NULL"
FILL = {"id": "seq", "name": "CONCAT('row-', seq)", "amount": "seq % 1000"}
COLUMNS = ("id", "name", "amount")


def datax_groups(splits: list[dict[str, Any]], channels: int, per_group: int) -> list[dict[str, Any]]:
    """DataX's assignFairly on a split list, written out plainly (the test's own oracle)."""
    groups = math.ceil(channels / per_group)
    buckets: dict[str, list[str]] = {}
    for split in splits:
        buckets.setdefault(split["resource_mark"], []).append(split["id"])
    assigned: list[list[str]] = [[] for _ in range(groups)]
    index = 0
    while any(buckets.values()):
        for mark in buckets:
            if buckets[mark]:
                assigned[index % groups].append(buckets[mark].pop(0))
                index += 1
    spread = [channels // groups + (1 if i < channels % groups else 0) for i in range(groups)]
    return [{"id": i, "channels": spread[i], "splits": assigned[i]} for i in range(groups)]


def sharded_source(dbs: Databases, layout: list[list[int]], split_pk: str | None = "id") -> dict[str, Any]:
    """Databases with tables of the given row counts (ids unique across all of them)."""
    connections, first = [], 1
    for s, tables in enumerate(layout):
        db = dbs.create(f"shard{s}")
        names = []
        for t, rows in enumerate(tables):
            table = f"t{t}"
            create_table(dbs.admin, db, table, DDL)
            if rows:
                fill_from_sequence(dbs.admin, db, table, rows, FILL | {"id": f"seq + {first - 1}"})
            first += rows
            names.append(table)
        connections.append({"host": SERVER.host, "port": SERVER.port, "database": db, "tables": names})
    params = SERVER.params(connections=connections)
    if split_pk:
        params["split_pk"] = split_pk
    return {"plugin": "mysql", "params": params}


def null_dest(dest_id: str = "null") -> dict[str, Any]:
    return {"id": dest_id, "plugin": "stream", "params": {}}


def recorded_tasks(ws: Workspace) -> int:
    conn = sqlite3.connect(ws.root / "var" / "wormhole.db")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM wormhole_task").fetchone()[0])
    finally:
        conn.close()


def plan_json(ws: Workspace, spec: dict[str, Any]) -> dict[str, Any]:
    (ws.root / "task.json").write_text(json.dumps(spec))
    proc = ws.run("plan", "task.json", "--json", check=True)
    return json.loads(proc.stdout)


@pytest.mark.mysql
@pytest.mark.parametrize(("channel", "per_group"), [(2, 5), (6, 5), (7, 2), (12, 3), (40, 4)])
def test_plan_groups_a_sharded_source_as_datax_would(ws: Workspace, dbs: Databases, channel: int,
                                                     per_group: int) -> None:
    """Several databases, several uneven tables each: the plan's groups are DataX's for its own splits."""
    source = sharded_source(dbs, [[3000, 40, 700], [5], [2000, 0, 90, 10, 1]])
    target = dbs.create("target")
    ws.write_conf(speed={"channels_per_task_group": per_group})
    spec = {"source": source, "settings": {"speed": {"channel": channel}},
            "destinations": [{"id": "copy", "plugin": "mysql", "params": SERVER.params(target, table="t")}]}

    plan = plan_json(ws, spec)

    assert list(plan) == ["engine", "engine_reason", "channels", "channel_reason", "splits", "task_groups",
                          "destinations", "estimated_rows", "speed", "variables", "conf_file"]
    assert Path(plan["conf_file"]).resolve() == (ws.root / "conf" / "engine.toml").resolve()  # the one it read
    splits = plan["splits"]
    # The splitter's order: shard by shard, table by table; each split marked with its database.
    marks = [s["resource_mark"] for s in splits]
    assert marks == sorted(marks, key=marks.index) and len(set(marks)) == 3
    assert all(m.endswith(c["database"]) for m, c in zip(dict.fromkeys(marks), source["params"]["connections"]))
    assert all(s["range"] is None or "`id`" in s["range"] for s in splits)
    channels = min(channel, len(splits))
    assert plan["channels"] == channels
    assert plan["channel_reason"].startswith(f"settings.speed.channel {channel}")
    assert plan["task_groups"] == datax_groups(splits, channels, per_group)
    assert sorted(i for g in plan["task_groups"] for i in g["splits"]) == sorted(s["id"] for s in splits)
    assert plan["destinations"] == [{"id": "copy", "plugin": "mysql", "writers": 3,
                                     "method": "writer threads; load=append, write_mode=insert, method=auto",
                                     "load": f"none: the run will fail: table `{target}`.`t` does not exist on "
                                             f"{SERVER.host}:{SERVER.port}/{target} (the mysql store creates no "
                                             "table: create it first)"}]
    # Planning moved no row and touched no destination; no task was recorded.
    assert execute(dbs.admin, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
                   (target,))[0][0] == 0
    assert recorded_tasks(ws) == 0


@pytest.mark.mysql
def test_a_run_follows_its_plan_and_records_it(ws: Workspace, dbs: Databases) -> None:
    """The run's result holds the plan `wormhole plan` printed; the copy is exact."""
    source = sharded_source(dbs, [[4000, 300], [1200], [50, 2500, 7]])
    target = dbs.create("target")
    create_table(dbs.admin, target, "t", DDL)
    ws.write_conf(speed={"channels_per_task_group": 2})
    spec = {"source": source, "settings": {"speed": {"channel": 5}},
            "destinations": [{"id": "copy", "plugin": "mysql", "params": SERVER.params(target, table="t")},
                             null_dest()]}
    planned = plan_json(ws, spec)

    code, task, stderr = run_task(ws, spec)

    assert code == 0, stderr[-3000:]
    recorded = task["result"]["plan"]
    for key in ("engine", "channels", "channel_reason", "splits", "task_groups", "destinations"):
        assert recorded[key] == planned[key], key
    assert recorded["task_groups"] == datax_groups(planned["splits"], 5, 2)
    made = [e for e in log_events(stderr) if e["event"] == "plan.made"]
    assert len(made) == 1 and made[0]["task_groups"] == recorded["task_groups"]
    started = [e for e in log_events(stderr) if e["event"] == "reader.started"]
    assert started[0]["threads"] == 5 and started[0]["task_groups"] == 3
    assert task["result"]["source"]["channels"] == 5
    total = 4000 + 300 + 1200 + 50 + 2500 + 7
    assert count(dbs.admin, target, "t") == total
    assert fingerprint(dbs.admin, target, "t", COLUMNS)[:2] == (total, total)


@pytest.mark.mysql
def test_an_idle_task_group_takes_splits_from_a_slow_one(ws: Workspace, dbs: Databases) -> None:
    """Three groups of one channel: group 0's first split is a big table; the other groups finish their
    small ones and take group 0's waiting splits instead of idling (DataX's groups would wait)."""
    source = sharded_source(dbs, [[300_000], [5, 5, 5, 5], [5, 5, 5, 5]], split_pk=None)
    target = dbs.create("target")
    create_table(dbs.admin, target, "t", DDL)
    ws.write_conf(speed={"channels_per_task_group": 1})
    spec = {"source": source, "settings": {"speed": {"channel": 3}},
            "destinations": [{"id": "copy", "plugin": "mysql", "params": SERVER.params(target, table="t")}]}

    code, task, stderr = run_task(ws, spec)

    assert code == 0, stderr[-3000:]
    groups = task["result"]["plan"]["task_groups"]
    assert [g["channels"] for g in groups] == [1, 1, 1]
    big = groups[0]["splits"][0]
    assert big.endswith("/t0") and "shard0" in big
    waiting = set(groups[0]["splits"][1:])
    stolen = {e["split_id"] for e in log_events(stderr) if e["event"] == "reader.split_stolen"}
    assert waiting and waiting <= stolen, (waiting, stolen)
    assert big not in stolen  # group 0's own channel was reading it
    total = 300_000 + 8 * 5
    assert fingerprint(dbs.admin, target, "t", COLUMNS)[:2] == (total, total)


@pytest.mark.mysql
def test_concurrent_readers_read_different_databases_at_once(ws: Workspace, dbs: Databases) -> None:
    """3 shards, 3 channels: the server's processlist, sampled during the run, shows reads on all three
    databases at the same time. The task's speed limit (3 channels of 50,000 rows/s) keeps each read open
    for 4 s, so a loaded machine that starts one channel late still overlaps them."""
    source = sharded_source(dbs, [[200_000, 200_000], [200_000, 200_000], [200_000, 200_000]], split_pk=None)
    databases = [c["database"] for c in source["params"]["connections"]]
    spec = {"source": source, "settings": {"speed": {"record": 150_000, "channel_record": 50_000}},
            "destinations": [null_dest()]}
    watcher = SERVER.connect()
    most: set[str] = set()
    seen: set[str] = set()
    done = threading.Event()

    def sample() -> None:
        nonlocal most
        pattern = re.compile("|".join(re.escape(q(db)) for db in databases))
        while not done.is_set():
            rows = execute(watcher, "SELECT INFO FROM information_schema.PROCESSLIST "
                                    "WHERE ID <> CONNECTION_ID() AND INFO LIKE 'SELECT%'")
            now = {m.group(0) for (info,) in rows for m in [pattern.search(info or "")] if m}
            seen.update(now)
            if len(now) > len(most):
                most = now
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        code, task, stderr = run_task(ws, spec)
    finally:
        done.set()
        sampler.join(10)
        watcher.close()

    assert code == 0, stderr[-3000:]
    assert task["result"]["source"]["rows_read"] == 1_200_000
    assert len(seen) == 3, seen
    assert len(most) == 3, f"at most {len(most)} databases were read at once: {most}"
    # Round-robin over the marks: the first three splits the single group's channels take are on
    # three different databases.
    first = task["result"]["plan"]["task_groups"][0]["splits"][:3]
    assert len({s.split("/")[1] for s in first}) == 3


def test_a_job_limit_without_a_per_channel_limit_is_refused_everywhere(ws: Workspace) -> None:
    """`validate`, `plan`, `run` exit 204 naming both keys; a task row with it ends failed (204)."""
    spec = {"source": {"plugin": "stream", "params": {"rows": 10}}, "destinations": [null_dest()],
            "settings": {"speed": {"record": 1000}}}
    (ws.root / "task.json").write_text(json.dumps(spec))
    for args in (("validate", "task.json"), ("plan", "task.json"), ("run", "task.json")):
        proc = ws.run(*args)
        assert proc.returncode == 204, (args, proc.stderr)
        assert "settings.speed.record" in proc.stderr and "channel_record" in proc.stderr, proc.stderr
    assert recorded_tasks(ws) == 0
    code, task, _ = run_task(ws, spec)
    assert code == 204 and task["status"] == "failed" and "channel_record" in task["error"]
    # With the per-channel limit in engine.toml, the same task plans 1000 / 250 = 4 channels.
    ws.write_conf(speed={"channel_record": 250})
    plan = plan_json(ws, spec | {"source": {"plugin": "stream", "params": {"rows": 10, "splits": 8}}})
    assert (plan["channels"], plan["channel_reason"]) == (4, "settings.speed.record 1000 / channel_record 250 = 4")


def test_plan_of_a_stored_task_leaves_it_pending(ws: Workspace) -> None:
    spec = {"source": {"plugin": "stream", "params": {"rows": 100, "splits": 3}},
            "destinations": [{"id": "f", "plugin": "file", "params": {"path": "out/f", "format": "csv"}}],
            "settings": {"speed": {"channel": 8}}}
    task_id = ws.submit(spec)
    proc = ws.run("plan", "--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr
    assert "channels:       3 (settings.speed.channel 8, capped at 3 split(s))" in proc.stdout
    assert "f (file): 1 writer(s), writer threads; format=csv, mode=overwrite" in proc.stdout
    assert ws.show(task_id)["status"] == "pending"
    assert not (ws.root / "out").exists()
    assert ws.run("plan", "--task-id", "999").returncode == 204
    assert ws.run("plan").returncode == 2


@pytest.mark.mysql
def test_a_table_listed_twice_is_refused_not_read_twice_or_merged(ws: Workspace, dbs: Databases) -> None:
    """Two splits with one id would be one split to the task groups: refused, naming it, nothing written."""
    source = sharded_source(dbs, [[50]])
    source["params"]["connections"].append(dict(source["params"]["connections"][0]))
    spec = {"source": source, "destinations": [{"id": "f", "plugin": "file",
                                                "params": {"path": "out/f", "format": "jsonl"}}]}
    (ws.root / "task.json").write_text(json.dumps(spec))
    proc = ws.run("plan", "task.json")
    assert proc.returncode == 203 and "two splits named" in proc.stderr, proc.stderr
    code, task, stderr = run_task(ws, spec)
    assert code == 203 and "two splits named" in task["error"], stderr[-2000:]
    assert not (ws.root / "out").exists()


@pytest.mark.mysql
def test_plan_says_a_run_will_fail_on_a_missing_mysql_table_and_shows_no_log_on_a_terminal(
        ws: Workspace, dbs: Databases) -> None:
    """It said ``load: unknown (no table orders_new yet)``, after three info log lines (one of 4,189 characters)."""
    db = dbs.create("plan")
    conn = SERVER.connect(db)
    create_table(conn, db, "orders", DDL)
    fill_from_sequence(conn, db, "orders", 50, FILL)
    conn.close()
    spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="orders", split_pk="id")},
            "destinations": [{"id": "dw", "plugin": "mysql", "params": SERVER.params(db, table="orders_new")}]}
    (ws.root / "task.json").write_text(json.dumps(spec), encoding="utf-8")
    code, shown = run_on_a_terminal(ws, "plan", "task.json")
    assert code == 0, shown
    assert f"    load: none: the run will fail: table `{db}`.`orders_new` does not exist on " in shown, shown
    assert "(the mysql store creates no table: create it first)" in shown
    assert shown.startswith("engine:") and "[info" not in shown and "plan.made" not in shown  # the plan, not the log
    code, shown = run_on_a_terminal(ws, "plan", "task.json", "--log-level", "info")  # asked for: shown
    assert code == 0 and "plan.made" in shown and "load: none: the run will fail" in shown
    proc = ws.run("run", "task.json")  # and the run does fail, as the plan said
    assert proc.returncode != 0 and f"table `{db}`.`orders_new` does not exist" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.postgres
def test_plan_says_whether_a_missing_postgres_table_fails_the_run_or_is_created(ws: Workspace,
                                                                                 pg_schemas: Schemas) -> None:
    schema = pg_schemas.create("plan")
    conn = sqlite3.connect(ws.root / "src.db")
    with conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.close()
    spec = {"source": {"plugin": "sqlite", "params": {"path": "src.db", "table": "t"}}, "destinations": [
        {"id": "fails", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="missing")},
        {"id": "made", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="new",
                                                                               create_table=True)}]}
    (ws.root / "task.json").write_text(json.dumps(spec), encoding="utf-8")
    planned = json.loads(ws.run("plan", "task.json", "--json", check=True).stdout)
    load = {d["id"]: d["load"] for d in planned["destinations"]}
    assert load["fails"] == (f'none: the run will fail: table "{schema}"."missing" does not exist on '
                             f"{pg_schemas.server.host}:{pg_schemas.server.port}/{pg_schemas.server.database} "
                             "(create_table: true creates it from the source's columns)"), load
    assert load["made"].endswith(f'(no table "{schema}"."new" yet: the run creates it from the source\'s columns)')

"""Exactly once in ordinary operations, on the real MariaDB server: two task databases writing one table, a
retried partial task, a destination that fails while its lost split waits, rows wider than a lane's share.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace
from tests.e2e.test_resume import failure, start
from tests.mysql_helpers import Databases, VanishingServer, create_table, execute, q, scalar, tables

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

ROWS = 20_000


def failure_log(proc: Any) -> str:
    return str(proc.log_path.read_text())


def deployment(root: Path) -> Workspace:
    """A wormhole deployment of its own: its own task database (so its own task 1)."""
    root.mkdir(parents=True)
    ws = make_workspace(root)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.3, "stale_s": 1.5}, recovery={"retry_wait_s": 0.2})
    return ws


def parity_spec(db: str, dbs: Databases, parity: int) -> dict[str, Any]:
    """Stream ids of one parity into an append table without a key and a staging load, both on ``db``."""
    params = dbs.server.params(db)
    return {
        "source": {"plugin": "stream", "params": {"rows": ROWS, "splits": 20, "columns": [
            {"name": "id", "type": "int"}, {"name": "v", "type": "string"}]}},
        "transforms": [{"filter": f"id % 2 = {parity}"}],
        "destinations": [
            {"id": "app", "plugin": "mysql", "params": params | {"table": "t_app"}},
            {"id": "stg", "plugin": "mysql", "params": params | {"table": "t_stg", "load": "staging"}},
        ],
        "settings": {"speed": {"channel": 2}},
    }


def ids_of(dbs: Databases, db: str, table: str) -> list[int]:
    return [int(r[0]) for r in execute(dbs.admin, f"SELECT id FROM {q(db)}.{q(table)} ORDER BY id")]


def test_two_task_databases_writing_one_table_keep_apart(dbs: Databases, tmp_path: Path) -> None:
    """Deployment A's task 1 crashes after five splits of ``app`` are durable, leaving markers and its staging
    table; deployment B's task 1 (the other ids) then runs to the same tables; A resumes. Every row arrives
    once: B took none of A's markers for its own, and neither dropped the other's staging table."""
    db = dbs.create("two_dbs")
    create_table(dbs.admin, db, "t_app", "id BIGINT NOT NULL, v VARCHAR(64) NULL")
    create_table(dbs.admin, db, "t_stg", "id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64) NULL")
    a, b = deployment(tmp_path / "a"), deployment(tmp_path / "b")
    task_a = a.submit(parity_spec(db, dbs, 0))
    task_b = b.submit(parity_spec(db, dbs, 1))
    assert task_a == task_b == 1  # the same task id in two task databases

    crashed = start(a, task_a, crash="after_seal:app:5")
    crashed.wait(timeout=120)
    assert crashed.returncode < 0, failure(crashed)
    a_staging = [t for t in tables(dbs.admin, db) if t.startswith("t_stg__wh")]
    assert len(a_staging) == 1, tables(dbs.admin, db)

    proc = b.run("--task-id", str(task_b), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not [e for e in log_events(proc.stderr) if e["event"] == "writer.split_already_durable"]
    assert a_staging[0] in tables(dbs.admin, db), "B dropped A's staging table"
    assert b.show(task_b)["result"]["destinations"]["app"]["rows_written"] == ROWS // 2

    time.sleep(2.0)  # A's claim is stale now
    proc = a.run("--task-id", str(task_a), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = a.show(task_a)["result"]
    assert result["destinations"]["app"]["splits_resumed"] >= 5, result["destinations"]["app"]

    every = ids_of(dbs, db, "t_app")
    assert len(every) == len(set(every)) == ROWS, (len(every), len(set(every)))
    assert ids_of(dbs, db, "t_stg") == ids_of(dbs, db, "t_app")[0::2]  # A's staging load committed last
    assert sorted(tables(dbs.admin, db)) == ["t_app", "t_stg", "wormhole_splits"]
    assert execute(dbs.admin, f"SELECT COUNT(*) FROM {q(db)}.wormhole_splits")[0][0] == 0


def test_a_retried_partial_task_writes_only_the_destinations_that_did_not_commit(dbs: Databases,
                                                                              ws: Workspace) -> None:
    """``later`` fails at prepare, ``good`` and ``js`` commit (partial); after a retry, whose run is killed
    midway and taken over, only ``later`` is written: nothing of ``good`` (no key) or ``js`` twice."""
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.3, "stale_s": 1.5})
    db = dbs.create("retry")
    create_table(dbs.admin, db, "good", "id BIGINT NOT NULL, v VARCHAR(64) NULL")  # no key: twice shows
    params = dbs.server.params(db)
    spec = {"source": {"plugin": "stream", "params": {"rows": ROWS, "splits": 8, "columns": [
                {"name": "id", "type": "int"}, {"name": "v", "type": "string"}]}},
            "destinations": [{"id": "good", "plugin": "mysql", "params": params | {"table": "good"}},
                             {"id": "later", "plugin": "mysql", "params": params | {"table": "later"}},
                             {"id": "js", "plugin": "file", "params": {"path": str(ws.root / "out"), "format": "jsonl",
                                                                        "mode": "append"}}]}
    task_id = ws.submit(spec)
    first = ws.run("--task-id", str(task_id), timeout=240)
    assert first.returncode == 202, first.stderr[-3000:]
    assert ws.show(task_id)["status"] == "partial"

    create_table(dbs.admin, db, "later", "id BIGINT NOT NULL, v VARCHAR(64) NULL")
    assert ws.run("task", "retry", str(task_id)).returncode == 0
    killed = start(ws, task_id, crash="after_seal:later:3")
    killed.wait(timeout=120)
    assert killed.returncode < 0, failure(killed)
    time.sleep(2.0)  # stale: the next run takes the retry's run over
    second = ws.run("--task-id", str(task_id), timeout=240)
    assert second.returncode == 0, second.stderr[-3000:]
    task = ws.show(task_id)
    dests = task["result"]["destinations"]
    assert dests["good"]["skipped"] and dests["js"]["skipped"] and dests["later"]["skipped"] is None, dests
    assert dests["good"]["rows_written"] == 0 and dests["later"]["splits_resumed"] >= 3, dests["later"]
    assert [r["status"] for r in task["runs"]] == ["partial", "crashed", "success"]
    for table in ("good", "later"):
        ids = ids_of(dbs, db, table)
        assert len(ids) == len(set(ids)) == ROWS, (table, len(ids), len(set(ids)))
    lines = sum(len(p.read_text().splitlines()) for p in (ws.root / "out").glob("part-*"))
    assert lines == ROWS

    # --force on the successful task is the one way to load it again: every destination is written anew.
    assert ws.run("task", "retry", str(task_id)).returncode != 0
    assert ws.run("task", "retry", "--force", str(task_id)).returncode == 0
    third = ws.run("--task-id", str(task_id), timeout=240)
    assert third.returncode == 0, third.stderr[-3000:]
    assert len(ids_of(dbs, db, "good")) == 2 * ROWS


def test_a_destination_whose_server_vanishes_while_its_lost_splits_wait_fails_alone(dbs: Databases,
                                                                                   ws: Workspace) -> None:
    """``far``'s server vanishes mid-run: its open splits are lost and queued to be read again for it,
    then it fails for good. The queued splits are dropped (nobody needs them), the readers go on, the
    healthy destinations commit every row, and the run ends partial instead of waiting forever."""
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  recovery={"retry_wait_s": 10.0, "split_retries": 2})  # splits wait while far fails
    db = dbs.create("vanish")
    for table in ("far", "near"):
        create_table(dbs.admin, db, table, "id BIGINT NOT NULL, v VARCHAR(64) NULL")
    relay = VanishingServer(dbs.server)
    rows = 60_000
    spec = {"source": {"plugin": "stream", "params": {"rows": rows, "splits": 60, "columns": [
                {"name": "id", "type": "int"}, {"name": "v", "type": "string"}]}},
            "destinations": [
                {"id": "far", "plugin": "mysql", "concurrency": 2, "params": dbs.server.params(
                    db, table="far", host="127.0.0.1", port=relay.port, connect_timeout_s=1, retries=1,
                    retry_wait_s=0.2, batch_size=100)},
                {"id": "near", "plugin": "mysql", "params": dbs.server.params(db, table="near")},
                {"id": "js", "plugin": "file", "params": {"path": str(ws.root / "out"), "format": "jsonl"}}],
            "settings": {"speed": {"channel": 2, "channel_record": 20_000}}}
    try:
        task_id = ws.submit(spec)
        proc = start(ws, task_id)
        deadline = time.monotonic() + 60
        while (time.monotonic() < deadline and proc.poll() is None
               and scalar(dbs.admin, f"SELECT COUNT(*) FROM {q(db)}.far") < 5_000):
            time.sleep(0.05)
        relay.cut()
        proc.wait(timeout=150)
    finally:
        relay.close()
    assert proc.returncode == 202, failure(proc)
    result = ws.show(task_id)["result"]
    dests = result["destinations"]
    assert dests["far"]["status"] == "failed" and dests["near"]["status"] == dests["js"]["status"] == "success"
    near = ids_of(dbs, db, "near")
    assert len(near) == len(set(near)) == rows
    assert sum(len(p.read_text().splitlines()) for p in (ws.root / "out").glob("part-*")) == rows
    # Its server is gone, so its committed splits cannot be rolled back: the result says so.
    assert dests["far"]["rollback_error"], dests["far"]
    events = log_events(failure_log(proc))
    assert [e for e in events if e["event"] == "coordinator.split_dropped"], "\n".join(
        f'{e["event"]} {e.get("destination")} {e.get("split_id")} {str(e.get("error") or e.get("why"))[:100]}'
        for e in events if e["level"] != "info")


def test_rows_wider_than_a_lanes_share_of_the_queue_flow(dbs: Databases, ws: Workspace) -> None:
    """A split's last batch holds fewer rows than spill_rows but more bytes than the lane's share of
    queue_bytes: the end marker used to wait for room while the writer waited for rows (a deadlock
    until push_timeout_s). Rows of 10 KB and of 3 MB reach mysql and jsonl whole."""
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  exchange={"queue_bytes": 1024 * 1024, "batch_bytes": 512 * 1024})
    src, dst = dbs.create("wide_src"), dbs.create("wide_dst")
    for db in (src, dst):
        create_table(dbs.admin, db, "t", "id BIGINT NOT NULL PRIMARY KEY, body LONGTEXT NOT NULL")
    rows = [(i, (f"{i:08d}" * 1250)) for i in range(1, 801)] + [(i, f"{i:08d}" * 400_000) for i in range(801, 805)]
    for row in rows:
        execute(dbs.admin, f"INSERT INTO {q(src)}.t VALUES (%s, %s)", row)
    spec = {"source": {"plugin": "mysql", "params": dbs.server.params(src, table="t", split_pk="id")},
            "destinations": [{"id": "db", "plugin": "mysql", "params": dbs.server.params(dst, table="t")},
                             {"id": "js", "plugin": "file", "params": {"path": str(ws.root / "out"),
                                                                        "format": "jsonl"}}],
            "settings": {"speed": {"channel": 1}}}
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert execute(dbs.admin, f"SELECT COUNT(*), SUM(CRC32(body)) FROM {q(dst)}.t") == execute(
        dbs.admin, f"SELECT COUNT(*), SUM(CRC32(body)) FROM {q(src)}.t")
    lines = [json.loads(line) for p in (ws.root / "out").glob("part-*") for line in p.read_text().splitlines()]
    assert sorted((r["id"], r["body"]) for r in lines) == rows

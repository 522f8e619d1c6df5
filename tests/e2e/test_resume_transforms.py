"""A crashed run with adaptive push-up, resumed: every split some destination holds is read again under
the placement it was read under (its checkpoint rows record it), not under what the resumed run would
decide now, and every destination ends up exact.

The crash is made deterministic: the test holds a lock on the MySQL destination's table, so its inserts
wait while the jsonl destination seals every split; the run is SIGKILLed then. The resumed run must read
every split again for the MySQL destination alone.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace
from tests.e2e.test_resume import failure, start
from tests.mysql_helpers import Databases, execute, fill_from_sequence

pytestmark = pytest.mark.mysql

ROWS = 60_000


def checkpoint(ws: Workspace, task_id: int) -> list[tuple[str, str, str | None]]:
    conn = sqlite3.connect(ws.root / "var" / "wormhole.db")
    try:
        return [tuple(r) for r in conn.execute("SELECT split_id, destination, payload FROM wormhole_checkpoint "
                                               "WHERE task_id = ?", (task_id,))]
    finally:
        conn.close()


def expected() -> list[tuple[Any, ...]]:
    return sorted((i, None if i % 7 == 0 else f"user{i}", i * 0.5, "test" if i % 10 == 0 else "ok", i % 5)
                  for i in range(1, ROWS + 1) if i % 5 == 3)


def test_a_resumed_run_reads_each_split_under_the_placement_it_was_read_under(
        tmp_path: Path, dbs: Databases) -> None:
    server = dbs.server
    src = dbs.create("rsrc")
    dst = dbs.create("rdst")
    admin = server.connect(src)
    execute(admin, "CREATE TABLE src (id BIGINT PRIMARY KEY, name VARCHAR(40), amount DOUBLE, status VARCHAR(8), "
                   "grp INT)")
    fill_from_sequence(admin, src, "src", ROWS, {
        "id": "seq", "name": "IF(seq % 7 = 0, NULL, CONCAT('user', seq))", "amount": "seq * 0.5",
        "status": "IF(seq % 10 = 0, 'test', 'ok')", "grp": "seq % 5"})
    execute(admin, f"CREATE TABLE `{dst}`.sink (id BIGINT PRIMARY KEY, name VARCHAR(40), amount DOUBLE, "
                   "status VARCHAR(8), grp INT)")
    ws = make_workspace(tmp_path)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0}, pushup={"interval_s": 0.05, "min_rows": 2000})
    spec = {"source": {"plugin": "mysql", "params": server.params(src, table="src", split_pk="id", split_factor=40)},
            "transforms": [{"filter": "grp = 3"}],
            "destinations": [
                {"id": "js", "plugin": "file", "params": {"path": str(tmp_path / "js"), "format": "jsonl"}},
                {"id": "db", "plugin": "mysql", "params": server.params(dst, table="sink")}],
            "settings": {"pushup": "adaptive", "speed": {"channel": 2}}}
    task_id = ws.submit(spec)

    # A next-key lock on the empty table's supremum: every insert into it waits while the lock is held.
    blocker = server.connect(dst)
    execute(blocker, "BEGIN")
    execute(blocker, "SELECT * FROM sink FOR UPDATE")
    first = start(ws, task_id)
    try:
        deadline = time.monotonic() + 60
        while True:
            rows = checkpoint(ws, task_id)
            planned = {s for s, d, _ in rows if d == ""}
            sealed = {s: json.loads(p) for s, d, p in rows if d == "js" and s in planned and p}
            if planned and len(sealed) == len(planned):
                break
            assert first.poll() is None, failure(first)
            assert time.monotonic() < deadline, f"{len(sealed)} of {len(planned)} splits sealed in js"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        execute(blocker, "ROLLBACK")
        blocker.close()
    assert not [s for s, d, _ in checkpoint(ws, task_id) if d == "db"]  # the MySQL destination holds nothing
    recorded = {s: p["plan"] for s, p in sealed.items()}
    assert "none" in recorded.values() and len(set(recorded.values())) == 2, recorded  # moved mid-run

    # The resumed run would place nothing in the source by itself (no decision for an hour): every split
    # it reads must be under its recorded placement all the same.
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0}, pushup={"interval_s": 3600, "min_rows": 2000})
    time.sleep(2.5)  # stale_s
    proc = ws.run("--task-id", str(task_id), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    task = ws.show(task_id)
    result = task["result"]
    transforms = result["transforms"]
    assert transforms["splits"] == recorded
    assert transforms["reproduced"] == sorted(recorded)
    assert transforms["moves"] == []
    events = log_events(proc.stderr)
    restored = next(e for e in events if e["event"] == "pushup.restored")
    assert restored["splits"] == len(recorded)
    # The pushed splits read a fifth of their rows, the others all: the pushed query really ran.
    assert ROWS // 5 < result["source"]["rows_read"] < ROWS, result["source"]
    assert result["destinations"]["js"]["rows_resumed"] == ROWS // 5
    assert result["destinations"]["db"]["rows_written"] == ROWS // 5

    got_js = sorted(tuple(json.loads(line).values()) for part in (tmp_path / "js").glob("*.jsonl")
                    for line in part.read_text().splitlines())
    got_db = sorted(execute(admin, f"SELECT id, name, amount, status, grp FROM `{dst}`.sink"))
    admin.close()
    assert got_js == expected()
    assert got_db == expected()

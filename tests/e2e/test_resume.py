"""Runs that survive crashes: SIGKILL a run of a 200,000-row MySQL source (20 splits) fanned out to mysql staging, mysql
append into a table without a primary key, jsonl and sqlite; once its claim is stale, `wormhole --task-id N`
takes it over and resumes it. Every destination must then equal the source (no row missing, none twice),
the resumed run must read fewer rows than the source holds, and nothing the crashed run left may remain.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace
from tests.mysql_helpers import Databases, Server, create_table, execute, fill_from_sequence, fingerprint, q, tables

pytestmark = pytest.mark.mysql

# Enough splits (channel 4 x split_factor 5) that every kill lands mid-run; more rows would prove nothing more.
ROWS = 200_000
COLUMNS = ("id", "k", "v")


def py_fingerprint(rows: Iterable[tuple[Any, ...]]) -> tuple[int, int, int, int]:
    """Rows, distinct ids, and order-independent sum and xor of a per-row CRC32 (as the server-side one)."""
    count, ids, total, xor = 0, set(), 0, 0
    for row in rows:
        crc = zlib.crc32("|".join(str(v) for v in row).encode())
        count += 1
        ids.add(row[0])
        total += crc
        xor ^= crc
    return count, len(ids), total, xor


@pytest.fixture(scope="module")
def source() -> Iterator[tuple[Server, str, tuple[int, int, int, int]]]:
    from tests.conftest import MYSQL_URL, mysql_or_skip

    mysql_or_skip().close()
    server = Server.from_url(MYSQL_URL)
    admin = server.connect()
    dbs = Databases(server, admin)
    db = dbs.create("resume_src")
    create_table(admin, db, "src", "id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(40) NOT NULL")
    fill_from_sequence(admin, db, "src", ROWS, {"id": "seq", "k": "seq % 1000", "v": "CONCAT('row-', seq)"})
    rows = execute(admin, f"SELECT id, k, v FROM {q(db)}.src")
    try:
        yield server, db, py_fingerprint(rows)
    finally:
        dbs.drop_all()  # closes admin too


class Fanout:
    """One scenario's destinations (fresh tables, directory and file) and the task that fills them."""

    def __init__(self, server: Server, src_db: str, dbs: Databases, root: Path, engine: str = "local") -> None:
        self.server = server
        self.src_db = src_db
        self.db = dbs.create("resume_dst")
        self.root = root
        conn = server.connect()
        create_table(conn, self.db, "dst_stg", "id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(40) NOT NULL")
        create_table(conn, self.db, "dst_app", "id BIGINT NOT NULL, k INT NOT NULL, v VARCHAR(40) NOT NULL")
        conn.close()
        self.jsonl = root / "out" / "orders"
        self.sqlite = root / "out" / "orders.db"
        self.spec = {
            "source": {"plugin": "mysql", "params": server.params(src_db, table="src", split_pk="id")},
            "destinations": [
                {"id": "stg", "plugin": "mysql", "params": server.params(self.db, table="dst_stg", load="staging")},
                {"id": "app", "plugin": "mysql", "params": server.params(self.db, table="dst_app")},
                {"id": "js", "plugin": "file", "params": {"path": str(self.jsonl), "format": "jsonl"}},
                {"id": "sq", "plugin": "sqlite", "params": {"path": str(self.sqlite), "table": "orders"}},
            ],
            "settings": {"engine": engine, "speed": {"channel": 4}},
        }

    def fingerprints(self) -> dict[str, tuple[Any, ...]]:
        conn = self.server.connect()
        try:
            out: dict[str, tuple[Any, ...]] = {
                "stg": fingerprint(conn, self.db, "dst_stg", COLUMNS),
                "app": fingerprint(conn, self.db, "dst_app", COLUMNS),
            }
        finally:
            conn.close()
        lines: list[tuple[Any, ...]] = []
        for part in sorted(self.jsonl.glob("part-*")):
            for line in part.read_text().splitlines():
                obj = json.loads(line)
                lines.append((obj["id"], obj["k"], obj["v"]))
        out["js"] = py_fingerprint(lines)
        lite = sqlite3.connect(self.sqlite)
        out["sq"] = py_fingerprint(lite.execute("SELECT id, k, v FROM orders"))
        lite.close()
        return out

    def source_fingerprint(self) -> tuple[Any, ...]:
        conn = self.server.connect()
        try:
            return fingerprint(conn, self.src_db, "src", COLUMNS)
        finally:
            conn.close()

    def leftovers(self) -> list[str]:
        conn = self.server.connect()
        try:
            left = [t for t in tables(conn, self.db) if t not in ("dst_stg", "dst_app", "wormhole_splits")]
            if "wormhole_splits" in tables(conn, self.db):
                marks = execute(conn, f"SELECT COUNT(*) FROM {q(self.db)}.wormhole_splits")[0][0]
                if marks:
                    left.append(f"{marks} marker rows")
        finally:
            conn.close()
        left += [p.name for p in self.jsonl.parent.iterdir() if ".wormhole-" in p.name]
        lite = sqlite3.connect(self.sqlite)
        left += [r[0] for r in lite.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'orders'")]
        lite.close()
        return left


def durable_everywhere(ws: Workspace, task_id: int, destinations: int = 4) -> int:
    """Splits of the task's latest run that every destination holds, per the checkpoint table."""
    conn = sqlite3.connect(ws.root / "var" / "wormhole.db")
    try:
        rows = conn.execute("SELECT split_id, COUNT(*) FROM wormhole_checkpoint WHERE task_id = ? "
                            "AND destination != '' GROUP BY run_id, split_id", (task_id,)).fetchall()
    finally:
        conn.close()
    return sum(1 for _, n in rows if n >= destinations)


def start(ws: Workspace, task_id: int, crash: str | None = None) -> subprocess.Popen[str]:
    """``wormhole --task-id`` in the background; ``crash``: a crash point it stops at (tests/crash_entry.py)."""
    env = ws.env()
    from tests.conftest import crashing_command, wormhole_command

    command = wormhole_command() if crash is None else crashing_command(crash)

    # Output to a file, not a pipe: a killed Spark driver's JVM may hold a pipe open after it dies.
    path = ws.root / f"run-{time.monotonic_ns()}.err"
    with path.open("w") as log:
        proc = subprocess.Popen([*command, "--task-id", str(task_id)], cwd=ws.root, env=env,
                                stdout=subprocess.DEVNULL, stderr=log, text=True)
    proc.log_path = path  # type: ignore[attr-defined]
    return proc


def failure(proc: subprocess.Popen[str]) -> str:
    return str(proc.log_path.read_text()[-3000:])  # type: ignore[attr-defined]


def resume(ws: Workspace, task_id: int, first: subprocess.Popen[str]) -> tuple[int, dict[str, Any], list[dict]]:
    first.wait(timeout=120)
    assert first.returncode == -signal.SIGKILL, (first.returncode, failure(first))
    assert ws.show(task_id)["status"] == "running"  # the crash left its claim behind
    time.sleep(2.5)  # stale_s = 2
    proc = ws.run("--task-id", str(task_id), timeout=300)
    return proc.returncode, ws.show(task_id), log_events(proc.stderr)


@pytest.fixture
def scenario(source: tuple[Server, str, tuple[int, ...]], tmp_path: Path) -> Iterator[tuple[Workspace, Fanout]]:
    server, src_db, _ = source
    admin = server.connect()
    dbs = Databases(server, admin)
    ws = make_workspace(tmp_path)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0}, recovery={"retry_wait_s": 0.2})
    try:
        yield ws, Fanout(server, src_db, dbs, tmp_path)
    finally:
        dbs.drop_all()  # closes admin too


def check_exact(fan: Fanout, source_py: tuple[int, ...], task: dict[str, Any], everywhere: int = 1,
                rows: int = ROWS) -> None:
    """``everywhere``: splits every destination held durably when the first run died (the resumed run
    must not read them again); ``rows``: how many the source holds."""
    prints = fan.fingerprints()
    expected_server = fan.source_fingerprint()
    assert prints["stg"] == expected_server and prints["app"] == expected_server
    assert prints["js"] == source_py and prints["sq"] == source_py
    source = task["result"]["source"]
    assert source["splits_skipped"] >= everywhere, source
    if everywhere:
        assert source["rows_read"] < rows, source
    assert fan.leftovers() == []


@pytest.mark.parametrize("point", ["during_reads", "before_seal", "after_seal", "after_commit"])
def test_sigkill_then_takeover_resumes_exactly(source: tuple[Server, str, tuple[int, ...]],
                                               scenario: tuple[Workspace, Fanout], point: str) -> None:
    ws, fan = scenario
    task_id = ws.submit(fan.spec)
    if point == "after_commit":
        # Between the destinations' final commits: stg and app committed, js and sq not, the task's
        # outcome not recorded. The resumed run must not load stg or app again (app has no key: a
        # second load would double it) and has nothing left to read.
        first = start(ws, task_id, crash="after_commit:app:1")
    elif point == "during_reads":
        first = start(ws, task_id)
        deadline = time.monotonic() + 90
        while durable_everywhere(ws, task_id) < 3:
            assert first.poll() is None, failure(first)
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
    else:
        # Killed inside the 10th split (of 20) of the append destination: before its transaction commits,
        # or after it committed and before the checkpoint knows it. Which splits the other destinations
        # had made durable by then depends on the machine's load: the checkpoint says.
        first = start(ws, task_id, crash=f"{point}:app:10")
    first.wait(timeout=120)
    everywhere = durable_everywhere(ws, task_id)
    code, task, events = resume(ws, task_id, first)
    assert code == 0, task.get("error")
    first_run = task["runs"][0]["id"] if "runs" in task else None
    result = task["result"]
    assert result["resumed_from_run"] is not None and result["resumed_from_run"] == (first_run or
                                                                                      result["resumed_from_run"])
    assert result["source"]["splits_skipped"] + result["source"]["splits_resumed"] > 0
    assert any(e["event"] == "task.resumed" for e in events)
    if point == "after_commit":
        assert result["source"]["rows_read"] == 0 and result["source"]["splits_skipped"] == result["source"]["splits"]
        assert {d: v["rows_resumed"] for d, v in result["destinations"].items()} == dict.fromkeys(
            ("stg", "app", "js", "sq"), ROWS)
        committed_before = ("writer.commit_skipped", "sqlite.committed_before", "file.committed_before")
        skipped = {e["destination"] for e in events if e["event"] in committed_before}
        assert skipped == {"stg", "app"}, skipped
    check_exact(fan, source[2], task, everywhere)


def durable_rows(ws: Workspace, task_id: int) -> int:
    conn = sqlite3.connect(ws.root / "var" / "wormhole.db")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM wormhole_checkpoint WHERE task_id = ? AND destination != ''",
                                (task_id,)).fetchone()[0])
    finally:
        conn.close()


# -- small, store-only scenarios (stream source, jsonl and sqlite destinations) ------------------------

def small_spec(root: Path, rows: int = 120_000) -> dict[str, Any]:
    return {"source": {"plugin": "stream", "params": {"rows": rows, "splits": 12}},
            "destinations": [{"id": "js", "plugin": "file", "params": {"path": str(root / "out" / "js"),
                                                                        "format": "jsonl"}},
                             {"id": "sq", "plugin": "sqlite", "params": {"path": str(root / "out" / "t.db"),
                                                                         "table": "t"}}],
            "settings": {"speed": {"record": 40_000, "channel_record": 10_000}}}


def crashed_midway(ws: Workspace, spec: dict[str, Any], durable: int = 6) -> int:
    task_id = ws.submit(spec)
    first = start(ws, task_id)
    deadline = time.monotonic() + 60
    while durable_rows(ws, task_id) < durable:
        assert first.poll() is None, failure(first)
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    return task_id


def small_outputs(root: Path) -> tuple[list[int], list[int]]:
    ids = sorted(json.loads(line)["id"] for p in (root / "out" / "js").glob("part-*")
                 for line in p.read_text().splitlines())
    lite = sqlite3.connect(root / "out" / "t.db")
    try:
        return ids, sorted(r[0] for r in lite.execute("SELECT id FROM t"))
    finally:
        lite.close()


@pytest.fixture
def small_ws(tmp_path: Path) -> Workspace:
    ws = make_workspace(tmp_path)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.3, "stale_s": 1.5})
    return ws


def test_two_processes_racing_to_take_over_a_stale_task_one_wins(small_ws: Workspace) -> None:
    ws = small_ws
    task_id = crashed_midway(ws, small_spec(ws.root))
    time.sleep(2.0)  # stale now
    racers = [ws.popen("--task-id", str(task_id)) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in racers)
    for p in racers:
        p.communicate()
    assert codes == [0, 205], codes
    task = ws.show(task_id)
    assert [r["status"] for r in task["runs"]] == ["crashed", "success"]
    assert task["runs"][1]["resumed_from"] == task["runs"][0]["id"]
    ids, lite = small_outputs(ws.root)
    assert ids == lite == list(range(120_000)) or ids == lite == list(range(1, 120_001))
    assert task["result"]["source"]["rows_read"] < 120_000


def test_task_show_lists_leftovers_and_task_clean_removes_only_that_tasks(small_ws: Workspace,
                                                                           tmp_path: Path) -> None:
    ws = small_ws
    mine = crashed_midway(ws, small_spec(ws.root / "mine"))
    other = crashed_midway(ws, small_spec(ws.root / "other"))
    # The crashed run of `mine` is recorded failed (as an operator or an older version would): its state
    # is then no longer resumable, only left behind.
    conn = sqlite3.connect(ws.root / "var" / "wormhole.db")
    with conn:
        conn.execute("UPDATE wormhole_task SET status = 'failed' WHERE id = ?", (mine,))
        conn.execute("UPDATE wormhole_task_run SET status = 'failed' WHERE task_id = ?", (mine,))
    conn.close()
    shown = ws.show(mine)["leftovers"]
    assert any(".wormhole-" in x for x in shown["js"]) and any("_wh_stage" in x for x in shown["sq"]), shown
    # `other` is still running (stale): its state is the resumable run's, not a leftover.
    assert ws.show(other)["leftovers"] == {"js": [], "sq": []}

    cleaned = json.loads(ws.run("task", "clean", str(mine), check=True).stdout)
    assert cleaned["removed"]["js"] and cleaned["removed"]["sq"], cleaned
    assert ws.show(mine)["leftovers"] == {"js": [], "sq": []}
    assert not [p for p in (ws.root / "mine" / "out").iterdir() if ".wormhole-" in p.name]
    # The other task's state is untouched, and it still resumes exactly.
    assert [p for p in (ws.root / "other" / "out").iterdir() if ".wormhole-" in p.name]
    time.sleep(2.0)
    assert ws.run("--task-id", str(other), timeout=120).returncode == 0
    ids, lite = small_outputs(ws.root / "other")
    assert len(ids) == len(set(ids)) == 120_000 and lite == ids


def test_a_paused_process_that_wakes_after_a_takeover_leaves_everything_to_the_new_holder(
        small_ws: Workspace, tmp_path: Path) -> None:
    """SIGSTOP the run right before its commits, long enough for its claim to go stale; another process
    takes the task over and finishes it. When the first one wakes, it must touch nothing: its lease ran
    out while it was paused, and its next heartbeat says the claim is gone, so it neither commits (a
    second post_sql would show) nor rolls back what the new holder committed, and it exits 205."""
    from tests.conftest import MYSQL_URL

    server = Server.from_url(MYSQL_URL)
    admin = server.connect()
    dbs = Databases(server, admin)
    try:
        db = dbs.create("paused")
        create_table(admin, db, "app", "id BIGINT NOT NULL, k INT, v VARCHAR(40)")  # no key: twice would show
        create_table(admin, db, "log", "n INT")
        spec = {"source": {"plugin": "stream", "params": {"rows": 60_000, "splits": 6,
                                                          "columns": [{"name": "id", "type": "int"},
                                                                      {"name": "k", "type": "int"},
                                                                      {"name": "v", "type": "string"}]}},
                "destinations": [
                    {"id": "js", "plugin": "file", "params": {"path": str(tmp_path / "out" / "js"), "format": "jsonl"}},
                    {"id": "app", "plugin": "mysql",
                     "params": server.params(db, table="app", post_sql=[f"INSERT INTO {q(db)}.log VALUES (1)"])}]}
        task_id = small_ws.submit(spec)
        first = start(small_ws, task_id, crash="before_commit:js:1:stop")
        deadline = time.monotonic() + 60
        while not Path(f"/proc/{first.pid}/stat").read_text().split(")")[-1].split()[0] == "T":
            assert first.poll() is None, failure(first)
            assert time.monotonic() < deadline, "the run never paused before its commits"
            time.sleep(0.05)
        time.sleep(2.0)  # stale_s = 1.5
        second = small_ws.run("--task-id", str(task_id), timeout=120)
        assert second.returncode == 0, second.stderr[-3000:]
        os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=60) == 205, failure(first)

        events = log_events(first.log_path.read_text())  # type: ignore[attr-defined]
        after_wake = events[next(i for i, e in enumerate(events) if e["event"] == "test.crash"):]
        assert any(e["event"] == "task.claim_lost" for e in after_wake)
        assert not [e for e in after_wake if e["event"] in ("destination.committed", "destination.rolled_back")]
        assert {e["destination"] for e in after_wake if e["event"] == "destination.abandoned"} == {"js", "app"}
        assert execute(admin, f"SELECT COUNT(*) FROM {q(db)}.log") == [(1,)]  # post_sql ran once: the new holder's
        assert execute(admin, f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {q(db)}.app") == [(60_000, 60_000)]
        ids = sorted(json.loads(line)["id"] for p in (tmp_path / "out" / "js").glob("part-*")
                     for line in p.read_text().splitlines())
        assert ids == list(range(60_000))
        task = small_ws.show(task_id)
        assert task["status"] == "success" and [r["status"] for r in task["runs"]] == ["crashed", "success"]
    finally:
        dbs.drop_all()

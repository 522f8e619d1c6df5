"""Incremental sync on the real MariaDB server: each run reads only what changed, every destination keeps its
own watermark (a destination that missed a window catches up, the others get no row twice), and a SIGKILL
between two destinations' commits resumes with the recorded window, exactly."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace
from tests.e2e.test_daemon import FAST, Daemon, TaskDb, wait_for
from tests.e2e.test_resume import failure, start
from tests.mysql_helpers import Databases, create_table, execute, q
from wormhole.taskdb import open_store

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

Versions = dict[int, list[tuple[str, datetime]]]


def workspace(tmp_path: Path) -> Workspace:
    (tmp_path / "ws").mkdir()
    ws = make_workspace(tmp_path / "ws")
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.3, "stale_s": 1.5}, recovery={"retry_wait_s": 0.2})
    return ws


def submit_and_run(ws: Workspace, spec: dict[str, Any], crash: str | None = None) -> tuple[int, Any]:
    task_id = ws.submit(spec)
    return task_id, start(ws, task_id, crash=crash)


def finished(ws: Workspace, task_id: int, proc: Any, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    proc.wait(timeout=120)
    assert proc.returncode in codes, failure(proc)
    return ws.show(task_id)


def paused(proc: Any) -> None:
    deadline = time.monotonic() + 60
    while Path(f"/proc/{proc.pid}/stat").read_text().split(")")[-1].split()[0] != "T":
        assert proc.poll() is None, failure(proc)
        assert time.monotonic() < deadline, "the run never paused"
        time.sleep(0.02)


# -- five runs, updates between and during them ----------------------------------------------------


class Source:
    """The source table and every version of every row the test wrote (id -> [(v, updated_at)])."""

    def __init__(self, dbs: Databases, db: str) -> None:
        self.admin, self.db = dbs.admin, db
        self.versions: Versions = {}

    def write(self, ids: range | list[int], tag: str, age_s: int = 0) -> None:
        """Insert or update ``ids`` with ``v = tag`` and ``updated_at`` now (less ``age_s``)."""
        values = ", ".join(f"({i}, '{tag}', NOW(6) - INTERVAL {age_s} SECOND)" for i in ids)
        execute(self.admin, f"INSERT INTO {q(self.db)}.src (id, v, updated_at) VALUES {values} "
                            f"ON DUPLICATE KEY UPDATE v = VALUES(v), updated_at = VALUES(updated_at)")
        for i, v, at in execute(self.admin, f"SELECT id, v, updated_at FROM {q(self.db)}.src WHERE id IN "
                                            f"({', '.join(str(i) for i in ids)})"):
            self.versions.setdefault(int(i), []).append((str(v), at))

    def as_of(self, upper: datetime) -> dict[int, tuple[str, datetime]]:
        """Each row's last version written before ``upper``: what a destination holds after that run."""
        out = {}
        for i, versions in self.versions.items():
            before = [ver for ver in versions if ver[1] < upper]
            if before:
                out[i] = before[-1]
        return out


def contents(dbs: Databases, db: str, ws: Workspace) -> dict[str, dict[int, tuple[str, datetime]]]:
    """Each destination's rows as id -> (v, updated_at); the jsonl parts' latest version of each id."""
    mysql = {int(i): (str(v), at) for i, v, at in execute(dbs.admin, f"SELECT id, v, updated_at FROM {q(db)}.dst")}
    conn = sqlite3.connect(ws.root / "dw.db")
    rows = conn.execute("SELECT id, v, updated_at FROM t").fetchall()
    lite = {int(i): (str(v), datetime.fromisoformat(at)) for i, v, at in rows}
    conn.close()
    lines: dict[int, tuple[str, datetime]] = {}
    for part in sorted((ws.root / "out").glob("*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            version = (row["v"], datetime.fromisoformat(row["updated_at"]))
            if row["id"] not in lines or version[1] > lines[row["id"]][1]:
                lines[row["id"]] = version
    return {"my": mysql, "lite": lite, "js": lines}


def lastmodified_spec(dbs: Databases, db: str) -> dict[str, Any]:
    return {
        "name": "orders_sync",
        "source": {"plugin": "mysql", "params": dbs.server.params(db, table="src", split_pk="id"),
                   "incremental": {"column": "updated_at", "mode": "lastmodified", "lag_s": 1}},
        "destinations": [
            {"id": "my", "plugin": "mysql", "params": dbs.server.params(db, table="dst", write_mode="upsert")},
            {"id": "lite", "plugin": "sqlite", "params": {"path": "dw.db", "table": "t", "write_mode": "upsert",
                                                          "key": ["id"]}},
            {"id": "js", "plugin": "file", "params": {"path": "out", "format": "jsonl", "mode": "append"}}],
        "settings": {"speed": {"channel": 2}}}


def test_five_runs_leave_every_destination_equal_to_the_source_as_of_each_upper_bound(
        dbs: Databases, tmp_path: Path) -> None:
    db = dbs.create("inc5")
    for table in ("src", "dst"):
        create_table(dbs.admin, db, table, "id INT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL, "
                                           "updated_at DATETIME(6) NOT NULL")
    source = Source(dbs, db)
    source.write(range(1, 601), "a", age_s=3600)
    ws = workspace(tmp_path)
    spec = lastmodified_spec(dbs, db)
    # Between runs: inserts and updates, stamped 2 s back (a writer whose stamps trail its commits: lag_s
    # re-reads them, and they are surely before the next run's upper bound, so the next run takes them).
    # During runs 2 and 3 (paused after the first split of `my` is durable): inserts, and updates of rows no
    # later write touches. A row changed twice before any run read its first change would have that change
    # skipped by every lastmodified reader without a snapshot: the test never writes one.
    between = [None, (list(range(1, 21)) + list(range(601, 641)), "b"),
               (list(range(1, 6)) + list(range(200, 211)), "c"), (list(range(641, 700)), "d"),
               (list(range(30, 40)), "e")]
    during = {2: (list(range(100, 111)) + list(range(700, 711)), "x"), 3: (list(range(300, 306)), "y")}
    written: list[dict[str, int]] = []
    for run in range(1, 6):
        if between[run - 1] is not None:
            ids, tag = between[run - 1]
            source.write(ids, tag, age_s=2)
        if run == 5:
            # The last run must be past the lag of every version, those written during runs 2 and 3 (stamped
            # when written) too: on a quick machine it can start within lag_s of them.
            latest = max(at for versions in source.versions.values() for _, at in versions)
            while execute(dbs.admin, "SELECT NOW() - INTERVAL 1 SECOND")[0][0] <= latest:
                time.sleep(0.1)
        task_id, proc = submit_and_run(ws, spec, crash="after_seal:my:1:stop" if run in during else None)
        if run in during:
            paused(proc)
            ids, tag = during[run]
            source.write(ids, tag)
            os.kill(proc.pid, signal.SIGCONT)
        shown = finished(ws, task_id, proc)
        window = shown["result"]["incremental"]
        upper = datetime.fromisoformat(window["to"])
        expected = source.as_of(upper)
        got = contents(dbs, db, ws)
        for dest in ("my", "lite", "js"):
            assert got[dest] == expected, (run, dest, set(got[dest].items()) ^ set(expected.items()))
            assert window["destinations"][dest]["now"] == window["to"]
        written.append({d: r["rows_written"] for d, r in shown["result"]["destinations"].items()})
        assert shown["watermarks"]["destinations"]["my"]["value"] == window["to"]
    assert written[0] == {"my": 600, "lite": 600, "js": 600}
    assert all(0 < w["my"] < 200 for w in written[1:]), written  # only the window, never the table again
    assert expected == {i: versions[-1] for i, versions in source.versions.items()} and len(expected) == 710


# -- one destination fails: the next run catches it up --------------------------------------------


def append_spec(dbs: Databases, db: str) -> dict[str, Any]:
    return {
        "name": "events_sync",
        "source": {"plugin": "mysql", "params": dbs.server.params(db, table="src", split_pk="id"),
                   "incremental": {"column": "id"}},
        "destinations": [
            {"id": "my", "plugin": "mysql", "params": dbs.server.params(db, table="dst")},  # no key: a row twice shows
            {"id": "lite", "plugin": "sqlite", "params": {"path": "dw.db", "table": "t"}},
            {"id": "js", "plugin": "file", "params": {"path": "out", "format": "jsonl", "mode": "append"}}],
        "settings": {"speed": {"channel": 2}}}


def append_setup(dbs: Databases, tmp_path: Path, label: str, dst: bool = True
                 ) -> tuple[str, Workspace, dict[str, Any]]:
    """A source table keyed by id (and a destination table without a key), a workspace, the append spec."""
    db = dbs.create(label)
    create_table(dbs.admin, db, "src", "id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL")
    if dst:
        create_table(dbs.admin, db, "dst", "id BIGINT NOT NULL, v BIGINT NOT NULL")
    return db, workspace(tmp_path), append_spec(dbs, db)


def insert(dbs: Databases, db: str, ids: range) -> None:
    execute(dbs.admin, f"INSERT INTO {q(db)}.src (id, v) VALUES {', '.join(f'({i}, {i})' for i in ids)}")


def ids_everywhere(dbs: Databases, db: str, ws: Workspace) -> dict[str, list[int]]:
    conn = sqlite3.connect(ws.root / "dw.db")
    lite = sorted(int(r[0]) for r in conn.execute("SELECT id FROM t"))
    conn.close()
    lines = [json.loads(line)["id"] for part in (ws.root / "out").glob("*.jsonl")
             for line in part.read_text(encoding="utf-8").splitlines()]
    return {"my": [int(r[0]) for r in execute(dbs.admin, f"SELECT id FROM {q(db)}.dst ORDER BY id")],
            "lite": lite, "js": sorted(lines)}


def test_a_destination_that_failed_a_run_is_caught_up_by_the_next_and_the_others_get_only_new_rows(
        dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "incfail")
    insert(dbs, db, range(1, 501))
    task_id, proc = submit_and_run(ws, spec)
    assert {d: r["rows_written"] for d, r in finished(ws, task_id, proc)["result"]["destinations"].items()} \
        == {"my": 500, "lite": 500, "js": 500}

    insert(dbs, db, range(501, 701))
    execute(dbs.admin, f"RENAME TABLE {q(db)}.dst TO {q(db)}.dst_away")  # run 2 cannot write `my`
    task_id, proc = submit_and_run(ws, spec)
    second = finished(ws, task_id, proc, codes=(202,))
    results = second["result"]["destinations"]
    assert results["my"]["status"] == "failed"
    assert results["lite"]["rows_written"] == results["js"]["rows_written"] == 200
    assert {d: w["value"] for d, w in second["watermarks"]["destinations"].items()} == \
        {"my": "500", "lite": "700", "js": "700"}

    execute(dbs.admin, f"RENAME TABLE {q(db)}.dst_away TO {q(db)}.dst")
    insert(dbs, db, range(701, 801))
    (ws.root / "task.json").write_text(json.dumps(spec), encoding="utf-8")
    planned = json.loads(ws.run("plan", "task.json", "--json", check=True).stdout)["incremental"]
    assert (planned["from"], planned["to"]) == ("500", "800")
    assert {d: v["from"] for d, v in planned["destinations"].items()} == {"my": "500", "lite": "700", "js": "700"}
    task_id, proc = submit_and_run(ws, spec)
    third = finished(ws, task_id, proc)
    assert {d: r["rows_written"] for d, r in third["result"]["destinations"].items()} == \
        {"my": 300, "lite": 100, "js": 100}
    assert {d: r["rows_filtered"] for d, r in third["result"]["destinations"].items()} == \
        {"my": 0, "lite": 200, "js": 200}  # read once from 500; each kept only what is past its own watermark
    assert ids_everywhere(dbs, db, ws) == {d: list(range(1, 801)) for d in ("my", "lite", "js")}
    assert {w["value"] for w in third["watermarks"]["destinations"].values()} == {"800"}


def test_a_retried_partial_run_finishes_its_own_window_for_the_destination_that_failed(
        dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "incretry", dst=False)
    insert(dbs, db, range(1, 301))
    task_id, proc = submit_and_run(ws, spec)  # `my`'s table does not exist yet: it fails, the others commit
    assert finished(ws, task_id, proc, codes=(202,))["result"]["destinations"]["my"]["status"] == "failed"
    create_table(dbs.admin, db, "dst", "id BIGINT NOT NULL, v BIGINT NOT NULL")
    insert(dbs, db, range(301, 351))  # after the partial run's plan: the next run's
    ws.run("task", "retry", str(task_id), check=True)
    planned = json.loads(ws.run_here("plan", "--task-id", str(task_id), "--json", check=True).stdout)
    assert planned["resumes_run"] == ws.show(task_id)["runs"][0]["id"]  # the plan shows what the run will do:
    assert (planned["incremental"]["from"], planned["incremental"]["to"]) == (None, "300")  # its own window
    retried = finished(ws, task_id, start(ws, task_id))
    assert retried["result"]["plan"]["splits"] == planned["splits"]
    results = retried["result"]["destinations"]
    assert results["my"]["rows_written"] == 300 and retried["result"]["incremental"]["to"] == "300"
    assert results["lite"]["skipped"] == results["js"]["skipped"] == f"committed by run {retried['runs'][0]['id']}"
    assert {d: w["value"] for d, w in retried["watermarks"]["destinations"].items()} == \
        {"my": "300", "lite": "300", "js": "300"}
    assert ids_everywhere(dbs, db, ws) == {d: list(range(1, 301)) for d in ("my", "lite", "js")}


# -- SIGKILL between two destinations' commits ------------------------------------------------------


def test_a_run_killed_between_two_commits_resumes_its_own_window_and_the_next_run_takes_the_rest(
        dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "inckill")
    insert(dbs, db, range(1, 401))
    task_id, proc = submit_and_run(ws, spec, crash="after_commit:my:1")
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL, failure(proc)
    killed = ws.show(task_id)
    assert killed["watermarks"]["destinations"] == {"my": {"value": "400", "run": 1}}  # with my's commit row

    insert(dbs, db, range(401, 451))  # after the plan: the resumed run must not take these
    time.sleep(2.0)  # stale_s = 1.5
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr[-3000:]
    window = [e for e in log_events(proc.stderr) if e["event"] == "incremental.window"]
    assert window and window[0]["resumed"] is True and window[0]["to"] == "400"
    resumed = ws.show(task_id)
    assert {d: w["value"] for d, w in resumed["watermarks"]["destinations"].items()} == {"my": "400", "lite": "400",
                                                                                         "js": "400"}
    assert ids_everywhere(dbs, db, ws) == {d: list(range(1, 401)) for d in ("my", "lite", "js")}

    task_id, proc = submit_and_run(ws, spec)
    last = finished(ws, task_id, proc)
    assert {d: r["rows_written"] for d, r in last["result"]["destinations"].items()} == {"my": 50, "lite": 50, "js": 50}
    assert ids_everywhere(dbs, db, ws) == {d: list(range(1, 451)) for d in ("my", "lite", "js")}



# -- a recurring task: one destination broken for several ticks -----------------------------------


def run_tick(ws: Workspace, task_id: int, n: int) -> dict[str, Any]:
    """Claim the recurring task's next tick as a daemon does (made due at once: no waiting for the clock)
    and run it in the foreground as the daemon's child would; the run's result."""
    tick = datetime(2026, 1, 1, 0, 0, n)
    TaskDb(ws).query("UPDATE wormhole_task SET next_run_at = ? WHERE id = ?", (f"{tick:%Y-%m-%d %H:%M:%S}.000",
                                                                              task_id))
    store = open_store(f"sqlite:///{ws.root}/var/wormhole.db")
    try:
        assert store.claim_tick(task_id, f"test/tick-{n}", tick)
    finally:
        store.close()
    proc = ws.run("--task-id", str(task_id), "--claimed-by", f"test/tick-{n}")
    assert proc.returncode in (0, 202), proc.stderr[-3000:]
    result: dict[str, Any] = ws.show(task_id)["result"]  # the latest run's
    return result


def test_a_recurring_task_gives_the_healthy_destinations_new_rows_while_the_broken_one_catches_up_later(
        dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "incsched", dst=False)  # `my` is broken: its table is missing
    spec["destinations"] = [d for d in spec["destinations"] if d["id"] != "lite"]
    spec["settings"]["schedule"] = "0 0 1 1 *"  # never due by itself: each tick is claimed by run_tick
    (ws.root / "nope.json").write_text(json.dumps({**spec, "source": {**spec["source"], "incremental": {
        "column": "nope"}}}), encoding="utf-8")
    planned = ws.run_here("plan", "nope.json")  # a column the source lacks: a bad task (204), not a failed read
    assert planned.returncode == 204 and "source.incremental.column: nope is not a column of `src`" in planned.stderr
    (ws.root / "task.json").write_text(json.dumps(spec), encoding="utf-8")
    task_id = int(ws.run("task", "submit", "task.json", check=True).stdout.strip())
    for n, top in ((1, 100), (2, 200)):
        insert(dbs, db, range(top - 99, top + 1))
        result = run_tick(ws, task_id, n)
        assert result["destinations"]["js"]["rows_written"] == 100  # the new rows, every tick
        assert result["status"] == "partial" and result["resumed_from_run"] is None  # not the last tick's window
        assert result["destinations"]["my"]["status"] == "failed"
        assert result["incremental"]["to"] == str(top)
        assert {d: w["value"] for d, w in ws.show(task_id)["watermarks"]["destinations"].items()} == {"js": str(top)}
    create_table(dbs.admin, db, "dst", "id BIGINT NOT NULL, v BIGINT NOT NULL")
    insert(dbs, db, range(201, 301))
    result = run_tick(ws, task_id, 3)
    assert result["status"] == "success"  # read once from the start: `my` catches up, `js` keeps only what is new
    assert {d: r["rows_written"] for d, r in result["destinations"].items()} == {"my": 300, "js": 100}
    mine = [int(r[0]) for r in execute(dbs.admin, f"SELECT id FROM {q(db)}.dst ORDER BY id")]
    lines = sorted(json.loads(line)["id"] for part in (ws.root / "out").glob("*.jsonl")
                   for line in part.read_text(encoding="utf-8").splitlines())
    assert mine == lines == list(range(1, 301))  # each row once in each


# -- two runs of one job at once ------------------------------------------------------------------


def test_a_second_run_of_one_state_key_waits_for_the_first_and_takes_only_what_is_new(
        dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "inclock")
    # The first run is paused (SIGSTOP) for a while: its claim must not go stale meanwhile.
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.3, "stale_s": 60.0}, recovery={"retry_wait_s": 0.2})
    insert(dbs, db, range(1, 301))
    first, proc = submit_and_run(ws, spec, crash="before_commit:my:1:stop")  # every row written, not committed
    paused(proc)
    second, other = submit_and_run(ws, spec)  # the same job (one state key), submitted again
    deadline = time.monotonic() + 60
    while '"incremental.waiting"' not in other.log_path.read_text():  # type: ignore[attr-defined]
        assert other.poll() is None, failure(other)  # before the fix: it read the same window and committed
        assert time.monotonic() < deadline, failure(other)
        time.sleep(0.1)
    waiting = next(e for e in log_events(other.log_path.read_text())  # type: ignore[attr-defined]
                   if e["event"] == "incremental.waiting")
    assert (waiting["state_key"], waiting["held_by_task"]) == ("events_sync", first)
    os.kill(proc.pid, signal.SIGCONT)
    assert {d: r["rows_written"] for d, r in finished(ws, first, proc)["result"]["destinations"].items()} == \
        {"my": 300, "lite": 300, "js": 300}
    assert {d: r["rows_written"] for d, r in finished(ws, second, other)["result"]["destinations"].items()} == \
        {"my": 0, "lite": 0, "js": 0}
    assert ids_everywhere(dbs, db, ws) == {d: list(range(1, 301)) for d in ("my", "lite", "js")}
    assert all(part.stat().st_size for part in (ws.root / "out").glob("*.jsonl"))  # no empty part from the second


def test_one_job_submitted_three_times_under_one_daemon_moves_each_row_once(dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "incdaemon")
    # A loaded machine may start a child late: its claim must not look dead meanwhile.
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.3, "stale_s": 10.0}, recovery={"retry_wait_s": 0.2})
    insert(dbs, db, range(1, 301))
    tasks = [ws.submit(spec) for _ in range(3)]
    daemon = Daemon(ws, *FAST, "--max-tasks", "4")
    try:
        wait_for(lambda: set(TaskDb(ws).statuses().values()) == {"success"} and len(TaskDb(ws).statuses()) == 3,
                 90, "the three runs")
        # Whether a run waited for another's state key depends on when the daemon's children start (on a
        # loaded machine one may start after another ended): each row once everywhere is what must hold.
    finally:
        daemon.close()
    written = sorted(ws.show(t)["result"]["destinations"]["my"]["rows_written"] for t in tasks)
    assert written == [0, 0, 300]
    assert ids_everywhere(dbs, db, ws) == {d: list(range(1, 301)) for d in ("my", "lite", "js")}

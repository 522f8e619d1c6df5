"""`wormhole daemon` as a service runs it: real processes, tasks inserted by plain SQL, SQLite and MariaDB.

Every wait is bounded. A task's length is set by a stream destination that sleeps ``delay_ms`` per
batch (one batch of at most ``exchange.batch_rows`` rows), so "a task running for about a second" is deterministic.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pymysql
import pytest

from tests.conftest import MYSQL_URL, Workspace, closed_after, make_workspace, wormhole_command
from wormhole.taskdb import open_store

pytestmark = pytest.mark.e2e

FAST = ("--poll-s", "0.2", "--heartbeat-s", "0.3")


def task_spec(name: str, rows: int = 2000, delay_ms: float = 0.0, sqlite: bool = True) -> str:
    dests: list[dict[str, Any]] = [{"id": "j", "plugin": "file", "params": {"path": f"out/{name}", "format": "jsonl"}}]
    if sqlite:
        dests.append({"id": "s", "plugin": "sqlite", "params": {"path": f"out/{name}.sqlite", "table": "t"}})
    if delay_ms:
        dests.append({"id": "slow", "plugin": "stream", "concurrency": 1, "params": {"delay_ms": delay_ms}})
    return json.dumps({"name": name, "source": {"plugin": "stream", "params": {"rows": rows, "seed": 3}},
                       "destinations": dests})


class TaskDb:
    """Plain SQL on the workspace's task database (not the code under test), like an upstream system."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.mysql = ws.task_db.startswith("mysql")

    def _conn(self) -> Any:
        if not self.mysql:
            return sqlite3.connect(self.ws.root / "var" / "wormhole.db", timeout=30, isolation_level=None)
        u = urlparse(self.ws.task_db)
        return pymysql.connect(host=u.hostname, port=u.port or 3306, user="root", password="",
                               database=u.path.lstrip("/"), autocommit=True)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        conn = self._conn()
        try:
            cur = conn.cursor()
            cur.execute(sql.replace("?", "%s") if self.mysql else sql, params)
            return list(cur.fetchall())
        finally:
            conn.close()

    def insert(self, tasks: list[tuple[str, str, int | None]]) -> list[int]:
        """(name, spec, priority or None for the plain two-column INSERT), all in one transaction."""
        conn = self._conn()
        mark = "%s" if self.mysql else "?"
        ids = []
        try:
            cur = conn.cursor()
            cur.execute("BEGIN")
            for name, spec, priority in tasks:
                if priority is None:
                    cur.execute(f"INSERT INTO wormhole_task (name, spec) VALUES ({mark}, {mark})", (name, spec))
                else:
                    cur.execute(f"INSERT INTO wormhole_task (name, spec, priority) VALUES ({mark}, {mark}, {mark})",
                                (name, spec, priority))
                ids.append(int(cur.lastrowid))
            cur.execute("COMMIT")
        finally:
            conn.close()
        return ids

    def statuses(self) -> dict[int, str]:
        return dict(self.query("SELECT id, status FROM wormhole_task"))

    def runs(self, task_id: int) -> list[tuple[Any, ...]]:
        return self.query("SELECT status, exit_code, claimed_by FROM wormhole_task_run WHERE task_id = ? ORDER BY id",
                          (task_id,))


class Daemon:
    """A `wormhole daemon` process whose JSON log lines go to a file."""

    def __init__(self, ws: Workspace, *args: str, env: dict[str, str] | None = None) -> None:
        self.log_path = ws.root / f"daemon-{uuid.uuid4().hex[:6]}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen([*wormhole_command(), "daemon", *args], cwd=ws.root, env=env or ws.env(),
                                     stdout=subprocess.DEVNULL, stderr=self._log)
        wait_for(lambda: self.events("daemon.started") or self.proc.poll() is not None, 30, "daemon.started")
        assert self.proc.poll() is None, self.tail()

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                if name is None or event.get("event") == name:
                    out.append(event)
        return out

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self, timeout: float = 60, sig: signal.Signals = signal.SIGTERM) -> tuple[int, float]:
        """Send ``sig``; (exit code, seconds until the daemon exited)."""
        sent = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - sent

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._log.close()


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    yield from closed_after([])


def jsonl_rows(path: Path) -> int:
    return sum(1 for part in path.glob("*.jsonl") for _ in part.open(encoding="utf-8"))


def sqlite_rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM t").fetchone()[0])
    finally:
        conn.close()


def test_ten_tasks_three_at_a_time_by_priority(ws: Workspace, daemons: list[Daemon]) -> None:
    """10 tasks inserted while the daemon runs: all succeed with their rows, never more than 3 run at once,
    and they are claimed by priority, then in creation order."""
    db = TaskDb(ws)
    daemon = Daemon(ws, "--max-tasks", "3", *FAST)
    daemons.append(daemon)
    priorities = [None, 5, None, 1, 5, None, None, 9, 1, None]  # None: the upstream two-column INSERT
    ids = db.insert([(f"t{n}", task_spec(f"t{n}", rows=1000 + n, delay_ms=700), p)
                     for n, p in enumerate(priorities)])
    expected_order = [i for _, i in sorted(zip(priorities, ids, strict=True), key=lambda x: (-(x[0] or 0), x[1]))]
    most = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = db.statuses()
        most = max(most, sum(s == "running" for s in states.values()))
        if all(s not in ("pending", "running") for s in states.values()):
            break
        time.sleep(0.05)
    assert most == 3, daemon.tail()
    assert db.statuses() == dict.fromkeys(ids, "success"), daemon.tail()
    for n, task_id in enumerate(ids):
        assert jsonl_rows(ws.root / "out" / f"t{n}") == 1000 + n
        assert sqlite_rows(ws.root / "out" / f"t{n}.sqlite") == 1000 + n
        (run,) = db.runs(task_id)
        assert run[:2] == ("success", 0)
    assert [e["task_id"] for e in daemon.events("daemon.claimed")] == expected_order
    # The task row is written before its process exits: the daemon reaps it a moment later.
    finished = wait_for(lambda: len(daemon.events("daemon.task_finished")) == 10
                        and daemon.events("daemon.task_finished"), 10, "10 task_finished events")
    assert sorted(e["task_id"] for e in finished) == ids
    assert all(e["exit_code"] == 0 and e["duration_s"] > 0.5 for e in finished)
    assert daemon.events("daemon.claim_released") == []

    wait_for(lambda: db.query("SELECT status, running_tasks, pid FROM wormhole_daemon") == [
        ("running", 0, daemon.proc.pid)], 5, "the heartbeat row")
    code, took = daemon.stop()
    assert (code, took < 10) == (0, True), daemon.tail()
    assert db.query("SELECT status FROM wormhole_daemon") == [("stopped",)]
    assert daemon.events("daemon.stopping") and daemon.events("daemon.stopped")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_lets_tasks_finish_within_the_grace_then_interrupts_them(ws: Workspace, daemons: list[Daemon],
                                                                         sig: signal.Signals) -> None:
    """SIGTERM or SIGINT: no more claims; a task that ends within --grace-s succeeds, one that does not is
    sent SIGTERM (rolled back, run 'interrupted'); the daemon exits 0 soon after the grace period."""
    db = TaskDb(ws)
    daemon = Daemon(ws, "--max-tasks", "2", "--grace-s", "5", *FAST)
    daemons.append(daemon)
    short, long_, queued = db.insert([("short", task_spec("short", delay_ms=2500), 2),
                                      ("long", task_spec("long", rows=4096 * 200, delay_ms=1000), 1),
                                      ("queued", task_spec("queued"), 0)])
    wait_for(lambda: len(db.query("SELECT id FROM wormhole_task_run WHERE status = 'running'")) == 2, 30,
             "both runs to start")
    code, took = daemon.stop(sig=sig)
    assert code == 0, daemon.tail()
    assert 4.5 < took < 5 + 15, took  # waited for the grace period, then not much longer
    assert db.statuses() == {short: "success", long_: "failed", queued: "pending"}
    assert [r[:2] for r in db.runs(short)] == [("success", 0)]
    assert [r[:2] for r in db.runs(long_)] == [("interrupted", 203)]
    assert db.runs(queued) == []
    assert not (ws.root / "out" / "long").exists()  # rolled back
    assert jsonl_rows(ws.root / "out" / "short") == 2000
    stopping = daemon.events("daemon.stopping")
    assert stopping[0]["signal"] == sig.name and stopping[0]["running"] == [short, long_]
    (signalled,) = daemon.events("daemon.signalling_tasks")
    assert (signalled["signal"], signalled["task_ids"]) == ("SIGTERM", [long_])
    assert [e["task_id"] for e in daemon.events("daemon.claimed")] == [short, long_]


def test_a_task_whose_process_dies_is_settled(ws: Workspace, daemons: list[Daemon]) -> None:
    """A child killed by SIGKILL records nothing itself: the daemon fails the task and its run, and goes on."""
    db = TaskDb(ws)
    daemon = Daemon(ws, "--max-tasks", "1", *FAST)
    daemons.append(daemon)
    (victim,) = db.insert([("victim", task_spec("victim", rows=4096 * 100, delay_ms=1000), None)])
    wait_for(lambda: db.runs(victim), 30, "the run to start")
    token = db.query("SELECT claimed_by FROM wormhole_task WHERE id = ?", (victim,))[0][0]
    (started,) = daemon.events("daemon.task_started")
    assert started["task_id"] == victim
    os.kill(started["pid"], signal.SIGKILL)
    wait_for(lambda: db.statuses()[victim] == "failed", 20, "the task to be failed")
    assert db.runs(victim) == [("crashed", -9, token)]  # the next run of the task resumes it
    (after,) = db.insert([("after", task_spec("after"), None)])
    wait_for(lambda: db.statuses()[after] == "success", 30, "the next task")
    (released,) = daemon.events("daemon.claim_released")
    assert (released["task_id"], released["status"], released["exit_code"]) == (victim, "failed", -9)
    assert daemon.stop()[0] == 0


def test_the_claim_hand_over(ws: Workspace) -> None:
    """--claimed-by runs only a task running under that very claim; a plain --task-id still refuses it."""
    (task_id,) = TaskDb(ws).insert([("handed", task_spec("handed"), None)])
    with open_store(ws.task_db.replace("///", f"///{ws.root}/")) as store:
        assert store.claim(task_id, "host:1/daemon-1/1")
    plain = ws.run("--task-id", str(task_id))
    assert plain.returncode == 205 and "task.claim_refused" in plain.stderr
    wrong = ws.run("--task-id", str(task_id), "--claimed-by", "host:1/daemon-1/2")
    assert wrong.returncode == 205 and "running under the claim host:1/daemon-1/2" in wrong.stderr
    assert ws.run("--claimed-by", "host:1/daemon-1/1").returncode == 2
    right = ws.run("--task-id", str(task_id), "--claimed-by", "host:1/daemon-1/1")
    assert right.returncode == 0, right.stderr[-2000:]
    task = ws.show(task_id)
    assert (task["status"], task["attempts"], task["claimed_by"]) == ("success", 1, "host:1/daemon-1/1")
    assert [(r["status"], r["claimed_by"]) for r in task["runs"]] == [("success", "host:1/daemon-1/1")]
    assert jsonl_rows(ws.root / "out" / "handed") == 2000


# -- MariaDB task database ----------------------------------------------------------------------------


@pytest.mark.mysql
def test_two_daemons_never_run_a_task_twice(tmp_path: Path, mysql_db: str, daemons: list[Daemon]) -> None:
    """Two daemons on one MariaDB task database: every task succeeds with exactly one run."""
    ws = make_workspace(tmp_path, task_db=mysql_db)
    db = TaskDb(ws)
    daemons.extend(Daemon(ws, "--max-tasks", "2", "--poll-s", "0.1") for _ in range(2))
    ids = db.insert([(f"m{n}", task_spec(f"m{n}", rows=500 + n, sqlite=False), None) for n in range(12)])
    wait_for(lambda: all(s not in ("pending", "running") for s in db.statuses().values()), 90, "all tasks")
    assert db.statuses() == dict.fromkeys(ids, "success"), [d.tail() for d in daemons]
    for n, task_id in enumerate(ids):
        (run,) = db.runs(task_id)
        assert run[:2] == ("success", 0)
        assert jsonl_rows(ws.root / "out" / f"m{n}") == 500 + n
    claimed = [[e["task_id"] for e in d.events("daemon.claimed")] for d in daemons]
    assert sorted(claimed[0] + claimed[1]) == ids  # each task claimed by exactly one daemon
    assert all(claimed)  # both took work from the one queue
    assert sorted(r[0] for r in db.query("SELECT status FROM wormhole_daemon")) == ["running", "running"]
    assert [d.stop()[0] for d in daemons] == [0, 0]


@pytest.fixture
def limited_user(mysql_db: str) -> Iterator[tuple[str, Callable[[bool], None]]]:
    """A user with rights on the task database only: (its URL, a switch that revokes or restores them)."""
    admin = pymysql.connect(host="127.0.0.1", port=urlparse(MYSQL_URL).port or 3306, user="root", autocommit=True)
    db_name = urlparse(mysql_db).path.lstrip("/")
    user = f"whd_{uuid.uuid4().hex[:8]}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{db_name}`.* TO '{user}'@'%'")

    def reachable(yes: bool) -> None:
        with admin.cursor() as cur:
            if yes:
                cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{db_name}`.* TO '{user}'@'%'")
                return
            cur.execute(f"REVOKE ALL PRIVILEGES ON `{db_name}`.* FROM '{user}'@'%'")
            cur.execute("SELECT id FROM information_schema.processlist WHERE user = %s", (user,))
            for (thread_id,) in cur.fetchall():
                cur.execute(f"KILL CONNECTION {int(thread_id)}")

    u = urlparse(mysql_db)
    yield f"mysql://{user}:pw@{u.hostname}:{u.port or 3306}/{db_name}", reachable
    with admin.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
    admin.close()


@pytest.mark.mysql
def test_daemon_survives_the_task_db_going_away(tmp_path: Path, mysql_db: str, daemons: list[Daemon],
                                               limited_user: tuple[str, Callable[[bool], None]]) -> None:
    """The daemon's task database refuses it for a while (rights revoked, connections killed): it logs
    daemon.taskdb_unreachable, keeps going, and once the database is back claims and finishes every task."""
    ws = make_workspace(tmp_path, task_db=mysql_db)
    db = TaskDb(ws)
    url, reachable = limited_user
    env = {**ws.env(), "WORMHOLE_TASK_DB": url}
    daemon = Daemon(ws, "--max-tasks", "2", *FAST, env=env)
    daemons.append(daemon)
    ids = db.insert([(f"r{n}", task_spec(f"r{n}", rows=300, delay_ms=5000 if n < 2 else 0, sqlite=False), None)
                     for n in range(5)])
    wait_for(lambda: len(db.query("SELECT id FROM wormhole_task_run WHERE status = 'running'")) == 2, 30,
             "two runs to start")
    reachable(False)
    try:
        wait_for(lambda: daemon.events("daemon.taskdb_unreachable"), 15, "daemon.taskdb_unreachable", every=0.2)
        time.sleep(1.0)
        assert daemon.proc.poll() is None, daemon.tail()
    finally:
        reachable(True)
    try:
        wait_for(lambda: all(s == "success" for s in db.statuses().values()), 60, "all tasks", every=0.2)
    except AssertionError as exc:
        runs = {task_id: db.runs(task_id) for task_id in ids}
        failed = [f'"task_id": {t},' for t, status in db.statuses().items() if status != "success"]
        lines = [line for line in daemon.log_path.read_text(errors="replace").splitlines()
                 if any(f in line for f in failed) and '"level": "info"' not in line]
        raise AssertionError(f"{exc}: statuses {db.statuses()}, runs {runs}\n" + "\n".join(lines[-30:])) from None
    for task_id in ids:
        assert [r[:2] for r in db.runs(task_id)] == [("success", 0)]
    assert daemon.events("daemon.taskdb_reachable"), daemon.tail()
    # What the test did is what the daemon saw: its connection killed, or its rights refused on reconnect.
    causes = ("Access denied", "Lost connection", "gone away")
    errors = [e["error"] for e in daemon.events("daemon.taskdb_unreachable")]
    assert errors and all(any(c in e for c in causes) for e in errors), errors
    assert daemon.stop()[0] == 0


@pytest.mark.mysql
def test_a_claimed_task_waits_for_its_task_database_to_come_back(tmp_path: Path, mysql_db: str,
                                                                  limited_user: tuple[str, Callable[[bool], None]]
                                                                  ) -> None:
    """The task database goes away between a daemon's claim and its child's start: the child
    (``--claimed-by``) waits for it while the claim is good, then runs the task, instead of failing it."""
    ws = make_workspace(tmp_path, task_db=mysql_db)
    db = TaskDb(ws)
    url, reachable = limited_user
    (task_id,) = db.insert([("r0", task_spec("r0", rows=300, sqlite=False), None)])
    store = open_store(url)
    try:
        assert store.claim(task_id, "test-daemon/1")
    finally:
        store.close()
    reachable(False)
    log = tmp_path / "child.err"
    with log.open("w") as err:
        proc = subprocess.Popen([*wormhole_command(), "--task-id", str(task_id), "--claimed-by", "test-daemon/1"],
                                cwd=ws.root, env={**ws.env(), "WORMHOLE_TASK_DB": url}, stdout=subprocess.DEVNULL,
                                stderr=err, text=True)
    try:
        # Refused at least once (however long the child took to start), and still waiting.
        wait_for(lambda: "task.taskdb_unreachable" in log.read_text() or proc.poll() is not None, 60,
                 "the child to meet the refusing database")
        assert proc.poll() is None, f"the child gave up on its task database at once:\n{log.read_text()[-3000:]}"
    finally:
        reachable(True)
    proc.wait(timeout=60)
    stderr = log.read_text()
    assert proc.returncode == 0, stderr[-3000:]
    events = [json.loads(line)["event"] for line in stderr.splitlines() if line.startswith("{")]
    assert "task.taskdb_unreachable" in events and "task.finished" in events
    assert db.statuses()[task_id] == "success"
    assert [r[:2] for r in db.runs(task_id)] == [("success", 0)]


@pytest.mark.mysql
def test_a_finished_run_waits_for_its_task_database_to_record_its_outcome(
        tmp_path: Path, mysql_db: str, limited_user: tuple[str, Callable[[bool], None]]) -> None:
    """The task database goes away after the run's last commit, before its outcome is written: the
    process waits for it (up to claim.stale_s) and records success, instead of exiting 203 and leaving
    a finished task crashed."""
    from tests.conftest import crashing_command

    ws = make_workspace(tmp_path, task_db=mysql_db)
    db = TaskDb(ws)
    url, reachable = limited_user
    (task_id,) = db.insert([("r0", task_spec("r0", rows=300, sqlite=False), None)])
    log = tmp_path / "run.err"
    with log.open("w") as err:  # paused right after its only destination's final commit
        proc = subprocess.Popen([*crashing_command("after_commit:j:1:stop"), "--task-id", str(task_id)],
                                cwd=ws.root, env={**ws.env(), "WORMHOLE_TASK_DB": url}, stdout=subprocess.DEVNULL,
                                stderr=err, text=True)
    try:
        wait_for(lambda: proc.poll() is not None
                 or Path(f"/proc/{proc.pid}/stat").read_text().split(")")[-1].split()[0] == "T", 60,
                 "the run to pause after its commit")
        assert proc.poll() is None, log.read_text()[-3000:]
        reachable(False)
        os.kill(proc.pid, signal.SIGCONT)
        wait_for(lambda: '"step": "record the outcome"' in log.read_text() or proc.poll() is not None, 30,
                 "the run to meet the refusing database")
        assert proc.poll() is None, f"the run gave up recording its outcome at once:\n{log.read_text()[-3000:]}"
    finally:
        reachable(True)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
    assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    assert db.statuses()[task_id] == "success"
    assert [r[:2] for r in db.runs(task_id)] == [("success", 0)]
    assert jsonl_rows(ws.root / "out" / "r0") == 300

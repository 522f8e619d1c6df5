"""Claims that survive crashes: heartbeats, taking over a SIGKILLed run, and never taking a live one.

Real processes on a real task database (SQLite, and MariaDB for the take-over). The engine.toml sets
``[claim] heartbeat_s = 0.5, stale_s = 2``. A task's length is set by a stream destination that
sleeps ``delay_ms`` per batch of 4096 rows. Which rows the resumed run writes is the engine side's
business (its own tests); these check the exit codes and the task database.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, closed_after, log_events, make_workspace, wormhole_command
from tests.e2e.test_daemon import FAST, Daemon, TaskDb, wait_for

pytestmark = pytest.mark.e2e

HEARTBEAT_S = 0.5
STALE_S = 2.0


def slow_spec(batches: int, delay_ms: float = 40.0) -> str:
    return json.dumps({"name": "slow", "source": {"plugin": "stream", "params": {"rows": batches * 4096, "seed": 5}},
                       "destinations": [{"id": "slow", "plugin": "stream", "concurrency": 1,
                                         "params": {"delay_ms": delay_ms}}]})


def workspace(root: Path, task_db: str | None = None) -> Workspace:
    ws = make_workspace(root, task_db)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": HEARTBEAT_S, "stale_s": STALE_S},
                  exchange={"batch_rows": 4096})  # a task's length is counted in batches of 4096 rows
    return ws


class Running:
    """``wormhole --task-id N`` in the background, its JSON log lines in a file (no pipe to fill)."""

    def __init__(self, ws: Workspace, task_id: int) -> None:
        self.log_path = ws.root / f"task-{task_id}-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen([*wormhole_command(), "--task-id", str(task_id)], cwd=ws.root, env=ws.env(),
                                     stdout=subprocess.DEVNULL, stderr=self._log)

    def stderr(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._log.close()


@pytest.fixture
def running() -> Iterator[list[Running]]:
    yield from closed_after([])


def task_row(db: TaskDb, task_id: int) -> dict[str, Any]:
    ((status, claimed_by, attempts, heartbeat_at),) = db.query(
        "SELECT status, claimed_by, attempts, heartbeat_at FROM wormhole_task WHERE id = ?", (task_id,))
    return {"status": status, "claimed_by": claimed_by, "attempts": attempts, "heartbeat_at": stamp(heartbeat_at)}


def run_rows(db: TaskDb, task_id: int) -> list[dict[str, Any]]:
    rows = db.query("SELECT id, status, exit_code, claimed_by, error, resumed_from FROM wormhole_task_run"
                    " WHERE task_id = ? ORDER BY id", (task_id,))
    keys = ("id", "status", "exit_code", "claimed_by", "error", "resumed_from")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def stamp(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def heartbeat_age(db: TaskDb, task_id: int) -> float:
    beat = task_row(db, task_id)["heartbeat_at"]
    assert beat is not None
    return (datetime.now(UTC).replace(tzinfo=None) - beat).total_seconds()


def start_and_wait_running(ws: Workspace, db: TaskDb, task_id: int, running: list[Running]) -> Running:
    run = Running(ws, task_id)
    running.append(run)
    wait_for(lambda: run_rows(db, task_id) or run.proc.poll() is not None, 60, "the run to start")
    assert run.proc.poll() is None, run.stderr()[-3000:]
    return run


def kill_and_wait_stale(db: TaskDb, task_id: int, run: Running) -> None:
    run.proc.send_signal(signal.SIGKILL)
    run.proc.wait(timeout=30)
    assert task_row(db, task_id)["status"] == "running"  # nothing recorded the crash
    wait_for(lambda: heartbeat_age(db, task_id) > STALE_S + 0.2, 30, "the heartbeat to go stale")


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def ws(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    if request.param == "sqlite":
        return workspace(tmp_path)
    return workspace(tmp_path, request.getfixturevalue("mysql_db"))


def test_a_sigkilled_run_is_taken_over_once_its_heartbeat_is_stale(ws: Workspace, running: list[Running]) -> None:
    db = TaskDb(ws)
    task_id = ws.submit(slow_spec(batches=60))
    first = start_and_wait_running(ws, db, task_id, running)
    (old,) = run_rows(db, task_id)
    holder = task_row(db, task_id)["claimed_by"]
    kill_and_wait_stale(db, task_id, first)

    proc = ws.run("--task-id", str(task_id))

    assert proc.returncode == 0, proc.stderr[-3000:]
    crashed, resumed = run_rows(db, task_id)
    assert (crashed["id"], crashed["status"], crashed["exit_code"], crashed["claimed_by"]) == (
        old["id"], "crashed", None, holder)
    assert crashed["error"].startswith("the process stopped heartbeating; taken over by ")
    assert (resumed["status"], resumed["exit_code"], resumed["resumed_from"]) == ("success", 0, old["id"])
    assert resumed["claimed_by"] != holder and crashed["error"].endswith(resumed["claimed_by"])
    task = task_row(db, task_id)
    assert (task["status"], task["attempts"], task["claimed_by"]) == ("success", 2, resumed["claimed_by"])
    (taken,) = [e for e in log_events(proc.stderr) if e.get("event") == "task.taken_over"]
    assert (taken["previous_claimed_by"], taken["resumed_from"]) == (holder, old["id"])
    assert taken["heartbeat_age_s"] > STALE_S


def test_a_live_run_heartbeats_and_is_never_taken_over_nor_reset(tmp_path: Path, running: list[Running]) -> None:
    ws = workspace(tmp_path)
    db = TaskDb(ws)
    task_id = ws.submit(slow_spec(batches=300))  # 12 s: two CLI runs beside it on a loaded machine
    live = start_and_wait_running(ws, db, task_id, running)

    # The heartbeat column moves while the task runs.
    first_beat = task_row(db, task_id)["heartbeat_at"]
    time.sleep(HEARTBEAT_S * 4)
    assert task_row(db, task_id)["heartbeat_at"] > first_beat
    assert live.proc.poll() is None, live.stderr()[-3000:]

    before = (task_row(db, task_id) | {"heartbeat_at": None}, run_rows(db, task_id))
    holder = before[0]["claimed_by"]
    taker = ws.run("--task-id", str(task_id))
    retry = ws.run("task", "retry", "--force", str(task_id))
    assert live.proc.poll() is None, "the live run ended before the checks: make the task longer"

    assert taker.returncode == 205, taker.stderr[-3000:]
    (refused,) = [e for e in log_events(taker.stderr) if e.get("event") == "task.claim_refused"]
    assert refused["claimed_by"] == holder and refused["heartbeat_age_s"] < STALE_S
    assert f"claimed by {holder}" in refused["error"] and "claim.stale_s = 2" in refused["error"]
    assert retry.returncode == 205, retry.stderr
    assert f"claimed by {holder}" in retry.stderr and "claim.stale_s = 2" in retry.stderr
    assert "last heartbeat was" in retry.stderr
    assert (task_row(db, task_id) | {"heartbeat_at": None}, run_rows(db, task_id)) == before

    assert live.proc.wait(timeout=120) == 0, live.stderr()[-3000:]
    (run,) = run_rows(db, task_id)
    assert (run["status"], run["exit_code"], run["resumed_from"]) == ("success", 0, None)
    task = task_row(db, task_id)
    assert (task["status"], task["attempts"], task["claimed_by"]) == ("success", 1, holder)


def test_forced_retry_resets_a_stale_running_task(tmp_path: Path, running: list[Running]) -> None:
    ws = workspace(tmp_path)
    db = TaskDb(ws)
    task_id = ws.submit(slow_spec(batches=40))
    first = start_and_wait_running(ws, db, task_id, running)
    kill_and_wait_stale(db, task_id, first)

    retry = ws.run("task", "retry", "--force", str(task_id))

    assert retry.returncode == 0, retry.stderr
    task = task_row(db, task_id)
    assert (task["status"], task["claimed_by"], task["heartbeat_at"]) == ("pending", None, None)
    (crashed,) = run_rows(db, task_id)
    assert crashed["status"] == "crashed" and "task retry --force" in crashed["error"]
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The next run resumes the crashed one (it never writes again what a destination holds).
    assert [(r["status"], r["resumed_from"]) for r in run_rows(db, task_id)] == [("crashed", None),
                                                                                 ("success", crashed["id"])]


def test_the_daemons_child_heartbeats_and_its_quick_is_not_taken_by_the_daemon(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    db = TaskDb(ws)
    quick = ws.submit(slow_spec(batches=1))
    victim = ws.submit(slow_spec(batches=1))
    # A running task whose process is gone (its heartbeat never written): only `--task-id` takes it over.
    db.query("UPDATE wormhole_task SET status = 'running', claimed_by = 'gone:1', attempts = 1 WHERE id = ?",
             (victim,))
    db.query("UPDATE wormhole_task SET priority = 1 WHERE id = ?", (quick,))
    slow = ws.submit(slow_spec(batches=80))
    daemon = Daemon(ws, "--max-tasks", "1", *FAST)
    try:
        wait_for(lambda: db.statuses()[slow] == "running" and run_rows(db, slow), 60, "the daemon to run the task")
        first_beat = task_row(db, slow)["heartbeat_at"]
        time.sleep(HEARTBEAT_S * 4)
        assert task_row(db, slow)["heartbeat_at"] > first_beat, daemon.tail()
        wait_for(lambda: db.statuses()[slow] == "success", 120, "the task to finish")
    finally:
        daemon.close()
    assert db.statuses()[quick] == "success"
    assert task_row(db, victim) == {"status": "running", "claimed_by": "gone:1", "attempts": 1, "heartbeat_at": None}
    assert [e["task_id"] for e in daemon.events("daemon.claimed")] == [quick, slow]


def test_a_daemon_takes_over_a_task_whose_process_died_and_resumes_it(tmp_path: Path,
                                                                       running: list[Running]) -> None:
    """A run SIGKILLed with its splits half written (as when its container or machine goes): once its
    heartbeat is stale, a daemon takes the task over by itself and its child resumes the crashed run;
    a daemon started with --no-take-over leaves it alone."""
    ws = workspace(tmp_path)
    db = TaskDb(ws)
    rows = 60 * 4096
    spec = {"name": "resumable", "source": {"plugin": "stream", "params": {"rows": rows, "splits": 12, "seed": 5}},
            "destinations": [{"id": "j", "plugin": "file", "params": {"path": "out/j", "format": "jsonl"}}],
            "settings": {"speed": {"record": 20_000, "channel_record": 10_000}}}
    task_id = ws.submit(spec)
    first = start_and_wait_running(ws, db, task_id, running)
    wait_for(lambda: db.query("SELECT COUNT(*) FROM wormhole_checkpoint WHERE task_id = ? AND destination = 'j'",
                              (task_id,))[0][0] >= 2, 60, "two splits durable in j")
    kill_and_wait_stale(db, task_id, first)

    bystander = Daemon(ws, "--max-tasks", "1", "--no-take-over", *FAST)
    try:
        time.sleep(1.0)
        assert task_row(db, task_id)["status"] == "running" and not bystander.events("daemon.taken_over")
    finally:
        bystander.close()
    daemon = Daemon(ws, "--max-tasks", "1", *FAST)
    try:
        wait_for(lambda: db.statuses()[task_id] == "success", 120, "the task to be resumed")
    finally:
        daemon.close()
    (taken,) = daemon.events("daemon.taken_over")
    crashed, resumed = run_rows(db, task_id)
    assert taken["task_id"] == task_id and taken["crashed_run"] == crashed["id"]
    assert (crashed["status"], resumed["status"], resumed["resumed_from"]) == ("crashed", "success", crashed["id"])
    result = json.loads(db.query("SELECT result FROM wormhole_task WHERE id = ?", (task_id,))[0][0])
    assert result["resumed_from_run"] == crashed["id"]
    assert result["destinations"]["j"]["splits_resumed"] >= 2 and result["source"]["rows_read"] < rows
    ids = sorted(json.loads(line)["id"] for p in (ws.root / "out" / "j").glob("part-*")
                 for line in p.read_text().splitlines())
    assert ids == list(range(rows))

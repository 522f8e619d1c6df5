"""Recurring tasks under real daemons: a six-field (seconds) schedule runs a task at every tick without two
runs overlapping, `task pause|resume` stop and restart it; SIGTERM mid-run, then a new daemon redoes that
tick once and goes on; a run killed mid-way is resumed once, for its tick, before the next tick's run.

A run takes about two seconds (a child process's start, plus a stream destination sleeping per batch when
``delay_ms`` is set); the schedule ticks every two seconds, so ticks do arrive while a run holds the claim.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, closed_after
from tests.e2e.test_daemon import FAST, Daemon, TaskDb, wait_for

pytestmark = pytest.mark.e2e

EVERY_2S = "* * * * * */2"


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    yield from closed_after([])


def recurring_spec(ws: Workspace, delay_ms: float = 0.0, schedule: str = EVERY_2S) -> Path:
    dests: list[dict[str, Any]] = [{"id": "j", "plugin": "file",
                                    "params": {"path": "out/tick ${tick_ts}", "format": "jsonl"}}]
    if delay_ms:
        dests.append({"id": "slow", "plugin": "stream", "concurrency": 1, "params": {"delay_ms": delay_ms}})
    path = ws.root / "recurring.json"
    path.write_text(json.dumps({"name": "recurring", "source": {"plugin": "stream", "params": {"rows": 300, "seed": 1}},
                                "destinations": dests, "settings": {"schedule": schedule}}))
    return path


def submit(ws: Workspace, spec: Path) -> int:
    return int(ws.run("task", "submit", str(spec), check=True).stdout.strip())


def show(ws: Workspace, task_id: int) -> dict[str, Any]:
    return ws.show(task_id)


def finished(ws: Workspace, task_id: int) -> list[dict[str, Any]]:
    return [r for r in show(ws, task_id)["runs"] if r["status"] != "running"]


def ended(ws: Workspace, task_id: int) -> int:
    """How many runs of the task ended (plain SQL: polled often, so no `task show` process each time)."""
    return int(TaskDb(ws).query("SELECT COUNT(*) FROM wormhole_task_run WHERE task_id = ? AND status <> ?",
                                (task_id, "running"))[0][0])


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def assert_no_overlap(runs: list[dict[str, Any]]) -> None:
    for before, after in itertools.pairwise(runs):
        assert ts(before["finished_at"]) <= ts(after["started_at"]), (before, after)


def test_a_seconds_schedule_runs_at_every_tick_without_overlap_pause_and_resume(ws: Workspace,
                                                                                daemons: list[Daemon]) -> None:
    task_id = submit(ws, recurring_spec(ws))
    doc = show(ws, task_id)
    assert doc["status"] == "scheduled" and doc["runs"] == []
    assert doc["schedule"]["cron"] == EVERY_2S and doc["schedule"]["paused"] is False
    assert ts(doc["schedule"]["next_tick"]).second % 2 == 0 and "watermarks" in doc
    daemons.append(Daemon(ws, *FAST, "--max-tasks", "4"))
    wait_for(lambda: ended(ws, task_id) >= 3, 60, "three runs", every=0.2)
    # Paused, it starts no run (one in progress ends); resumed, it runs again.
    paused = ws.run("task", "pause", str(task_id))
    assert paused.returncode == 0 and f"task {task_id} is paused" in paused.stdout
    wait_for(lambda: TaskDb(ws).statuses()[task_id] == "scheduled", 30, "the run in progress to end", every=0.2)
    before = ended(ws, task_id)
    time.sleep(4.5)  # two ticks pass
    assert ended(ws, task_id) == before and TaskDb(ws).statuses()[task_id] == "scheduled"
    assert ws.run("task", "resume", str(task_id), check=True).stdout.strip() == f"task {task_id} is resumed"
    wait_for(lambda: ended(ws, task_id) > before, 30, "a run after resume", every=0.2)
    daemons[0].stop()
    runs = finished(ws, task_id)
    assert len(runs) >= 4
    assert {r["status"] for r in runs} == {"success"}
    assert_no_overlap(runs)
    ticks = [r["variables"]["tick_ts"] for r in runs]
    assert ticks == sorted(set(ticks)), ticks  # one run per tick, in order
    for tick in ticks:
        assert ts(tick).second % 2 == 0 and ts(tick) <= ts(runs[ticks.index(tick)]["started_at"])
        assert sum(1 for p in (ws.root / "out" / f"tick {tick}").glob("*.jsonl") for _ in p.open()) == 300
    doc = show(ws, task_id)
    assert doc["status"] == "scheduled" and doc["schedule"]["paused"] is False
    assert ts(doc["schedule"]["last_tick"]) >= ts(ticks[-1])
    assert ts(doc["schedule"]["next_tick"]) > ts(ticks[-1])


def test_sigterm_mid_run_then_a_new_daemon_redoes_that_tick_once(ws: Workspace, daemons: list[Daemon]) -> None:
    task_id = submit(ws, recurring_spec(ws, delay_ms=1500))
    first = Daemon(ws, *FAST, "--grace-s", "0")
    daemons.append(first)
    wait_for(lambda: first.events("destination.started"), 30, "a run under way")
    code, _ = first.stop()
    assert code == 0
    doc = show(ws, task_id)
    runs = doc["runs"]
    assert [r["status"] for r in runs] == ["interrupted"]
    cut_tick = runs[0]["variables"]["tick_ts"]
    assert doc["status"] == "scheduled" and ts(doc["schedule"]["next_tick"]) == ts(cut_tick)
    daemons.append(Daemon(ws, *FAST))
    wait_for(lambda: ended(ws, task_id) >= 3, 60, "two runs after the restart", every=0.2)
    daemons[1].stop()
    runs = finished(ws, task_id)
    assert [r["status"] for r in runs[:3]] == ["interrupted", "success", "success"]
    ticks = [r["variables"]["tick_ts"] for r in runs]
    assert ticks[1] == cut_tick  # the interrupted tick, redone exactly once
    assert ticks.count(cut_tick) == 2 and ticks[2] > cut_tick and ticks == sorted(ticks)
    assert_no_overlap(runs)
    assert {r["status"] for r in runs[1:]} == {"success"}
    out = ws.root / "out" / f"tick {cut_tick}"
    assert sum(1 for p in out.glob("*.jsonl") for _ in p.open()) == 300


def test_a_run_killed_mid_way_is_resumed_once_before_the_next_tick(ws: Workspace, daemons: list[Daemon]) -> None:
    task_id = submit(ws, recurring_spec(ws, delay_ms=1500))
    daemon = Daemon(ws, *FAST)
    daemons.append(daemon)
    wait_for(lambda: daemon.events("destination.started"), 30, "a run under way")
    os.kill(daemon.events("daemon.task_started")[0]["pid"], signal.SIGKILL)
    wait_for(lambda: ended(ws, task_id) >= 3, 60, "two runs after the kill", every=0.2)
    daemon.stop()
    runs = finished(ws, task_id)
    assert [r["status"] for r in runs[:3]] == ["crashed", "success", "success"]
    assert [r["resumed_from"] for r in runs[:3]] == [None, runs[0]["id"], None]  # resumed once, then new ticks
    ticks = [r["variables"]["tick_ts"] for r in runs]
    assert ticks[1] == ticks[0] < ticks[2] and ticks == sorted(ticks)
    assert_no_overlap(runs)
    assert [e["status"] for e in daemon.events("daemon.claim_released")] == ["scheduled"]
    out = ws.root / "out" / f"tick {ticks[0]}"
    assert sum(1 for p in out.glob("*.jsonl") for _ in p.open()) == 300

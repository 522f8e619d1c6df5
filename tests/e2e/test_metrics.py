"""The Prometheus endpoints, scraped over HTTP while real processes run: a task's and the daemon's.

Scrapes are parsed with prometheus_client's own text parser; every wait is bounded.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Workspace, log_events, make_workspace

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROWS = 300_000
TASK = {"name": "metrics", "source": {"plugin": "stream", "params": {"rows": ROWS, "splits": 4, "dirty_every": 1000}},
        "destinations": [{"id": "fast", "plugin": "stream", "concurrency": 1, "params": {"delay_ms": 20}},
                         {"id": "csv", "plugin": "file", "error_limit": {"record": 1000},
                          "params": {"path": "out/csv", "format": "csv"}},
                         {"id": "slow", "plugin": "stream", "concurrency": 1, "params": {"delay_ms": 50}}]}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> Samples | None:
    """Every sample of /metrics by (name, labels); None when nothing answers (not up yet, or gone)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def scrapes_until_exit(proc: subprocess.Popen[str], port: int, timeout: float = 90) -> Iterator[Samples]:
    """The run's scrapes, until its endpoint closes (or the process ends). Once it has answered, a port that
    stops answering is closed for good: whatever answers there later is another process's (a test in
    parallel bound the port it freed), never this run's."""
    deadline = time.monotonic() + timeout
    answered = False
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the process did not end in time"
        samples = scrape(port)
        if samples is not None:
            answered = True
            yield samples
        elif answered:
            return
        time.sleep(0.2)


@pytest.fixture(name="ws")
def fixture_ws(tmp_path: Path) -> Workspace:
    ws = make_workspace(tmp_path)
    (tmp_path / "task.json").write_text(json.dumps(TASK))
    return ws


def test_a_run_serves_rising_counters_that_end_equal_to_the_result(ws: Workspace) -> None:
    """Scraped during `run FILE --metrics-port P`: rows read and written rise while the task runs; the
    last scrape (during --metrics-hold-s) equals the counts the task row records, per destination."""
    port = free_port()
    proc = ws.popen("run", "task.json", "--metrics-port", str(port), "--metrics-hold-s", "3")
    history = list(scrapes_until_exit(proc, port))
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 201, stderr  # success with rejected rows
    task_id = next(e["task_id"] for e in log_events(stderr) if e["event"] == "task.submitted")
    result = ws.show(task_id)["result"]
    task = str(task_id)
    running = [s for s in history if value(s, "wormhole_run_state", task_id=task, state="running") == 1.0]
    read = [value(s, "wormhole_rows_read_total", task_id=task) for s in running]
    slow = [value(s, "wormhole_rows_written_total", task_id=task, destination="slow", plugin="stream")
            for s in running]
    assert len({v for v in read if v is not None}) >= 2, read
    assert len({v for v in slow if v is not None}) >= 2, slow
    seen = [v for v in slow if v is not None]
    # Rising, and seen before the end (a scrape may also land after the last row, while the run commits).
    assert seen == sorted(seen) and seen[0] < ROWS and seen[-1] <= ROWS
    last = history[-1]
    assert value(last, "wormhole_run_state", task_id=task, state="success") == 1.0
    assert value(last, "wormhole_rows_read_total", task_id=task) == result["source"]["rows_read"] == ROWS
    for dest_id, dest in result["destinations"].items():
        labels = {"task_id": task, "destination": dest_id, "plugin": dest["plugin"]}
        assert value(last, "wormhole_rows_written_total", **labels) == dest["rows_written"]
        assert value(last, "wormhole_rows_rejected_total", **labels) == dest["rows_rejected"]
        assert value(last, "wormhole_bytes_written_total", **labels) == dest["bytes"]
        assert value(last, "wormhole_destination_state", state="success", **labels) == 1.0
        assert value(last, "wormhole_queue_rows", **labels) == 0.0
    assert result["destinations"]["csv"]["rows_rejected"] == ROWS // 1000  # the counts are not all alike
    events = [e["event"] for e in log_events(stderr)]
    assert "metrics.serving" in events and "metrics.holding" in events


def test_a_port_in_use_refuses_the_run_before_the_claim(ws: Workspace) -> None:
    """--metrics-port on a taken port: exit 203 with the reason, and the task stays pending; `run FILE`
    binds before it records the task, so its attempts leave no task behind for a daemon to run."""
    task_id = ws.submit(TASK)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        procs = [ws.run("--task-id", str(task_id), "--metrics-port", port),
                 ws.run("run", "task.json", "--metrics-port", port),
                 ws.run("--metrics-port", port, "run", "task.json")]
    for proc in procs:
        assert proc.returncode == 203, proc.stderr
        assert [e["error_code"] for e in log_events(proc.stderr) if e["event"] == "metrics.not_started"] == [
            "METRICS_UNAVAILABLE"]
        assert "task.submitted" not in [e["event"] for e in log_events(proc.stderr)]
    assert ws.show(task_id)["status"] == "pending"
    listed = ws.run("task", "list", check=True).stdout.splitlines()[1:]
    assert [line.split()[:2] for line in listed] == [[str(task_id), "pending"]]  # the only task


def test_the_daemon_counts_tasks_by_status(ws: Workspace) -> None:
    """`wormhole daemon --metrics-port P`: tasks claimed, running now, and finished by status."""
    ok = {"source": {"plugin": "stream", "params": {"rows": 5000}},
          "destinations": [{"id": "n", "plugin": "stream"}]}
    broken = {"source": {"plugin": "stream", "params": {"rows": 5000}},
              "destinations": [{"id": "n", "plugin": "stream", "params": {"fail_after": 0}}]}
    slow = {"source": {"plugin": "stream", "params": {"rows": 40_000}},
            "destinations": [{"id": "n", "plugin": "stream", "concurrency": 1, "params": {"delay_ms": 300}}]}
    for spec in (ok, ok, broken, slow):
        ws.submit(spec)
    port = free_port()
    daemon = ws.popen("daemon", "--max-tasks", "2", "--poll-s", "0.2", "--metrics-port", str(port))
    try:
        deadline = time.monotonic() + 90
        peak_running = 0.0
        while True:
            assert time.monotonic() < deadline and daemon.poll() is None, "the daemon did not finish 4 tasks"
            samples = scrape(port) or {}
            peak_running = max(peak_running, value(samples, "wormhole_daemon_tasks_running") or 0.0)
            finished = {dict(labels)["status"]: v for (name, labels), v in samples.items()
                        if name == "wormhole_daemon_tasks_finished_total"}
            if sum(finished.values()) == 4:
                break
            time.sleep(0.2)
        assert finished == {"success": 3.0, "failed": 1.0}
        assert value(samples, "wormhole_daemon_tasks_claimed_total") == 4.0
        assert value(samples, "wormhole_daemon_tasks_running") == 0.0
        assert peak_running >= 1.0
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.communicate(timeout=60)
    assert daemon.returncode == 0

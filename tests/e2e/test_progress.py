"""Live progress as a user sees it: `wormhole run FILE` in a real terminal (tmux), and off a terminal.

The task reads a stream once and writes it to two stream destinations that sleep per batch (``delay_ms``),
so it runs for about six seconds: long enough to watch the counts rise.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Workspace, log_events, make_workspace, wormhole_command

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROWS = 400_000
TASK = {"name": "progress", "source": {"plugin": "stream", "params": {"rows": ROWS, "splits": 4}},
        "destinations": [{"id": "fast", "plugin": "stream", "concurrency": 1, "params": {"delay_ms": 20}},
                         {"id": "slow", "plugin": "stream", "concurrency": 1, "params": {"delay_ms": 60}}]}
DEST_LINE = re.compile(r"^-> (fast|slow)\s+stream\s+(\w+)\s+written ([\d,]+)\s+rejected ([\d,]+)")
TASK_LINE = re.compile(r"^task \d+\s+stream\s+(\w+)\s+read ([\d,]+)")


@pytest.fixture(name="ws")
def fixture_ws(tmp_path: Path) -> Workspace:
    ws = make_workspace(tmp_path)
    (tmp_path / "task.json").write_text(json.dumps(TASK))
    return ws


class Tmux:
    """A private tmux server (its own socket, no user config) with one fixed-size window."""

    def __init__(self) -> None:
        self.socket = f"wh-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def screen(self) -> list[str]:
        return self("capture-pane", "-p", "-t", "main").splitlines()


@pytest.fixture(name="tmux")
def fixture_tmux() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    tmux = Tmux()
    tmux("new-session", "-d", "-s", "main", "-x", "180", "-y", "50")
    try:
        yield tmux
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)


def written(screen: list[str]) -> dict[str, list[tuple[str, int]]]:
    """Per destination, every progress line on the screen: (state, rows written)."""
    found: dict[str, list[tuple[str, int]]] = {}
    for line in screen:
        m = DEST_LINE.match(line)
        if m:
            found.setdefault(m.group(1), []).append((m.group(2), int(m.group(3).replace(",", ""))))
    return found


def test_a_terminal_shows_one_updating_line_per_destination(ws: Workspace, tmux: Tmux) -> None:
    """On a TTY: while the task runs, one line per destination whose count rises (the display is redrawn
    in place, never scrolled); at the end, every destination's final state and the full count."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in ws.env().items() if k.startswith("WORMHOLE_"))
    command = " ".join(shlex.quote(part) for part in wormhole_command())
    tmux("send-keys", "-t", "main", f"cd {shlex.quote(str(ws.root))} && env {env} {command} run task.json; "
                                    "echo EXIT=$?", "Enter")
    seen: dict[str, list[int]] = {"fast": [], "slow": []}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        screen = tmux.screen()
        if any(line.startswith("EXIT=") for line in screen):
            break
        for dest, lines in written(screen).items():
            assert len(lines) == 1, screen  # one line per destination, updated in place
            state, rows = lines[0]
            if state == "running":
                seen[dest].append(rows)
        time.sleep(0.3)
    else:
        pytest.fail(f"the task did not end within 90 s:\n{chr(10).join(tmux.screen())}")
    screen = tmux.screen()
    assert "EXIT=0" in screen, screen
    for dest, counts in seen.items():
        assert counts == sorted(counts), (dest, counts)  # never goes back
        # watched it rise (the last running line may already show every row: written, not yet committed)
        assert len(set(counts)) >= 2 and counts[0] < ROWS, (dest, counts)
    final = written(screen)
    assert final == {"fast": [("success", ROWS)], "slow": [("success", ROWS)]}, screen
    task_lines = [m.groups() for m in map(TASK_LINE.match, screen) if m]
    assert task_lines == [("success", f"{ROWS:,}")], screen
    # Info lines stay off the screen (they go to the log file); the outcome table comes after the final frame.
    assert not any("task.claimed" in line or "task.finished" in line for line in screen), screen
    after = screen[screen.index(next(line for line in screen if line.startswith("-> slow"))):]
    assert any(line.startswith("== task 1: status success, exit code 0") for line in after), screen
    assert "full log: var/logs/task-1-run-1.jsonl" in after, screen


def test_off_a_terminal_stderr_is_json_lines_only(ws: Workspace) -> None:
    """The same run with stderr a pipe: nothing but JSON log lines (no display, no escape codes)."""
    proc = ws.run("run", "task.json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines and all(line.startswith("{") for line in lines), lines[:5]
    assert "\x1b" not in proc.stderr
    events = log_events(proc.stderr)
    assert len(events) == len(lines)
    assert any(e["event"] == "monitor.progress" for e in events)
    assert [e["status"] for e in events if e["event"] == "task.finished"] == ["success"]
    assert not (ws.root / "var" / "logs").exists()  # the log is stderr's, no file besides


DIRTY_TASK = {"name": "terminal", "source": {"plugin": "stream", "params": {"rows": 20_000, "splits": 2,
                                                                            "dirty_every": 4_000}},
              "destinations": [{"id": "lake", "plugin": "file", "params": {"path": "out/lake", "format": "jsonl"},
                                "error_limit": {"record": 10}},
                               {"id": "report", "plugin": "sqlite", "params": {"path": "r.sqlite", "table": "t"},
                                "error_limit": {"record": 2}}]}


def run_on_a_terminal(ws: Workspace, *args: str, timeout: float = 90) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr a pseudo-terminal (160x50, log format auto, as a user
    has it): its exit code and all it wrote, escape codes and carriage returns removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    env = {**{k: v for k, v in ws.env().items() if k != "WORMHOLE_LOG_FORMAT"}, "TERM": "xterm"}
    proc = subprocess.Popen([*wormhole_command(), *args], cwd=ws.root, env=env, stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the process closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            pytest.fail(f"no end within {timeout} s:\n{out.decode(errors='replace')}")
        code = proc.wait(timeout=10)
    finally:
        os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))
    return code, text.replace("\r", "")


def test_a_terminal_shows_the_plan_errors_and_the_outcome_and_the_log_goes_to_a_file(ws: Workspace) -> None:
    """On a terminal: the plan as a few lines, no info line, the error of the destination over its budget,
    the outcome table naming the log file; the file holds every event as the JSON line it is off a terminal."""
    (ws.root / "dirty.json").write_text(json.dumps(DIRTY_TASK))
    ws.write_conf(exchange={"batch_rows": 4096})  # how many rejections precede the stop depends on the batches
    code, screen = run_on_a_terminal(ws, "run", "dirty.json")
    lines = screen.splitlines()
    assert code == 202, screen
    start = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    assert re.match(r"plan: local engine \(.+\), 2 channels \(.+\)$", lines[start]), screen
    assert re.match(r"  read 2 splits in 1 task group, 20,000 rows estimated$", lines[start + 1]), screen
    assert re.match(r"  -> lake    file    1 writer +writer threads; format=jsonl", lines[start + 2]), screen
    assert re.match(r"  -> report  sqlite  1 writer +writer threads; write_mode=insert", lines[start + 3]), screen
    assert lines[start + 4] == "  full log: var/logs/task-1-run-1.jsonl", screen
    assert "[info" not in screen and "task.claimed" not in screen and "task.finished" not in screen, screen
    assert re.search(r"\[error +\] destination.failed .*record limit of 2", screen), screen
    table = lines[lines.index("== task 1: status partial, exit code 202, 20,000 rows read once in "
                              + re.search(r"rows read once in ([\d.]+) s", screen).group(1) + " s"):]
    assert re.match(r"lake +file +committed \([\d,]+ written\) +\d+  output: out/lake$", table[2]), table
    assert re.match(r"report +sqlite +rolled back \([\d,]+ written, undone\) +3  error: 3 rejected", table[3]), table
    assert table[4:6] == ["rejected rows and their reasons: var/dirty/task-1/run-1.jsonl",
                          "full log: var/logs/task-1-run-1.jsonl"], table

    events = [json.loads(line) for line in (ws.root / "var/logs/task-1-run-1.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names[:2] == ["task.submitted", "task.claimed"] and names[-1] == "task.finished", names
    assert {"plan.made", "destination.prepared", "destination.failed", "destination.committed"} <= set(names)
    plan = next(e for e in events if e["event"] == "plan.made")
    assert plan["task_id"] == 1 and plan["run_id"] == 1 and len(plan["splits"]) == 2, plan

"""Live progress as a user sees it: `wormhole run FILE` in a real terminal (tmux), and off a terminal.

The task reads a stream once and writes it to two stream destinations that sleep per batch (``delay_ms``),
so it runs for about six seconds: long enough to watch the counts rise.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
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
        assert len(set(counts)) >= 2 and counts[-1] < ROWS, (dest, counts)  # watched it rise
    final = written(screen)
    assert final == {"fast": [("success", ROWS)], "slow": [("success", ROWS)]}, screen
    task_lines = [m.groups() for m in map(TASK_LINE.match, screen) if m]
    assert task_lines == [("success", f"{ROWS:,}")], screen
    # Log lines are printed above the display, not through it: the last ones come after the final frame.
    assert any("task.finished" in line for line in screen[screen.index(next(
        line for line in screen if line.startswith("-> slow"))):]), screen


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

"""The console's fixtures: a workspace whose runs beat often (progress and cancels seen quickly), the
console's token, and tasks that succeed, reject rows or run long."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, make_workspace

TOKEN = "console-test-token-0123456789"
SECRET = "s3cret-pw-do-not-show"

pytest.importorskip("starlette", reason="the console extra (starlette, uvicorn) is not installed")


def console_workspace(root: Path) -> Workspace:
    ws = make_workspace(root)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.2, "stale_s": 30.0}, exchange={"batch_rows": 1000})
    return ws


@pytest.fixture(name="cws")
def fixture_cws(tmp_path: Path) -> Workspace:
    return console_workspace(tmp_path)


def good_task(out: Path, rows: int = 2000) -> dict[str, Any]:
    """Succeeds: a stream source into a CSV file and the null sink."""
    return {"name": "good", "source": {"plugin": "stream", "params": {"rows": rows, "splits": 4}},
            "destinations": [{"id": "csv", "plugin": "file", "params": {"path": str(out), "format": "csv"}},
                             {"id": "null", "plugin": "stream", "params": {}}]}


def dirty_task(out: Path) -> dict[str, Any]:
    """Fails: every 100th row cannot be encoded, and the CSV destination allows none (20 rejected rows)."""
    return {"name": "dirty", "source": {"plugin": "stream", "params": {"rows": 2000, "splits": 2, "dirty_every": 100}},
            "destinations": [{"id": "csv", "plugin": "file", "params": {"path": str(out), "format": "csv"},
                              "error_limit": {"record": 0}}]}


def slow_task(rows: int = 1_000_000, delay_ms: float = 100) -> dict[str, Any]:
    """Runs for ``rows`` / 1000 x ``delay_ms`` unless stopped: the null sink sleeps per batch of 1000 rows."""
    return {"name": "slow", "source": {"plugin": "stream", "params": {"rows": rows, "splits": 4}},
            "settings": {"speed": {"channel": 1}},
            "destinations": [{"id": "slow", "plugin": "stream", "params": {"delay_ms": delay_ms}}]}


def secret_task() -> dict[str, Any]:
    """Valid, never run: a MySQL destination whose password must never be shown."""
    return {"name": "secretive", "source": {"plugin": "stream", "params": {"rows": 10}},
            "destinations": [{"id": "dw", "plugin": "mysql", "params": {
                "host": "127.0.0.1", "user": "loader", "password": SECRET, "database": "dw", "table": "t"}}]}


@pytest.fixture(name="token_env")
def fixture_token_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("WORMHOLE_CONSOLE_TOKEN", TOKEN)
    return TOKEN


def chdir(path: Path) -> Any:
    """The console resolves var/dirty like the runs it shows: from the workspace's directory."""
    previous = os.getcwd()
    os.chdir(path)
    return previous

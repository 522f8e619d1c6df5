"""The CLI's subcommands as a user types them: validate, submit, plugins, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Workspace

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_validate_accepts_the_shipped_examples(ws: Workspace) -> None:
    """Every task in conf/examples validates."""
    for example in sorted((REPO / "conf/examples").glob("*.json")):
        proc = ws.run("validate", str(example))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("valid:")


def test_validate_lists_every_problem_and_exits_204(ws: Workspace, tmp_path: Path) -> None:
    """validate prints each problem with its key path and exits 204."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"source": {"plugin": "stream", "params": {"rows": -1}},
                               "destinations": [{"id": "a", "plugin": "sqlite", "params": {"table": "t"}}]}))
    proc = ws.run("validate", str(bad))
    assert proc.returncode == 204
    assert "source.params.rows: must be >= 0" in proc.stderr
    assert "destinations[0].params.path: required key is missing" in proc.stderr


def test_submit_prints_the_id_and_refuses_a_bad_file(ws: Workspace, tmp_path: Path) -> None:
    """task submit prints the new id (a pending task); an invalid file is refused with 204 and not inserted."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"name": "g", "source": {"plugin": "stream", "params": {"rows": 5}},
                                "destinations": [{"id": "n", "plugin": "stream"}]}))
    proc = ws.run("task", "submit", str(good), check=True)
    task_id = int(proc.stdout.strip())
    assert ws.show(task_id)["status"] == "pending"
    good.write_text("{}")
    assert ws.run("task", "submit", str(good)).returncode == 204
    listed = ws.run("task", "list", check=True).stdout.strip().splitlines()
    assert len(listed) == 2  # header and the one good task


def test_plugins_lists_the_stores(ws: Workspace) -> None:
    """plugins names every built-in store with its roles."""
    out = ws.run("plugins", check=True).stdout
    for name in ("file", "sqlite", "stream"):
        assert name in out
    assert "source/destination" in out


def test_usage_errors_exit_2(ws: Workspace) -> None:
    """No task id and no subcommand is a usage error (2), as is --task-id with a subcommand."""
    assert ws.run().returncode == 2
    assert ws.run("--task-id", "1", "plugins").returncode == 2


def test_unreachable_task_db_fails_clearly(ws: Workspace) -> None:
    """An unreachable task database exits 203 and names the (redacted) URL, not the password."""
    ws.task_db = "mysql://root:s3cret@127.0.0.1:1/nope?connect_timeout=2"
    proc = ws.run("--task-id", "1", timeout=60)
    assert proc.returncode == 203
    assert "127.0.0.1:1" in proc.stderr and "s3cret" not in proc.stderr

"""The CLI's subcommands as a user types them: validate, submit, plugins, usage errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import Workspace, log_events

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_validate_accepts_the_shipped_examples(ws: Workspace) -> None:
    """Every task in conf/examples validates, once the environment variables it names are set."""
    import subprocess

    from tests.conftest import wormhole_command

    for example in sorted((REPO / "conf/examples").glob("*.json")):
        named = set(re.findall(r'"password_env": "(\w+)"', example.read_text(encoding="utf-8")))
        proc = subprocess.run([*wormhole_command(), "validate", str(example)], cwd=ws.root, capture_output=True,
                              env={**ws.env(), **dict.fromkeys(named, "pw")}, text=True, timeout=120)
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


def test_a_succeeded_task_run_again_is_pointed_to_the_retry_that_works(ws: Workspace) -> None:
    """``--task-id N`` on a succeeded task suggested ``task retry N``, which refuses a succeeded task without
    --force: the hint names the command that works, and it does."""
    task_id = ws.submit({"source": {"plugin": "stream", "params": {"rows": 3}},
                         "destinations": [{"id": "n", "plugin": "stream"}]})
    assert ws.run("--task-id", str(task_id)).returncode == 0
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode != 0
    assert f"`wormhole task retry {task_id} --force` makes it pending again" in proc.stderr, proc.stderr
    assert ws.run("task", "retry", str(task_id)).returncode != 0  # the hint before this fix: refused
    assert ws.run("task", "retry", str(task_id), "--force", check=True).stdout.strip() == f"task {task_id} is pending"


DATAX_JOB = {"job": {"setting": {"speed": {"channel": 1}}, "content": [{
    "reader": {"name": "mysqlreader", "parameter": {
        "username": "etl", "password": "r", "column": ["id"],
        "connection": [{"table": ["orders"], "jdbcUrl": ["jdbc:mysql://127.0.0.1:3306/shop"]}]}},
    "writer": {"name": "mysqlwriter", "parameter": {
        "username": "loader", "password": "w", "column": ["id"],
        "connection": [{"table": ["orders_copy"], "jdbcUrl": "jdbc:mysql://127.0.0.1:3306/dw"}]}}}]}}


def test_a_datax_job_given_as_a_task_points_to_the_import(ws: Workspace) -> None:
    (ws.root / "job.json").write_text(json.dumps(DATAX_JOB), encoding="utf-8")
    for command in ("run", "validate"):
        proc = ws.run(command, "job.json")
        assert proc.returncode == 204
        assert "this is a DataX job (job.content), not a wormhole task: convert it with `wormhole import " \
               "datax FILE -o task.json`" in proc.stderr, proc.stderr
        assert "unknown key" not in proc.stderr


def test_validate_and_run_name_every_unset_password_env_of_an_imported_datax_task(ws: Workspace) -> None:
    """validate passed with the writer's password_env unset, and the run named only the reader's."""
    import subprocess

    from tests.conftest import wormhole_command

    (ws.root / "job.json").write_text(json.dumps(DATAX_JOB), encoding="utf-8")
    ws.run("import", "datax", "job.json", "-o", "task.json", check=True)
    task = json.loads((ws.root / "task.json").read_text(encoding="utf-8"))
    reader = task["source"]["params"]["password_env"]
    (writer,) = [d["params"]["password_env"] for d in task["destinations"]]
    assert reader != writer
    for command in ("validate", "run"):
        proc = ws.run(command, "task.json")
        assert proc.returncode == 204, proc.stderr
        assert f"source.params.password_env: environment variable {reader} is not set" in proc.stderr
        assert f"destinations[0].params.password_env: environment variable {writer} is not set" in proc.stderr
    assert ws.run("task", "list", check=True).stdout.count("\n") == 1  # run FILE recorded nothing
    proc = subprocess.run([*wormhole_command(), "validate", "task.json"], cwd=ws.root, capture_output=True,
                          env={**ws.env(), reader: "r"}, text=True, timeout=120)
    assert proc.returncode == 204 and writer in proc.stderr and reader not in proc.stderr, proc.stderr
    # A submitted task (it may run elsewhere: submit does not check) run here: its log names both too.
    task_id = int(ws.run("task", "submit", "task.json", check=True).stdout)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode != 0
    (event,) = [e for e in log_events(proc.stderr) if e["event"] == "task.environment_unset"]
    assert event["problems"] == [f"source.params.password_env: environment variable {reader} is not set",
                                 f"destinations[0].params.password_env: environment variable {writer} is not set"]

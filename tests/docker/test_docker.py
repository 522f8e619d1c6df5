"""The Docker image for real: ``make docker`` builds it (installing and starting Docker, and making the
base image, when missing), then containers run tasks against the MariaDB server on the host network.

Skipped with the reason when Docker cannot be started here, unless ``WORMHOLE_REQUIRE_DOCKER=1`` (CI)
makes that a failure. The image is built once per test session; an unchanged tree rebuilds from cache
in seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MYSQL_URL, REPO, Workspace, log_events, make_workspace
from tests.mysql_helpers import (
    Databases,
    Server,
    create_table,
    execute,
    fill_from_sequence,
    fingerprint,
    table_rows,
)
from wormhole.cli import cli
from wormhole.plugins.base import WriteContext

pytestmark = [pytest.mark.docker, pytest.mark.mysql, pytest.mark.e2e, pytest.mark.timeout(1800)]

IMAGE = os.environ.get("WORMHOLE_IMAGE", "wormhole")
SERVER = Server.from_url(MYSQL_URL)
WORKDIR = "/srv/wormhole"
"""The image's working directory: relative paths in a task (and var/) resolve under it."""

ROWS = 5000
DDL = ("id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NULL, amount DECIMAL(12,2) NULL, "
       "ts DATETIME NULL")
COLUMNS = ("id", "name", "amount", "ts")
FILL = {"id": "seq",
        # Non-ASCII text: the container has no locale set up, so a lossy encoding would show here.
        "name": "IF(seq % 97 = 0, NULL, CONCAT('näme-', seq, '-名'))",
        "amount": "IF(seq % 89 = 0, NULL, seq / 100)",
        "ts": "IF(seq % 83 = 0, NULL, TIMESTAMP('2021-01-01') + INTERVAL seq * 37 SECOND)"}

HAS_DAEMON = "daemon" in cli.commands  # type: ignore[attr-defined]
DAEMON_GRACE_S = 15


def _docker_unavailable(reason: str) -> None:
    if os.environ.get("WORMHOLE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"Docker is required (WORMHOLE_REQUIRE_DOCKER=1) but cannot be started: {reason}")
    pytest.skip(f"Docker cannot be started here: {reason}")


@pytest.fixture(scope="session")
def image() -> str:
    """``make docker``'s steps: Docker up (skip when it cannot be), the base image, then the image."""
    setup = subprocess.run([str(REPO / "scripts/docker-setup.sh")], capture_output=True, text=True, timeout=600)
    if setup.returncode != 0:
        _docker_unavailable(setup.stderr.strip()[-2000:] or f"scripts/docker-setup.sh exited {setup.returncode}")
    # Docker runs: from here on a failure is the image's, never a reason to skip.
    build = subprocess.run(["make", "--no-print-directory", "docker"], cwd=REPO, capture_output=True, text=True,
                           timeout=1700)
    output = (build.stdout + build.stderr)[-6000:]
    assert build.returncode == 0, f"make docker exited {build.returncode}:\n{output}"
    return IMAGE


def docker(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def task_db(dbs: Databases, tmp_path: Path) -> tuple[str, Workspace]:
    """A MySQL task database (initialised by the host's CLI) and a workspace to insert and show tasks."""
    url = f"{MYSQL_URL.rstrip('/')}/{dbs.create('taskdb')}"
    return url, make_workspace(tmp_path, task_db=url)


def source(dbs: Databases) -> str:
    db = dbs.create("src")
    create_table(dbs.admin, db, "src", DDL)
    fill_from_sequence(dbs.admin, db, "src", ROWS, FILL)
    return db


def target(dbs: Databases, label: str) -> str:
    db = dbs.create(label)
    create_table(dbs.admin, db, "t", DDL)
    return db


def mysql_copy(src: str, dst: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The source and a MySQL destination of a task copying ``src``.src to ``dst``.t."""
    return ({"plugin": "mysql", "params": SERVER.params(src, table="src", split_pk="id")},
            {"id": "db", "plugin": "mysql", "params": SERVER.params(dst, table="t")})


def canon(row: Sequence[Any]) -> tuple[Any, ...]:
    """One comparable form for a row from MySQL (Decimal, datetime) or from JSON (text, number)."""
    rid, name, amount, ts = row
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts.replace("Z", "+00:00")).replace(tzinfo=None)
    return (int(rid), name, None if amount is None else Decimal(str(amount)).quantize(Decimal("0.01")), ts)


def jsonl_rows(directory: Path) -> list[tuple[Any, ...]]:
    rows = [canon(tuple(json.loads(line)[c] for c in COLUMNS))
            for part in sorted(directory.glob("*.jsonl"))
            for line in part.read_text(encoding="utf-8").splitlines()]
    return sorted(rows, key=lambda r: r[0])


def task_statuses(ws: Workspace, ids: Sequence[int]) -> dict[int, str]:
    conn = SERVER.connect(ws.task_db.rsplit("/", 1)[1])
    try:
        marks = ", ".join(["%s"] * len(ids))
        return dict(execute(conn, f"SELECT id, status FROM wormhole_task WHERE id IN ({marks})", list(ids)))
    finally:
        conn.close()


SPARK_ON_BOOKWORM_PYTHON = pytest.mark.xfail("__reduce__" not in vars(WriteContext), strict=True, reason=(
    "Debian bookworm's Python 3.11.2 replaces a user-defined __getstate__ of a frozen slots dataclass "
    "(CPython gh-104035, fixed in 3.11.4), so WriteContext pickles its threading.Event and Spark cannot ship "
    "a file destination: the contexts in wormhole/plugins/base.py need __reduce__, which dataclasses leave alone"))


@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=SPARK_ON_BOOKWORM_PYTHON)])
def test_task_in_a_container_copies_mysql_to_mysql_and_jsonl(image: str, dbs: Databases, tmp_path: Path,
                                                             engine: str) -> None:
    """``docker run wormhole --task-id N``: both destinations hold exactly the source, the task is a success."""
    url, ws = task_db(dbs, tmp_path)
    src, dst = source(dbs), target(dbs, "dst")
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)  # the container runs as its own non-root user
    reader, db_dest = mysql_copy(src, dst)
    spec = {"name": f"docker-{engine}", "source": reader, "settings": {"engine": engine},
            "destinations": [db_dest, {"id": "files", "plugin": "file",
                                       "params": {"path": "out/rows", "format": "jsonl"}}]}
    task_id = ws.submit(spec)

    proc = docker("run", "--rm", "--network", "host", "-v", f"{out}:{WORKDIR}/out", image,
                  "--task-id", str(task_id), "--task-db", url, timeout=600)

    assert proc.returncode == 0, proc.stderr[-4000:]
    finished = [e for e in log_events(proc.stderr) if e.get("event") == "task.finished"]
    assert finished and finished[-1]["status"] == "success", proc.stderr[-4000:]
    task = ws.show(task_id)
    assert task["status"] == "success"
    assert task["result"]["engine"] == engine
    for dest_id in ("db", "files"):
        dest = task["result"]["destinations"][dest_id]
        assert (dest["status"], dest["rows_written"], dest["rows_rejected"]) == ("success", ROWS, 0), dest
    admin = dbs.admin
    assert fingerprint(admin, dst, "t", COLUMNS) == fingerprint(admin, src, "src", COLUMNS)
    want = [canon(r) for r in table_rows(admin, src, "src", COLUMNS)]
    assert len(want) == ROWS
    assert jsonl_rows(out / "rows") == want


@pytest.mark.xfail(not HAS_DAEMON, reason="needs the daemon branch", strict=False)
def test_daemon_in_a_container_runs_inserted_tasks_and_stops_within_its_grace(image: str, dbs: Databases,
                                                                              tmp_path: Path) -> None:
    """``docker run -d wormhole daemon``: 3 tasks inserted with plain SQL all succeed; ``docker stop`` ends it
    cleanly (exit 0) within its grace period."""
    url, ws = task_db(dbs, tmp_path)
    src = source(dbs)
    targets = [target(dbs, f"d{i}") for i in range(3)]
    name = f"wormhole-daemon-{uuid.uuid4().hex[:8]}"
    started = docker("run", "-d", "--name", name, "--network", "host", image, "daemon", "--task-db", url,
                     "--max-tasks", "2", "--poll-s", "0.5", "--grace-s", str(DAEMON_GRACE_S))
    assert started.returncode == 0, started.stderr
    try:
        ids = []
        for i, dst in enumerate(targets):
            reader, db_dest = mysql_copy(src, dst)
            ids.append(ws.submit({"name": f"daemon-{i}", "source": reader, "destinations": [db_dest]}))
        statuses = wait_until_settled(ws, ids, name, deadline_s=300)
        assert statuses == dict.fromkeys(ids, "success"), daemon_logs(name)
        stop_began = time.monotonic()
        stopped = docker("stop", "--time", str(DAEMON_GRACE_S + 30), name, timeout=DAEMON_GRACE_S + 60)
        stop_took = time.monotonic() - stop_began
        assert stopped.returncode == 0, stopped.stderr
        state = json.loads(docker("inspect", "--format", "{{json .State}}", name).stdout)
        assert (state["ExitCode"], state["OOMKilled"]) == (0, False), daemon_logs(name)
        assert stop_took < DAEMON_GRACE_S, f"docker stop took {stop_took:.1f}s\n{daemon_logs(name)}"
    finally:
        docker("rm", "--force", name)
    want = fingerprint(dbs.admin, src, "src", COLUMNS)
    for dst in targets:
        assert fingerprint(dbs.admin, dst, "t", COLUMNS) == want
    for task_id in ids:
        assert ws.show(task_id)["result"]["destinations"]["db"]["rows_written"] == ROWS


def wait_until_settled(ws: Workspace, ids: Sequence[int], container: str, deadline_s: float) -> dict[int, str]:
    """Poll the task rows until none is pending or running (bounded; fails early if the daemon died)."""
    deadline = time.monotonic() + deadline_s
    statuses = task_statuses(ws, ids)
    while any(s in ("pending", "running") for s in statuses.values()):
        running = docker("inspect", "--format", "{{.State.Running}}", container).stdout.strip()
        assert running == "true", f"the daemon container stopped:\n{daemon_logs(container)}"
        assert time.monotonic() < deadline, f"tasks not done in {deadline_s}s: {statuses}\n{daemon_logs(container)}"
        time.sleep(0.5)
        statuses = task_statuses(ws, ids)
    return statuses


def daemon_logs(container: str) -> str:
    logs = docker("logs", container)
    return (logs.stdout + logs.stderr)[-4000:]

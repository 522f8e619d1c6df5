"""Shared fixtures: the MariaDB server (required in CI) and its uuid-named databases, the CLI as a
subprocess, log capture."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.mysql_helpers import Databases, Server

REPO = Path(__file__).resolve().parent.parent
MYSQL_URL = os.environ.get("WORMHOLE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``-n N --dist loadgroup`` (``make test``): tests that share an expensive fixture run on one
    worker, so it is made once per run: the Docker image, the run's one SparkSession, a module's source."""
    ranks: dict[str, int] = {}
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        ranks[item.nodeid] = _START_RANK.get(group or "", 2 if group or item.get_closest_marker("slow") else 3)
    # Longest first: one worker takes the Spark group, another the Docker group, at once; module groups and
    # slow tests come next, so no long unit starts last. A stable sort: the order is the same on every
    # worker, as xdist requires.
    items.sort(key=lambda item: ranks[item.nodeid])


_START_RANK = {"spark": 0, "docker": 1}


def _xdist_group(item: pytest.Item) -> str | None:
    if item.get_closest_marker("docker"):
        return "docker"
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    if "spark_conf" in defs:
        return "spark"
    if any(fixturedefs[-1].scope == "module" for fixturedefs in defs.values()):
        return item.nodeid.split("::")[0]
    return None


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def mysql_or_skip() -> Any:
    """A pymysql connection to the test server; skip when absent unless WORMHOLE_REQUIRE_MYSQL=1."""
    from urllib.parse import urlparse

    import pymysql

    u = urlparse(MYSQL_URL)
    try:
        return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                               password=u.password or "", connect_timeout=5, autocommit=True)
    except pymysql.err.OperationalError as exc:
        if os.environ.get("WORMHOLE_REQUIRE_MYSQL") == "1":
            pytest.fail(f"MariaDB at {MYSQL_URL} is required (WORMHOLE_REQUIRE_MYSQL=1) but unreachable: {exc}")
        pytest.skip(f"MariaDB at {MYSQL_URL} unreachable: {exc}")


@pytest.fixture(name="mysql_db")
def fixture_mysql_db() -> Iterator[str]:
    """A fresh database on the test server; yields its mysql:// URL and drops it afterwards."""
    conn = mysql_or_skip()
    name = f"wh_test_{uuid.uuid4().hex[:8]}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    try:
        yield f"{MYSQL_URL.rstrip('/')}/{name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


def wormhole_command() -> list[str]:
    """The installed console script next to the interpreter running the tests (.venv/bin/wormhole)."""
    script = Path(sys.executable).parent / "wormhole"
    return [str(script)] if script.exists() else [sys.executable, "-m", "wormhole"]


def crashing_command(crash: str) -> list[str]:
    """``wormhole`` that SIGKILLs (or SIGSTOPs) itself at a crash point (tests/crash_entry.py: ``crash`` is
    ``<point>:<destination>:<n>[:stop]``); the CLI's arguments follow."""
    return [sys.executable, str(Path(__file__).with_name("crash_entry.py")), crash]


@dataclass
class Workspace:
    """A working directory with its own task DB (var/wormhole.db) where the CLI runs as a subprocess."""

    root: Path
    task_db: str

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
        env["WORMHOLE_TASK_DB"] = self.task_db
        env["WORMHOLE_CONF"] = str(self.root / "conf")
        env["WORMHOLE_LOG_FORMAT"] = "json"
        return env

    def run(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*wormhole_command(), *args], cwd=self.root, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"wormhole {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*wormhole_command(), *args], cwd=self.root, env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def write_conf(self, **sections: dict[str, Any]) -> None:
        lines = []
        for section, values in sections.items():
            lines.append(f"[{section}]")
            lines.extend(f"{k} = {json.dumps(v)}" for k, v in values.items())
        (self.root / "conf").mkdir(exist_ok=True)
        (self.root / "conf" / "engine.toml").write_text("\n".join(lines) + "\n")

    def submit(self, spec: dict[str, Any] | str, name: str = "test") -> int:
        """Insert a task the way an upstream system does: a plain INSERT, not our own code."""
        text = spec if isinstance(spec, str) else json.dumps(spec)
        if self.task_db.startswith("sqlite"):
            conn = sqlite3.connect(self.root / "var" / "wormhole.db")
            with conn:
                cur = conn.execute("INSERT INTO wormhole_task (name, spec) VALUES (?, ?)", (name, text))
            conn.close()
            return int(cur.lastrowid)
        from urllib.parse import urlparse

        import pymysql

        u = urlparse(self.task_db)
        conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                               password=u.password or "", database=u.path.lstrip("/"), autocommit=True)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO wormhole_task (name, spec) VALUES (%s, %s)", (name, text))
            task_id = cur.lastrowid
        conn.close()
        return int(task_id)

    def taskdb_id(self) -> str:
        """The id ``db init`` gave this workspace's (SQLite) task database: destinations name their kept
        state (staging tables, markers, temporary directories) by it."""
        conn = sqlite3.connect(self.root / "var" / "wormhole.db")
        try:
            return str(conn.execute("SELECT value FROM wormhole_meta WHERE name = 'taskdb_id'").fetchone()[0])
        finally:
            conn.close()

    def show(self, task_id: int) -> dict[str, Any]:
        return json.loads(self.run("task", "show", str(task_id), check=True).stdout)


def run_task(ws: Workspace, spec: dict[str, Any] | str, timeout: float = 240) -> tuple[int, dict[str, Any], str]:
    """Insert ``spec`` as an upstream system would, run ``wormhole --task-id``: (exit code, task, stderr)."""
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id), timeout=timeout)
    return proc.returncode, ws.show(task_id), proc.stderr


def log_events(stderr: str) -> list[dict[str, Any]]:
    """The JSON log lines of a CLI run."""
    events = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    return events


def make_workspace(root: Path, task_db: str | None = None) -> Workspace:
    ws = Workspace(root=root, task_db=task_db or "sqlite:///var/wormhole.db")
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0})
    ws.run("db", "init", check=True)
    return ws


@pytest.fixture(name="ws")
def fixture_ws(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path)


@pytest.fixture
def server() -> Server:
    """The MariaDB test server (skips, or fails under WORMHOLE_REQUIRE_MYSQL=1, when absent)."""
    mysql_or_skip().close()
    return Server.from_url(MYSQL_URL)


@pytest.fixture
def dbs(server: Server) -> Iterator[Databases]:
    """uuid-named databases on the test server, dropped after the test."""
    databases = Databases(server, server.connect())
    try:
        yield databases
    finally:
        databases.drop_all()

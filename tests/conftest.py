"""Shared fixtures: the MariaDB server (required in CI) and its uuid-named databases, the CLI as a
subprocess, log capture."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import structlog

from tests.mysql_helpers import Databases, Server

REPO = Path(__file__).resolve().parent.parent
MYSQL_URL = os.environ.get("WORMHOLE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306")


class _Closable(Protocol):
    def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)


def closed_after(started: list[_C]) -> Iterator[list[_C]]:
    """A fixture's body: yield the list a test appends what it starts to (daemons, processes), then close
    each one, whatever the test's outcome."""
    yield started
    for item in started:
        item.close()


GROUPED_MODULES = frozenset({"tests/e2e/test_resume.py", "tests/web/test_console_browser.py"})
"""Modules whose tests share a module-scoped fixture (a source table worth making once): under ``make test``
one worker runs each of them whole, so the fixture is made once. The collection hook below fails when a
module with such a fixture is missing here. A fixture that costs milliseconds (a connection, a table of a
few rows) is function-scoped instead: a grouped module is one worker's serial chain (the expression
agreement module's was the longest after Spark's)."""


SPARK_CLUSTER_MODULES = frozenset({"tests/spark/test_cluster.py", "tests/spark/test_cluster_isolated.py"})
"""Modules whose standalone clusters and every run on them are processes of their own (they opt out of
the run's SparkSession): one unit apart from the session's, so their cluster and driver JVMs start on
another worker while the session's tests run (together about half of that unit's time when it held them)."""


def xdist_unit(nodeid: str) -> str:
    """The unit of work a test belongs to under ``make test`` (pytest-xdist): the run's one SparkSession
    (tests/spark), the standalone clusters (SPARK_CLUSTER_MODULES), the Docker image (tests/docker),
    a module of GROUPED_MODULES, or the test alone."""
    module = nodeid.split("::")[0]
    if module in SPARK_CLUSTER_MODULES:
        return "spark-cluster"
    if module.startswith("tests/spark/"):
        return "spark"
    if module.startswith("tests/docker/"):
        return "docker"
    return module if module in GROUPED_MODULES else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` as xdist_unit() groups (xdist's own marker groups do not reach the scheduler
    under pytest 9), in collection order: the units the collection hook puts first start first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    config.option.loadscopereorder = False
    return UnitScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest first, so no long unit starts last: the Spark, Spark cluster and Docker units, then grouped
    modules and slow tests, then the rest (a stable sort: every worker collects the same order, as xdist
    requires)."""
    ranks: dict[str, int] = {}
    for item in items:
        unit = xdist_unit(item.nodeid)
        scopes = {name: defs[-1].scope for name, defs in item._fixtureinfo.name2fixturedefs.items()}
        if "module" in scopes.values() and unit == item.nodeid:
            raise pytest.UsageError(f"{item.nodeid} uses a module-scoped fixture: add its module to "
                                    "GROUPED_MODULES (tests/conftest.py)")
        if "spark_conf" in scopes and unit != "spark":
            raise pytest.UsageError(f"{item.nodeid} uses the run's SparkSession outside tests/spark")
        ranks[item.nodeid] = {"spark": 0, "spark-cluster": 1, "docker": 1}.get(unit, 2 if unit != item.nodeid
                                                          or item.get_closest_marker("slow") else 3)
    items.sort(key=lambda item: ranks[item.nodeid])


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

    def run_here(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """The same ``wormhole`` command run in this process (click's runner: same arguments, environment and
        working directory, stdout and stderr apart), without the ~0.5 s of CPU a new interpreter spends
        importing the CLI. For the bookkeeping every test repeats (``db init``, ``task show``); what a
        user sees of those commands as a process is asserted in tests/e2e/test_cli*.py."""
        from click.testing import CliRunner

        from wormhole.cli import cli

        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("WORMHOLE_")}
        env.update(self.env())
        configured = structlog.is_configured()
        saved = structlog.get_config()
        try:
            with contextlib.chdir(self.root):
                result = CliRunner(env=env).invoke(cli, list(args), prog_name="wormhole")
        finally:  # the command configured logging for itself: give the test process its own back
            if configured:
                structlog.configure(**saved)
            else:
                structlog.reset_defaults()
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        proc = subprocess.CompletedProcess(["wormhole", *args], result.exit_code, result.stdout, result.stderr)
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
        return json.loads(self.run_here("task", "show", str(task_id), check=True).stdout)


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
    ws.run_here("db", "init", check=True)
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

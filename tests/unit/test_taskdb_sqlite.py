"""SQLite task store: the shared contract (tests/taskdb_contract.py) plus the SQLite bits, and URLs."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pymysql
import pytest

from tests.taskdb_contract import LegacySchema, RawInsert, TaskStoreContract, near_now, task_in, utcnow
from wormhole.config import ClaimConf
from wormhole.errors import TaskDbError
from wormhole.taskdb import DEFAULT_STALE_S, DEFAULT_TASK_DB_URL, TaskStore, open_store, redact_url

# The tables as the first release's `db init` created them (no priority, no wormhole_daemon).
LEGACY_SQLITE_DDL = """
CREATE TABLE wormhole_task (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name VARCHAR(255) NOT NULL DEFAULT '', spec TEXT NOT NULL,
    status VARCHAR(16) NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), started_at TEXT, finished_at TEXT,
    claimed_by VARCHAR(255), result TEXT, error TEXT);
CREATE INDEX ix_wormhole_task_status ON wormhole_task (status);
CREATE TABLE wormhole_task_run (
    id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL, status VARCHAR(16) NOT NULL DEFAULT 'running',
    claimed_by VARCHAR(255), started_at TEXT, finished_at TEXT, exit_code INTEGER, result TEXT, error TEXT);
CREATE INDEX ix_wormhole_task_run_task_id ON wormhole_task_run (task_id);
"""

TS_TEXT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tasks.db"


@pytest.fixture
def db_url(db_path: Path) -> str:
    return f"sqlite:///{db_path}"  # db_path is absolute: four slashes


@pytest.fixture
def store_and_path(db_url: str, db_path: Path) -> Iterator[tuple[TaskStore, Path]]:
    with open_store(db_url, create=True) as s:
        s.init_schema()
        yield s, db_path


class TestSqliteStore(TaskStoreContract):
    @pytest.fixture
    def store_url(self, db_url: str) -> str:
        return db_url

    @pytest.fixture
    def raw_insert(self, db_path: Path) -> Iterator[RawInsert]:
        def insert(sql: str) -> int:
            raw = sqlite3.connect(db_path)
            try:
                task_id = raw.execute(sql).lastrowid
                raw.commit()
            finally:
                raw.close()
            assert task_id is not None
            return task_id

        yield insert

    @pytest.fixture
    def legacy_schema(self, db_path: Path) -> LegacySchema:
        def create() -> None:
            raw = sqlite3.connect(db_path)
            try:
                raw.executescript(LEGACY_SQLITE_DDL)
            finally:
                raw.close()

        return create

    def test_schema_has_its_tables_indexes_and_wal(self, store: TaskStore, db_path: Path) -> None:
        store.init_schema()  # a second time: still all there
        raw = sqlite3.connect(db_path)
        try:
            tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            raw.close()
        assert {"wormhole_task", "wormhole_task_run", "wormhole_daemon", "wormhole_checkpoint"} <= tables
        assert {"ix_wormhole_task_status", "ix_wormhole_task_run_task_id", "ix_wormhole_checkpoint_task_id"} <= indexes

    def test_unreadable_upstream_row_is_a_task_db_error(self, store: TaskStore, raw_insert: RawInsert) -> None:
        task_id = raw_insert("INSERT INTO wormhole_task (name, spec, created_at) VALUES ('x', '{}', 'yesterday')")
        with pytest.raises(TaskDbError, match="unreadable row"):
            store.get(task_id)

    def test_timestamps_are_stored_as_utc_text(self, store: TaskStore, db_path: Path) -> None:
        task_id = task_in(store, "success")
        raw = sqlite3.connect(db_path)
        try:
            row = raw.execute("SELECT created_at, started_at, finished_at FROM wormhole_task WHERE id = ?",
                              (task_id,)).fetchone()
        finally:
            raw.close()
        for text in row:
            assert TS_TEXT.match(text), text
            assert near_now(datetime.fromisoformat(text))


def test_not_a_database_is_a_task_db_error(db_path: Path) -> None:
    db_path.write_bytes(b"this is not a sqlite database, just some text" * 100)
    with pytest.raises(TaskDbError, match="task database"):
        open_store(f"sqlite:///{db_path}").list()


def test_task_db_error_is_a_wormhole_error(db_url: str) -> None:
    with pytest.raises(TaskDbError) as info, open_store(db_url, create=True) as s:
        s.get(1)
    assert info.value.code == "TASK_DB_ERROR"
    assert info.value.details["url"] == db_url
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


# -- URLs -------------------------------------------------------------------------------------------


def test_relative_url_is_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///var/nested/tasks.db", create=True) as s:
        s.init_schema()
        assert s.url == "sqlite:///var/nested/tasks.db"
    assert (tmp_path / "var" / "nested" / "tasks.db").is_file()


def test_absolute_url_has_four_slashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere" / "abs.db"
    url = f"sqlite:///{target}"
    assert url.startswith("sqlite:////")
    with open_store(url, create=True) as s:
        s.init_schema()
    assert target.is_file()
    assert not (tmp_path / "var").exists()


def test_default_url_creates_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_TASK_DB_URL == "sqlite:///var/wormhole.db"
    monkeypatch.delenv("WORMHOLE_TASK_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    with open_store(create=True) as s:
        assert s.url == DEFAULT_TASK_DB_URL
    assert (tmp_path / "var" / "wormhole.db").is_file()


def test_opening_without_create_never_creates_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read-only use (task list/show) of a missing database is an error naming it; no var/ appears."""
    monkeypatch.delenv("WORMHOLE_TASK_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TaskDbError, match=r"var/wormhole\.db does not exist; `wormhole db init` creates it"):
        open_store()
    assert list(tmp_path.iterdir()) == []


def test_env_url_is_used_when_no_url_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "from-env.db"
    monkeypatch.setenv("WORMHOLE_TASK_DB", f"sqlite:///{target}")
    with open_store(create=True) as s:
        s.init_schema()
    assert target.is_file()
    with open_store(f"sqlite:///{tmp_path}/explicit.db", create=True):  # an explicit URL wins over the environment
        pass
    assert (tmp_path / "explicit.db").is_file()


@pytest.mark.parametrize("url", [
    "postgres://etl:hunter2@db1:5432/tasks",
    "etl:hunter2@db1:3306/tasks",
    "",
    "sqlite://host/tasks.db",
    "sqlite:///",
    "sqlite:///var/",
    "sqlite:///var/tasks.db?mode=ro",
    "mysql://etl:hunter2@db1:notaport/tasks",
    "mysql://etl:hunter2@db1:3306/",
    "mysql://etl:hunter2@db1:3306",
    "mysql://etl:hunter2@:3306/tasks",
    "mysql://etl:hunter2@db1/tasks/extra",
    "mysql://etl:hunter2@db1/tasks?connect_timeout=0",
    "mysql://etl:hunter2@db1/tasks?connect_timeout=soon",
    "mysql://etl:hunter2@db1/tasks?timeout=3",
])
def test_bad_urls_are_task_db_errors(url: str) -> None:
    with pytest.raises(TaskDbError, match="invalid task database URL") as info:
        open_store(url)
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(info.value.details)


@pytest.mark.parametrize(("url", "redacted"), [
    ("mysql://root:s3cret@db1:3306/wh", "mysql://root:***@db1:3306/wh"),
    ("mysql://root:p@ss:w@rd@db1/wh", "mysql://root:***@db1/wh"),
    ("mysql://root@db1:3306/wh", "mysql://root@db1:3306/wh"),
    ("mysql://db1/wh?password=s3cret&connect_timeout=3", "mysql://db1/wh?password=***&connect_timeout=***"),
    ("sqlite:///var/wormhole.db", "sqlite:///var/wormhole.db"),
    # Unreadable (a '#', an '@' after the host, no '//'): nothing after the scheme, any of it may be a password.
    ("mysql://u:p@db1/wh?ssl_key=/k&token=abc#x", "mysql://***"),
    ("mysql://user:Tk#p@ss:w/rd?x=1@host/db", "mysql://***"),
    ("mysql://user:12/ss@host/db", "mysql://***"),
    ("mysql://user:a?b@host/db", "mysql://***"),
    ("root:s3cret@db1:3306/wh", "root:***"),
    ("Tk#p@ss:w/rd", "***"),
])
def test_redact_url_hides_the_password(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


def test_mysql_url_is_parsed_and_password_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def fake_connect(**kwargs: Any) -> None:
        seen.append(kwargs)
        raise pymysql.err.OperationalError(
            1045, "Access denied for user 'etl'@'10.0.0.1' (using password: YES)"
        )

    monkeypatch.setattr(pymysql, "connect", fake_connect)
    monkeypatch.setenv("WORMHOLE_TASK_DB_PASSWORD", "from-env-secret")

    with pytest.raises(TaskDbError, match="access denied") as info:
        open_store("mysql://etl:url%40secret@db1:3307/tasks?connect_timeout=2.5")
    assert "secret" not in str(info.value)
    assert "mysql://etl:***@db1:3307/tasks" in str(info.value)
    kw = seen[-1]
    assert (kw["host"], kw["port"], kw["user"], kw["password"], kw["database"], kw["connect_timeout"]) == (
        "db1", 3307, "etl", "url@secret", "tasks", 2.5)
    assert kw["charset"] == "utf8mb4" and kw["autocommit"] is True and "+00:00" in kw["init_command"]

    with pytest.raises(TaskDbError):
        open_store("mysql://db1/tasks")  # no user, no port, no password in the URL
    kw = seen[-1]
    assert (kw["user"], kw["port"], kw["password"], kw["connect_timeout"]) == (
        "root", 3306, "from-env-secret", 10.0)
    assert len(seen) == 2  # access denied is not retried


def test_transient_mysql_connect_failures_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def fake_connect(**kwargs: Any) -> None:
        calls.append(1)
        raise pymysql.err.OperationalError(2003, "Can't connect to MySQL server on 'db1' (timed out)")

    monkeypatch.setattr(pymysql, "connect", fake_connect)
    with pytest.raises(TaskDbError, match=r"cannot connect to db1:3306") as info:
        open_store("mysql://root:pw@db1/tasks")
    assert len(calls) == 3
    assert "mysql://root:***@db1/tasks" in str(info.value)
    assert isinstance(info.value.__cause__, pymysql.err.OperationalError)


def test_default_stale_s_is_the_engine_conf_default() -> None:
    assert DEFAULT_STALE_S == ClaimConf().stale_s


def test_heartbeat_is_stored_as_utc_text(store_and_path: tuple[TaskStore, Path]) -> None:
    store, db_path = store_and_path
    task_id = task_in(store, "running")
    raw = sqlite3.connect(db_path)
    try:
        (text,) = raw.execute("SELECT heartbeat_at FROM wormhole_task WHERE id = ?", (task_id,)).fetchone()
    finally:
        raw.close()
    assert TS_TEXT.match(text), text
    assert near_now(datetime.fromisoformat(text))


def test_a_fresh_timestamp_is_close_to_utc() -> None:
    # Guards the helper the shared tests rely on.
    assert near_now(utcnow()) and not near_now(utcnow() - timedelta(hours=2))

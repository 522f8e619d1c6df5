"""MySQL/MariaDB task store against a real server: the shared contract (tests/taskdb_contract.py), plus
the MySQL bits.

Each test gets a fresh database ``wh_test_<hex8>`` (dropped afterwards) on the server named by
``WORMHOLE_TEST_MYSQL_URL`` (default ``mysql://root@127.0.0.1:3306``). An unreachable server skips
these tests, unless ``WORMHOLE_REQUIRE_MYSQL=1``, which turns that into a failure.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import pymysql
import pytest

from tests.taskdb_contract import SPEC, LegacySchema, RawInsert, TaskStoreContract, near_now
from wormhole.errors import TaskDbError
from wormhole.taskdb import TaskStore, open_store

pytestmark = pytest.mark.mysql


# -- the server and a database per test -------------------------------------------------------------


def _server_params(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    return {"host": parts.hostname or "127.0.0.1", "port": parts.port or 3306,
            "user": unquote(parts.username or "") or "root", "password": unquote(parts.password or ""),
            "charset": "utf8mb4", "autocommit": True, "connect_timeout": 5}


@pytest.fixture
def server_url() -> str:
    url = os.environ.get("WORMHOLE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306")
    try:
        pymysql.connect(**_server_params(url)).close()
    except pymysql.err.Error as exc:
        reason = f"MySQL/MariaDB server for the task database tests is unreachable: {exc}"
        if os.environ.get("WORMHOLE_REQUIRE_MYSQL") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return url


def admin(server_url: str, database: str | None = None) -> pymysql.connections.Connection:
    """A plain pymysql connection, independent of the code under test."""
    return pymysql.connect(**_server_params(server_url), database=database)


@pytest.fixture
def mysql_url(server_url: str) -> Iterator[str]:
    name = f"wh_test_{uuid.uuid4().hex[:8]}"
    conn = admin(server_url)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        parts = urlsplit(server_url)
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


# The tables as the first release's `db init` created them (no priority, no wormhole_daemon).
LEGACY_MYSQL_DDL = (
    """CREATE TABLE wormhole_task (
    id BIGINT NOT NULL AUTO_INCREMENT, name VARCHAR(255) NOT NULL DEFAULT '', spec LONGTEXT NOT NULL,
    status VARCHAR(16) NOT NULL DEFAULT 'pending', attempts INT NOT NULL DEFAULT 0,
    created_at TIMESTAMP(3) NULL DEFAULT CURRENT_TIMESTAMP(3), started_at DATETIME(3) NULL,
    finished_at DATETIME(3) NULL, claimed_by VARCHAR(255) NULL, result LONGTEXT NULL, error TEXT NULL,
    PRIMARY KEY (id), KEY ix_wormhole_task_status (status)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE wormhole_task_run (
    id BIGINT NOT NULL AUTO_INCREMENT, task_id BIGINT NOT NULL, status VARCHAR(16) NOT NULL DEFAULT 'running',
    claimed_by VARCHAR(255) NULL, started_at DATETIME(3) NULL, finished_at DATETIME(3) NULL, exit_code INT NULL,
    result LONGTEXT NULL, error TEXT NULL, PRIMARY KEY (id), KEY ix_wormhole_task_run_task_id (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
)


def db_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


# -- the shared contract, plus what only MySQL has ---------------------------------------------------


class TestMySqlStore(TaskStoreContract):
    # The raw session below is deliberately on +05:00: the check is "UTC, not five hours ahead".
    upstream_created_at_slack = 600.0

    @pytest.fixture
    def store_url(self, mysql_url: str) -> str:
        return mysql_url

    @pytest.fixture
    def raw_insert(self, server_url: str, mysql_url: str) -> Iterator[RawInsert]:
        def insert(sql: str) -> int:
            conn = admin(server_url, db_name(mysql_url))
            try:
                with conn.cursor() as cur:
                    cur.execute("SET time_zone = '+05:00'")  # an upstream session that is not on UTC
                    cur.execute(sql)
                    return cur.lastrowid
            finally:
                conn.close()

        yield insert

    @pytest.fixture
    def legacy_schema(self, server_url: str, mysql_url: str) -> LegacySchema:
        def create() -> None:
            conn = admin(server_url, db_name(mysql_url))
            try:
                with conn.cursor() as cur:
                    for statement in LEGACY_MYSQL_DDL:
                        cur.execute(statement)
            finally:
                conn.close()

        return create

    def test_schema_is_innodb_utf8mb4_with_millisecond_stamps(self, store: TaskStore, server_url: str,
                                                                mysql_url: str) -> None:
        store.init_schema()  # a second time: still all there
        conn = admin(server_url)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT table_name, engine, table_collation FROM information_schema.tables"
                            " WHERE table_schema = %s ORDER BY table_name", (db_name(mysql_url),))
                tables = cur.fetchall()
                cur.execute("SELECT column_name, data_type, datetime_precision FROM information_schema.columns"
                            " WHERE table_schema = %s AND table_name = 'wormhole_task' AND column_name LIKE %s",
                            (db_name(mysql_url), "%\\_at"))
                stamps = {row[0]: (row[1], row[2]) for row in cur.fetchall()}
        finally:
            conn.close()
        assert [t[0] for t in tables] == ["wormhole_action", "wormhole_checkpoint", "wormhole_daemon", "wormhole_meta",
                                          "wormhole_split_digest", "wormhole_state_lock", "wormhole_task",
                                          "wormhole_task_run", "wormhole_watermark"]
        assert all(t[1] == "InnoDB" and t[2].startswith("utf8mb4") for t in tables)
        assert stamps == {"created_at": ("timestamp", 3), "started_at": ("datetime", 3),
                          "finished_at": ("datetime", 3), "heartbeat_at": ("datetime", 3),
                          "next_run_at": ("datetime", 3), "tick_at": ("datetime", 3)}

    def test_store_reconnects_after_the_connection_dropped(self, store: TaskStore, server_url: str,
                                                           mysql_url: str) -> None:
        task_id = store.submit("t", SPEC)
        conn = admin(server_url)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s",
                            (db_name(mysql_url),))
                for (thread_id,) in cur.fetchall():
                    cur.execute("KILL CONNECTION %s", (thread_id,))
        finally:
            conn.close()
        assert store.claim(task_id, "after-reconnect")
        rec = store.get(task_id)
        assert rec is not None and near_now(rec.started_at)  # the new session is on UTC too


def test_missing_database_is_named(server_url: str) -> None:
    parts = urlsplit(server_url)
    url = urlunsplit((parts.scheme, parts.netloc, "/wh_test_does_not_exist", "", ""))
    with pytest.raises(TaskDbError, match="'wh_test_does_not_exist' does not exist"):
        open_store(url)


def test_unreachable_server_fails_fast() -> None:
    started = time.monotonic()
    with pytest.raises(TaskDbError, match=r"cannot connect to 127\.0\.0\.1:1") as info:
        open_store("mysql://root:hunter2@127.0.0.1:1/tasks?connect_timeout=2")
    assert time.monotonic() - started < 10
    assert "hunter2" not in str(info.value)
    assert "mysql://root:***@127.0.0.1:1/tasks" in str(info.value)


def test_password_from_environment_is_used(server_url: str, mysql_url: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    if urlsplit(server_url).password:
        pytest.skip("the test server URL carries a password, so the environment is not consulted")
    monkeypatch.setenv("WORMHOLE_TASK_DB_PASSWORD", "definitely-wrong-pw")
    with pytest.raises(TaskDbError, match="access denied") as info:
        open_store(mysql_url)
    assert "definitely-wrong-pw" not in str(info.value)

"""MySQL/MariaDB task store against a real server: the same behaviours as SQLite, plus the MySQL bits.

Each test gets a fresh database ``wh_test_<hex8>`` (dropped afterwards) on the server named by
``WORMHOLE_TEST_MYSQL_URL`` (default ``mysql://root@127.0.0.1:3306``). An unreachable server skips
these tests, unless ``WORMHOLE_REQUIRE_MYSQL=1``, which turns that into a failure.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import pymysql
import pytest

from wormhole.errors import TaskDbError
from wormhole.taskdb import RunRecord, TaskRecord, TaskStore, open_store

pytestmark = pytest.mark.mysql

SPEC = '{"name": "orders", "source": {"plugin": "mysql", "params": {}}, "destinations": []}'
UPSTREAM_INSERT = (
    "INSERT INTO wormhole_task (name, spec) VALUES "
    "('orders', '{\"source\": {\"plugin\": \"mysql\"}, \"destinations\": []}')"
)


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def near_now(value: datetime | None, slack: float = 60.0) -> bool:
    return value is not None and abs((value - utcnow()).total_seconds()) < slack


# -- the server and a database per test -------------------------------------------------------------


def _server_params(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    return {"host": parts.hostname or "127.0.0.1", "port": parts.port or 3306,
            "user": unquote(parts.username or "") or "root", "password": unquote(parts.password or ""),
            "charset": "utf8mb4", "autocommit": True, "connect_timeout": 5}


@pytest.fixture(scope="module")
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


@pytest.fixture
def store(mysql_url: str) -> Iterator[TaskStore]:
    s = open_store(mysql_url)
    s.init_schema()
    yield s
    s.close()


def db_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def task_in(store: TaskStore, status: str) -> int:
    """A task driven through the public API into ``status``."""
    task_id = store.submit("t", SPEC)
    if status == "pending":
        return task_id
    assert store.claim(task_id, "setup")
    if status == "running":
        return task_id
    run_id = store.start_run(task_id, "setup")
    store.finish(task_id, run_id, status=status, run_status=status, exit_code=0, result=None, error=None)
    return task_id


# -- schema -----------------------------------------------------------------------------------------


def test_init_schema_is_idempotent(server_url: str, mysql_url: str) -> None:
    with open_store(mysql_url) as s:
        s.init_schema()
        task_id = s.submit("kept", SPEC)
        s.init_schema()
        assert s.get(task_id) is not None
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
    assert [t[0] for t in tables] == ["wormhole_task", "wormhole_task_run"]
    assert all(t[1] == "InnoDB" and t[2].startswith("utf8mb4") for t in tables)
    assert stamps == {"created_at": ("timestamp", 3), "started_at": ("datetime", 3),
                      "finished_at": ("datetime", 3)}


def test_uninitialised_database_says_run_db_init(mysql_url: str) -> None:
    with open_store(mysql_url) as s:
        for op in (lambda: s.get(1), lambda: s.list(), lambda: s.submit("x", SPEC),
                   lambda: s.claim(1, "me"), lambda: s.runs(1), lambda: s.start_run(1, "me")):
            with pytest.raises(TaskDbError, match=r"is not initialised: run `wormhole db init`") as info:
                op()
            assert mysql_url in str(info.value)


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


# -- submit, get, list ------------------------------------------------------------------------------


def test_submit_get_and_list(store: TaskStore) -> None:
    ids = [store.submit(f"task-{n}", SPEC) for n in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    rec = store.get(ids[0])
    assert isinstance(rec, TaskRecord)
    assert (rec.id, rec.name, rec.spec, rec.status, rec.attempts) == (ids[0], "task-0", SPEC, "pending", 0)
    assert near_now(rec.created_at)
    assert (rec.started_at, rec.finished_at, rec.claimed_by, rec.result, rec.error) == (None,) * 5
    assert [t.id for t in store.list()] == ids[::-1]
    assert [t.id for t in store.list(limit=2)] == ids[:0:-1]
    assert store.get(ids[-1] + 100) is None


def test_list_filters_by_status(store: TaskStore) -> None:
    pending = task_in(store, "pending")
    running = task_in(store, "running")
    failed = task_in(store, "failed")
    assert [t.id for t in store.list(status="pending")] == [pending]
    assert [t.id for t in store.list(status="running")] == [running]
    assert [t.id for t in store.list(status="failed")] == [failed]
    assert store.list(status="success") == []


def test_unicode_round_trips(store: TaskStore) -> None:
    spec = '{"name": "Bestellungen \u00fc \u4e2d\u6587 \U0001f680"}'
    task_id = store.submit("\U0001f680 orders", spec)
    rec = store.get(task_id)
    assert rec is not None and (rec.name, rec.spec) == ("\U0001f680 orders", spec)


def test_upstream_raw_insert_is_a_pending_task(store: TaskStore, server_url: str, mysql_url: str) -> None:
    conn = admin(server_url, db_name(mysql_url))  # not our code: what an upstream system would do
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+05:00'")  # an upstream session that is not on UTC
            cur.execute(UPSTREAM_INSERT)
            task_id = cur.lastrowid
    finally:
        conn.close()
    rec = store.get(task_id)
    assert rec is not None
    assert (rec.name, rec.status, rec.attempts) == ("orders", "pending", 0)
    assert rec.spec == '{"source": {"plugin": "mysql"}, "destinations": []}'
    assert near_now(rec.created_at, slack=600)  # UTC, not five hours ahead
    assert store.claim(task_id, "engine")


# -- claim ------------------------------------------------------------------------------------------


def test_claim_succeeds_once(store: TaskStore) -> None:
    task_id = store.submit("t", SPEC)
    assert store.claim(task_id, "host-a:1") is True
    assert store.claim(task_id, "host-b:2") is False
    rec = store.get(task_id)
    assert rec is not None
    assert (rec.status, rec.attempts, rec.claimed_by) == ("running", 1, "host-a:1")
    assert near_now(rec.started_at)


@pytest.mark.parametrize("status", ["running", "success", "partial", "failed"])
def test_claim_refuses_a_task_that_is_not_pending(store: TaskStore, status: str) -> None:
    task_id = task_in(store, status)
    before = store.get(task_id)
    assert store.claim(task_id, "intruder") is False
    assert store.get(task_id) == before
    assert store.claim(task_id + 1000, "intruder") is False


def test_concurrent_claim_has_exactly_one_winner(store: TaskStore, mysql_url: str) -> None:
    task_id = store.submit("contended", SPEC)
    barrier = threading.Barrier(8)
    results: dict[str, bool | BaseException] = {}

    def contender(name: str) -> None:
        try:
            with open_store(mysql_url) as own:  # each claimer has its own connection, like separate processes
                barrier.wait(timeout=30)
                results[name] = own.claim(task_id, name)
        except BaseException as exc:
            results[name] = exc

    threads = [threading.Thread(target=contender, args=(f"worker-{n}",)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 8 and all(isinstance(r, bool) for r in results.values()), results
    winners = [name for name, won in results.items() if won is True]
    assert len(winners) == 1
    rec = store.get(task_id)
    assert rec is not None
    assert (rec.status, rec.attempts, rec.claimed_by) == ("running", 1, winners[0])


def test_store_reconnects_after_the_connection_dropped(store: TaskStore, server_url: str,
                                                       mysql_url: str) -> None:
    task_id = store.submit("t", SPEC)
    conn = admin(server_url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s", (db_name(mysql_url),))
            for (thread_id,) in cur.fetchall():
                cur.execute("KILL CONNECTION %s", (thread_id,))
    finally:
        conn.close()
    assert store.claim(task_id, "after-reconnect")
    rec = store.get(task_id)
    assert rec is not None and near_now(rec.started_at)  # the new session is on UTC too


# -- runs, finish, fail -----------------------------------------------------------------------------


def test_start_run_finish_and_runs_round_trip(store: TaskStore) -> None:
    task_id = store.submit("t", SPEC)
    assert store.claim(task_id, "host:1")
    run1 = store.start_run(task_id, "host:1")
    store.finish(task_id, run1, status="partial", run_status="partial", exit_code=2,
                 result='{"dw": "success", "report": "failed"}', error="report: duplicate key")
    rec = store.get(task_id)
    assert rec is not None
    assert (rec.status, rec.result, rec.error) == ("partial", '{"dw": "success", "report": "failed"}',
                                                   "report: duplicate key")
    assert rec.started_at is not None and rec.finished_at is not None and rec.finished_at >= rec.started_at

    assert store.retry(task_id)
    assert store.claim(task_id, "host:2")
    rec = store.get(task_id)
    assert rec is not None
    assert (rec.attempts, rec.claimed_by, rec.result, rec.error, rec.finished_at) == (
        2, "host:2", None, None, None)
    run2 = store.start_run(task_id, "host:2")
    store.finish(task_id, run2, status="success", run_status="success", exit_code=0,
                 result='{"dw": "success"}', error=None)

    runs = store.runs(task_id)
    assert [r.id for r in runs] == [run1, run2]
    assert all(isinstance(r, RunRecord) for r in runs)
    first, second = runs
    assert (first.task_id, first.status, first.claimed_by, first.exit_code, first.error) == (
        task_id, "partial", "host:1", 2, "report: duplicate key")
    assert (second.status, second.claimed_by, second.exit_code, second.result, second.error) == (
        "success", "host:2", 0, '{"dw": "success"}', None)
    assert all(near_now(r.started_at) and near_now(r.finished_at) for r in runs)
    assert store.runs(task_id + 1) == []


def test_finish_is_atomic_and_checks_its_rows(store: TaskStore) -> None:
    task_id = task_in(store, "running")
    run_id = store.start_run(task_id, "me")
    with pytest.raises(TaskDbError, match="not found"):
        store.finish(task_id, run_id + 1, status="success", run_status="success", exit_code=0, result=None,
                     error=None)
    rec = store.get(task_id)
    assert rec is not None and rec.status == "running"  # the task update was rolled back
    store.finish(task_id, run_id, status="failed", run_status="interrupted", exit_code=143, result=None,
                 error="SIGTERM")
    (run,) = store.runs(task_id)
    assert (run.status, run.exit_code, run.error) == ("interrupted", 143, "SIGTERM")


def test_long_values_are_clipped_not_rejected(store: TaskStore) -> None:
    task_id = store.submit("x" * 300, SPEC)
    store.fail_task(task_id, "\u00e9" * 50_000)  # 100 kB of utf8mb4 would overflow TEXT
    rec = store.get(task_id)
    assert rec is not None and rec.error is not None
    assert len(rec.name) == 255
    assert len(rec.error) <= 16_000 and rec.error.endswith("[truncated]")


def test_fail_task_without_a_run(store: TaskStore) -> None:
    task_id = store.submit("broken", "{not json")
    store.fail_task(task_id, "invalid task: spec is not JSON")
    rec = store.get(task_id)
    assert rec is not None
    assert (rec.status, rec.error, rec.attempts) == ("failed", "invalid task: spec is not JSON", 0)
    assert near_now(rec.finished_at)
    assert store.runs(task_id) == []
    with pytest.raises(TaskDbError, match="not found"):
        store.fail_task(task_id + 1, "nope")


# -- retry ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "force", "allowed"), [
    ("failed", False, True), ("partial", False, True),
    ("running", False, False), ("success", False, False), ("pending", False, False),
    ("failed", True, True), ("partial", True, True),
    ("running", True, True), ("success", True, True), ("pending", True, False),
])
def test_retry_rules(store: TaskStore, status: str, force: bool, allowed: bool) -> None:
    task_id = task_in(store, status)
    before = store.get(task_id)
    assert store.retry(task_id, force=force) is allowed
    rec = store.get(task_id)
    assert rec is not None and before is not None
    if allowed:
        assert (rec.status, rec.finished_at, rec.result, rec.error, rec.claimed_by) == (
            "pending", None, None, None, None)
        assert store.claim(task_id, "again")
    else:
        assert rec == before
    assert store.retry(task_id + 1000, force=True) is False

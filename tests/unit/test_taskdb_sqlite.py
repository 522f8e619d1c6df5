"""SQLite task store: schema, the upstream INSERT, atomic claim, run bookkeeping, retry rules, URLs."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pymysql
import pytest

from wormhole.errors import TaskDbError
from wormhole.taskdb import (
    DEFAULT_TASK_DB_URL,
    TASK_STATUSES,
    RunRecord,
    TaskRecord,
    TaskStore,
    open_store,
    redact_url,
)

SPEC = '{"name": "orders", "source": {"plugin": "sqlite", "params": {}}, "destinations": []}'
UPSTREAM_INSERT = (
    "INSERT INTO wormhole_task (name, spec) VALUES "
    "('orders', '{\"source\": {\"plugin\": \"mysql\"}, \"destinations\": []}')"
)
TS_TEXT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def near_now(value: datetime | None, slack: float = 60.0) -> bool:
    return value is not None and abs((value - utcnow()).total_seconds()) < slack


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tasks.db"


@pytest.fixture
def db_url(db_path: Path) -> str:
    return f"sqlite:///{db_path}"  # db_path is absolute: four slashes


@pytest.fixture
def store(db_url: str) -> Iterator[TaskStore]:
    s = open_store(db_url)
    s.init_schema()
    yield s
    s.close()


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


def test_init_schema_is_idempotent(db_url: str, db_path: Path) -> None:
    with open_store(db_url) as s:
        s.init_schema()
        task_id = s.submit("kept", SPEC)
        s.init_schema()
        assert s.get(task_id) is not None
    raw = sqlite3.connect(db_path)
    try:
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()
    assert {"wormhole_task", "wormhole_task_run"} <= tables
    assert {"ix_wormhole_task_status", "ix_wormhole_task_run_task_id"} <= indexes


def test_store_satisfies_the_protocol(store: TaskStore) -> None:
    assert isinstance(store, TaskStore)
    assert TASK_STATUSES == ("pending", "running", "success", "partial", "failed")


def test_uninitialised_database_says_run_db_init(db_url: str) -> None:
    with open_store(db_url) as s:
        for op in (lambda: s.get(1), lambda: s.list(), lambda: s.submit("x", SPEC),
                   lambda: s.claim(1, "me"), lambda: s.runs(1), lambda: s.start_run(1, "me")):
            with pytest.raises(TaskDbError, match=r"is not initialised: run `wormhole db init`") as info:
                op()
            assert db_url in str(info.value)


def test_not_a_database_is_a_task_db_error(db_path: Path) -> None:
    db_path.write_bytes(b"this is not a sqlite database, just some text" * 100)
    with pytest.raises(TaskDbError, match="task database"):
        open_store(f"sqlite:///{db_path}").list()


def test_closed_store_refuses_work(db_url: str) -> None:
    s = open_store(db_url)
    s.init_schema()
    s.close()
    s.close()  # idempotent
    with pytest.raises(TaskDbError, match="closed"):
        s.list()


# -- submit, get, list ------------------------------------------------------------------------------


def test_submit_get_and_list(store: TaskStore) -> None:
    ids = [store.submit(f"task-{n}", SPEC) for n in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    rec = store.get(ids[0])
    assert isinstance(rec, TaskRecord)
    assert (rec.id, rec.name, rec.spec, rec.status, rec.attempts) == (ids[0], "task-0", SPEC, "pending", 0)
    assert near_now(rec.created_at)
    assert (rec.started_at, rec.finished_at, rec.claimed_by, rec.result, rec.error) == (None,) * 5
    assert [t.id for t in store.list()] == ids[::-1]  # newest first
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
    with pytest.raises(ValueError, match="unknown task status"):
        store.list(status="bogus")


def test_upstream_raw_insert_is_a_pending_task(store: TaskStore, db_path: Path) -> None:
    raw = sqlite3.connect(db_path)  # not our code: what an upstream system would do
    try:
        task_id = raw.execute(UPSTREAM_INSERT).lastrowid
        raw.commit()
    finally:
        raw.close()
    assert task_id is not None
    rec = store.get(task_id)
    assert rec is not None
    assert (rec.name, rec.status, rec.attempts) == ("orders", "pending", 0)
    assert rec.spec == '{"source": {"plugin": "mysql"}, "destinations": []}'
    assert near_now(rec.created_at)  # the column default is UTC
    assert store.claim(task_id, "engine")


def test_unreadable_upstream_row_is_a_task_db_error(store: TaskStore, db_path: Path) -> None:
    raw = sqlite3.connect(db_path)
    try:
        task_id = raw.execute(
            "INSERT INTO wormhole_task (name, spec, created_at) VALUES ('x', '{}', 'yesterday')").lastrowid
        raw.commit()
    finally:
        raw.close()
    assert task_id is not None
    with pytest.raises(TaskDbError, match="unreadable row"):
        store.get(task_id)


def test_timestamps_are_stored_as_utc_text(store: TaskStore, db_path: Path) -> None:
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


def test_claim_of_unknown_task_is_false(store: TaskStore) -> None:
    assert store.claim(12345, "me") is False


def test_concurrent_claim_has_exactly_one_winner(store: TaskStore, db_url: str) -> None:
    task_id = store.submit("contended", SPEC)
    barrier = threading.Barrier(8)
    results: dict[str, bool | BaseException] = {}

    def contender(name: str) -> None:
        try:
            with open_store(db_url) as own:  # each claimer has its own connection, like separate processes
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


def test_store_can_be_handed_to_another_thread(store: TaskStore) -> None:
    task_id = store.submit("t", SPEC)
    outcome: list[bool] = []
    t = threading.Thread(target=lambda: outcome.append(store.claim(task_id, "other-thread")))
    t.start()
    t.join(timeout=30)
    assert outcome == [True]


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
    assert [r.id for r in runs] == [run1, run2]  # oldest first
    assert all(isinstance(r, RunRecord) for r in runs)
    first, second = runs
    assert (first.task_id, first.status, first.claimed_by, first.exit_code, first.error) == (
        task_id, "partial", "host:1", 2, "report: duplicate key")
    assert (second.status, second.claimed_by, second.exit_code, second.result, second.error) == (
        "success", "host:2", 0, '{"dw": "success"}', None)
    assert all(near_now(r.started_at) and near_now(r.finished_at) for r in runs)
    assert store.runs(task_id + 1) == []
    final = store.get(task_id)
    assert final is not None and final.status == "success"


def test_a_started_run_is_running(store: TaskStore) -> None:
    task_id = task_in(store, "running")
    run_id = store.start_run(task_id, "me")
    (run,) = store.runs(task_id)
    assert (run.id, run.status, run.finished_at, run.exit_code) == (run_id, "running", None, None)


def test_finish_is_atomic_and_checks_its_rows(store: TaskStore) -> None:
    task_id = task_in(store, "running")
    run_id = store.start_run(task_id, "me")
    with pytest.raises(TaskDbError, match="not found"):
        store.finish(task_id, run_id + 1, status="success", run_status="success", exit_code=0, result=None,
                     error=None)
    rec = store.get(task_id)
    assert rec is not None and rec.status == "running"  # the task update was rolled back
    with pytest.raises(ValueError, match="unknown task status"):
        store.finish(task_id, run_id, status="interrupted", run_status="interrupted", exit_code=1,
                     result=None, error=None)
    store.finish(task_id, run_id, status="failed", run_status="interrupted", exit_code=143, result=None,
                 error="SIGTERM")
    (run,) = store.runs(task_id)
    assert (run.status, run.exit_code, run.error) == ("interrupted", 143, "SIGTERM")


def test_long_errors_are_clipped(store: TaskStore) -> None:
    task_id = store.submit("x" * 300, SPEC)
    store.fail_task(task_id, "e" * 50_000)
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
        assert rec.attempts == before.attempts
        assert store.claim(task_id, "again")
    else:
        assert rec == before


def test_retry_unknown_task_is_false(store: TaskStore) -> None:
    assert store.retry(999) is False
    assert store.retry(999, force=True) is False


# -- URLs -------------------------------------------------------------------------------------------


def test_relative_url_is_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///var/nested/tasks.db") as s:
        s.init_schema()
        assert s.url == "sqlite:///var/nested/tasks.db"
    assert (tmp_path / "var" / "nested" / "tasks.db").is_file()


def test_absolute_url_has_four_slashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere" / "abs.db"
    url = f"sqlite:///{target}"
    assert url.startswith("sqlite:////")
    with open_store(url) as s:
        s.init_schema()
    assert target.is_file()
    assert not (tmp_path / "var").exists()


def test_default_url_creates_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_TASK_DB_URL == "sqlite:///var/wormhole.db"
    monkeypatch.delenv("WORMHOLE_TASK_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    with open_store() as s:
        assert s.url == DEFAULT_TASK_DB_URL
    assert (tmp_path / "var" / "wormhole.db").is_file()


def test_env_url_is_used_when_no_url_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "from-env.db"
    monkeypatch.setenv("WORMHOLE_TASK_DB", f"sqlite:///{target}")
    with open_store() as s:
        s.init_schema()
    assert target.is_file()
    with open_store(f"sqlite:///{tmp_path}/explicit.db"):  # an explicit URL wins over the environment
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
    ("mysql://db1/wh?password=s3cret&connect_timeout=3", "mysql://db1/wh?password=***&connect_timeout=3"),
    ("sqlite:///var/wormhole.db", "sqlite:///var/wormhole.db"),
    ("root:s3cret@db1:3306/wh", "root:***@db1:3306/wh"),
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


def test_task_db_error_is_a_wormhole_error(db_url: str) -> None:
    with pytest.raises(TaskDbError) as info, open_store(db_url) as s:
        s.get(1)
    assert info.value.code == "TASK_DB_ERROR"
    assert info.value.details["url"] == db_url
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def test_a_fresh_timestamp_is_close_to_utc() -> None:
    # Guards the helper the other tests rely on.
    assert near_now(utcnow()) and not near_now(utcnow() - timedelta(hours=2))

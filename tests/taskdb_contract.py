"""The behaviours every task store backend shares, written once and run per backend.

A backend's test module subclasses :class:`TaskStoreContract` (as ``Test<Backend>Store``) and provides
two fixtures:

``store_url``
    the URL of a fresh, *uninitialised* task database of that backend;
``raw_insert``
    a callable that runs one ``INSERT`` on its own plain connection (not the code under test, the way
    an upstream system writes tasks) and returns the new row id;
``legacy_schema``
    a callable that creates, on its own plain connection, the tables as the first release's
    ``db init`` made them (no ``priority`` column, no ``wormhole_daemon`` table).

The contract's ``store`` fixture opens ``store_url`` and runs ``init_schema`` on it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
import structlog

from wormhole.errors import TaskDbError
from wormhole.incremental import Window
from wormhole.recovery.chain import Chain, ChainPlan, split_prefix
from wormhole.recovery.checkpoint import CheckpointRow, RowKind, SplitDigest, WatermarkWrite
from wormhole.recovery.state import chain_state
from wormhole.taskdb import TASK_STATUSES, RunRecord, TaskRecord, TaskStore, open_store
from wormhole.taskdb.watermarks import StateHolder

SPEC = '{"name": "orders", "source": {"plugin": "sqlite", "params": {}}, "destinations": []}'
UPSTREAM_INSERT = (
    "INSERT INTO wormhole_task (name, spec) VALUES "
    "('orders', '{\"source\": {\"plugin\": \"mysql\"}, \"destinations\": []}')"
)

RawInsert = Callable[[str], int]
LegacySchema = Callable[[], None]


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def near_now(value: datetime | None, slack: float = 60.0) -> bool:
    return value is not None and abs((value - utcnow()).total_seconds()) < slack


def stale(store: TaskStore, task_id: int, age: float = 0.05) -> float:
    """Let the task's heartbeat grow older than the stale_s this returns."""
    time.sleep(age)
    seen = store.heartbeat_age(task_id)
    assert seen is None or seen >= age * 0.5, seen
    return age / 2


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


def race(store_url: str, names: list[str], act: Callable[[TaskStore, str], object]) -> dict[str, object]:
    """``act(store, name)`` for each name at once, each in a thread with a connection of its own (like
    processes): what each returned or raised, by name."""
    barrier = threading.Barrier(len(names))
    results: dict[str, object] = {}

    def contender(name: str) -> None:
        try:
            with open_store(store_url, create=True) as own:
                barrier.wait(timeout=30)
                results[name] = act(own, name)
        except BaseException as exc:
            results[name] = exc

    threads = [threading.Thread(target=contender, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


class TaskStoreContract:
    """Shared tests of :func:`open_store` / :class:`TaskStore`; subclasses provide the fixtures above."""

    #: How far from now an upstream row's ``created_at`` may be (a backend whose raw session is
    #: deliberately not on UTC may need more room for clock skew).
    upstream_created_at_slack: float = 60.0

    @pytest.fixture
    def store(self, store_url: str) -> Iterator[TaskStore]:
        s = open_store(store_url, create=True)
        s.init_schema()
        yield s
        s.close()

    # -- schema, lifecycle of the store -------------------------------------------------------------

    def test_init_schema_is_idempotent(self, store_url: str) -> None:
        with open_store(store_url, create=True) as s:
            s.init_schema()
            task_id = s.submit("kept", SPEC)
            s.init_schema()
            assert s.get(task_id) is not None

    def test_store_satisfies_the_protocol(self, store: TaskStore) -> None:
        assert isinstance(store, TaskStore)
        assert TASK_STATUSES == ("pending", "running", "success", "partial", "failed", "scheduled")

    def test_uninitialised_database_says_run_db_init(self, store_url: str) -> None:
        with open_store(store_url, create=True) as s:
            for op in (lambda: s.get(1), lambda: s.list(), lambda: s.submit("x", SPEC),
                       lambda: s.claim(1, "me"), lambda: s.runs(1), lambda: s.start_run(1, "me")):
                with pytest.raises(TaskDbError, match=r"is not initialised: run `wormhole db init`") as info:
                    op()
                assert store_url in str(info.value)

    def test_closed_store_refuses_work(self, store_url: str) -> None:
        s = open_store(store_url, create=True)
        s.init_schema()
        s.close()
        s.close()  # idempotent
        with pytest.raises(TaskDbError, match="closed"):
            s.list()

    # -- submit, get, list --------------------------------------------------------------------------

    def test_submit_get_and_list(self, store: TaskStore) -> None:
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

    def test_list_filters_by_status(self, store: TaskStore) -> None:
        pending = task_in(store, "pending")
        running = task_in(store, "running")
        failed = task_in(store, "failed")
        assert [t.id for t in store.list(status="pending")] == [pending]
        assert [t.id for t in store.list(status="running")] == [running]
        assert [t.id for t in store.list(status="failed")] == [failed]
        assert store.list(status="success") == []
        with pytest.raises(ValueError, match="unknown task status"):
            store.list(status="bogus")

    def test_unicode_round_trips(self, store: TaskStore) -> None:
        spec = '{"name": "Bestellungen \u00fc \u4e2d\u6587 \U0001f680"}'
        task_id = store.submit("\U0001f680 orders", spec)
        rec = store.get(task_id)
        assert rec is not None and (rec.name, rec.spec) == ("\U0001f680 orders", spec)

    def test_upstream_raw_insert_is_a_pending_task(self, store: TaskStore, raw_insert: RawInsert) -> None:
        task_id = raw_insert(UPSTREAM_INSERT)  # not our code: what an upstream system would do
        assert task_id is not None
        rec = store.get(task_id)
        assert rec is not None
        assert (rec.name, rec.status, rec.attempts) == ("orders", "pending", 0)
        assert rec.spec == '{"source": {"plugin": "mysql"}, "destinations": []}'
        assert near_now(rec.created_at, slack=self.upstream_created_at_slack)  # the column default is UTC
        assert store.claim(task_id, "engine")

    # -- claim --------------------------------------------------------------------------------------

    def test_claim_succeeds_once(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        assert store.claim(task_id, "host-a:1") is True
        assert store.claim(task_id, "host-b:2") is False
        rec = store.get(task_id)
        assert rec is not None
        assert (rec.status, rec.attempts, rec.claimed_by) == ("running", 1, "host-a:1")
        assert near_now(rec.started_at)

    @pytest.mark.parametrize("status", ["running", "success", "partial", "failed"])
    def test_claim_refuses_a_task_that_is_not_pending(self, store: TaskStore, status: str) -> None:
        task_id = task_in(store, status)
        before = store.get(task_id)
        assert store.claim(task_id, "intruder") is False
        assert store.get(task_id) == before
        assert store.claim(task_id + 1000, "intruder") is False

    def test_claim_of_unknown_task_is_false(self, store: TaskStore) -> None:
        assert store.claim(12345, "me") is False

    def test_concurrent_claim_has_exactly_one_winner(self, store: TaskStore, store_url: str) -> None:
        task_id = store.submit("contended", SPEC)
        results = race(store_url, [f"worker-{n}" for n in range(8)], lambda own, name: own.claim(task_id, name))
        assert len(results) == 8 and all(isinstance(r, bool) for r in results.values()), results
        winners = [name for name, won in results.items() if won is True]
        assert len(winners) == 1
        rec = store.get(task_id)
        assert rec is not None
        assert (rec.status, rec.attempts, rec.claimed_by) == ("running", 1, winners[0])

    def test_store_can_be_handed_to_another_thread(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        outcome: list[bool] = []
        t = threading.Thread(target=lambda: outcome.append(store.claim(task_id, "other-thread")))
        t.start()
        t.join(timeout=30)
        assert outcome == [True]

    # -- runs, finish, fail -------------------------------------------------------------------------

    def test_start_run_finish_and_runs_round_trip(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        assert store.claim(task_id, "host:1")
        run1 = store.start_run(task_id, "host:1")
        store.finish(task_id, run1, status="partial", run_status="partial", exit_code=2,
                     result='{"dw": "success", "report": "failed"}', error="report: duplicate key")
        rec = store.get(task_id)
        assert rec is not None
        assert (rec.status, rec.result, rec.error) == ("partial", '{"dw": "success", "report": "failed"}',
                                                       "report: duplicate key")
        assert rec.started_at is not None and rec.finished_at is not None
        assert rec.finished_at >= rec.started_at

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

    def test_a_started_run_is_running(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        run_id = store.start_run(task_id, "me")
        (run,) = store.runs(task_id)
        assert (run.id, run.status, run.finished_at, run.exit_code) == (run_id, "running", None, None)

    def test_finish_is_atomic_and_checks_its_rows(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        run_id = store.start_run(task_id, "me")
        with pytest.raises(TaskDbError, match="not found"):
            store.finish(task_id, run_id + 1, status="success", run_status="success", exit_code=0,
                         result=None, error=None)
        rec = store.get(task_id)
        assert rec is not None and rec.status == "running"  # the task update was rolled back
        with pytest.raises(ValueError, match="unknown task status"):
            store.finish(task_id, run_id, status="interrupted", run_status="interrupted", exit_code=1,
                         result=None, error=None)
        store.finish(task_id, run_id, status="failed", run_status="interrupted", exit_code=143, result=None,
                     error="SIGTERM")
        (run,) = store.runs(task_id)
        assert (run.status, run.exit_code, run.error) == ("interrupted", 143, "SIGTERM")

    # "\u00e9": 100 kB of utf8mb4 would overflow a MySQL TEXT column.
    @pytest.mark.parametrize("char", ["e", "\u00e9"], ids=["ascii", "multibyte"])
    def test_long_values_are_clipped_not_rejected(self, store: TaskStore, char: str) -> None:
        task_id = store.submit("x" * 300, SPEC)
        store.fail_task(task_id, char * 50_000)
        rec = store.get(task_id)
        assert rec is not None and rec.error is not None
        assert len(rec.name) == 255
        assert len(rec.error) <= 16_000 and rec.error.endswith("[truncated]")

    def test_fail_task_without_a_run(self, store: TaskStore) -> None:
        task_id = store.submit("broken", "{not json")
        store.fail_task(task_id, "invalid task: spec is not JSON")
        rec = store.get(task_id)
        assert rec is not None
        assert (rec.status, rec.error, rec.attempts) == ("failed", "invalid task: spec is not JSON", 0)
        assert near_now(rec.finished_at)
        assert store.runs(task_id) == []
        with pytest.raises(TaskDbError, match="not found"):
            store.fail_task(task_id + 1, "nope")

    # -- retry --------------------------------------------------------------------------------------

    @pytest.mark.parametrize(("status", "force", "allowed"), [
        ("failed", False, True), ("partial", False, True),
        ("running", False, False), ("success", False, False), ("pending", False, False),
        ("failed", True, True), ("partial", True, True),
        ("running", True, False), ("success", True, True), ("pending", True, False),
    ])
    def test_retry_rules(self, store: TaskStore, status: str, force: bool, allowed: bool) -> None:
        task_id = task_in(store, status)
        before = store.get(task_id)
        assert store.retry(task_id, force=force) is allowed
        rec = store.get(task_id)
        assert rec is not None and before is not None
        if allowed:
            assert (rec.status, rec.finished_at, rec.result, rec.error, rec.claimed_by, rec.heartbeat_at) == (
                "pending", None, None, None, None, None)
            assert rec.attempts == before.attempts
            assert store.claim(task_id, "again")
        else:
            assert rec == before
        assert store.retry(task_id + 1000, force=True) is False

    def test_forced_retry_resets_a_running_task_only_once_its_heartbeat_is_stale(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        run_id = store.start_run(task_id, "setup")
        before = store.get(task_id)
        assert store.retry(task_id, force=True) is False  # the default stale_s: its process is alive
        assert store.retry(task_id, force=True, stale_s=60) is False
        assert store.get(task_id) == before
        assert store.retry(task_id, force=True, stale_s=stale(store, task_id)) is True
        rec = store.get(task_id)
        assert rec is not None and (rec.status, rec.claimed_by, rec.heartbeat_at) == ("pending", None, None)
        (run,) = store.runs(task_id)
        assert (run.id, run.status) == (run_id, "crashed")
        assert run.error is not None and "stopped heartbeating" in run.error and near_now(run.finished_at)
        assert store.claim(task_id, "again")

    def test_retry_unknown_task_is_false(self, store: TaskStore) -> None:
        assert store.retry(999) is False
        assert store.retry(999, force=True) is False

    # -- the console: actions, cancel requests, progress, search (issue 41) ---------------------------

    def test_actions_are_recorded_newest_first_with_who_did_them(self, store: TaskStore) -> None:
        """Each action keeps its actor, task and time; a task's own list has only its actions."""
        a, b = store.submit("a", SPEC), store.submit("b", SPEC)
        store.record_action("submit", "ann from 10.0.0.1", task_id=a)
        store.record_action("retry", "bob", task_id=b, detail="force")
        assert [(x.action, x.actor, x.task_id, x.detail) for x in store.actions()] == [
            ("retry", "bob", b, "force"), ("submit", "ann from 10.0.0.1", a, None)]
        assert [x.action for x in store.actions(a)] == ["submit"] and near_now(store.actions(a)[0].created_at)
        with pytest.raises(ValueError, match="unknown action"):
            store.record_action("drop", "eve", task_id=a)

    def test_a_cancel_names_the_claim_it_stops(self, store: TaskStore) -> None:
        """A cancel is refused for a task that is not running; made for a running one, only the run under
        that claim sees it (a later claim of the same task does not)."""
        task_id = store.submit("t", SPEC)
        assert store.request_cancel(task_id, "ann") is None
        assert store.claim(task_id, "proc-1")
        run_id = store.start_run(task_id, "proc-1")
        assert store.cancel_requested(task_id, "proc-1") is None
        made = store.request_cancel(task_id, "ann")
        assert made is not None and (made.claimed_by, made.run_id) == ("proc-1", run_id)
        assert store.cancel_requested(task_id, "proc-1") == "ann"
        assert store.cancel_requested(task_id, "proc-2") is None
        assert [x.action for x in store.actions(task_id)] == ["cancel"]

    def test_the_heartbeat_writes_progress_and_search_finds_names(self, store: TaskStore) -> None:
        task_id = store.submit("orders_100%", SPEC)
        other = store.submit("customers", SPEC)
        assert store.claim(task_id, "me") and store.beat(task_id, "me", '{"run_id": 1, "rows_read": 5}')
        record = store.get(task_id)
        assert record is not None and record.progress == '{"run_id": 1, "rows_read": 5}'
        assert store.beat(task_id, "me") and store.get(task_id).progress == '{"run_id": 1, "rows_read": 5}'
        assert [r.id for r in store.list(search="100%")] == [task_id]
        assert [r.id for r in store.list(search="_")] == [task_id]  # a LIKE wildcard is matched as itself
        assert [r.id for r in store.list(search=str(other))] == [other]
        assert store.list(search="nothing") == []

    def test_the_console_reads_a_database_from_before_it(self, store_url: str, raw_insert: RawInsert) -> None:
        """Without the action table and the progress column (db init not run since), reads answer empty,
        beats write no progress, and the first action makes the table."""
        with open_store(store_url, create=True) as s:
            s.init_schema()
        raw_insert("DROP TABLE wormhole_action")
        raw_insert("ALTER TABLE wormhole_task DROP COLUMN progress")
        with open_store(store_url) as s:
            task_id = s.submit("t", SPEC)
            assert s.actions() == [] and s.cancel_requested(task_id, "me") is None
            assert s.claim(task_id, "me") and s.beat(task_id, "me", '{"run_id": 1}')
            assert s.get(task_id).progress is None
            s.record_action("retry", "ann", task_id=task_id)
            assert [x.actor for x in s.actions()] == ["ann"]

    # -- upgrade of an older database, priorities, the daemon's hand-over ------------------------------

    def test_db_init_upgrades_a_database_of_the_first_release(self, store_url: str, legacy_schema: LegacySchema,
                                                              raw_insert: RawInsert) -> None:
        legacy_schema()
        old = raw_insert(UPSTREAM_INSERT)
        with open_store(store_url, create=True) as s:
            with pytest.raises(TaskDbError, match=r"older version: run `wormhole db init`"):
                s.pending(10)
            s.init_schema()
            s.init_schema()  # idempotent on the upgraded database too
            rec = s.get(old)
            assert rec is not None and (rec.name, rec.status, rec.priority) == ("orders", "pending", 0)
            new = raw_insert(UPSTREAM_INSERT)  # the upstream INSERT without a priority still works
            urgent = raw_insert(UPSTREAM_INSERT.replace("(name, spec)", "(name, spec, priority)")
                                .replace("[]}')", "[]}', 9)"))
            assert s.pending(10) == [urgent, old, new]
            assert s.register_daemon("host", 1) >= 1
            # The columns and table of crash recovery: heartbeats, resumed runs, checkpoints.
            assert s.claim(old, "me") and s.beat(old, "me")
            age = s.heartbeat_age(old)
            assert age is not None and age < 60
            run_id = s.start_run(old, "me")
            resumed = s.start_run(old, "me", resumed_from=run_id)
            assert [r.resumed_from for r in s.runs(old)] == [None, run_id]
            s.save_plan(old, resumed, run_id, [("split-1", "{}")])
            s.mark_durable(old, resumed, run_id, "split-1", "dw", 3)
            assert [(r.kind, r.split_id, r.destination, r.rows) for r in s.checkpoint(resumed)] == [
                ("plan", "split-1", None, None), ("durable", "split-1", "dw", 3)]

    def test_a_database_of_the_previous_version_works_without_db_init(self, store_url: str,
                                                                     raw_insert: RawInsert) -> None:
        # The previous version's schema: today's without the job variables' columns (raw_insert runs any
        # one statement on its own connection).
        with open_store(store_url, create=True) as s:
            s.init_schema()
        raw_insert("ALTER TABLE wormhole_task DROP COLUMN params")
        raw_insert("ALTER TABLE wormhole_task_run DROP COLUMN variables")
        old = raw_insert(UPSTREAM_INSERT)
        with open_store(store_url) as s:
            rec = s.get(old)
            assert rec is not None and (rec.status, rec.params) == ("pending", None)
            assert [r.params for r in s.list()] == [None]
            assert s.claim(old, "me")
            run_id = s.start_run(old, "me")  # nothing to record: the table stays as it is
            assert [(r.id, r.variables) for r in s.runs(old)] == [(run_id, None)]
            # The first value to keep adds its column, as `db init` would.
            resumed = s.start_run(old, "me", resumed_from=run_id, variables='{"day": "2026-01-02"}')
            assert [r.variables for r in s.runs(old)] == [None, '{"day": "2026-01-02"}']
            new = s.submit("with params", SPEC, params='{"day": "2026-01-03"}')
            assert [(r.id, r.params) for r in s.list()] == [(new, '{"day": "2026-01-03"}'), (old, None)]
            assert resumed > run_id
        raw_insert(UPSTREAM_INSERT)  # the upstream INSERT without params still works on the upgraded table
        with open_store(store_url) as s:
            s.init_schema()  # and db init after the store added the columns is still idempotent
            assert s.list(limit=1)[0].params is None

    def test_pending_is_priority_then_creation_order(self, store: TaskStore) -> None:
        low = store.submit("low", SPEC)
        high = store.submit("high", SPEC, priority=5)
        low2 = store.submit("low2", SPEC)
        high2 = store.submit("high2", SPEC, priority=5)
        negative = store.submit("later", SPEC, priority=-1)
        claimed = store.submit("claimed", SPEC, priority=99)
        assert store.claim(claimed, "someone")
        assert store.pending(10) == [high, high2, low, low2, negative]
        assert store.pending(2) == [high, high2]
        rec = store.get(high)
        assert rec is not None and rec.priority == 5

    def test_adopt_takes_over_only_its_own_claim(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        assert store.adopt(task_id, "daemon#1") is False  # pending: nothing to adopt
        assert store.claim(task_id, "daemon#1")
        assert store.adopt(task_id, "daemon#2") is False
        assert store.adopt(task_id, "daemon#1") is True
        rec = store.get(task_id)
        assert rec is not None and (rec.status, rec.claimed_by, rec.attempts) == ("running", "daemon#1", 1)

    def test_release_requeues_a_claim_never_run_and_fails_a_started_one(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        assert store.claim(task_id, "d#1")
        assert store.release(task_id, "d#1", exit_code=203, error="child died") == "pending"
        rec = store.get(task_id)
        assert rec is not None and (rec.status, rec.attempts, rec.claimed_by, rec.started_at) == (
            "pending", 0, None, None)
        assert store.runs(task_id) == []

        assert store.claim(task_id, "d#2")
        run_id = store.start_run(task_id, "d#2")
        assert store.release(task_id, "d#9", exit_code=-9, error="not mine") is None
        assert store.release(task_id, "d#2", exit_code=-9, error="killed by SIGKILL") == "failed"
        rec = store.get(task_id)
        assert rec is not None and (rec.status, rec.error, rec.attempts) == ("failed", "killed by SIGKILL", 1)
        (run,) = store.runs(task_id)
        assert (run.id, run.status, run.exit_code, run.error) == (run_id, "failed", -9, "killed by SIGKILL")
        assert near_now(run.finished_at)
        assert store.release(task_id, "d#2", exit_code=0, error="again") is None  # settled once

    def test_release_leaves_a_recorded_task_alone(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        assert store.claim(task_id, "d#1")
        run_id = store.start_run(task_id, "d#1")
        store.finish(task_id, run_id, status="success", run_status="success", exit_code=0, result="{}", error=None)
        before = store.get(task_id)
        assert store.release(task_id, "d#1", exit_code=0, error="x") is None
        assert store.get(task_id) == before

    # -- heartbeats and taking over a crashed run ------------------------------------------------------

    def test_claim_writes_the_first_heartbeat_and_beat_moves_it(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        assert store.heartbeat_age(task_id) is None  # pending: never beaten
        assert store.claim(task_id, "me")
        first = store.get(task_id)
        assert first is not None and near_now(first.heartbeat_at)
        age = store.heartbeat_age(task_id)
        assert age is not None and 0 <= age < 5
        time.sleep(0.02)
        assert store.beat(task_id, "me") is True
        second = store.get(task_id)
        assert second is not None and first.heartbeat_at is not None and second.heartbeat_at is not None
        assert second.heartbeat_at > first.heartbeat_at
        assert store.heartbeat_age(task_id + 1000) is None

    def test_beat_is_false_once_the_claim_is_not_ours(self, store: TaskStore) -> None:
        task_id = store.submit("t", SPEC)
        assert store.beat(task_id, "me") is False  # pending
        assert store.claim(task_id, "me")
        before = store.get(task_id)
        assert store.beat(task_id, "someone-else") is False
        assert store.get(task_id) == before
        run_id = store.start_run(task_id, "me")
        store.finish(task_id, run_id, status="success", run_status="success", exit_code=0, result=None, error=None)
        assert store.beat(task_id, "me") is False  # finished
        assert store.beat(task_id + 1000, "me") is False

    def test_take_over_of_a_stale_task_crashes_its_run_and_names_it(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        old = store.start_run(task_id, "setup")
        stale_s = stale(store, task_id)
        assert store.take_over(task_id, "rescuer", stale_s) == old
        rec = store.get(task_id)
        assert rec is not None
        assert (rec.status, rec.claimed_by, rec.attempts) == ("running", "rescuer", 2)
        assert near_now(rec.heartbeat_at)
        (run,) = store.runs(task_id)
        assert (run.id, run.status) == (old, "crashed")
        assert run.error == "the process stopped heartbeating; taken over by rescuer"
        assert near_now(run.finished_at)
        new = store.start_run(task_id, "rescuer", resumed_from=old)
        assert [(r.id, r.status, r.resumed_from) for r in store.runs(task_id)] == [
            (old, "crashed", None), (new, "running", old)]
        # The rescuer's claim is fresh: nobody takes it from it, and the old claimant has lost it.
        assert store.take_over(task_id, "third", 60) is None
        assert store.beat(task_id, "setup") is False
        assert store.beat(task_id, "rescuer") is True

    def test_stale_lists_running_tasks_whose_heartbeat_is_old_by_priority(self, store: TaskStore) -> None:
        low, high, fresh = task_in(store, "running"), store.submit("high", SPEC, priority=3), task_in(store, "pending")
        assert store.claim(high, "setup")
        store.submit("pending", SPEC)
        task_in(store, "success")
        # Room for a loaded machine: ``fresh``'s heartbeat, written just before the query, must still be
        # younger than stale_s when the query runs (0.025 s was not, at a load average of 10).
        stale_s = stale(store, high, age=2.0)
        assert store.claim(fresh, "setup")  # its heartbeat was just written
        assert store.stale(10, stale_s) == [high, low]
        assert store.stale(1, stale_s) == [high]
        assert store.stale(10, 60) == []

    def test_resumed_from_follows_a_run_to_the_one_it_resumed(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        first = store.start_run(task_id, "setup")
        second = store.start_run(task_id, "setup", resumed_from=first)
        assert (store.resumed_from(second), store.resumed_from(first), store.resumed_from(second + 99)) == (
            first, None, None)

    def test_take_over_never_takes_a_fresh_heartbeat(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        store.start_run(task_id, "setup")
        before = (store.get(task_id), store.runs(task_id))
        assert store.take_over(task_id, "intruder", 60) is None
        assert (store.get(task_id), store.runs(task_id)) == before

    @pytest.mark.parametrize("status", ["pending", "success", "partial", "failed"])
    def test_take_over_takes_only_a_running_task(self, store: TaskStore, status: str) -> None:
        task_id = task_in(store, status)
        before = store.get(task_id)
        assert store.take_over(task_id, "intruder", 0) is None
        assert store.get(task_id) == before
        assert store.take_over(task_id + 1000, "intruder", 0) is None

    def test_take_over_of_a_claim_that_never_started_a_run_is_zero(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        assert store.take_over(task_id, "rescuer", stale(store, task_id)) == 0
        rec = store.get(task_id)
        assert rec is not None and rec.claimed_by == "rescuer"

    @pytest.mark.parametrize("fresh", [False, True], ids=["stale", "fresh"])
    def test_concurrent_take_over_has_at_most_one_winner(self, store: TaskStore, store_url: str,
                                                         fresh: bool) -> None:
        task_id = task_in(store, "running")
        old = store.start_run(task_id, "setup")
        # stale_s well above the race's length: with a few milliseconds, a loaded machine let a second
        # contender find the first winner's brand-new claim stale already, and take it over in turn.
        stale_s = 60.0 if fresh else stale(store, task_id, age=1.0)
        results = race(store_url, [f"rescuer-{n}" for n in range(6)],
                       lambda own, name: own.take_over(task_id, name, stale_s))
        assert len(results) == 6 and not any(isinstance(r, BaseException) for r in results.values()), results
        winners = [name for name, got in results.items() if got is not None]
        rec = store.get(task_id)
        assert rec is not None
        if fresh:
            assert winners == []
            assert (rec.claimed_by, rec.attempts) == ("setup", 1)
            assert [r.status for r in store.runs(task_id)] == ["running"]
        else:
            assert len(winners) == 1 and results[winners[0]] == old
            assert (rec.claimed_by, rec.attempts) == (winners[0], 2)
            assert [r.status for r in store.runs(task_id)] == ["crashed"]

    def test_finish_under_a_lost_claim_leaves_the_task_to_its_new_holder(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        old = store.start_run(task_id, "setup")
        assert store.take_over(task_id, "rescuer", stale(store, task_id)) == old
        new = store.start_run(task_id, "rescuer", resumed_from=old)
        before = store.get(task_id)
        assert store.finish(task_id, old, status="failed", run_status="interrupted", exit_code=143, result=None,
                            error="claim lost", claimed_by="setup") is False
        assert store.get(task_id) == before
        assert [r.status for r in store.runs(task_id)] == ["crashed", "running"]
        assert store.finish(task_id, new, status="success", run_status="success", exit_code=0, result="{}",
                            error=None, claimed_by="rescuer") is True
        rec = store.get(task_id)
        assert rec is not None and rec.status == "success"
        assert [r.status for r in store.runs(task_id)] == ["crashed", "success"]

    # -- checkpoints ------------------------------------------------------------------------------------

    def test_checkpoint_rows_round_trip(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        run_id = store.start_run(task_id, "setup")
        assert store.checkpoint(run_id) == []
        store.save_plan(task_id, run_id, run_id, [("s-2", '{"id": "s-2"}'), ("s-1", '{"id": "s-1"}')])
        store.mark_durable(task_id, run_id, run_id, "s-1", "dw", 10)
        store.mark_durable(task_id, run_id, run_id, "s-1", "dw", 10)  # idempotent
        store.mark_durable(task_id, run_id, run_id, "s-2", "\u00fcber-report", 0)
        store.save_plan(task_id, run_id, run_id, [("s-1", '{"changed": true}'), ("s-3", "{}")])  # keeps s-1
        assert store.checkpoint(run_id) == [
            CheckpointRow(RowKind.PLAN, "s-2", None, run_id, None, '{"id": "s-2"}'),
            CheckpointRow(RowKind.PLAN, "s-1", None, run_id, None, '{"id": "s-1"}'),
            CheckpointRow(RowKind.PLAN, "s-3", None, run_id, None, "{}"),
            CheckpointRow(RowKind.DURABLE, "s-1", "dw", run_id, 10, None),
            CheckpointRow(RowKind.DURABLE, "s-2", "\u00fcber-report", run_id, 0, None),
        ]
        with pytest.raises(ValueError, match="longer than 255"):
            store.mark_durable(task_id, run_id, run_id, "x" * 256, "dw", 1)
        for not_a_destination in ("", "#window"):
            with pytest.raises(ValueError, match="plan or window row"):
                store.mark_durable(task_id, run_id, run_id, "s-1", not_a_destination, 1)

    def test_a_resumed_run_keeps_its_origin_and_delete_checkpoints_keeps_one_run(self, store: TaskStore) -> None:
        task_id = task_in(store, "running")
        first = store.start_run(task_id, "setup")
        store.save_plan(task_id, first, first, [("a", "{}"), ("b", "{}")])
        store.mark_durable(task_id, first, first, "a", "dw", 5)
        second = store.start_run(task_id, "setup", resumed_from=first)
        store.save_plan(task_id, second, first, [("a", "{}"), ("b", "{}")])
        store.mark_durable(task_id, second, first, "b", "dw", 7)
        other = task_in(store, "running")
        other_run = store.start_run(other, "setup")
        store.save_plan(other, other_run, other_run, [("a", "{}")])
        assert {r.origin_run_id for r in store.checkpoint(second)} == {first}
        assert store.delete_checkpoints(task_id, keep_runs=[second, first]) == 0  # a resumable chain's stay
        assert store.delete_checkpoints(task_id, keep_runs=[second]) == 3
        assert store.checkpoint(first) == []
        assert [(r.split_id, r.destination, r.rows) for r in store.checkpoint(second)] == [
            ("a", None, None), ("b", None, None), ("b", "dw", 7)]
        assert store.delete_checkpoints(task_id) == 3
        assert store.checkpoint(second) == []
        assert len(store.checkpoint(other_run)) == 1  # another task's rows stay

    def test_a_split_digest_is_one_row_per_split_and_destination_that_claims_no_durability(
            self, store: TaskStore, raw_insert: RawInsert) -> None:
        """``settings.verify``: the digest of what a destination accepted of a split, written before its commit;
        a split sent again replaces it; kept per origin run (a resumed run's are its chain's), never a durable
        row; a database from before the table reads none and gets it with the first digest."""
        task_id = task_in(store, "running")
        first = store.start_run(task_id, "setup")
        raw_insert("DROP TABLE wormhole_split_digest")
        assert store.split_digests(task_id, first) == {}
        store.record_digest(task_id, first, first, "s-1", "dw", SplitDigest("3:00000000000000ff", 1))
        second = store.start_run(task_id, "setup", resumed_from=first)
        store.record_digest(task_id, second, first, "s-1", "dw", SplitDigest("4:0000000000000100", 1))  # again
        store.record_digest(task_id, second, first, "s-1", "\u00fcber-report", SplitDigest("4:0000000000000100", 1))
        store.record_digest(task_id, second, second, "s-2", "dw", SplitDigest("0:0000000000000000", 1))
        again = SplitDigest("4:0000000000000100", 1)
        assert store.split_digests(task_id, first) == {("dw", "s-1"): again, ("\u00fcber-report", "s-1"): again}
        assert store.split_digests(task_id, second) == {("dw", "s-2"): SplitDigest("0:0000000000000000", 1)}
        assert store.checkpoint(first) == store.checkpoint(second) == []  # nothing said durable
        with pytest.raises(ValueError, match="longer than 255"):
            store.record_digest(task_id, first, first, "x" * 256, "dw", SplitDigest("1:01", 1))
        assert store.delete_checkpoints(task_id, keep_runs=[second, first]) == 0
        assert store.delete_checkpoints(task_id, keep_runs=[second]) == 2  # those of the runs of origin `first`
        assert store.split_digests(task_id, first) == {} and len(store.split_digests(task_id, second)) == 1

    def test_each_table_of_a_database_task_resumes_its_own_plan_and_window(self, store: TaskStore) -> None:
        """A database task's table runs share one run: each records its plan and window under its table
        (its scope). A resumed run killed before it reached table b recorded a's plan alone: resuming it
        again gives b the plan and window of the run that planned b, not none."""
        def window(upper: int) -> str:
            return Window("job", "n", "append", "int", 0.0, upper, True, {"dw/s.a": None}).to_json()

        task_id = task_in(store, "running")
        first = store.start_run(task_id, "setup")
        store.save_plan(task_id, first, first, [("s.a#1", '{"id": "s.a#1"}')], window=window(40), scope="s.a")
        store.save_plan(task_id, first, first, [("s.b#1", '{"id": "s.b#1"}')], window=window(28), scope="s.b")
        second = store.start_run(task_id, "setup", resumed_from=first)
        store.save_plan(task_id, second, first, [("s.a#1", '{"id": "s.a#1"}')], window=window(40), scope="s.a")
        chain = Chain.read(store, second)
        a, b = chain.plan("s.a"), chain.plan("s.b")
        assert (a.run, [r.split_id for r in a.rows], a.window.upper if a.window else None) == (second, ["s.a#1"], 40)
        assert (b.run, [r.split_id for r in b.rows], b.window.upper if b.window else None) == (first, ["s.b#1"], 28)
        assert chain.plan("s.c") == ChainPlan()  # a table no run planned plans afresh
        # Tables `a` and `a#b`: neither's splits are the other's (their ids begin with escaped scopes).
        hashed = split_prefix("s.a#b")
        assert hashed == "s.a%23b#" and not hashed.startswith(split_prefix("s.a"))
        store.save_plan(task_id, second, first, [(f"{hashed}1", f'{{"id": "{hashed}1"}}')], scope="s.a#b")
        chain = Chain.read(store, second)
        assert [r.split_id for r in chain.plan("s.a").rows] == ["s.a#1"]
        assert [r.split_id for r in chain.plan("s.a#b").rows] == [f"{hashed}1"]
        with pytest.raises(ValueError, match="longer than 255"):
            store.save_plan(task_id, second, first, [], window=window(1), scope="x" * 256)

    def test_the_checkpoint_of_a_run_of_the_previous_version_still_resumes(self, store_url: str,
                                                                          raw_insert: RawInsert) -> None:
        # The previous version's rows had no kind: sentinels told them apart (a plan row's destination '',
        # a window row's '#window', a commit row's split id '').
        with open_store(store_url, create=True) as s:
            s.init_schema()
            task_id = task_in(s, "running")
            run_id, other = s.start_run(task_id, "setup"), s.start_run(task_id, "setup")
        raw_insert("ALTER TABLE wormhole_checkpoint DROP COLUMN kind")
        insert = ("INSERT INTO wormhole_checkpoint (task_id, run_id, origin_run_id, split_id, destination, `rows`,"
                  f" payload) VALUES ({task_id}, {{run}}, {run_id}, {{values}})")
        for run, values in ((run_id, "'s-1', '', NULL, '{\"id\": \"s-1\", \"resource_mark\": \"t\"}'"),
                            (run_id, "'s-2', '', NULL, '{\"id\": \"s-2\", \"resource_mark\": \"t\"}'"),
                            (other, "'', '#window', NULL, '{}'"),
                            (run_id, "'s-1', 'dw', 3, NULL"), (run_id, "'', 'lake', 5, NULL")):
            raw_insert(insert.format(run=run, values=values))
        plan = [(RowKind.PLAN, "s-1", None, None), (RowKind.PLAN, "s-2", None, None)]
        kept = [(RowKind.DURABLE, "s-1", "dw", 3), (RowKind.COMMITTED, None, "lake", 5)]

        def rows(s: TaskStore, run: int) -> list[tuple[object, ...]]:
            return [(r.kind, r.split_id, r.destination, r.rows) for r in s.checkpoint(run)]

        with open_store(store_url) as s:  # no db init: read as they are
            assert rows(s, run_id) == plan + kept
            assert rows(s, other) == [(RowKind.WINDOW, None, None, None)]
            s.mark_durable(task_id, run_id, run_id, "s-2", "dw", 4)  # the first write adds kind, migrates the rows
            assert rows(s, run_id) == [*plan, *kept, (RowKind.DURABLE, "s-2", "dw", 4)]
        raw_insert(insert.format(run=run_id, values="'', 'dw', 7, NULL"))  # the previous version writes on
        with open_store(store_url) as s:
            s.init_schema()
            state = chain_state(s, run_id, frozenset(), structlog.get_logger())
            assert [sp.id for sp in state.splits or ()] == ["s-1", "s-2"]
            assert dict(state.committed) == {"lake": 5, "dw": 7}
            assert rows(s, other) == [(RowKind.WINDOW, None, None, None)]

    def test_a_commit_row_and_its_watermark_are_written_together(self, store: TaskStore, store_url: str,
                                                                 raw_insert: RawInsert) -> None:
        task_id = task_in(store, "running")
        run_id = store.start_run(task_id, "setup")
        raw_insert("DROP TABLE wormhole_watermark")  # a database from before watermarks: none kept, made on write
        assert store.watermarks("orders") == {}
        store.save_plan(task_id, run_id, run_id, [("a", "{}")], window='{"w": 1}')
        store.mark_committed(task_id, run_id, run_id, "dw", 5, WatermarkWrite("orders", '{"int": "41"}'))
        store.mark_committed(task_id, run_id, run_id, "dw", 5, WatermarkWrite("orders", '{"int": "42"}'))
        store.mark_committed(task_id, run_id, run_id, "lake", 3)  # not incremental: the commit row alone
        assert store.watermarks("orders") == {"dw": ('{"int": "42"}', run_id)}
        assert store.watermarks("other") == {}
        assert [(r.kind, r.split_id, r.destination, r.payload) for r in store.checkpoint(run_id)] == [
            ("plan", "a", None, "{}"), ("window", None, None, '{"w": 1}'), ("committed", None, "dw", None),
            ("committed", None, "lake", None)]
        with pytest.raises(ValueError, match="longer than 255"):  # nothing half-written: the watermark stays
            store.mark_committed(task_id, run_id, run_id, "x" * 256, 1, WatermarkWrite("orders", '{"int": "9"}'))
        assert store.watermarks("orders") == {"dw": ('{"int": "42"}', run_id)}

    def test_one_run_at_a_time_holds_a_state_key_until_it_ends_or_its_heartbeat_is_stale(
            self, store: TaskStore, raw_insert: RawInsert) -> None:
        first, second = task_in(store, "running"), task_in(store, "running")
        run1, run2 = store.start_run(first, "setup"), store.start_run(second, "setup")
        raw_insert("DROP TABLE wormhole_state_lock")  # a database from before the lock: made on first use
        assert store.lock_state("orders", first, run1, "setup", 60) is None
        assert store.lock_state("orders", first, run1, "setup", 60) is None  # already ours
        assert store.lock_state("orders", second, run2, "setup", 60) == StateHolder(first, run1, "setup")
        assert store.lock_state("other", second, run2, "setup", 60) is None  # another key: free
        store.unlock_state("orders", second, "setup")  # not its lock: a no-op
        assert store.lock_state("orders", second, run2, "setup", 60) == StateHolder(first, run1, "setup")
        store.unlock_state("orders", first, "setup")
        assert store.lock_state("orders", second, run2, "setup", 60) is None
        # A holder whose heartbeat is older than stale_s (its process died) holds it no longer.
        stale_s = stale(store, second)
        assert store.beat(first, "setup")
        assert store.lock_state("orders", first, run1, "setup", stale_s) is None
        # Nor one whose task is no longer running under its claim (it finished, or was taken over).
        store.finish(first, run1, status="success", run_status="success", exit_code=0, result=None, error=None)
        assert store.lock_state("orders", second, run2, "setup", 60) is None

"""The Checkpointer on a real SQLite task database: the plan is recorded before the run goes on, through a
task database that refuses it for a moment; a write it cannot make is not fatal unless the run waits for it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from wormhole.errors import TaskDbError
from wormhole.plugins.base import Split
from wormhole.recovery import checkpoint
from wormhole.recovery.checkpoint import Checkpointer, RowKind, SplitDigest, split_from_json
from wormhole.recovery.state import RecoveryState
from wormhole.taskdb import SqlTaskStore, open_store
from wormhole.verify.checksum import CHECKSUM_VERSION, Digest

SPLITS = [Split(id="db/t:[0,10)", resource_mark="db", params={"lo": 0, "hi": 10}),
          Split(id="db/t:[10,20]", resource_mark="db", params={"lo": 10, "hi": 20})]


class Flaky:
    """The real store, refusing its first ``failures`` writes as an unreachable task database does."""

    def __init__(self, store: SqlTaskStore, failures: int) -> None:
        self.store = store
        self.failures = failures
        self.refused: tuple[str, ...] = ("save_plan", "mark_durable", "mark_committed")

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.store, name)

        def call(*args: Any) -> Any:
            if name in self.refused and self.failures > 0:
                self.failures -= 1
                raise TaskDbError("task database sqlite:///x: cannot connect: refused", url="sqlite:///x")
            return real(*args)
        return call


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlTaskStore]:
    s = open_store(f"sqlite:///{tmp_path / 'tasks.db'}", create=True)
    s.init_schema()
    task_id = s.submit("t", "{}")
    assert s.claim(task_id, "me") and s.start_run(task_id, "me") == 1
    yield s
    s.close()


def test_the_plan_waits_through_a_task_database_blip(store: SqlTaskStore) -> None:
    writer = Checkpointer(Flaky(store, failures=2), 1, 1, 1, structlog.get_logger())  # type: ignore[arg-type]
    writer.save_plan(SPLITS)  # returns only once the rows are there
    rows = store.checkpoint(1)
    assert [(r.kind, r.split_id, r.destination) for r in rows] == [(RowKind.PLAN, s.id, None) for s in SPLITS]
    assert [split_from_json(r.payload or "") for r in rows] == SPLITS
    writer.committed("dw", 20)
    writer.close()
    assert [(r.kind, r.split_id, r.destination, r.rows) for r in store.checkpoint(1)][2:] == [
        (RowKind.COMMITTED, None, "dw", 20)]


def test_a_plan_that_cannot_be_recorded_fails_the_run_and_a_commit_row_does_not(
        store: SqlTaskStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "WAIT_ATTEMPTS", 2)
    writer = Checkpointer(Flaky(store, failures=100), 1, 1, 1, structlog.get_logger())  # type: ignore[arg-type]
    with pytest.raises(TaskDbError, match="cannot connect"):
        writer.save_plan(SPLITS)
    writer.committed("dw", 20)  # logged, never raised: the destination's own record is the truth
    writer.sealed("db/t:[0,10)", "dw", 10)
    writer.close()
    assert store.checkpoint(1) == [] and writer.failed == 1


def test_a_stop_ends_the_waits_between_attempts(store: SqlTaskStore) -> None:
    stop = threading.Event()
    writer = Checkpointer(Flaky(store, failures=100), 1, 1, 1, structlog.get_logger(), stop)  # type: ignore[arg-type]
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(TaskDbError):
        writer.save_plan(SPLITS)  # would retry for about 20 s without the stop
    writer.close()


def test_the_state_a_task_would_resume_is_its_chains_first_run(store: SqlTaskStore) -> None:
    from wormhole.recovery.leftovers import resumable_chain, resumable_run

    time.sleep(0.01)  # the claim's heartbeat is in milliseconds: stale_s=0 takes only an older one
    assert store.take_over(1, "second", stale_s=0) == 1  # run 1 crashed (it never recorded a plan)
    second = store.start_run(1, "second", resumed_from=1)
    assert resumable_chain(store, 1) == [second, 1] and resumable_run(store, 1) == 1
    store.finish(1, second, status="success", run_status="success", exit_code=0, result=None, error=None)
    assert resumable_chain(store, 1) == [] and resumable_run(store, 1) is None


def test_a_split_digest_is_there_when_the_call_returns_and_a_resumed_run_reads_it(store: SqlTaskStore) -> None:
    """``settings.verify``: a split's digest is written and waited for before the destination commits the split, in
    a row that claims no durability (no durable row, so a resumed run still asks the destination); a split sent
    again replaces it; a resumed run reads the chain's digests, and those an older version wrote into durable rows."""
    writer = Checkpointer(store, 1, 1, 1, structlog.get_logger())
    writer.save_plan(SPLITS)
    writer.digest(SPLITS[0].id, "dw", SplitDigest("3:00000000000000ff", CHECKSUM_VERSION))
    assert store.split_digests(1, 1) == {("dw", SPLITS[0].id): SplitDigest("3:00000000000000ff", CHECKSUM_VERSION)}
    assert [r.kind for r in store.checkpoint(1)] == [RowKind.PLAN, RowKind.PLAN]  # nothing said durable
    writer.digest(SPLITS[0].id, "dw", SplitDigest("4:0000000000000100", CHECKSUM_VERSION))  # sent again
    writer.digest(SPLITS[0].id, "lake", SplitDigest("4:0000000000000100", CHECKSUM_VERSION))
    # A durable row as an older version wrote it, its digest in the payload (the table's wins where both are).
    old = json.dumps({"digest": "9:0000000000000009", "checksum_version": CHECKSUM_VERSION})
    store.mark_durable(1, 1, 1, SPLITS[1].id, "dw", 9, old)
    store.mark_durable(1, 1, 1, SPLITS[0].id, "dw", 4, json.dumps({"digest": "1:01", "checksum_version": 1 << 30}))
    writer.close()
    time.sleep(0.01)
    assert store.take_over(1, "second", stale_s=0) == 1
    second = store.start_run(1, "second", resumed_from=1)
    state = RecoveryState.restore(store, task_id=1, run_id=second, resume_from=1, finished_runs=frozenset(),
                                  log=structlog.get_logger(), stop=threading.Event())
    assert state.checkpointer is not None
    state.checkpointer.close()
    assert dict(state.digests) == {("dw", SPLITS[0].id): Digest(4, 0x100), ("lake", SPLITS[0].id): Digest(4, 0x100),
                                   ("dw", SPLITS[1].id): Digest(9, 9)}
    assert store.delete_checkpoints(1, keep_runs=[second, 1]) == 0  # a resumable chain keeps its digests
    assert store.delete_checkpoints(1) == 2 + 2 + 2  # plan and durable rows, and the two digests
    assert store.split_digests(1, 1) == {}


def test_a_split_digest_that_cannot_be_recorded_is_logged_never_raised(
        store: SqlTaskStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "WAIT_ATTEMPTS", 2)
    flaky = Flaky(store, failures=100)
    flaky.refused = ("record_digest",)
    writer = Checkpointer(flaky, 1, 1, 1, structlog.get_logger())  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logs:
        writer.digest("a", "dw", SplitDigest("1:01", CHECKSUM_VERSION))  # the split is committed all the same
        writer.close()
        writer.digest("b", "dw", SplitDigest("1:01", CHECKSUM_VERSION))  # after close: said, not waited for ever
    failed = [e for e in logs if e["event"] == "checkpoint.digest_failed"]
    assert [(e["split_id"], e["destination"]) for e in failed] == [("a", "dw"), ("b", "dw")]
    assert "cannot connect" in failed[0]["error"] and "checkpoint writer has ended" in failed[1]["error"]
    assert store.split_digests(1, 1) == {} and writer.failed == 2

"""A database task's table runs writing their checkpoint rows through one task-database connection
(wormhole/database/checkpoints.py): the writes that meet are committed together on the embedded SQLite
store, each still failing alone, and every call returns once its rows are there."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from wormhole.database.checkpoints import SharedCheckpoints
from wormhole.recovery.checkpoint import RowKind
from wormhole.taskdb import open_store
from wormhole.taskdb.base import SqlTaskStore

TABLES = 24


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlTaskStore]:
    s = open_store(f"sqlite:///{tmp_path / 'tasks.db'}", create=True)
    s.init_schema()
    task_id = s.submit("t", "{}")
    assert s.claim(task_id, "me") and s.start_run(task_id, "me") == 1
    yield s
    s.close()


def test_writes_that_meet_commit_together_and_each_fails_alone(store: SqlTaskStore) -> None:
    shared = SharedCheckpoints(store)
    start = threading.Barrier(TABLES)
    failed: list[BaseException] = []

    def table(i: int) -> None:
        start.wait()
        split = f"db/t{i:02d}#"
        shared.save_plan(1, 1, 1, [(split, "{}")])
        shared.mark_durable(1, 1, 1, split, f"rep/t{i:02d}", 10)
        try:  # a write that fails (no destination named) fails its caller alone
            shared.mark_committed(1, 1, 1, "" if i == 3 else f"rep/t{i:02d}", 10)
        except ValueError as exc:
            failed.append(exc)

    threads = [threading.Thread(target=table, args=(i,)) for i in range(TABLES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared.close()
    rows = store.checkpoint(1)
    kinds = sorted((r.kind.value, r.destination or "") for r in rows if r.kind != RowKind.PLAN)
    assert len([r for r in rows if r.kind == RowKind.PLAN]) == TABLES
    assert kinds == sorted([("durable", f"rep/t{i:02d}") for i in range(TABLES)]
                           + [("committed", f"rep/t{i:02d}") for i in range(TABLES) if i != 3])
    assert len(failed) == 1 and shared.writes == 3 * TABLES
    assert shared.groups < shared.writes  # some met: fewer commits than rows
    shared.mark_committed(1, 1, 1, "rep/t03", 10)  # after close: written at once, on its own
    assert any(r.kind == RowKind.COMMITTED and r.destination == "rep/t03" for r in store.checkpoint(1))

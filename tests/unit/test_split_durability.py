"""Split durability of the file (csv, jsonl, parquet) and sqlite destinations: each split made durable
on its own, a crashed run resumed from what the destination holds, leftovers of other runs cleaned.

"Crash" = stop calling methods and drop the objects (sqlite: the process's connection goes away, so
its open transaction is lost), then a new periphery with ``origin_run_id`` = the crashed run.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tests.plugin_helpers as helpers
from wormhole.plugins.base import (
    Column,
    DurablePeriphery,
    LeftoverPeriphery,
    Row,
    Schema,
    SinkRole,
    SplitWriter,
    WriteContext,
)
from wormhole.plugins.file import PLUGIN as FILE
from wormhole.plugins.file import ColumnOption, FileReaderOptions, FileWriterOptions
from wormhole.plugins.sqlite import PLUGIN as SQLITE
from wormhole.plugins.sqlite import SqliteWriterOptions

KV = Schema((Column("id", "int"), Column("name", "string")))

# Split ids with the characters real ones have (paths, key ranges), and one too long for a file name.
A = "db1/t:[0,100)"
B = "/data/in/part.2.csv"
C = "stream-2"
LONG = "/very/long/" + "x" * 300 + ".csv"


def rows_of(split: str, n: int) -> list[Row]:
    base = {A: 0, B: 100, C: 200, LONG: 300}[split]
    return [(base + i, f"{split} #{i}") for i in range(n)]


@dataclass
class Store:
    kind: str
    sink: SinkRole
    options: Any
    where: Path

    def ctx(self, run_id: int, origin_run_id: int | None = None, task_id: int = 7) -> WriteContext:
        return WriteContext(task_id=task_id, run_id=run_id, origin_run_id=origin_run_id, destination="out",
                            schema=KV, batch_rows=1000, concurrency=2, plugin=self.kind)

    def periphery(self, ctx: WriteContext) -> Any:
        periphery = self.sink.periphery(self.options, ctx)
        periphery.prepare()
        return periphery

    def writer(self, ctx: WriteContext, periphery: Any, worker: int = 0) -> Any:
        writer = self.sink.writer(self.options, ctx, periphery, worker)
        writer.open()
        return writer

    def crash(self, periphery: Any) -> None:
        if self.kind == "sqlite":
            periphery.conn.close()  # the process dies: SQLite discards its open transaction

    def output(self) -> list[Row]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.options.path)
            try:
                return sorted(conn.execute("SELECT id, name FROM t").fetchall())
            finally:
                conn.close()
        columns = tuple(ColumnOption(name=c.name, type=c.type) for c in KV.columns)
        options = FileReaderOptions(path=self.options.path, format=self.kind, columns=columns)
        return sorted(helpers.read_all(FILE.source, options))  # type: ignore[arg-type]

    def beside(self) -> list[str]:
        """What the destination holds besides the output: the directory around a file target, or
        the tables of the sqlite file."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.options.path)
            try:
                return sorted(n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
            finally:
                conn.close()
        return sorted(os.listdir(self.where))


@pytest.fixture(params=["jsonl", "csv", "parquet", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        return Store("sqlite", SQLITE.sink, SqliteWriterOptions(path=str(tmp_path / "out.db"), table="t"),  # type: ignore[arg-type]
                     tmp_path)
    if request.param == "parquet":
        pytest.importorskip("pyarrow")
    return Store(request.param, FILE.sink, FileWriterOptions(path=str(tmp_path / "out"), format=request.param),  # type: ignore[arg-type]
                 tmp_path)


def done(store: Store) -> list[str]:
    return ["t"] if store.kind == "sqlite" else ["out"]


def write(writer: Any, split: str, rows: Sequence[Row]) -> None:
    result = writer.write_split(split, rows)
    assert (result.written, result.rejected) == (len(rows), ())


def test_the_roles_implement_the_protocols(store: Store) -> None:
    ctx = store.ctx(1)
    periphery = store.periphery(ctx)
    assert isinstance(periphery, DurablePeriphery) and isinstance(periphery, LeftoverPeriphery)
    assert isinstance(store.writer(ctx, periphery), SplitWriter)
    periphery.rollback()


def test_a_crashed_run_resumes_with_its_durable_splits_and_each_row_lands_once(store: Store) -> None:
    ctx = store.ctx(1)
    periphery = store.periphery(ctx)
    assert periphery.durable_splits() == {}
    writer = store.writer(ctx, periphery)
    other = store.writer(ctx, periphery, 1)
    # Batches of A, B and C interleave; A and B end, C is still being written when the run dies.
    write(writer, A, rows_of(A, 3)[:2])
    write(other, C, rows_of(C, 4)[:2])
    write(writer, B, rows_of(B, 2))
    write(writer, A, rows_of(A, 3)[2:])
    writer.end_split(A, 3)
    write(other, LONG, rows_of(LONG, 1))
    other.end_split(LONG, 1)
    write(other, C, rows_of(C, 4)[2:3])
    writer.end_split(B, 2)
    write(other, C, rows_of(C, 4)[3:])
    store.crash(periphery)
    del writer, other, periphery

    resumed = store.ctx(2, origin_run_id=1)
    periphery = store.periphery(resumed)
    assert periphery.durable_splits() == {A: 3, B: 2, LONG: 1}
    writer = store.writer(resumed, periphery)
    write(writer, C, rows_of(C, 4))
    writer.end_split(C, 4)
    writer.close()
    periphery.commit()
    expected = sorted(rows_of(A, 3) + rows_of(B, 2) + rows_of(C, 4) + rows_of(LONG, 1))
    assert store.output() == expected
    # Killed after the commit, before the task's outcome was recorded: the destination's own record
    # says the load is committed, so the next run writes nothing and commits nothing again.
    del writer, periphery
    again = store.ctx(3, origin_run_id=1)
    periphery = store.periphery(again)
    assert periphery.durable_splits() == {A: 3, B: 2, C: 4, LONG: 1}
    periphery.commit()
    assert store.output() == expected
    periphery.release()  # the outcome is recorded
    assert store.beside() == done(store)  # no staging, markers or temporary directory left
    if store.kind != "sqlite":
        assert not [n for n in os.listdir(store.options.path) if n == "_WORMHOLE" or n.startswith("_wh_split-")]


def test_a_run_resumed_twice_keeps_what_each_made_durable(store: Store) -> None:
    _crash_with_a_durable_split(store, 1)

    second = store.ctx(2, origin_run_id=1)
    periphery = store.periphery(second)
    writer = store.writer(second, periphery)
    write(writer, B, rows_of(B, 3))
    writer.end_split(B, 3)
    write(writer, C, rows_of(C, 1))
    store.crash(periphery)

    third = store.ctx(3, origin_run_id=1)
    periphery = store.periphery(third)
    assert periphery.durable_splits() == {A: 2, B: 3}
    writer = store.writer(third, periphery)
    write(writer, C, rows_of(C, 2))
    writer.end_split(C, 2)
    periphery.commit()
    assert store.output() == sorted(rows_of(A, 2) + rows_of(B, 3) + rows_of(C, 2))


def test_abort_split_discards_only_that_split(store: Store) -> None:
    periphery, writer = _started(store, 1)
    write(writer, A, rows_of(A, 2))
    write(writer, B, rows_of(B, 3))
    writer.abort_split(B)
    writer.abort_split("never seen")  # no error for a split it does not know
    writer.end_split(A, 2)
    write(writer, B, rows_of(B, 1))  # written again, as the engine does after an abort
    write(writer, C, rows_of(C, 2))
    writer.abort_split(C)
    writer.end_split(B, 1)
    writer.close()
    periphery.commit()
    assert store.output() == sorted(rows_of(A, 2) + rows_of(B, 1))


def test_an_aborted_split_is_not_durable_after_a_crash(store: Store) -> None:
    periphery, writer = _started(store, 1)
    write(writer, A, rows_of(A, 2))
    write(writer, B, rows_of(B, 2))
    writer.abort_split(B)
    writer.end_split(A, 2)
    store.crash(periphery)
    periphery = store.periphery(store.ctx(2, origin_run_id=1))
    assert periphery.durable_splits() == {A: 2}
    periphery.commit()
    assert store.output() == rows_of(A, 2)


def test_rollback_of_a_resumed_run_leaves_the_target_as_it_was(store: Store) -> None:
    _crash_with_a_durable_split(store, 1)
    periphery = store.periphery(store.ctx(2, origin_run_id=1))
    periphery.rollback()
    assert store.beside() == []  # no target (sqlite: never created), staging, markers or temporary directory


def _started(store: Store, run_id: int, task_id: int = 7) -> tuple[Any, Any]:
    """Run ``run_id`` of task ``task_id``: its prepared periphery and a writer."""
    ctx = store.ctx(run_id, task_id=task_id)
    periphery = store.periphery(ctx)
    return periphery, store.writer(ctx, periphery)


def _crash_with_a_durable_split(store: Store, run_id: int, task_id: int = 7) -> None:
    """Run ``run_id`` makes split A (2 rows) durable, then its process dies."""
    periphery, writer = _started(store, run_id, task_id)
    write(writer, A, rows_of(A, 2))
    writer.end_split(A, 2)
    store.crash(periphery)


def _plant_a_look_alike(store: Store) -> str:
    """Something a user made that merely looks like a leftover of task 7's run 5: no marker."""
    if store.kind == "sqlite":
        conn = sqlite3.connect(store.options.path)
        conn.execute("CREATE TABLE _wh_stage_7_5_out (id INTEGER, name TEXT)")
        conn.commit()
        conn.close()
        return "_wh_stage_7_5_out"
    name = ".out.wormhole-7-5.tmp"
    (store.where / name).mkdir()
    (store.where / name / "part-00000.csv").write_text("mine\n", encoding="utf-8")
    return name


def test_leftovers_of_another_run_are_found_and_removed_and_nothing_else(store: Store) -> None:
    _crash_with_a_durable_split(store, run_id=8, task_id=9)  # another task's crashed run
    _crash_with_a_durable_split(store, run_id=1)
    look_alike = _plant_a_look_alike(store)
    before = store.beside()

    periphery = store.sink.periphery(store.options, store.ctx(3))  # not prepared: `task clean` does this
    assert periphery.leftovers(keep_run=1) == []  # run 1 may still be resumed
    found = periphery.leftovers(keep_run=None)
    assert len(found) >= 1 and all("run 1" in f for f in found)
    assert periphery.clean_leftovers(keep_run=None) == found
    assert periphery.leftovers(keep_run=None) == []

    after = store.beside()
    assert look_alike in after
    if store.kind == "sqlite":
        assert sorted(set(before) - set(after)) == ["_wh_stage_7_1_out"]
        conn = sqlite3.connect(store.options.path)
        assert conn.execute("SELECT DISTINCT task_id FROM _wh_splits").fetchall() == [(9,)]
        conn.close()
    else:
        assert sorted(set(before) - set(after)) == [".out.wormhole-7-1.tmp"]
        assert ".out.wormhole-9-8.tmp" in after


def test_a_fresh_run_removes_other_runs_leftovers_and_resumes_nothing(store: Store) -> None:
    _crash_with_a_durable_split(store, run_id=1)
    _crash_with_a_durable_split(store, run_id=8, task_id=9)
    look_alike = _plant_a_look_alike(store)
    ctx = store.ctx(2)  # a new run, not a resume: it starts from nothing
    periphery = store.periphery(ctx)
    assert periphery.durable_splits() == {}
    writer = store.writer(ctx, periphery)
    write(writer, B, rows_of(B, 2))
    writer.end_split(B, 2)
    periphery.commit()
    assert store.output() == rows_of(B, 2)
    after = store.beside()
    assert look_alike in after
    if store.kind == "sqlite":
        assert "_wh_stage_7_1_out" not in after and "_wh_stage_9_8_out" in after
    else:
        assert ".out.wormhole-7-1.tmp" not in after and ".out.wormhole-9-8.tmp" in after

"""The Engine in-process against a real (SQLite) task database: a run whose destinations all committed but
whose outcome was never recorded (the process died right after its commits) is resumed without loading
any destination again, neither one that keeps its own record (jsonl) nor one that keeps none (a
third-party append-only store, which only the checkpoint's commit row can protect)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from wormhole.config import EngineConf, PathsConf
from wormhole.engine import Engine, RunResult
from wormhole.options import opt
from wormhole.plugins import registry
from wormhole.plugins.base import Plugin, SinkRole, WriteContext, WriteResult
from wormhole.plugins.batch import Batch, rows_of
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import SqlTaskStore, open_store

ROWS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendOptions:
    path: str = opt("")


class AppendPeriphery:
    """An append-only store with no record of its own (as a hive append): commit adds the run's rows."""

    def __init__(self, options: AppendOptions, ctx: WriteContext) -> None:
        self.path = Path(options.path)
        self.tmp = self.path.with_name(f"{self.path.name}.run{ctx.run_id}")
        self.lock = threading.Lock()

    def prepare(self) -> None:
        self.tmp.write_text("")

    def commit(self) -> None:
        with self.path.open("a") as out:
            out.write(self.tmp.read_text())
        self.tmp.unlink()

    def rollback(self) -> None:
        self.tmp.unlink(missing_ok=True)


class AppendWriter:
    def __init__(self, options: AppendOptions, ctx: WriteContext, periphery: AppendPeriphery, worker: int) -> None:
        self.p = periphery

    def open(self) -> None:
        pass

    def write(self, batch: Batch) -> WriteResult:
        with self.p.lock, self.p.tmp.open("a") as f:
            f.write("".join(f"{row[0]}\n" for row in rows_of(batch)))
        return WriteResult(written=len(batch))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _append_plugin() -> Iterator[None]:
    registry._loaded["appendonly"] = Plugin(name="appendonly", description="test sink", sink=SinkRole(
        options=AppendOptions, periphery=AppendPeriphery, writer=AppendWriter))
    registry.BUILTIN["appendonly"] = "tests.unit.test_resume_engine:unused"
    yield
    registry._loaded.pop("appendonly", None)
    registry.BUILTIN.pop("appendonly", None)


def engine_run(store: SqlTaskStore, spec: TaskSpec, conf: EngineConf, task_id: int, run_id: int,
               resume_from: int | None) -> tuple[Engine, RunResult, list[dict[str, Any]]]:
    with capture_logs() as events:
        engine = Engine(conf, spec, task_id=task_id, run_id=run_id, log=structlog.get_logger(), checkpoints=store,
                        resume_from=resume_from)
        result = engine.run()
    return engine, result, events


def test_a_run_killed_after_its_commits_is_resumed_without_loading_anything_twice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store, checkpoints = open_store(url, create=True), open_store(url)
    store.init_schema()
    js = {"path": str(tmp_path / "js"), "format": "jsonl"}
    raw = {"source": {"plugin": "stream", "params": {"rows": ROWS, "splits": 4}},
           "destinations": [{"id": "log", "plugin": "appendonly", "params": {"path": str(tmp_path / "log.txt")}},
                            {"id": "js", "plugin": "file", "params": js}]}
    spec, conf = TaskSpec.from_mapping(raw), EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    task_id = store.submit("t", json.dumps(raw))
    assert store.claim(task_id, "first")
    first = store.start_run(task_id, "first")
    _, result, _ = engine_run(checkpoints, spec, conf, task_id, first, None)
    assert result.exit_code == 0
    # The process dies here: its outcome is never recorded, and nothing is released.
    assert (tmp_path / "js" / "_WORMHOLE").exists()

    assert store.take_over(task_id, "second", stale_s=0) == first
    second = store.start_run(task_id, "second", resumed_from=first)
    engine, result, events = engine_run(checkpoints, spec, conf, task_id, second, first)
    assert result.exit_code == 0, result.result
    assert result.result["resumed_from_run"] == first and result.result["source"]["rows_read"] == 0
    dests = result.result["destinations"]
    assert dests["log"]["status"] == dests["js"]["status"] == "success"
    assert dests["log"]["rows_resumed"] == dests["js"]["rows_resumed"] == ROWS
    assert dests["log"]["rows_written"] == dests["js"]["rows_written"] == 0
    assert [e["destination"] for e in events if e["event"] == "destination.committed_before"] == ["log"]
    assert sorted(int(x) for x in (tmp_path / "log.txt").read_text().split()) == list(range(ROWS))  # once
    ids = sorted(json.loads(line)["id"] for p in (tmp_path / "js").glob("part-*")
                 for line in p.read_text().splitlines())
    assert ids == list(range(ROWS))
    engine.release()  # the outcome is recorded
    assert not (tmp_path / "js" / "_WORMHOLE").exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".") or ".run" in n] == []  # no temporary left
    store.close()
    checkpoints.close()

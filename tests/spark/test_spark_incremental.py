"""Incremental reads in Spark mode: the window's filters run as Spark Columns like any transform, so each run
reads past the lowest watermark and each destination keeps only the rows past its own."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import structlog

from wormhole.config import EngineConf
from wormhole.engine import Engine
from wormhole.recovery.checkpoint import WatermarkWrite
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import open_store

_runs = itertools.count(1)


def add(path: Path, ids: range) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS ev (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO ev VALUES (?, ?)", [(i, f"v{i}") for i in ids])
    conn.close()


def jsonl_ids(path: Path) -> list[int]:
    return sorted(json.loads(line)["id"] for part in path.glob("part-*")
                  for line in part.read_text(encoding="utf-8").splitlines())


def test_spark_runs_take_each_destination_past_its_own_watermark(spark_conf: EngineConf, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'tasks.db'}", create=True)
    store.init_schema()
    src = tmp_path / "src.db"
    add(src, range(1, 101))
    raw: dict[str, Any] = {
        "name": "ev_sync",
        "source": {"plugin": "sqlite", "params": {"path": str(src), "table": "ev"}, "incremental": {"column": "id"}},
        "destinations": [
            {"id": "lake", "plugin": "file", "params": {"path": str(tmp_path / "lake"), "format": "jsonl",
                                                        "mode": "append"}},
            {"id": "late", "plugin": "file", "params": {"path": str(tmp_path / "late"), "format": "jsonl",
                                                        "mode": "append"}}],
        "settings": {"engine": "spark"}}
    # `late` was last committed at 40 (a run it failed since): it catches up from there.
    store.mark_committed(1, 1, 1, "late", 40, WatermarkWrite("ev_sync", '{"int": "40"}'))
    store.mark_committed(1, 1, 1, "lake", 100, WatermarkWrite("ev_sync", '{"int": "60"}'))
    add(src, range(101, 131))

    def run() -> dict[str, Any]:
        run_id = next(_runs) + 1
        result = Engine(spark_conf, TaskSpec.from_mapping(raw), task_id=1, run_id=run_id,
                        log=structlog.get_logger(), checkpoints=store).run()
        assert result.exit_code == 0, result.result
        return result.result

    first = run()
    assert first["engine"] == "spark"
    assert (first["incremental"]["from"], first["incremental"]["to"]) == ("40", "130")
    assert {d: r["rows_written"] for d, r in first["destinations"].items()} == {"lake": 70, "late": 90}
    assert jsonl_ids(tmp_path / "lake") == list(range(61, 131))
    assert jsonl_ids(tmp_path / "late") == list(range(41, 131))
    assert {d: v for d, (v, _) in store.watermarks("ev_sync").items()} == {"lake": '{"int": "130"}',
                                                                           "late": '{"int": "130"}'}
    add(src, range(131, 141))
    second = run()
    assert {d: r["rows_written"] for d, r in second["destinations"].items()} == {"lake": 10, "late": 10}
    assert jsonl_ids(tmp_path / "late") == list(range(41, 141))
    store.close()

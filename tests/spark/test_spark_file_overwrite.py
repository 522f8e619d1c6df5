"""Spark mode applies the file destination's overwrite rule (tests/e2e/test_destination_safety.py checks
it through the CLI in local mode). The runs share the test run's SparkSession: a CLI run per step would
start a Spark driver JVM each, and the rule under test is the engine's, not the CLI's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.spark_helpers import run_task
from wormhole.config import EngineConf

pytestmark = [pytest.mark.spark]


def spec(root: Path, rows: int) -> dict[str, Any]:
    return {"source": {"plugin": "stream", "params": {"rows": rows, "splits": 2, "seed": 3}},
            "settings": {"engine": "spark"},
            "destinations": [{"id": "p", "plugin": "file", "params": {"path": str(root / "p"), "format": "parquet"}},
                             {"id": "j", "plugin": "file", "params": {"path": str(root / "j"), "format": "jsonl"}}]}


def jsonl_ids(path: Path) -> list[int]:
    return sorted(json.loads(line)["id"] for part in path.glob("part-*.jsonl")
                  for line in part.read_text(encoding="utf-8").splitlines())


def test_spark_mode_applies_the_same_overwrite_rule(spark_conf: EngineConf, tmp_path: Path) -> None:
    """Spark's parquet output (parts with uuids, .crc files) is replaced by the next run; an unrelated file
    stops the swap: that destination fails (exit 202), the file stays, the other destination commits."""
    out = tmp_path / "out"
    result, _ = run_task(spark_conf, spec(out, 500))
    assert result.exit_code == 0, result.result
    names = sorted(p.name for p in (out / "p").iterdir())
    assert "_SUCCESS" in names and any(n.endswith(".crc") for n in names), names
    result, _ = run_task(spark_conf, spec(out, 300))
    assert result.exit_code == 0, result.result
    assert pq.read_table(out / "p").num_rows == 300
    (out / "p" / "notes.txt").write_text("keep\n", encoding="utf-8")
    result, _ = run_task(spark_conf, spec(out, 100))
    assert result.exit_code == 202, result.result
    dests = result.result["destinations"]
    assert dests["p"]["status"] == "failed" and str(out / "p") in dests["p"]["error"]
    assert dests["j"]["status"] == "success" and jsonl_ids(out / "j") == list(range(100))
    assert (out / "p" / "notes.txt").read_text(encoding="utf-8") == "keep\n"
    assert [str(p) for p in tmp_path.rglob("*.wormhole-*")] == []

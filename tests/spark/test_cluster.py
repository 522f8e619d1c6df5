"""A task on a real standalone cluster (scripts/spark-cluster.sh: one master, one worker on 127.0.0.1),
run through the CLI, gives the same contents as the same task run through the CLI on local[2,3].

No in-process SparkSession here: both runs are CLI processes, so this module is a unit of its own under
``make test`` with the isolated cluster's (tests/conftest.py, SPARK_CLUSTER_MODULES), beside the
session's tests rather than after them."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, Workspace, log_events, make_workspace

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.slow]

MASTER = "spark://127.0.0.1:7077"


@pytest.fixture(autouse=True)
def _answering_session() -> None:
    """No in-process SparkSession here (the conftest's): both runs are CLI processes."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = REPO / "scripts" / "spark-cluster.sh"
    env = {"WORMHOLE_CLUSTER_DIR": str(tmp_path_factory.mktemp("cluster")), "PATH": "/usr/bin:/bin"}
    started = subprocess.run([str(script), "start"], env=env, capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        yield MASTER
    finally:
        subprocess.run([str(script), "stop"], env=env, capture_output=True, text=True, timeout=60)


def task(out: Path, hive_table: str | None = None) -> dict[str, Any]:
    return {
        "source": {"plugin": "stream", "params": {"rows": 30_000, "splits": 3, "columns": [
            {"name": "id", "type": "int"}, {"name": "name", "type": "string"}, {"name": "price", "type": "decimal"},
            {"name": "ts", "type": "datetime"}, {"name": "doc", "type": "json"}]}},
        "destinations": [
            {"id": "parquet", "plugin": "file", "params": {"path": str(out / "parquet"), "format": "parquet"}},
            {"id": "jsonl", "plugin": "file", "params": {"path": str(out / "jsonl"), "format": "jsonl"}},
        ] + ([{"id": "warehouse", "plugin": "hive", "params": {"table": hive_table, "create": True}}]
             if hive_table else []),
        "settings": {"engine": "spark"},
    }


def run(ws: Workspace, spec: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``wormhole --task-id`` on ``spec``, which must succeed: its result and log events."""
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = ws.show(task_id)["result"]
    return json.loads(result) if isinstance(result, str) else result, log_events(proc.stderr)


def jsonl_lines(path: Path) -> list[str]:
    return sorted(line for part in path.glob("part-*.jsonl") for line in part.read_text().splitlines())


# Its own budget: a cluster's JVMs start slowly on a loaded machine, and the run's own timeout (600 s)
# should end a hung run, not pytest's default 300 s in the middle of a JVM call.
@pytest.mark.timeout(900)
def test_a_task_on_the_standalone_cluster_equals_local(cluster: str, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    ws = make_workspace(tmp_path / "ws")
    ws.write_conf(monitor={"interval_s": 0.05}, spark={
        "master": cluster, "warehouse_dir": str(tmp_path / "ws" / "var" / "warehouse"),
        "metastore_dir": str(tmp_path / "ws" / "var" / "metastore")})
    result, events = run(ws, task(tmp_path / "cluster", hive_table="wh_cluster.t"))
    assert result["engine"] == "spark" and result["spark"]["master"] == cluster
    written = {e["destination"]: e["write"] for e in events if e["event"] == "spark.destination_written"}
    # The row writer ran in the worker's executors; Spark wrote the Hive staging Parquet there too.
    assert written == {"parquet": "native", "jsonl": "partitions", "warehouse": "native"}
    assert result["destinations"]["warehouse"]["rows_written"] == 30_000

    (tmp_path / "local_ws").mkdir()
    local_ws = make_workspace(tmp_path / "local_ws")
    local_ws.write_conf(monitor={"interval_s": 0.05}, spark={"master": "local[2,3]"})
    local, _ = run(local_ws, task(tmp_path / "local"))
    assert local["engine"] == "spark" and local["spark"]["master"] == "local[2,3]"
    a = pq.read_table(str(tmp_path / "cluster" / "parquet")).sort_by("id")
    b = pq.read_table(str(tmp_path / "local" / "parquet")).sort_by("id")
    assert a.num_rows == b.num_rows == 30_000
    assert a.equals(b)
    assert jsonl_lines(tmp_path / "cluster" / "jsonl") == jsonl_lines(tmp_path / "local" / "jsonl")
    # The cluster run's Hive table (its own embedded metastore) holds the same rows as its parquet.
    warehouse = tmp_path / "ws" / "var" / "warehouse" / "wh_cluster.db" / "t"
    c = pq.read_table(str(warehouse)).sort_by("id")
    assert c.num_rows == 30_000 and c.column("name").equals(a.column("name"))

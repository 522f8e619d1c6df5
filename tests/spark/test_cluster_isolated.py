"""Spark on a cluster that shares nothing with the driver but the network and one directory (issue 37).

A standalone master and two workers, each worker in its own mount namespace where the repository, its
virtualenv and the interpreter it was made from are empty directories (as on separate machines with
only Java): a MySQL -> MySQL + parquet task runs through the archive ``wormhole spark pack`` built, to an
exact copy. Broken clusters (the executors' Python missing, a Python without wormhole's dependencies, a
destination path the workers cannot see) fail before any destination is touched (a ``load: truncate``
target keeps its rows), naming the cause and the setting.

Each run starts a driver JVM and executors (about 100 s for the module on the quiet 2-core machine): CI runs
it (``CI=true``, as ``.ci/run`` sets), and a developer's ``make test`` only with WORMHOLE_TEST_CLUSTER=1
(marker ``cluster``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, Workspace, log_events, make_workspace
from tests.mysql_helpers import (
    Databases,
    Server,
    assert_json_lines,
    create_table,
    execute,
    fill_from_sequence,
    table_rows,
)

pytestmark = [pytest.mark.spark, pytest.mark.mysql, pytest.mark.e2e, pytest.mark.slow, pytest.mark.cluster,
              pytest.mark.skipif(os.environ.get("WORMHOLE_TEST_CLUSTER") != "1" and os.environ.get("CI") != "true",
                                 reason="starts a standalone cluster (minutes): set WORMHOLE_TEST_CLUSTER=1")]

DDL = "id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(40), amount DECIMAL(14,4), ts DATETIME(3), note TEXT NULL"
FILL = {"id": "seq", "name": "CONCAT('naïve ✓ ', seq)", "amount": "seq * 1.0625",
        "ts": "TIMESTAMP('2024-02-29 10:11:12.345') + INTERVAL seq SECOND", "note": "IF(seq % 7 = 0, NULL, 'x')"}
COLUMNS = ("id", "name", "amount", "ts", "note")
ROWS = 20_000


@pytest.fixture(autouse=True)
def _answering_session() -> None:
    """No in-process SparkSession here (the conftest's): every run is a CLI process on the cluster."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hidden() -> list[Path]:
    """What a worker must not see: the checkout, the virtualenv, and the interpreter's installation
    (unless it is the system's own, where Java lives too)."""
    found = {REPO.resolve(), Path(sys.prefix).resolve()}
    base = Path(sys.base_prefix).resolve()
    if base not in (Path("/usr"), Path("/usr/local"), Path("/")):
        found.add(base)
    # A directory inside another hidden one is hidden with it (and cannot be mounted over once covered).
    return sorted(p for p in found if not any(q != p and q in p.parents for q in found))


@dataclass
class Cluster:
    master: str
    root: Path
    shared: Path
    """Seen by the driver and the workers alike (file destinations go here)."""
    unseen: Path
    """Seen by the driver only: an empty directory in each worker's namespace."""
    procs: list[subprocess.Popen[bytes]]


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not in {log}:\n{log.read_text(errors='replace')[-3000:] if log.exists() else ''}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to hide the driver's files from the workers")
    import pyspark

    root = tmp_path_factory.mktemp("cluster")
    spark_home = Path(pyspark.__file__).resolve().parent
    shared, unseen, empty = root / "shared", root / "unseen", root / "empty"
    for d in (shared, unseen, empty):
        d.mkdir()
    port, procs = _free_port(), []
    env = {"PATH": "/usr/bin:/bin", "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "SPARK_HOME": str(spark_home), "HOME": str(root)}
    master_log = root / "master.log"
    with master_log.open("wb") as out:
        procs.append(subprocess.Popen(
            [str(spark_home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(_free_port())], env=env, stdout=out, stderr=out,
            start_new_session=True))
    try:
        _wait_for(master_log, "I have been elected leader", procs[0])
        for n in (1, 2):
            procs.append(_worker(root, n, spark_home, empty, [*_hidden(), unseen], f"spark://127.0.0.1:{port}", env))
        for n in (1, 2):
            _wait_for(root / f"worker{n}.log", "Successfully registered with master", procs[n])
        yield Cluster(f"spark://127.0.0.1:{port}", root, shared, unseen, procs)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _worker(root: Path, n: int, spark_home: Path, empty: Path, hide: list[Path], master: str,
            env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A worker in a mount namespace of its own: Spark's files bound where it runs them from, then the
    driver's files covered by an empty directory."""
    mount = root / f"spark{n}"
    work = root / f"work{n}"
    mount.mkdir()
    work.mkdir()
    script = "\n".join([
        "set -e",
        f"mount --bind '{spark_home}' '{mount}'",
        *[f"mount --bind '{empty}' '{path}'" for path in hide],
        f"exec '{mount}/bin/spark-class' org.apache.spark.deploy.worker.Worker --host 127.0.0.1 "
        f"--webui-port 0 --cores 1 --memory 1g --work-dir '{work}' '{master}'"])
    with (root / f"worker{n}.log").open("wb") as out:
        return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "/bin/bash", "-c", script],
                                env={**env, "SPARK_HOME": str(mount)}, stdout=out, stderr=out,
                                start_new_session=True)


@pytest.fixture(scope="module")
def archive(cluster: Cluster) -> Path:
    from wormhole.spark.pack import pack

    path, _ = pack(cluster.root / "wormhole-env.tar.gz")
    return path


def _workspace(cluster: Cluster, name: str, **spark: Any) -> Workspace:
    (cluster.root / name).mkdir()
    ws = make_workspace(cluster.root / name)
    settings = {"master": cluster.master, "hive": False, **spark}
    conf = {"spark.executor.memory": "512m", "spark.executor.cores": 1, "spark.cores.max": 2,
            "spark.driver.host": "127.0.0.1", "spark.driver.memory": "1g"}
    lines = ["[monitor]", "interval_s = 0.1", "[spark]", *[f"{k} = {json.dumps(v)}" for k, v in settings.items()],
             "[spark.conf]", *[f"{json.dumps(k)} = {json.dumps(v)}" for k, v in conf.items()]]
    (ws.root / "conf" / "engine.toml").write_text("\n".join(lines) + "\n")
    return ws


def _task(server: Server, db: str, parquet: Path, load: str = "staging") -> dict[str, Any]:
    return {"source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
            "destinations": [
                {"id": "copy", "plugin": "mysql", "params": server.params(db, table="dst", load=load)},
                {"id": "files", "plugin": "file", "params": {"path": str(parquet), "format": "parquet"}}],
            "settings": {"engine": "spark", "speed": {"channel": 4}}}


@pytest.fixture
def source(dbs: Databases, server: Server) -> str:
    db = dbs.create("cluster")
    admin = server.connect()
    create_table(admin, db, "src", DDL)
    fill_from_sequence(admin, db, "src", ROWS, FILL)
    create_table(admin, db, "dst", DDL)
    admin.close()
    return db


def _run(ws: Workspace, task: dict[str, Any]) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    task_id = ws.submit(task)
    proc = ws.run("--task-id", str(task_id), timeout=900)
    assert_json_lines(proc.stderr)  # the JVM's own output went to var/spark/jvm.log, not to stderr
    assert (ws.root / "var" / "spark" / "jvm.log").stat().st_size > 0
    result = ws.show(task_id)["result"]
    return proc.returncode, json.loads(result) if isinstance(result, str) else result, log_events(proc.stderr)


@pytest.mark.timeout(1500)
def test_a_task_runs_through_the_archive_on_workers_that_see_nothing_of_the_driver(
        cluster: Cluster, archive: Path, source: str, server: Server) -> None:
    ws = _workspace(cluster, "good", archive=str(archive))
    code, result, events = _run(ws, _task(server, source, cluster.shared / "out"))
    assert code == 0, result
    assert result["spark"]["master"] == cluster.master
    checked = next(e for e in events if e["event"] == "spark.executors_checked")
    assert len(checked["executors"]) == 2 and checked["file_destinations"] == ["files"]
    admin = server.connect()
    expected = table_rows(admin, source, "src", COLUMNS)
    assert table_rows(admin, source, "dst", COLUMNS) == expected
    admin.close()
    table = pq.read_table(str(cluster.shared / "out")).sort_by("id")
    assert table.num_rows == ROWS
    assert [tuple(r[c] for c in COLUMNS) for r in table.to_pylist()] == [
        (i, name, Decimal(amount), ts, note) for i, name, amount, ts, note in expected]


def _broken(cluster: Cluster, source: str, server: Server, name: str, parquet: Path, **spark: Any) -> dict[str, Any]:
    """A run with ``load: truncate`` on a target holding 3 rows: it fails (exit 203) before any destination
    is prepared, so the rows are still there and no parquet directory was made."""
    admin = server.connect()
    execute(admin, f"INSERT INTO `{source}`.dst (id, name) VALUES (-1, 'a'), (-2, 'b'), (-3, 'c')")
    code, result, events = _run(_workspace(cluster, name, **spark), _task(server, source, parquet, load="truncate"))
    assert code == 203, result
    assert table_rows(admin, source, "dst", ("id",)) == [(-3,), (-2,), (-1,)]
    admin.close()
    assert not parquet.exists()
    assert not [e for e in events if e["event"] == "destination.prepared"]
    return result


@pytest.mark.timeout(900)
def test_executors_without_the_drivers_python_fail_before_anything_is_touched(
        cluster: Cluster, source: str, server: Server) -> None:
    # No [spark] python, no archive: the executors are told to run the driver's .venv/bin/python.
    result = _broken(cluster, source, server, "no_python", cluster.shared / "no_python")
    program = re.search(r'Cannot run program "([^"]+)"', result["error"])
    assert program is not None and re.search(r"/\.venv/bin/python3?$", program[1]), result["error"]
    assert "[spark] python" in result["error"] and "(executor " in result["error"]


@pytest.mark.timeout(900)
def test_a_python_without_the_dependencies_is_named(cluster: Cluster, source: str, server: Server) -> None:
    system = Path("/usr/bin/python3.11")
    if not system.exists():
        pytest.skip("no system Python 3.11 to stand for a worker's own Python")
    result = _broken(cluster, source, server, "no_deps", cluster.shared / "no_deps", python=str(system))
    assert f"(Python {system})" in result["error"] and "No module named" in result["error"], result["error"]
    assert "wormhole spark pack" in result["error"]


@pytest.mark.timeout(900)
def test_a_path_the_workers_cannot_see_is_named(cluster: Cluster, archive: Path, source: str,
                                                  server: Server) -> None:
    result = _broken(cluster, source, server, "path_unseen", cluster.unseen / "out", archive=str(archive))
    assert f"cannot see destination files's path {cluster.unseen / 'out'}" in result["error"], result["error"]
    assert not list(cluster.unseen.iterdir())  # the driver's probe file is gone again

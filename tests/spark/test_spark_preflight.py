"""The executor check on the run's local session (issue 37): it passes on healthy executors, and with the
executors' Python broken a task with ``load: truncate`` fails before any destination is prepared, naming
the program and the setting, its target's rows intact. (On local masters a run skips the check, whose
executors are the driver: the test makes the run treat its master as a cluster's.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.mysql_helpers import Databases, Server, create_table, execute, table_rows
from tests.spark_helpers import run_task
from wormhole.config import EngineConf
from wormhole.spark.preflight import ExecutorsNotReady, check_executors
from wormhole.spark.session import default_jars
from wormhole.task_spec import TaskSpec

pytestmark = [pytest.mark.spark]

BROKEN = "/nonexistent/venv/bin/python3"


@pytest.fixture
def broken_python(spark_session: Any) -> Iterator[None]:
    """The executors' Python a path no worker has (as a cluster's workers lacking the driver's .venv)."""
    sc = spark_session.sparkContext
    kept = sc.pythonExec
    sc.pythonExec = BROKEN
    try:
        yield
    finally:
        sc.pythonExec = kept


def test_healthy_executors_pass(spark_session: Any, tmp_path: Path) -> None:
    spec = TaskSpec.from_mapping({"source": {"plugin": "stream", "params": {"rows": 1}}, "destinations": [
        {"id": "pq", "plugin": "file", "params": {"path": str(tmp_path / "out" / "pq"), "format": "parquet"}}]})
    with structlog.testing.capture_logs() as events:
        check_executors(spark_session, spec.destinations, default_jars(), structlog.get_logger())
    checked = next(e for e in events if e["event"] == "spark.executors_checked")
    assert checked["file_destinations"] == ["pq"] and checked["tasks"] >= 1
    assert not list(tmp_path.iterdir())  # the probe file is gone, the destination untouched


def test_a_broken_python_fails_the_check(spark_session: Any, broken_python: None) -> None:
    with pytest.raises(ExecutorsNotReady, match=f'Cannot run program "{BROKEN}".*\\[spark\\] python'):
        check_executors(spark_session, (), (), structlog.get_logger())


@pytest.mark.mysql
@pytest.mark.timeout(600)
def test_a_truncate_target_keeps_its_rows_when_the_executors_cannot_run(
        spark_conf: EngineConf, dbs: Databases, server: Server, broken_python: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("wormhole.spark.runner.is_local", lambda _master: False)
    db = dbs.create("preflight")
    admin = server.connect()
    create_table(admin, db, "dst", "id BIGINT PRIMARY KEY, name VARCHAR(20)")
    execute(admin, f"INSERT INTO `{db}`.dst VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    result, events = run_task(spark_conf, {
        "source": {"plugin": "stream", "params": {"rows": 100, "columns": [
            {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}},
        "destinations": [{"id": "db", "plugin": "mysql", "params": server.params(db, table="dst", load="truncate")}],
        "settings": {"engine": "spark"}})
    assert result.exit_code == 203, result.result
    assert f'Cannot run program "{BROKEN}"' in result.result["error"], result.result["error"]
    assert "[spark] python" in result.result["error"]
    assert not [e for e in events if e["event"] == "destination.prepared"]
    assert table_rows(admin, db, "dst", ("id", "name")) == [(1, "a"), (2, "b"), (3, "c")]
    admin.close()


def test_a_jdbc_driver_class_the_executors_cannot_load_is_named(spark_session: Any) -> None:
    from wormhole.spark.preflight import JDBC_HINT, _jdbc_problems

    assert _jdbc_problems(spark_session, 2, ["org.mariadb.jdbc.Driver"]) == []
    [problem] = _jdbc_problems(spark_session, 2, ["org.nope.Driver"])
    assert problem.startswith("JDBC driver org.nope.Driver: ") and "ClassNotFoundException" in problem, problem
    assert problem.endswith(JDBC_HINT)

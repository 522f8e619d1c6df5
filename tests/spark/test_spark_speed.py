"""Speed limits in Spark mode: the executors' reads paced by the driver's throttle (its token server),
on the test run's one SparkSession. Bounds as in tests/e2e/test_speed_limit.py: the throttle never lets
the measured rate exceed the limit, and the lower bounds are generous."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from tests.mysql_helpers import Databases, Server, count, create_table, fill_from_sequence
from tests.spark_helpers import run_task
from wormhole.config import EngineConf
from wormhole.engine import Engine
from wormhole.task_spec import TaskSpec

pytestmark = [pytest.mark.spark]


def assert_paced(result: Any, rows: int, limit: int) -> dict[str, Any]:
    speed = result.result["speed"]
    assert (speed["record_limit"], speed["byte_limit"]) == (limit, None)
    assert speed["rows"] == rows
    # A limit is never exceeded; how close a loaded machine comes to it is a benchmark's question
    # (benchmarks/speed.py), not a test's.
    assert speed["rows_per_s"] <= limit * 1.0001
    assert speed["seconds"] >= rows / limit * 0.999
    assert speed["bytes"] > 0 and speed["waited_s"] > 0
    return speed


def server_events(events: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    started = [e for e in events if e["event"] == "throttle.server_started"]
    stopped = [e for e in events if e["event"] == "throttle.server_stopped"]
    assert len(started) == len(stopped) == 1, (started, stopped)
    return started[0], stopped[0]


def test_a_record_limit_holds_for_the_spark_read(spark_conf: EngineConf) -> None:
    rows, limit = 12_000, 4000  # 3 s over 4 partitions read two at a time
    result, events = run_task(spark_conf, {
        "source": {"plugin": "stream", "params": {"rows": rows, "splits": 4}},
        "destinations": [{"id": "a", "plugin": "stream"}, {"id": "b", "plugin": "stream"}],
        "settings": {"engine": "spark", "speed": {"record": limit, "channel_record": limit}}})
    assert result.exit_code == 0, result.result
    assert result.result["engine"] == "spark"
    for dest in result.result["destinations"].values():
        assert dest["rows_written"] == rows
    assert_paced(result, rows, limit)
    started, stopped = server_events(events)
    assert stopped["connections"] >= 1
    # Stopped in release(): nothing listens on its port any more.
    with pytest.raises(OSError):
        socket.create_connection((started["host"], started["port"]), timeout=2).close()


def test_a_stop_ends_the_executors_waits_at_once(spark_conf: EngineConf) -> None:
    """10 rows/s: the first batch alone waits minutes; a stop ends the run within seconds."""
    spec = TaskSpec.from_mapping({"source": {"plugin": "stream", "params": {"rows": 100_000, "splits": 2}},
                                  "destinations": [{"id": "a", "plugin": "stream"}],
                                  "settings": {"engine": "spark", "speed": {"record": 10, "channel_record": 10}}})
    engine = Engine(spark_conf, spec, task_id=7, run_id=9_001, log=structlog.get_logger())
    sent: list[float] = []

    def stop_once_waiting(events: list[dict[str, Any]]) -> None:
        deadline = time.monotonic() + 120
        # An executor's read task has asked for its first rows (a loaded machine may take long to start one).
        while not any(e["event"] == "throttle.reader_joined" for e in list(events)) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)  # inside its first wait by now
        sent.append(time.monotonic())
        engine.stop("test stop")

    with capture_logs() as events:
        stopper = threading.Thread(target=stop_once_waiting, args=(events,))
        stopper.start()
        result = engine.run()
        ended = time.monotonic()
        stopper.join(10)
    assert result.result["interrupted"] is True and result.exit_code == 203
    assert sent and ended - sent[0] < 30, "the stop did not end the waits"
    assert result.result["destinations"]["a"]["rows_written"] == 0
    assert 0 < result.result["speed"]["waited_s"] < 60  # the executors waited, and were cut short
    server_events(events)


def test_no_limit_adds_no_stage_and_still_reports_the_rate(spark_conf: EngineConf) -> None:
    result, events = run_task(spark_conf, {
        "source": {"plugin": "stream", "params": {"rows": 5000, "splits": 2}},
        "destinations": [{"id": "a", "plugin": "stream"}],
        "settings": {"engine": "spark"}})
    assert result.exit_code == 0, result.result
    speed = result.result["speed"]
    assert (speed["record_limit"], speed["byte_limit"], speed["rows"], speed["bytes"]) == (None, None, 5000, None)
    assert speed["waited_s"] == 0 and speed["seconds"] > 0
    assert not [e for e in events if e["event"].startswith("throttle.")]
    planned = [e for e in events if e["event"] == "spark.source_planned"]
    assert planned and planned[0]["paced"] is False


@pytest.mark.mysql
def test_a_record_limit_holds_for_a_native_jdbc_read(spark_conf: EngineConf, dbs: Databases,
                                                      server: Server) -> None:
    rows, limit = 9000, 3000
    src, dst = dbs.create("spsrc"), dbs.create("spdst")
    ddl = "id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2)"
    create_table(dbs.admin, src, "t", ddl)
    create_table(dbs.admin, dst, "t", ddl)
    fill_from_sequence(dbs.admin, src, "t", rows, {"id": "seq", "name": "CONCAT('n', seq)", "amount": "seq / 100"})
    result, events = run_task(spark_conf, {
        "source": {"plugin": "mysql", "params": server.params(src, table="t", split_pk="id")},
        "destinations": [{"id": "db", "plugin": "mysql", "params": server.params(dst, table="t")}],
        "settings": {"engine": "spark", "speed": {"record": limit, "channel_record": limit // 2}}})
    assert result.exit_code == 0, result.result
    planned = [e for e in events if e["event"] == "spark.source_planned"]
    assert planned and planned[0]["read"] == "native" and planned[0]["paced"] is True
    assert count(dbs.admin, dst, "t") == rows
    assert_paced(result, rows, limit)
    server_events(events)

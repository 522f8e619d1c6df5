"""Task-wide speed limits (``settings.speed.record`` / ``byte``) as a user sees them: real ``wormhole
--task-id`` runs, the result's ``speed`` object, the run's length.

The throttle never lets the measured rate exceed the limit (the first batch pays for itself up front),
so the upper bounds are exact; the lower bounds allow 25%, and the run's length a few seconds of
start-up on a loaded machine, so nothing here can flake.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from tests.conftest import Workspace, run_task
from tests.mysql_helpers import Databases, Server, count, create_table, fill_from_sequence, fingerprint

pytestmark = pytest.mark.e2e


def stream(rows: int, splits: int = 4) -> dict[str, Any]:
    return {"plugin": "stream", "params": {"rows": rows, "splits": splits, "seed": 3}}


def nulls(n: int) -> list[dict[str, Any]]:
    return [{"id": f"null{i}", "plugin": "stream"} for i in range(n)]


def assert_rate(measured: float, limit: int) -> None:
    # Never over the limit. How close a run comes to it depends on the machine's load: that is
    # measured by benchmarks/speed.py (make bench BENCH_ARGS="--only speed"), never asserted here.
    assert measured <= limit * 1.0001, (measured, limit)


def assert_lasted(result: dict[str, Any], seconds: float) -> None:
    """The run took at least ``seconds`` (what the limit allows for its rows)."""
    assert result["speed"]["seconds"] >= seconds * 0.999
    assert result["duration_s"] >= seconds


@pytest.mark.parametrize(("channels", "destinations"), [(1, 1), (4, 1), (1, 3), (4, 3)])
def test_a_record_limit_holds_for_the_whole_task(ws: Workspace, channels: int, destinations: int) -> None:
    rows, limit = 30_000, 12_000  # 2.5 s
    code, task, stderr = run_task(ws, {"source": stream(rows), "destinations": nulls(destinations),
                                       "settings": {"speed": {"record": limit, "channel_record": limit // channels}}})
    assert code == 0, stderr[-3000:]
    result = task["result"]
    assert result["source"]["channels"] == channels
    # DataX's rule set the count: limit / per-channel limit.
    assert result["plan"]["channel_reason"] == f"settings.speed.record {limit} / channel_record {limit // channels} " \
                                               f"= {channels}"
    assert all(d["rows_written"] == rows for d in result["destinations"].values())
    speed = result["speed"]
    assert (speed["record_limit"], speed["byte_limit"], speed["rows"]) == (limit, None, rows)
    assert_rate(speed["rows_per_s"], limit)
    assert_lasted(result, rows / limit)
    assert speed["waited_s"] > 0
    assert list(result)[list(result).index("source") + 1] == "speed"  # documented key order


def test_a_byte_limit_holds_on_the_estimated_bytes(ws: Workspace) -> None:
    rows, limit = 40_000, 1_000_000  # about 61 estimated bytes a row: 2.4 s
    code, task, stderr = run_task(ws, {"source": stream(rows), "destinations": nulls(2),
                                       "settings": {"speed": {"byte": limit, "channel_byte": limit // 2}}})
    assert code == 0, stderr[-3000:]
    result = task["result"]
    speed = result["speed"]
    assert (speed["record_limit"], speed["byte_limit"], speed["rows"]) == (None, limit, rows)
    # The bytes are the exchange's estimate: the same figure each destination's count shows.
    assert speed["bytes"] == result["destinations"]["null0"]["bytes"] > rows * 30
    assert_rate(speed["bytes_per_s"], limit)
    assert_lasted(result, speed["bytes"] / limit)


def test_without_a_limit_the_rate_is_measured_and_nothing_waits(ws: Workspace) -> None:
    code, task, stderr = run_task(ws, {"source": stream(50_000), "destinations": nulls(1)})
    assert code == 0, stderr[-3000:]
    speed = task["result"]["speed"]
    assert (speed["record_limit"], speed["byte_limit"], speed["rows"], speed["waited_s"]) == (None, None, 50_000, 0)
    assert speed["bytes"] > 0 and speed["rows_per_s"] is not None and speed["rows_per_s"] > 0


def test_sigterm_ends_a_long_wait_at_once(ws: Workspace) -> None:
    """100 rows/s: the first batch alone waits 40 s; SIGTERM ends the wait and the run within seconds."""
    task_id = ws.submit({"source": stream(1_000_000), "destinations": nulls(1),
                         "settings": {"speed": {"record": 100, "channel_record": 100}}})
    proc = ws.popen("--task-id", str(task_id))
    deadline = time.monotonic() + 60
    while ws.show(task_id)["status"] != "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)  # the readers are in their first wait by now
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 15, "the wait was not ended by the stop"
    assert proc.returncode == 203, stderr[-2000:]
    result = ws.show(task_id)["result"]
    assert result["interrupted"] is True
    assert 0 < result["speed"]["waited_s"] < 30  # it waited, and was cut short
    assert result["destinations"]["null0"]["rows_written"] == 0


@pytest.mark.mysql
def test_mysql_to_mysql_with_a_record_limit(ws: Workspace, dbs: Databases, server: Server) -> None:
    rows, limit = 25_000, 10_000  # 2.5 s
    src, dst = dbs.create("spdsrc"), dbs.create("spddst")
    ddl = "id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2)"
    columns = ["id", "name", "amount"]
    create_table(dbs.admin, src, "t", ddl)
    create_table(dbs.admin, dst, "t", ddl)
    fill_from_sequence(dbs.admin, src, "t", rows, {"id": "seq", "name": "CONCAT('row ', seq)", "amount": "seq / 7"})
    code, task, stderr = run_task(ws, {
        "source": {"plugin": "mysql", "params": server.params(src, table="t", split_pk="id")},
        "destinations": [{"id": "copy", "plugin": "mysql", "params": server.params(dst, table="t")}],
        "settings": {"speed": {"record": limit, "channel_record": limit // 2}}})
    assert code == 0, stderr[-3000:]
    assert count(dbs.admin, dst, "t") == rows
    assert fingerprint(dbs.admin, dst, "t", columns) == fingerprint(dbs.admin, src, "t", columns)
    result = task["result"]
    assert result["speed"]["rows"] == rows
    assert_rate(result["speed"]["rows_per_s"], limit)
    assert_lasted(result, rows / limit)

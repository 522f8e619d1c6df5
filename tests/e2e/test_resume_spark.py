"""The crash-and-takeover scenario of tests/e2e/test_resume.py on engine spark: the same 200,000-row MySQL
source in 20 splits (channel 4 x split_factor 5), fanned out to the same four destinations.

A module of its own, with its own copy of the source table (a few seconds to make): its three driver JVMs make
it the longest test of the suite, and as a unit of its own under ``make test`` it runs beside the other resume
scenarios instead of after them on one worker. Not fewer rows: the first run is killed once 3 splits are held
by every destination, and the takeover has something to write only if some destination is still behind then.
With 200,000 rows the sqlite one was (the takeover skipped 15 splits and wrote 5, to sqlite alone); with
40,000 every destination had written all 20 splits before the kill landed, and the takeover had nothing to
write.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Workspace, log_events, make_workspace
from tests.e2e.test_resume import (
    ROWS,
    Fanout,
    check_exact,
    durable_everywhere,
    failure,
    py_fingerprint,
    resume,
    start,
)
from tests.mysql_helpers import Databases, Server, create_table, execute, fill_from_sequence, q

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def scenario(server: Server, dbs: Databases, tmp_path: Path) -> Iterator[tuple[Workspace, Fanout, tuple[int, ...]]]:
    """The workspace, the fan-out (a fresh source and its destinations) and the source's rows' fingerprint
    computed in Python."""
    db = dbs.create("resume_spark_src")
    create_table(dbs.admin, db, "src", "id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(40) NOT NULL")
    fill_from_sequence(dbs.admin, db, "src", ROWS, {"id": "seq", "k": "seq % 1000", "v": "CONCAT('row-', seq)"})
    source_py = py_fingerprint(execute(dbs.admin, f"SELECT id, k, v FROM {q(db)}.src"))
    ws = make_workspace(tmp_path)
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0}, spark={"master": "local[2]"})
    yield ws, Fanout(server, db, dbs, tmp_path), source_py


@pytest.mark.timeout(600)  # three driver JVMs in turn: the budget of the two tests this chain replaced
def test_spark_driver_killed_mid_write_then_after_a_commit_resumes_exactly(
        scenario: tuple[Workspace, Fanout, tuple[int, ...]]) -> None:
    """engine spark, one task whose driver (the wormhole process) is killed twice, so each JVM start
    serves a check. Run 1 is SIGKILLed while the destinations are written split by split: its takeover,
    run 2, reads only the splits some destination lacks and writes each only what it lacks. Run 2 is
    killed right after app's final commit, when every split is held by every destination (the native
    JDBC read then has no split to read: it once failed on an empty union): run 3 reads nothing, loads
    neither mysql destination again and commits the rest."""
    ws, fan, source_py = scenario
    spec = dict(fan.spec, settings={"engine": "spark", "speed": {"channel": 4}})
    task_id = ws.submit(spec)
    first = start(ws, task_id)
    deadline = time.monotonic() + 240
    while durable_everywhere(ws, task_id) < 3:  # then the resumed run need not read those splits
        assert first.poll() is None, failure(first)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=120)
    everywhere = durable_everywhere(ws, task_id)
    assert first.returncode == -signal.SIGKILL, (first.returncode, failure(first))
    assert ws.show(task_id)["status"] == "running"  # the crash left its claim behind
    time.sleep(2.5)  # stale_s = 2

    second = start(ws, task_id, crash="after_commit:app:1")
    second.wait(timeout=300)
    events = log_events(second.log_path.read_text())  # type: ignore[attr-defined]
    assert any(e["event"] == "test.crash" for e in events), failure(second)
    resumed = [e for e in events if e["event"] == "task.resumed"]
    assert resumed and resumed[0]["skipped"] >= everywhere >= 3, resumed
    planned = [e for e in events if e["event"] == "spark.source_planned"]
    assert planned[-1]["partitions"] == resumed[0]["splits"] - resumed[0]["skipped"], planned
    read = [e["rows"] for e in events if e["event"] == "spark.source_read"]
    assert read and read[-1] < ROWS, read  # the splits held everywhere were not read again

    code, task, events = resume(ws, task_id, second)
    assert code == 0, task.get("error")
    assert [r["status"] for r in task["runs"]] == ["crashed", "crashed", "success"], task["runs"]
    result = task["result"]
    assert result["engine"] == "spark" and result["resumed_from_run"] == task["runs"][1]["id"]
    assert any(e["event"] == "task.resumed" for e in events)
    source_result = result["source"]
    assert source_result["rows_read"] == 0 and source_result["splits_skipped"] == source_result["splits"], source_result
    planned = [e for e in events if e["event"] == "spark.source_planned"]
    assert (planned[-1]["read"], planned[-1]["partitions"]) == ("row_reader", 0), planned  # the splits left
    check_exact(fan, source_py, task)

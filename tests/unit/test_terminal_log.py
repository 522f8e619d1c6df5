"""The log while a live display shows (wormhole.progress.TerminalLog) and the text it puts on the screen:
the plan as a few lines, warnings and errors only, every event as a JSON line in a file; the outcome table."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wormhole import log
from wormhole.progress import TerminalLog, outcome_lines, plan_lines

PLAN = {"engine": "local", "engine_reason": "settings.engine is 'local'", "channels": 4,
        "channel_reason": "settings.speed.channel 4",
        "splits": [{"id": f"s-{i}", "resource_mark": "stream", "range": f"[{i}, {i + 1})"} for i in range(4)],
        "task_groups": [{"id": 0, "channels": 4, "splits": ["s-0", "s-1", "s-2", "s-3"]}],
        "destinations": [{"id": "csv_export", "plugin": "file", "writers": 2, "method": "writer threads; format=csv"},
                         {"id": "db", "plugin": "sqlite", "writers": 1, "method": "writer threads; write_mode=insert"}],
        "estimated_rows": 500_000, "speed": {"byte": None, "record": 1000}}


@pytest.fixture(name="stream")
def fixture_stream() -> Iterator[io.StringIO]:
    """structlog configured as the CLI does on a terminal (console lines) into a string; no diversion after."""
    stream = io.StringIO()
    log.configure("console", "info", stream=stream)
    try:
        yield stream
    finally:
        log.divert(None)


def emit_run(logger: Any) -> None:
    logger.info("task.claimed", claimed_by="me")
    logger.info("plan.made", **PLAN)
    logger.info("destination.prepared", destination="db")
    logger.warning("task.heartbeat_failed", error="database is locked")
    logger.error("destination.failed", destination="db", error="3 rejected rows exceed the record limit of 2",
                 password="hunter2")
    logger.info("task.finished", status="partial")


def test_the_screen_shows_the_plan_warnings_and_errors_and_the_file_every_event(stream: io.StringIO,
                                                                                tmp_path: Path) -> None:
    terminal = TerminalLog()
    log.divert(terminal)
    logger = log.get_logger(task_id=7)
    logger.info("task.submitted", file="task.json")  # before the run (and its file) is known: kept
    path = tmp_path / "var" / "logs" / "task-7-run-1.jsonl"
    assert terminal.open(path) is None
    emit_run(logger.bind(run_id=1))
    terminal.close()

    screen = stream.getvalue()
    assert screen.splitlines()[:4] == [
        "plan: local engine (settings.engine is 'local'), 4 channels (settings.speed.channel 4)",
        "  read 4 splits in 1 task group, 500,000 rows estimated",
        "  -> csv_export  file    2 writers   writer threads; format=csv",
        "  -> db          sqlite  1 writer    writer threads; write_mode=insert"]
    assert f"  full log: {path}" in screen.splitlines()
    assert "  speed limit: 1,000 rows/s" in screen.splitlines()
    for event in ("task.submitted", "task.claimed", "destination.prepared", "task.finished", "[info"):
        assert event not in screen, screen
    warning, error = screen.splitlines()[-2:]
    assert "[warning  ] task.heartbeat_failed" in warning and "database is locked" in warning
    assert "[error    ] destination.failed" in error and "record limit of 2" in error
    assert "hunter2" not in screen and "task_id" not in error and "run_id" not in error  # the display shows ids
    assert error[:8].count(":") == 2 and error[8] == " ", error  # the time of day, not the whole timestamp

    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["event"] for e in events] == ["task.submitted", "task.claimed", "plan.made", "destination.prepared",
                                            "task.heartbeat_failed", "destination.failed", "task.finished"]
    plan = events[2]
    assert {k: plan[k] for k in PLAN} == PLAN and plan["task_id"] == 7 and plan["run_id"] == 1
    assert events[5]["password"] == "***" and events[5]["level"] == "error" and events[5]["timestamp"]


def test_without_a_diversion_the_stream_gets_every_event_as_before(stream: io.StringIO) -> None:
    log.configure("json", "info", stream=stream)
    emit_run(log.get_logger(task_id=7, run_id=1))
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["task.claimed", "plan.made", "destination.prepared",
                                            "task.heartbeat_failed", "destination.failed", "task.finished"]
    assert events[1]["splits"] == PLAN["splits"] and events[1]["task_id"] == 7


def test_a_log_file_that_cannot_be_written_puts_every_event_on_the_screen(stream: io.StringIO,
                                                                         tmp_path: Path) -> None:
    (tmp_path / "var").write_text("a file where the log directory should be")
    terminal = TerminalLog()
    log.divert(terminal)
    problem = terminal.open(tmp_path / "var" / "logs" / "task-1-run-1.jsonl")
    assert problem is not None and "cannot write the log file" in problem
    emit_run(log.get_logger(task_id=1, run_id=1))
    screen = stream.getvalue()
    for event in ("task.claimed", "plan.made", "destination.prepared", "task.finished"):
        assert event in screen, screen


def test_plan_lines_name_the_transforms_and_a_missing_estimate() -> None:
    plan = {**PLAN, "estimated_rows": None, "speed": {"byte": None, "record": None},
            "transforms": {"source_chain": {"placement": "source", "operators": [{"id": "f1"}]},
                           "chains": [{"chain": "task", "operators": [{"id": "m1"}, {"id": "m2"}]}]}}
    lines = plan_lines(plan)
    assert lines[1] == "  read 4 splits in 1 task group, no row estimate"
    assert lines[-1] == "  transforms: 3 operators, 1 in the source's query"
    assert not any("speed limit" in line or "full log" in line for line in lines)


def destination(status: str, written: int, **extra: Any) -> dict[str, Any]:
    return {"plugin": "file", "status": status, "rows_written": written, "rows_rejected": extra.pop("rejected", 0),
            "rolled_back": False, "rollback_error": None, "error": None, **extra}


def test_the_outcome_table_says_what_happened_to_each_destination() -> None:
    result = {"source": {"rows_read": 500_000}, "duration_s": 4.2, "dirty_file": "var/dirty/task-3/run-1.jsonl",
              "destinations": {
                  "csv_export": destination("success", 499_995, rejected=5),
                  "db": destination("failed", 307_197, rejected=3, rolled_back=True, plugin="sqlite",
                                    error="3 rejected rows exceed the record limit of 2"),
                  "lake": destination("rolled_back", 20, rollback_error="connection lost", error="undone: db failed"),
                  "again": destination("success", 0, skipped="committed by run 1")}}
    lines = outcome_lines(3, "partial", 202, result, {"csv_export": "out/csv", "db": "r.sqlite, table t"})
    assert lines[0] == "== task 3: status partial, exit code 202, 500,000 rows read once in 4.2 s"
    assert lines[1].split() == ["destination", "plugin", "outcome", "rejected", "note"]
    rows = {line.split()[0]: line for line in lines[2:6]}
    assert "committed (499,995 written)" in rows["csv_export"] and rows["csv_export"].endswith("output: out/csv")
    assert "rolled back (307,197 written, undone)" in rows["db"] and "error: 3 rejected rows" in rows["db"]
    assert "FAILED, rollback failed (20 written, may remain)" in rows["lake"]
    assert rows["lake"].endswith("error: undone: db failed; rollback error: connection lost")
    assert "skipped (committed by run 1)" in rows["again"]
    assert lines[6:] == ["rejected rows and their reasons: var/dirty/task-3/run-1.jsonl"]


def test_plan_lines_name_a_mysql_destination_s_load() -> None:
    copy = {"id": "copy", "plugin": "mysql", "writers": 3, "method": "writer threads; method=auto",
            "load": "LOAD DATA from wire text"}
    lines = plan_lines({**PLAN, "destinations": [*PLAN["destinations"], copy]})  # type: ignore[list-item]
    assert "  -> copy        mysql   3 writers   writer threads; method=auto; load: LOAD DATA from wire text" in lines
    assert "  -> csv_export  file    2 writers   writer threads; format=csv" in lines  # no load: nothing said

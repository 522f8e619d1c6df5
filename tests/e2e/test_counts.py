"""Rejected-row counts a user can trust: the error message, the result and the dirty file say one number.

Several writer threads and several readers reject rows at once; whatever the timing, a destination
stopped by its record limit names, in its error, exactly the rows_rejected of its result, which is
exactly the number of its lines in the run's dirty file. The same holds for the source.
"""

from __future__ import annotations

import collections
import json
import re
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, run_task

pytestmark = pytest.mark.e2e


def dirty_origins(ws: Workspace, result: dict[str, Any]) -> collections.Counter[str]:
    """Lines of the run's dirty file, per origin (a destination id, or ``source``)."""
    if result["dirty_file"] is None:
        return collections.Counter()
    with (ws.root / result["dirty_file"]).open(encoding="utf-8") as f:  # relative to the run's directory
        return collections.Counter(json.loads(line)["origin"] for line in f)


def first_reasons(ws: Workspace, result: dict[str, Any]) -> dict[str, str]:
    """Each origin's first reason in the run's dirty file."""
    firsts: dict[str, str] = {}
    with (ws.root / result["dirty_file"]).open(encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            firsts.setdefault(entry["origin"], entry["reason"])
    return firsts


def number_in(error: str, pattern: str) -> int:
    match = re.search(pattern, error)
    assert match, f"no count in {error!r}"
    return int(match.group(1))


def run(ws: Workspace, spec: dict[str, Any]) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    code, task, stderr = run_task(ws, spec)
    return code, task["result"], log_events(stderr)


@pytest.mark.parametrize(("limit", "dirty_every"), [(0, 7), (25, 499)])
def test_a_destination_over_its_record_limit_names_the_rows_in_its_result_and_dirty_file(
        ws: Workspace, limit: int, dirty_every: int) -> None:
    """sqlite and jsonl destinations with 3 writer threads each, 4 readers: whatever batches were in flight
    when the limit was crossed, the error's count == rows_rejected == the destination's dirty lines."""
    spec = {
        "source": {"plugin": "stream", "params": {"rows": 300_000, "splits": 4, "dirty_every": dirty_every}},
        "destinations": [
            {"id": "db", "plugin": "sqlite", "concurrency": 3, "params": {"path": "db.sqlite", "table": "t"}},
            {"id": "lake", "plugin": "file", "concurrency": 3, "params": {"path": "lake", "format": "jsonl"}},
            {"id": "sink", "plugin": "stream", "error_limit": {}},
        ],
        "settings": {"speed": {"channel": 4}, "error_limit": {"record": limit}},
    }
    code, result, events = run(ws, spec)
    assert code == 202, result
    lines = dirty_origins(ws, result)
    failed = {e["destination"]: e["error"] for e in events if e["event"] == "destination.failed"}
    for dest_id in ("db", "lake"):
        dest = result["destinations"][dest_id]
        assert dest["status"] == "failed" and dest["error_code"] == "DIRTY_LIMIT_EXCEEDED", dest
        said = number_in(dest["error"], rf"^(\d+) rejected rows exceed the record limit of {limit}; the first: ")
        assert said == dest["rows_rejected"] == lines[dest_id] > limit, (dest, lines)
        assert dest["error"].endswith(f"; the first: {first_reasons(ws, result)[dest_id]}"), dest  # why, not how many
        assert failed[dest_id] == dest["error"]  # the log line says the same
        assert dest["rows_written"] + dest["rows_rejected"] == dest["rows_delivered"], dest
    assert result["destinations"]["sink"]["status"] == "success"
    assert result["destinations"]["sink"]["rows_written"] == 300_000
    assert sum(lines.values()) == lines["db"] + lines["lake"]  # the null sink rejects nothing
    assert not (ws.root / "lake").exists()


@pytest.mark.parametrize("limit", [0, 40])
def test_the_source_over_its_record_limit_names_the_rows_in_its_result_and_dirty_file(
        ws: Workspace, limit: int) -> None:
    """Eight csv files read by four readers, every 50th id not an integer: the task fails on the source's
    limit, and the error's count == source.rows_rejected == the dirty file's source lines."""
    (ws.root / "in").mkdir()
    for part in range(8):
        body = "".join(f"{'x' if i % 50 == 0 else i},n{i}\n" for i in range(20_000))
        (ws.root / "in" / f"p{part}.csv").write_text("id,name\n" + body)
    spec = {
        "source": {"plugin": "file", "params": {"path": "in", "format": "csv", "columns": [
            {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}},
        "destinations": [{"id": "sink", "plugin": "stream"}],
        "settings": {"speed": {"channel": 4}, "error_limit": {"record": limit}},
    }
    code, result, _ = run(ws, spec)
    assert code == 203, result
    said = number_in(result["error"], rf"^the source rejected (\d+) rows, over the record limit of {limit}; the "
                                      rf"first: ")
    assert result["error"].endswith(f"; the first: {first_reasons(ws, result)['source']}")
    assert said == result["source"]["rows_rejected"] == dirty_origins(ws, result)["source"] > limit, result
    assert result["destinations"]["sink"]["status"] == "rolled_back"
    assert result["destinations"]["sink"]["error"] == f"rolled back: {result['error']}"

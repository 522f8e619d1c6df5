"""The monitor's observer seam: listeners get typed snapshots while a task runs and a final one with the
result's counts; a listener that breaks is dropped without harming the run. Real Engine runs, no mocks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import structlog
from rich.console import Console
from structlog.testing import capture_logs

from wormhole.config import EngineConf, ExchangeConf, MonitorConf, PathsConf
from wormhole.engine import Engine, RunResult
from wormhole.monitor import ProgressSnapshot
from wormhole.progress import render
from wormhole.task_spec import TaskSpec

SPEC = {"source": {"plugin": "stream", "params": {"rows": 100_000, "dirty_every": 500}},
        "destinations": [{"id": "slow", "plugin": "stream", "params": {"delay_ms": 50}},
                         {"id": "csv", "plugin": "file", "error_limit": {"record": 1000}}]}


class Recorder:
    def __init__(self) -> None:
        self.snapshots: list[ProgressSnapshot] = []

    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        self.snapshots.append(snapshot)


class Broken:
    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        raise RuntimeError("observer bug")


def run(tmp_path: Path, *listeners: object) -> tuple[RunResult, list[dict]]:
    spec = dict(SPEC, destinations=[SPEC["destinations"][0],
                                    {**SPEC["destinations"][1], "params": {"path": str(tmp_path / "csv"),
                                                                           "format": "csv"}}])
    # Queues of one batch: the slow destination paces the readers, so the run lasts over a second
    # whatever the machine's load and the listeners see reads grow (big queues let them finish at once).
    conf = EngineConf(monitor=MonitorConf(interval_s=0.02, report_every=1000),
                      exchange=ExchangeConf(queue_rows=4096, spill_rows=4096),
                      paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    with capture_logs() as events:
        result = Engine(conf, TaskSpec.from_mapping(spec), task_id=7, run_id=1, log=structlog.get_logger(),
                        listeners=listeners).run()  # type: ignore[arg-type]
    return result, events


def test_listeners_see_the_run_and_a_final_snapshot_equal_to_the_result(tmp_path: Path) -> None:
    recorder = Recorder()
    result, events = run(tmp_path, recorder)
    assert result.status == "success"
    *running, final = recorder.snapshots
    assert running and all(not s.final and s.state == "running" for s in running)
    reads = [s.rows_read for s in running]
    assert reads == sorted(reads) and len(set(reads)) >= 2
    assert all(s.estimated_rows == 100_000 and s.percent is not None and 0 <= s.percent <= 100 for s in running)
    assert final.final and final.state == "success" and final.task_id == 7 and final.source == "stream"
    assert final.rows_read == result.result["source"]["rows_read"] == 100_000
    for dest in final.destinations:
        expected = result.result["destinations"][dest.id]
        assert (dest.state, dest.plugin, dest.written, dest.rejected, dest.bytes) == (
            expected["status"], expected["plugin"], expected["rows_written"], expected["rows_rejected"],
            expected["bytes"])
    assert {d.id: d.rejected for d in final.destinations}["csv"] == 200
    with pytest.raises(dataclasses.FrozenInstanceError):
        final.rows_read = 0  # type: ignore[misc]
    assert not [e for e in events if e["event"] == "monitor.progress"]  # the log keeps its own cadence
    text = "".join(segment.text for segment in Console(width=160).render(render(final)))
    assert "-> slow" in text and "written 100,000" in text and "success" in text


def test_a_broken_listener_is_dropped_and_the_run_goes_on(tmp_path: Path) -> None:
    recorder = Recorder()
    result, events = run(tmp_path, Broken(), recorder)
    assert result.status == "success"
    failed = [e for e in events if e["event"] == "monitor.listener_failed"]
    assert len(failed) == 1 and failed[0]["listener"] == "Broken" and failed[0]["error"] == "observer bug"
    assert recorder.snapshots[-1].final

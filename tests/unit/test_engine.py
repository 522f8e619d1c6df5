"""The Engine in-process: stalled destinations, timeouts that fire, the read side failing, logs and redaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from wormhole import log
from wormhole.config import EngineConf, ExchangeConf, MonitorConf, PathsConf, RecoveryConf, TimeoutsConf
from wormhole.engine import Engine, RunResult
from wormhole.errors import ReadError
from wormhole.options import opt
from wormhole.plugins import registry
from wormhole.plugins.base import Column, Plugin, ReadContext, Row, Schema, SourceInfo, SourceRole, Split
from wormhole.pool import run_with_timeout
from wormhole.task_spec import TaskSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class SlowOptions:
    rows: int = opt(1000, min=0)
    prepare_s: float = 0.0
    fail_at: int | None = None


class SlowSource:
    """A source whose preparation can hang and whose read can break: the faults the engine must survive."""

    def __init__(self, options: SlowOptions, ctx: ReadContext) -> None:
        self.o = options

    def prepare(self) -> SourceInfo:
        time.sleep(self.o.prepare_s)
        return SourceInfo(estimated_rows=self.o.rows)

    def schema(self) -> Schema:
        return Schema((Column("id", "int"),))

    def split(self, advice: int) -> list[Split]:
        return [Split(id="only", resource_mark="test")]

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        try:
            for start in range(0, self.o.rows, 100):
                if self.o.fail_at is not None and start >= self.o.fail_at:
                    raise ReadError("source connection lost")
                yield [(i,) for i in range(start, min(start + 100, self.o.rows))]
        finally:
            READS_ENDED.append(split.id)  # where a real reader closes its connection


READS_ENDED: list[str] = []


@pytest.fixture(autouse=True)
def _slow_plugin() -> Iterator[None]:
    registry._loaded["slow"] = Plugin(name="slow", description="test source",
                                      source=SourceRole(options=SlowOptions, splitter=SlowSource, reader=SlowSource,
                                                        periphery=SlowSource))
    registry.BUILTIN["slow"] = "tests.unit.test_engine:unused"
    yield
    registry._loaded.pop("slow", None)
    registry.BUILTIN.pop("slow", None)


def run(raw: dict, conf: EngineConf | None = None) -> tuple[RunResult, list[dict]]:
    spec = TaskSpec.from_mapping(raw)
    with capture_logs() as events:
        result = Engine(conf or EngineConf(), spec, task_id=1, run_id=1, log=structlog.get_logger()).run()
    return result, events


class TestEngine:
    def test_stalled_destination_fails_alone(self) -> None:
        """A destination that takes no batch within push_timeout_s fails; the other one commits."""
        conf = EngineConf(exchange=ExchangeConf(batch_rows=100, queue_rows=200, spill_rows=100, push_timeout_s=0.3))
        result, _ = run({"source": {"plugin": "stream", "params": {"rows": 20_000}},
                         "destinations": [{"id": "stuck", "plugin": "stream", "params": {"delay_ms": 2000}},
                                          {"id": "fine", "plugin": "stream"}]}, conf)
        assert result.exit_code == 202
        assert result.result["destinations"]["fine"]["rows_written"] == 20_000
        stuck = result.result["destinations"]["stuck"]
        assert stuck["status"] == "failed" and "no batch for 0.3 s" in stuck["error"]

    def test_reader_prepare_timeout_fires_and_is_skipped(self) -> None:
        """A hanging source pre-check is abandoned after its timeout and the task still runs."""
        conf = EngineConf(timeouts=TimeoutsConf(reader_prepare_s=0.2))
        start = time.monotonic()
        result, events = run({"source": {"plugin": "slow", "params": {"prepare_s": 30}},
                              "destinations": [{"id": "n", "plugin": "stream"}]}, conf)
        assert time.monotonic() - start < 10
        assert result.exit_code == 0
        assert any(e["event"] == "reader.prepare_skipped" for e in events)

    def test_a_read_broken_mid_split_fails_destinations_that_cannot_discard_it(self) -> None:
        """Rows of a split whose read broke reached destinations that cannot discard part of a split
        (stream): re-reading it would write them twice, so each fails naming the read's error (203)."""
        conf = EngineConf(exchange=ExchangeConf(batch_rows=1000))  # batches of the split sent before it breaks
        result, _ = run({"source": {"plugin": "slow", "params": {"rows": 10_000, "fail_at": 5000}},
                         "destinations": [{"id": "a", "plugin": "stream"}, {"id": "b", "plugin": "stream"}]}, conf)
        assert result.exit_code == 203 and result.status == "failed"
        for dest in result.result["destinations"].values():
            assert dest["status"] == "failed" and "source connection lost" in dest["error"]
            assert "cannot discard part of a split" in dest["error"]

    def test_a_split_whose_read_keeps_failing_is_retried_then_fails_the_read_side(self) -> None:
        """A read that breaks before any row is sent is retried split_retries times with backoff;
        then the read side fails (203) and every destination rolls back."""
        conf = EngineConf(recovery=RecoveryConf(split_retries=2, retry_wait_s=0.05))
        result, events = run({"source": {"plugin": "slow", "params": {"rows": 10_000, "fail_at": 0}},
                              "destinations": [{"id": "a", "plugin": "stream"}]}, conf)
        assert result.exit_code == 203 and result.status == "failed"
        assert "reading split only failed 3 time(s)" in result.error and "source connection lost" in result.error
        assert result.result["destinations"]["a"]["status"] == "rolled_back"
        assert result.result["source"]["splits_retried"] == 2
        assert [e["wait_s"] for e in events if e["event"] == "coordinator.split_retry"] == [0.05, 0.1]

    def test_record_limit_stops_a_hopeless_destination_early(self, tmp_path: Path) -> None:
        """Over its record limit a destination fails while the task runs, not after taking every row."""
        conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
        result, _ = run({"source": {"plugin": "stream", "params": {"rows": 1_000_000, "dirty_every": 1000}},
                         "destinations": [{"id": "strict", "plugin": "file", "error_limit": {"record": 0},
                                           "params": {"path": str(tmp_path / "out"), "format": "csv"}},
                                          {"id": "null", "plugin": "stream"}]}, conf)
        strict = result.result["destinations"]["strict"]
        assert strict["status"] == "failed" and "record limit of 0" in strict["error"]
        assert strict["rows_delivered"] < 100_000
        assert result.result["destinations"]["null"]["rows_written"] == 1_000_000
        assert not (tmp_path / "out").exists()

    def test_progress_is_reported_every_n_checks(self) -> None:
        """The monitor logs monitor.progress with rows/s while a task runs."""
        conf = EngineConf(monitor=MonitorConf(interval_s=0.02, report_every=2))
        _, events = run({"source": {"plugin": "stream", "params": {"rows": 200_000}},
                         "destinations": [{"id": "n", "plugin": "stream", "params": {"delay_ms": 5}}]}, conf)
        progress = [e for e in events if e["event"] == "monitor.progress"]
        assert progress and "rows_per_s" in progress[0] and "n" in progress[0]["destinations"]

    def test_stop_ends_a_run_quickly(self) -> None:
        """Engine.stop() (what SIGTERM calls) ends a long run and rolls everything back."""
        spec = TaskSpec.from_mapping({"source": {"plugin": "stream", "params": {"rows": 10**9}},
                                      "destinations": [{"id": "n", "plugin": "stream"}]})
        engine = Engine(EngineConf(), spec, task_id=1, run_id=1, log=structlog.get_logger())
        threading.Timer(0.5, engine.stop, args=("interrupted by test",)).start()
        start = time.monotonic()
        result = engine.run()
        assert time.monotonic() - start < 5
        assert result.run_status == "interrupted" and result.exit_code == 203
        assert result.result["destinations"]["n"]["status"] == "rolled_back"


def test_a_read_stopped_mid_split_is_closed_before_the_run_returns() -> None:
    """A stop mid-split ends the store's read at once (a real reader's connection is closed then), not when
    the exception that ended the reader thread is collected."""
    READS_ENDED.clear()
    spec = TaskSpec.from_mapping({"source": {"plugin": "slow", "params": {"rows": 10**9}},
                                  "destinations": [{"id": "n", "plugin": "stream"}]})
    engine = Engine(EngineConf(), spec, task_id=1, run_id=1, log=structlog.get_logger())
    threading.Timer(0.5, engine.stop, args=("interrupted by test",)).start()
    result = engine.run()
    assert result.run_status == "interrupted"
    assert READS_ENDED == ["only"]


def test_run_with_timeout_really_fires() -> None:
    """The original Wormhole ran the callable before waiting, so its timeouts never fired; ours do."""
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        run_with_timeout(lambda: time.sleep(30), 0.2, "test")
    assert time.monotonic() - start < 2


def test_secrets_are_redacted_in_logs(capsys: pytest.CaptureFixture[str]) -> None:
    """Secret keys never reach the log output, nested ones included; the name of the environment
    variable holding a password is no secret and is shown."""
    log.configure("json", "info")
    log.get_logger().info("x.happened", password="hunter2", dbPwd="hunter2-pwd",
                          params={"host": "h", "password_env": "PW", "token": "t", "auth": "hunter2-auth"})
    out = capsys.readouterr().err
    assert "hunter2" not in out and '"t"' not in out
    assert '"host": "h"' in out and '"password_env": "PW"' in out


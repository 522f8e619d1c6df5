"""Running tasks in this process against the test run's one SparkSession (see tests/spark/conftest.py)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from wormhole.config import EngineConf
from wormhole.engine import Engine, RunResult
from wormhole.task_spec import TaskSpec

_run_ids = itertools.count(1)


def run_task(conf: EngineConf, raw: dict[str, Any]) -> tuple[RunResult, list[dict[str, Any]]]:
    """Run a task in this process (the shared session) and capture its log events."""
    spec = TaskSpec.from_mapping(raw)
    with capture_logs() as events:
        result = Engine(conf, spec, task_id=7, run_id=next(_run_ids), log=structlog.get_logger()).run()
    return result, events


def dirty_lines(conf: EngineConf, result: RunResult) -> list[str]:
    path = result.result["dirty_file"]
    return Path(path).read_text().splitlines() if path else []


def answering_session(conf: EngineConf) -> str | None:
    """Make the run's session one that answers, replacing a broken one; say what was wrong with it (None
    when nothing was). Skips the test when a new session does not answer either."""
    from wormhole.spark.session import discard_session, get_session, session_fault

    fault = session_fault(get_session(conf.spark))
    if fault is None:
        return None
    discard_session()
    fault_after = session_fault(get_session(conf.spark))
    if fault_after is not None:
        pytest.skip(f"the run's SparkSession broke ({fault}) and a new one does not answer ({fault_after})")
    return fault

"""Transforms in Spark mode: the task's operators as Spark Columns before the fan-out, each destination's
on its own view; the same three destinations as local mode, against the expected output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_transforms import check_three, sqlite_source, three_destinations
from tests.spark_helpers import run_task
from tests.transform_helpers import SALT, SALT_ENV, expected_even, source_rows, task
from wormhole.config import EngineConf


def test_three_destinations_with_their_own_transforms_in_spark(spark_conf: EngineConf, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SALT_ENV, SALT)
    spec = task(sqlite_source(tmp_path / "src.db"), three_destinations(tmp_path), engine="spark")
    result, _ = run_task(spark_conf, spec)
    assert result.exit_code == 0, result.result
    check_three(tmp_path)
    assert result.result["engine"] == "spark"
    assert result.result["destinations"]["even"]["rows_written"] == len(expected_even(source_rows()))
    assert result.result["plan"]["transforms"]["dialect"] is None  # Spark evaluates them as Columns

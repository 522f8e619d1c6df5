"""The ``store`` fixture: one harness per store at a fresh location. A new store adds one entry here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The suite's asserts live outside test modules: have pytest explain their failures all the same.
pytest.register_assert_rewrite("tests.contract.suite", "tests.contract.harness")

from tests.contract.harness import FileHarness, SqliteHarness, StoreHarness, StreamHarness  # noqa: E402


def _mysql(request: pytest.FixtureRequest, tmp_path: Path) -> StoreHarness:
    from tests.contract.mysql_harness import MysqlHarness

    return MysqlHarness(request.getfixturevalue("mysql_db"))


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> StoreHarness:
    from tests.contract.postgres_harness import PostgresHarness

    return PostgresHarness()


HARNESSES: dict[str, Callable[[pytest.FixtureRequest, Path], StoreHarness]] = {
    "stream": lambda request, tmp_path: StreamHarness(),
    "csv": lambda request, tmp_path: FileHarness(tmp_path, "csv"),
    "jsonl": lambda request, tmp_path: FileHarness(tmp_path, "jsonl"),
    "parquet": lambda request, tmp_path: FileHarness(tmp_path, "parquet"),
    "sqlite": lambda request, tmp_path: SqliteHarness(tmp_path),
    "mysql": _mysql,
    "postgres": _postgres,
}
"""Store label -> harness factory (hive's lives in tests/spark/test_contract_hive.py, on the session's Spark)."""

MARKS = {"mysql": pytest.mark.mysql, "postgres": pytest.mark.postgres}


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, ())) for name in HARNESSES])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHarness]:
    harness = HARNESSES[request.param](request, tmp_path)
    yield harness
    harness.close()

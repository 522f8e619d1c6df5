"""Every operator on every store, Spark mode: the task's transforms on each source store as Spark Columns,
then the mysql, csv and parquet destinations of the local test plus a hive table, each with its own
operators, each equal to its expected output computed independently."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.mysql_helpers import Databases
from tests.spark_helpers import run_task
from tests.transform_helpers import HASH_TRANSFORMS, SALT, SALT_ENV, expected_hashes, source_rows, task
from tests.transform_stores import (
    SOURCE_STORES,
    check_store_destinations,
    expected_filtered,
    make_source,
    store_destinations,
)
from wormhole.config import EngineConf

pytestmark = [pytest.mark.spark, pytest.mark.mysql]


@pytest.mark.parametrize("store", SOURCE_STORES)
def test_each_operator_from_each_source_store_in_spark(spark_conf: EngineConf, spark_session: Any, dbs: Databases,
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       store: str) -> None:
    monkeypatch.setenv(SALT_ENV, SALT)
    rows = source_rows()
    db = dbs.create("tdst")
    table = f"wh_test.hashes_{uuid.uuid4().hex[:8]}"
    destinations = [*store_destinations(tmp_path / "out", dbs.server, db),
                    {"id": "warehouse", "plugin": "hive", "params": {"table": table, "create": True},
                     "transforms": HASH_TRANSFORMS}]
    result, _ = run_task(spark_conf, task(make_source(store, rows, tmp_path, dbs), destinations, engine="spark"))
    assert result.exit_code == 0, result.result
    assert result.result["engine"] == "spark"
    check_store_destinations(rows, tmp_path / "out", dbs.server, db)
    hive = sorted(tuple(r) for r in spark_session.table(table).select("id", "name", "grp").collect())
    assert hive == sorted(expected_hashes(rows))
    # Every destination reports what its own filters dropped, those written split by split (mysql, csv,
    # parquet: durable) and those written whole (hive) alike.
    want = expected_filtered(rows)
    assert {d: v["rows_filtered"] for d, v in result.result["destinations"].items()} == {
        **want, "warehouse": want["hashes"]}

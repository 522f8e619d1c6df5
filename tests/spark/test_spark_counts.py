"""Spark mode's rejected-row counts: the error message, the result and the dirty file say one number."""

from __future__ import annotations

import json
import re

import pytest

from tests.mysql_helpers import Databases, Server, create_table
from tests.spark_helpers import dirty_lines, run_task
from wormhole.config import EngineConf

pytestmark = [pytest.mark.spark, pytest.mark.mysql]


@pytest.mark.parametrize("limit", [0, 50])
def test_partition_writers_over_the_record_limit_name_the_rows_in_the_result_and_dirty_file(
        spark_conf: EngineConf, dbs: Databases, server: Server, limit: int) -> None:
    """mysql upsert writes inside the executors (4 partitions); names longer than the column are refused.
    Over the record limit, the destination fails naming its total, which is its rows_rejected and its
    dirty lines, and is rolled back; the other destination commits."""
    admin = server.connect()
    db = dbs.create("cnt")
    create_table(admin, db, "t", "id BIGINT PRIMARY KEY, name VARCHAR(13), amount DOUBLE, day DATE")
    admin.close()
    result, _ = run_task(spark_conf, {
        "source": {"plugin": "stream", "params": {"rows": 20_000, "splits": 4}},
        "destinations": [{"id": "db", "plugin": "mysql",
                          "params": server.params(db, table="t", write_mode="upsert")},
                         {"id": "sink", "plugin": "stream", "error_limit": {}}],
        "settings": {"engine": "spark", "error_limit": {"record": limit}}})
    assert result.exit_code == 202, result.result
    dest = result.result["destinations"]["db"]
    lines = [json.loads(line) for line in dirty_lines(spark_conf, result)]
    match = re.fullmatch(rf"(\d+) rejected rows exceed the record limit of {limit}(; the first: .*)?",
                         dest["error"] or "", re.DOTALL)
    assert match, dest
    assert int(match.group(1)) == dest["rows_rejected"] == len(lines) > limit, dest
    assert {line["origin"] for line in lines} == {"db"}
    assert dest["status"] == "failed" and dest["error_code"] == "DIRTY_LIMIT_EXCEEDED" and dest["rolled_back"]
    assert dest["rows_written"] + dest["rows_rejected"] == dest["rows_delivered"], dest
    assert result.result["destinations"]["sink"]["rows_written"] == 20_000

"""In Spark mode, the method the plan names for each destination is the one the run uses (issue 37):
the plan asks the source which columns its Spark read carries as exact text, as the native writes do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mysql_helpers import Databases, Server, create_table, fill_from_sequence
from tests.spark_helpers import run_task
from wormhole.config import EngineConf
from wormhole.planning.methods import WHERE

pytestmark = [pytest.mark.spark, pytest.mark.mysql]

# Every column travels exactly over JDBC: the parquet destination is Spark's native write.
JDBC_DDL = "id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2)"
JDBC_FILL = {"id": "seq", "name": "CONCAT('row-', seq)", "amount": "seq / 100"}
# A DATETIME is read by the row reader as its exact text: parquet falls back to the row writers.
TEXT_DDL = "id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(40), ts DATETIME"
TEXT_FILL = {"id": "seq", "name": "CONCAT('row-', seq)", "ts": "TIMESTAMP('2024-01-01') + INTERVAL seq SECOND"}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("ddl", "fill", "transforms", "parquet", "load"), [
    (JDBC_DDL, JDBC_FILL, [], "native", "LOAD DATA from Arrow"),
    # Every destination written by row writers, no transforms: the write job's tasks read the source
    # themselves, and the mysql destination loads the reader's wire text as in local mode.
    (TEXT_DDL, TEXT_FILL, [], "partitions", "LOAD DATA from wire text"),
    # The pushed-down projection leaves the exact-text column out of the read: Spark's native write again.
    (TEXT_DDL, TEXT_FILL, [{"project": {"drop": ["ts"]}}], "native", "LOAD DATA from Arrow")],
    ids=["jdbc", "text", "text-projected"])
def test_the_plan_names_the_write_the_run_uses(spark_conf: EngineConf, spark_session: Any, dbs: Databases,
                                                server: Server, tmp_path: Path, ddl: str, fill: dict[str, str],
                                                transforms: list[Any], parquet: str, load: str) -> None:
    db = dbs.create("plan")
    admin = server.connect()
    create_table(admin, db, "src", ddl)
    fill_from_sequence(admin, db, "src", 500, fill)
    create_table(admin, db, "dst", ddl)
    result, events = run_task(spark_conf, {
        "source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
        "destinations": [
            {"id": "pq", "plugin": "file", "params": {"path": str(tmp_path / "pq"), "format": "parquet"}},
            {"id": "lines", "plugin": "file", "params": {"path": str(tmp_path / "lines"), "format": "jsonl"}},
            {"id": "db", "plugin": "mysql", "params": server.params(db, table="dst")},
        ],
        "transforms": transforms,
        "settings": {"engine": "spark", "speed": {"channel": 2}},
    })
    assert result.exit_code == 0, result.result
    planned = {d["id"]: d["method"] for d in next(e for e in events if e["event"] == "plan.made")["destinations"]}
    written = {e["destination"]: e["write"] for e in events if e["event"] == "spark.destination_written"}
    assert written == {"pq": parquet, "lines": "partitions", "db": "partitions"}
    for dest, how in written.items():
        assert planned[dest].startswith(WHERE[how] + ";"), (dest, planned[dest], how)
    # Rows that crossed to the JVM carry no wire text: the mysql destination loads them as Arrow.
    planned_load = next(d["load"] for d in next(e for e in events if e["event"] == "plan.made")["destinations"]
                        if d["id"] == "db")
    logged = next(e["load"] for e in events if e["event"] == "writer.load_method")
    assert logged == load and planned_load.startswith(logged), (planned_load, logged)

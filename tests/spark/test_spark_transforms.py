"""Transforms in Spark mode: the task's operators as Spark Columns before the fan-out, each destination's
on its own view; the same three destinations as local mode, against the expected output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_transforms import check_three, sqlite_source, three_destinations
from tests.mysql_helpers import Databases, create_table, general_log, insert_rows, logged_like
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
    planned = result.result["plan"]["transforms"]
    # The leading filters and the projection go into the sqlite reader's query, as in local mode.
    assert planned["dialect"] == "sqlite" and planned["source_query"]["where"], planned


@pytest.mark.mysql
@pytest.mark.parametrize("pushup", ["static", "off"])
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_string_filters_on_mysql_compare_by_code_point_in_both_engines(spark_conf: EngineConf, tmp_path: Path,
                                                                         dbs: Databases, engine: str,
                                                                         pushup: str) -> None:
    """The column's collation is case- and trailing-space-insensitive ('TEST' = 'test', 'ok ' = 'ok' in
    MySQL); a filter means code points in both engines, wherever it runs: Spark must not push its own
    SQL for it, and the SQL wormhole pushes (the query log shows it) compares bytes."""
    db = dbs.create("coll")
    admin = dbs.server.connect()
    create_table(admin, db, "src", "id INT PRIMARY KEY, status VARCHAR(8) COLLATE utf8mb4_general_ci")
    insert_rows(admin, db, "src", ("id", "status"), [(1, "test"), (2, "TEST"), (3, "ok"), (4, "ok "), (5, "Ok")])
    admin.close()
    spec = {"source": {"plugin": "mysql", "params": dbs.server.params(db, table="src", split_pk="id")},
            "transforms": [{"filter": "status = 'ok' OR status = 'test'"}],
            "destinations": [{"id": "js", "plugin": "file", "params": {"path": str(tmp_path / "js"),
                                                                      "format": "jsonl"}}],
            "settings": {"engine": engine, "pushup": pushup}}
    with general_log(dbs.server) as entries:
        result, _ = run_task(spark_conf, spec)
    logged = logged_like(entries, ("Query", "Execute"), f"%`{db}`%src%WHERE%")
    assert result.exit_code == 0, result.result
    assert result.result["engine"] == engine
    got = sorted(json.loads(line)["id"] for p in (tmp_path / "js").glob("*.jsonl")
                 for line in p.read_text().splitlines())
    assert got == [1, 3]
    pushed = [q for q in logged if "AS BINARY" in q]
    assert bool(pushed) == (pushup == "static"), logged
    assert not [q for q in logged if "`status` = '" in q]  # never Spark's own, collated, SQL

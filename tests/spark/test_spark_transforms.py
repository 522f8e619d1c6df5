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


def test_integer_arithmetic_beyond_64_bits_writes_the_same_value_in_both_engines(spark_conf: EngineConf,
                                                                                 tmp_path: Path) -> None:
    """Issue 35 item 17: ``-i`` of i = -2^63 is 2^63 in Python; Spark computes it as DECIMAL(38, 0) and carries
    the derived column as its exact text, where a cast to long failed the task (CAST_OVERFLOW). A later
    operator reads it exactly; jsonl gets the integer and parquet (int64) rejects that row, in both engines."""
    import sqlite3

    import pyarrow.parquet as pq

    src = tmp_path / "src.db"
    conn = sqlite3.connect(src)
    with conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, -2**63), (2, 5), (3, None), (4, -7)])
    conn.close()
    outcomes = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine
        spec = {"source": {"plugin": "sqlite", "params": {"path": str(src), "table": "t"}},
                "transforms": [{"derive": {"neg": "-i"}}, {"filter": "neg > 0 OR neg IS NULL"},
                               {"derive": {"less": "neg - 1", "text": "cast(neg as string)"}}],
                "destinations": [{"id": "js", "plugin": "file", "params": {"path": str(out / "js"), "format": "jsonl"}},
                                 {"id": "pq", "plugin": "file", "params": {"path": str(out / "pq"),
                                                                           "format": "parquet"}}],
                "settings": {"engine": engine, "error_limit": {"record": 1}}}
        result, _ = run_task(spark_conf, spec)
        assert result.exit_code == 201, (engine, result.result)
        rows = sorted((json.loads(line) for p in (out / "js").glob("*.jsonl") for line in p.read_text().splitlines()),
                      key=lambda r: r["id"])
        parquet = sorted(r["id"] for p in (out / "pq").glob("*.parquet") for r in pq.read_table(p).to_pylist())
        dest = result.result["destinations"]
        outcomes[engine] = (rows, parquet, dest["pq"]["rows_rejected"])
    assert outcomes["local"] == outcomes["spark"], outcomes
    assert outcomes["spark"] == ([
        {"id": 1, "i": -2**63, "neg": 2**63, "less": 2**63 - 1, "text": "9223372036854775808"},
        {"id": 3, "i": None, "neg": None, "less": None, "text": None},
        {"id": 4, "i": -7, "neg": 7, "less": 6, "text": "7"}], [3, 4], 1)

"""Spark mode copies a MySQL table exactly as local mode does, whatever its column types.

The awkward-types table of the mysql store's round-trip test (tests/mysql_types_table.py: unsigned
BIGINT at its maximum, DECIMAL(65,30), TIME at +-838 h, YEAR, BIT(10), zero dates, JSON, every byte
value...) goes through both engines into MySQL (the native JDBC insert and the row writer's upsert)
and into Parquet; each destination must hold, value by value, what local mode's holds.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, execute, q
from tests.mysql_types_table import (
    POSTGRES_INEXACT,
    ROUNDTRIP_COLUMNS,
    ROUNDTRIP_STORES,
    TYPE_COLUMNS,
    TYPE_ROWS,
    TYPES_DDL,
    check_manual_table,
    measure_roundtrip,
    roundtrip_markdown,
)
from tests.pg_helpers import Schemas, pg_schemas
from tests.spark_helpers import dirty_lines, run_task
from wormhole.config import EngineConf

pytestmark = [pytest.mark.spark, pytest.mark.mysql]

__all__ = ["pg_schemas"]  # the fixture, used by name

BIT_COLUMNS = ("bt", "b1", "b5")
"""CAST(bit AS CHAR) is the raw bytes; bit + 0 its number."""


def create_types_table(admin: Any, db: str, table: str) -> None:
    # BIT(5) next to the shared table's BIT(10) and BIT(1): the width Spark's JDBC read once broke.
    ddl = TYPES_DDL.format(name=table).replace("b1 BIT(1)", "b1 BIT(1), b5 BIT(5)")
    execute(admin, f"USE {q(db)}")
    execute(admin, ddl)


def fill_types_table(admin: Any, db: str, table: str) -> None:
    execute(admin, "SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES'")
    marks = ", ".join(["%s"] * (len(TYPE_COLUMNS) + 1))
    fifth = {1: 31, 2: 0, 3: None, 4: 21}
    rows = [(*row, fifth[row[0]]) for row in TYPE_ROWS]
    # Rows 1 and 2 again with the few values Parquet's types cannot hold brought within them, so the
    # Parquet copies hold TIME, YEAR, BIT, JSON, every byte, emoji... and not only the NULL row.
    first, second = list(rows[0]), list(rows[1])
    first[0], first[10], first[11] = 5, 9223372036854775807, "12345.678"
    second[0], second[11] = 6, "-0.000000000000000001"
    with admin.cursor() as cur:
        cur.executemany(f"INSERT INTO {q(db)}.{q(table)} VALUES ({marks})", [*rows, tuple(first), tuple(second)])


def row_checksums(admin: Any, db: str, table: str) -> dict[int, dict[str, str]]:
    """Per row, per column: MD5 of the value's exact text (HEX of its bytes; a BIT's number), NULL apart."""
    columns = [*TYPE_COLUMNS, "b5"]
    exprs = [f"IFNULL(MD5({q(c)} + 0), 'NULL')" if c in BIT_COLUMNS
             else f"IFNULL(MD5(HEX(CAST({q(c)} AS CHAR))), 'NULL')" for c in columns]
    execute(admin, "SET time_zone = '+00:00'")
    rows = execute(admin, f"SELECT id, {', '.join(exprs)} FROM {q(db)}.{q(table)} ORDER BY id")
    return {int(r[0]): dict(zip(columns, r[1:], strict=True)) for r in rows}


def differences(a: dict[int, dict[str, str]], b: dict[int, dict[str, str]]) -> list[tuple[int, str]]:
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    return [(i, c) for i in sorted(a) for c in a[i] if a[i][c] != b[i][c]]


@pytest.mark.timeout(300)
def test_awkward_mysql_types_copy_the_same_in_both_engines(spark_conf: EngineConf, dbs: Databases, server: Server,
                                                           tmp_path: Path) -> None:
    admin = server.connect()
    db = dbs.create("types")
    create_types_table(admin, db, "src")
    fill_types_table(admin, db, "src")
    results = {}
    # spark: the row reader per split ([spark] direct_read off); direct: the write job's tasks read the source.
    for engine in ("local", "spark", "direct"):
        for table in (f"ins_{engine}", f"ups_{engine}"):
            create_types_table(admin, db, table)
        conf = dataclasses.replace(spark_conf, spark=dataclasses.replace(spark_conf.spark,
                                                                         direct_read=engine == "direct"))
        result, events = run_task(conf, {
            "source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
            "destinations": [
                # Spark: the native JDBC insert, and the row writer inside the executors.
                {"id": "ins", "plugin": "mysql", "params": server.params(db, table=f"ins_{engine}", load="staging")},
                {"id": "ups", "plugin": "mysql", "params": server.params(db, table=f"ups_{engine}",
                                                                         write_mode="upsert")},
                {"id": "files", "plugin": "file", "params": {"path": str(tmp_path / engine), "format": "parquet"}},
            ],
            "settings": {"engine": "local" if engine == "local" else "spark", "speed": {"channel": 2},
                         "error_limit": {"record": 10}},
        })
        results[engine] = result
        assert result.result["engine"] == ("local" if engine == "local" else "spark")
        # 201: success with rows rejected (Parquet's, below), the same in both engines.
        assert result.exit_code == 201, result.result
        if engine == "direct":
            planned = next(e for e in events if e["event"] == "spark.source_planned")
            assert planned["read"] == "direct", planned
        if engine == "spark":
            ways = {e["destination"]: e["write"] for e in events if e["event"] == "spark.destination_written"}
            # mysql destinations make each split durable: their row writers run in the executors.
            assert ways == {"ins": "partitions", "ups": "partitions", "files": "partitions"}, ways
            planned = next(e for e in events if e["event"] == "spark.source_planned")
            assert planned["read"] == "row_reader" and {"bu", "dec65", "dt", "bt", "js"} <= set(planned["exact"])
    source = row_checksums(admin, db, "src")
    assert len(source) == len(TYPE_ROWS) + 2
    for engine in ("local", "spark", "direct"):
        for table in (f"ins_{engine}", f"ups_{engine}"):
            assert differences(source, row_checksums(admin, db, table)) == [], table
    # Parquet holds what its contract can (int64, decimal(38,18), dates): local mode rejects the rest at
    # the destination, and Spark mode must reject the same rows there, not lose or alter them earlier.
    local = pq.read_table(str(tmp_path / "local")).sort_by("id")
    assert local.column("id").to_pylist() == [3, 5, 6]  # 1, 2, 4 hold values beyond Parquet's types
    for engine in ("spark", "direct"):
        spark = pq.read_table(str(tmp_path / engine)).sort_by("id")
        assert spark.schema == local.schema, engine
        assert spark.equals(local), (engine, local.to_pylist(), spark.to_pylist())
        for name in ("ins", "ups", "files"):
            a, b = (results[e].result["destinations"][name] for e in ("local", engine))
            assert (a["rows_written"], a["rows_rejected"]) == (b["rows_written"], b["rows_rejected"]), (engine, name)
        assert len(dirty_lines(spark_conf, results["local"])) == len(dirty_lines(spark_conf, results[engine]))
    admin.close()


DATED_COLUMNS = ["id", "bi", "d2", "db", "fl", "vc", "bl", "en", "yr", "dt", "dtm", "dt0", "ts"]


@pytest.mark.timeout(300)
def test_a_table_jdbc_carries_exactly_is_read_natively_with_its_dates_as_text(
        spark_conf: EngineConf, dbs: Databases, server: Server, tmp_path: Path) -> None:
    """Dates (zero, partial-zero, year 1000, TIMESTAMP) keep the fast JDBC read: cast to text in its query;
    FLOAT too, cast to DOUBLE (its 6-digit text would turn 16777216 into 16777200). With every destination
    written by row writers the write job's tasks read the source themselves (``direct``); ``jdbc`` is the
    same run with ``[spark] direct_read`` off: both copy what local mode copies."""
    admin = server.connect()
    db = dbs.create("dated")
    create_types_table(admin, db, "full")
    fill_types_table(admin, db, "full")
    keep = ", ".join(map(q, DATED_COLUMNS))
    execute(admin, f"USE {q(db)}")
    execute(admin, "SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES'")
    execute(admin, f"CREATE TABLE src AS SELECT {keep} FROM full")
    execute(admin, "ALTER TABLE src ADD PRIMARY KEY (id)")
    execute(admin, "UPDATE src SET fl = CASE id WHEN 1 THEN 16777216 WHEN 2 THEN 123456.7890625 ELSE 1.1 END "
                   "WHERE fl IS NOT NULL")
    for engine in ("local", "spark", "jdbc"):
        execute(admin, f"CREATE TABLE ins_{engine} LIKE src")
        conf = dataclasses.replace(spark_conf, spark=dataclasses.replace(spark_conf.spark,
                                                                         direct_read=engine != "jdbc"))
        result, events = run_task(conf, {
            "source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
            "destinations": [
                {"id": "ins", "plugin": "mysql", "params": server.params(db, table=f"ins_{engine}")},
                {"id": "files", "plugin": "file", "params": {"path": str(tmp_path / engine), "format": "parquet"}},
            ],
            "settings": {"engine": "local" if engine == "local" else "spark", "speed": {"channel": 2},
                         "error_limit": {"record": 10}},
        })
        assert result.exit_code == 201, result.result  # row 4's zero dates: Parquet rejects it, as in local mode
        assert result.result["destinations"]["files"]["rows_rejected"] == 1
        if engine != "local":
            planned = next(e for e in events if e["event"] == "spark.source_planned")
            assert planned["read"] == ("direct" if engine == "spark" else "native"), planned
    exprs = ", ".join(f"IFNULL(CAST(CAST({q(c)} AS DOUBLE) AS CHAR), 'NULL')" if c == "fl"
                      else f"MD5(IFNULL(HEX(CAST({q(c)} AS CHAR)), 'NULL'))" for c in DATED_COLUMNS)
    tables = {t: execute(admin, f"SELECT {exprs} FROM {q(t)} ORDER BY id")
              for t in ("src", "ins_local", "ins_spark", "ins_jdbc")}
    assert len(tables["src"]) == 6 and tables["ins_local"] == tables["src"] and tables["ins_spark"] == tables["src"]
    assert tables["ins_jdbc"] == tables["src"]
    assert {r[DATED_COLUMNS.index("fl")] for r in tables["src"]} >= {"16777216", "123456.7890625"}
    local, spark, jdbc = (pq.read_table(str(tmp_path / e)).sort_by("id") for e in ("local", "spark", "jdbc"))
    assert spark.schema == local.schema and spark.equals(local)
    assert jdbc.schema == local.schema and jdbc.equals(local)
    assert local.num_rows == 5
    admin.close()


@pytest.mark.timeout(300)
@pytest.mark.postgres
def test_type_round_trip_table_spark(spark_conf: EngineConf, dbs: Databases, server: Server, pg_schemas: Schemas,
                                     tmp_path: Path) -> None:
    """The manual's Spark type round-trip table: Spark mode writes every store's copy, local mode reads it
    back (hive: Spark mode, a table the destination creates; postgres: a table create_table makes)."""
    pg = (pg_schemas.server, pg_schemas.create("types"))
    stores = (*ROUNDTRIP_STORES, "hive", "postgres")
    outcomes = measure_roundtrip(spark_conf, "spark", server, dbs, tmp_path, stores, pg)
    for store in ("mysql", "csv", "jsonl", "parquet", "sqlite", "hive"):
        assert outcomes[store]["fl"] == "exact" and outcomes[store]["es"] == "exact", store
    for store in ("mysql", "csv", "jsonl", "parquet", "hive"):
        assert outcomes[store]["bu"] == "exact", (store, outcomes[store]["bu"])
    assert outcomes["postgres"] == {c: POSTGRES_INEXACT.get(c, "exact") for c in ROUNDTRIP_COLUMNS}  # as local mode
    check_manual_table("spark", roundtrip_markdown(outcomes))

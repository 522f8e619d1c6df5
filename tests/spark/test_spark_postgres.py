"""Spark mode reads a PostgreSQL table as local mode does, value by value: natively over JDBC (a partition
per split) when every column travels exactly, else with the row reader per split."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.pg_helpers import Schemas, pg_schemas, qi
from tests.spark_helpers import dirty_lines, run_task
from wormhole.config import EngineConf

__all__ = ["pg_schemas"]  # the fixture, used by name

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

TYPES_DDL = """CREATE TABLE {t} (
  id integer PRIMARY KEY, si smallint, bi bigint, r real, dp double precision, n numeric(12,3),
  nneg numeric(5,-2), s text, vc varchar(10), ch char(3), u uuid, ip inet, iv interval, tm time, bt bit(4),
  b bytea, flag boolean, d date, ts timestamp, tz timestamptz, j json, jb jsonb, arr integer[], tarr text[],
  arr2 integer[][], mood {s}.mood)"""
TYPES_ROWS = [
    "1, -32768, 9223372036854775807, 1.1, 0.1, -123456789.125, 12300, E'a\\tb\\n\"c\" ,\\\\ é😀', '', 'ab',"
    " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '10.0.0.1/32', '1 year 2 mons 3 days 04:05:06.5', '10:11:12.5', B'1010',"
    " '\\x0001ff2c0a', true, '0001-01-01', '2024-02-29 23:59:59.999999', '2024-01-01 12:00:00+02',"
    " '{\"a\": [1, 2.5, null], \"b\": 1.0}', '{\"b\": \"x\", \"a\": 1.0}', '{1,NULL,3}', '{\"a b\",NULL,\"é\"}',"
    " '{{1,2},{3,4}}', 'happy'",
    "2" + ", NULL" * 25,
    "3, 1, -1, 'Infinity', 'NaN', 0.001, 0, 'x', 'x', 'x', NULL, '::1', '-1 day', '00:00', B'0000', '\\x', false,"
    " '1582-10-10', '1000-01-01 00:00:00', '1900-01-01 00:00:00+00', 'null', '\"s\"', '{}', '{}', '{}', 'sad'",
    # Special dates: NULL with special_dates null, as local mode reads them.
    "4, NULL, NULL, '-Infinity', '-Infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " 'infinity', '-infinity', '0044-03-15 00:00:00+00 BC', NULL, NULL, NULL, NULL, NULL, NULL",
    "5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " '9999-12-31', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59.999999+00', NULL, NULL, NULL, NULL, NULL, NULL",
]
FILLER = ("INSERT INTO {t} (id, bi, n, s, d, ts, tz, jb, arr) SELECT i, i * 1000003, i / 7.0, 'row ' || i,"
          " DATE '2000-01-01' + i, TIMESTAMP '2000-01-01' + i * INTERVAL '77 minutes 1.5 seconds',"
          " TIMESTAMPTZ '2000-01-01 00:00:00+00' + i * INTERVAL '1 hour', jsonb_build_object('i', i), ARRAY[i, -i]"
          " FROM generate_series(10, 300) AS i")


def types_table(pg: Schemas, table: str = "t") -> str:
    schema = pg.create("spk")
    t = f"{qi(schema)}.{qi(table)}"
    pg.conn.execute(f"CREATE TYPE {qi(schema)}.mood AS ENUM ('sad', 'happy')")
    pg.conn.execute(TYPES_DDL.format(t=t, s=qi(schema)))
    for row in TYPES_ROWS:
        pg.conn.execute(f"INSERT INTO {t} VALUES ({row})")
    pg.conn.execute(FILLER.format(t=t))
    return schema


def copy_both_engines(spark_conf: EngineConf, tmp_path: Path, source: dict[str, Any],
                      transforms: list[dict[str, Any]] | None = None, postgres: dict[str, Any] | None = None,
                      **settings: Any) -> dict[str, tuple[Any, list[dict[str, Any]]]]:
    """The source into jsonl and parquet files (and a postgres table named after the engine) in each engine."""
    runs = {}
    for engine in ("local", "spark"):
        tables = [] if postgres is None else [{"id": "db", "plugin": "postgres",
                                                "params": {**postgres, "table": engine}}]
        runs[engine] = run_task(spark_conf, {
            "source": source, "transforms": transforms or [],
            "destinations": [
                {"id": "lines", "plugin": "file", "params": {"path": str(tmp_path / engine / "j"), "format": "jsonl"}},
                {"id": "files", "plugin": "file", "params": {"path": str(tmp_path / engine / "p"),
                                                             "format": "parquet"}},
                *tables,
            ],
            "settings": {"engine": engine, "speed": {"channel": 2}, **settings},
        })
        assert runs[engine][0].result["engine"] == engine
    return runs


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for f in sorted(path.rglob("*.jsonl")) for line in f.read_text().splitlines()]
    return sorted(rows, key=lambda r: r["id"])


def assert_same_outputs(tmp_path: Path, rows: int, lines: int | None = None) -> None:
    local, spark = jsonl_rows(tmp_path / "local" / "j"), jsonl_rows(tmp_path / "spark" / "j")
    assert len(local) == (rows if lines is None else lines)
    for a, b in zip(local, spark, strict=True):  # value by value, every column
        assert a == b, (a["id"], {k: (a[k], b[k]) for k in a if a[k] != b.get(k)})
    ta, tb = (pq.read_table(str(tmp_path / e / "p")).sort_by("id") for e in ("local", "spark"))
    assert ta.schema == tb.schema
    assert ta.num_rows == tb.num_rows == rows
    for name in ta.column_names:  # NaN == NaN here (Table.equals says not)
        a, b = (list(map(_same_nan, t.column(name).to_pylist())) for t in (ta, tb))
        assert a == b, name


def _same_nan(value: Any) -> Any:
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def table_text(conn: Any, schema: str, table: str) -> list[tuple[Any, ...]]:
    """Every row of a table as PostgreSQL prints it, by id."""
    return [tuple(r) for r in conn.execute(f"SELECT t::text FROM {qi(schema)}.{qi(table)} AS t ORDER BY id")]


@pytest.mark.timeout(300)
def test_every_postgres_type_reads_and_writes_as_in_local_mode(spark_conf: EngineConf, pg_schemas: Schemas,
                                                                tmp_path: Path) -> None:
    """Natively over JDBC, a partition per split: jsonl and parquet files equal local mode's value by
    value; the postgres tables create_table makes (written by the row writers in the executors, a split
    per partition) equal local mode's row by row."""
    schema = types_table(pg_schemas)
    server = pg_schemas.server
    source = {"plugin": "postgres", "params": server.params(schema, table="t", split_pk="id", special_dates="null")}
    # Pushed down into every split's JDBC predicate as literals (a '%' and a timestamp among them). Row 3's
    # char(3) is 'x  ' as read, which is not 'x' in either engine (issue 35 item 3); an enum and a uuid
    # compare as their text.
    pushed = [{"filter": "id <> 250 AND (s IS NULL OR s <> '50%') AND (ts IS NULL OR ts >= TIMESTAMP '1000-01-01') "
                         "AND (ch IS NULL OR ch <> 'x') AND (mood IS NULL OR mood <> 'x') AND (u IS NULL OR u <> 'x')"}]
    runs = copy_both_engines(spark_conf, tmp_path, source, pushed, server.params(schema, create_table=True,
                                                                                 load="staging"),
                             error_limit={"record": 2})
    for engine, (result, _) in runs.items():
        # JSON has no NaN or infinity: the jsonl destination rejects rows 3 and 4 in both engines.
        assert result.exit_code == 201, (engine, result.result)
        assert sorted(json.loads(line)["row"][0] for line in dirty_lines(spark_conf, result)) == [3, 4]
    events = runs["spark"][1]
    planned = next(e for e in events if e["event"] == "spark.source_planned")
    splits = next(e for e in runs["local"][1] if e["event"] == "splitter.done")["splits"]
    assert planned["read"] == "native" and planned["partitions"] == splits > 1, (planned, splits)
    ways = {e["destination"]: e["write"] for e in events if e["event"] == "spark.destination_written"}
    assert ways["db"] == "partitions", ways
    assert_same_outputs(tmp_path, 5 + 291 - 1, 3 + 291 - 1)
    want = table_text(pg_schemas.conn, schema, "local")
    assert len(want) == 5 + 291 - 1
    assert table_text(pg_schemas.conn, schema, "spark") == want  # numeric(12,3) holds 2.000 in both
    row1 = jsonl_rows(tmp_path / "spark" / "j")[0]
    assert (row1["ch"], row1["ip"], row1["iv"], row1["bt"], row1["tz"]) == (
        "ab ", "10.0.0.1", "P1Y2M3DT4H5M6.5S", "1010", "2024-01-01T10:00:00")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("direct", [False, True], ids=["row_reader", "direct"])
def test_postgres_columns_jdbc_cannot_carry_use_the_row_reader(spark_conf: EngineConf, pg_schemas: Schemas,
                                                                tmp_path: Path, direct: bool) -> None:
    """numeric without a scale (JDBC would round it) and special_dates reject (the default: JDBC cannot
    reject a row): the row reader per split, with the same rows rejected as in local mode; or, every
    destination written by row writers, the write job's tasks reading the source (``[spark] direct_read``)."""
    schema = pg_schemas.create("spk")
    t = f"{qi(schema)}.t"
    pg_schemas.conn.execute(f"CREATE TABLE {t} (id integer PRIMARY KEY, free numeric, d date)")
    pg_schemas.conn.execute(f"INSERT INTO {t} SELECT i, i / 8.0, DATE '2020-01-01' + i FROM generate_series(1, 200) i")
    # 19 places: in jsonl as it is, refused by parquet's decimal(38,18)
    pg_schemas.conn.execute(f"UPDATE {t} SET free = 1.0000000000000000001 WHERE id = 7")
    pg_schemas.conn.execute(f"UPDATE {t} SET d = 'infinity' WHERE id = 9")  # rejected (special_dates: reject)
    source = {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="t", split_pk="id")}
    conf = dataclasses.replace(spark_conf, spark=dataclasses.replace(spark_conf.spark, direct_read=direct))
    runs = copy_both_engines(conf, tmp_path, source, error_limit={"record": 2})
    for engine, (result, _) in runs.items():
        assert result.exit_code == 201, (engine, result.result)
        assert len(dirty_lines(spark_conf, result)) == 2
    planned = next(e for e in runs["spark"][1] if e["event"] == "spark.source_planned")
    if direct:
        assert planned["read"] == "direct", planned
    else:
        assert planned["read"] == "row_reader", planned
        assert "free (numeric without a declared scale)" in planned["reason"]
        assert "d (date with special_dates: reject)" in planned["reason"]
    assert_same_outputs(tmp_path, 198, lines=199)
    assert [r["free"] for r in jsonl_rows(tmp_path / "spark" / "j") if r["id"] in (6, 7)] == [
        "0.75000000000000000000", "1.0000000000000000001"]  # PostgreSQL's own text (6 / 8.0 has scale 20)


@pytest.mark.timeout(300)
def test_a_postgres_partition_whose_session_is_terminated_lands_once(spark_conf: EngineConf,
                                                                       pg_schemas: Schemas) -> None:
    """Spark retries a partition whose session was terminated mid-COPY: its split's transaction went with
    the session, the retry writes it again with its marker row, and every row lands once."""
    conn, server = pg_schemas.conn, pg_schemas.server
    schema = pg_schemas.create("spk")
    conn.execute(f"CREATE TABLE {qi(schema)}.src (id integer PRIMARY KEY, name text)")
    conn.execute(f"INSERT INTO {qi(schema)}.src SELECT i, 'name ' || i FROM generate_series(1, 300) i")
    # No primary key on the victim (a duplicate would go unnoticed), and each row slowed down so a COPY is
    # caught running.
    conn.execute(f"CREATE TABLE {qi(schema)}.victim (id bigint, name text)")
    conn.execute(f"CREATE FUNCTION {qi(schema)}.slow() RETURNS trigger LANGUAGE plpgsql AS "
                 "$$ BEGIN PERFORM pg_sleep(0.01); RETURN NEW; END $$")
    conn.execute(f"CREATE TRIGGER slow BEFORE INSERT ON {qi(schema)}.victim FOR EACH ROW "
                 f"EXECUTE FUNCTION {qi(schema)}.slow()")
    killed: list[int] = []
    done = threading.Event()

    def killer() -> None:
        watcher = server.connect()
        while not done.is_set() and not killed:
            for (pid,) in watcher.execute("SELECT pid FROM pg_stat_activity WHERE state = 'active' "
                                          "AND query LIKE %s", (f"COPY%{schema}%victim%",)).fetchall():
                watcher.execute("SELECT pg_terminate_backend(%s)", (pid,))
                killed.append(pid)
                break
            time.sleep(0.02)
        watcher.close()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        result, events = run_task(spark_conf, {
            "source": {"plugin": "postgres", "params": server.params(schema, table="src", split_pk="id")},
            "destinations": [{"id": "victim", "plugin": "postgres", "params": server.params(schema, table="victim")}],
            "settings": {"engine": "spark", "speed": {"channel": 2}}})
    finally:
        done.set()
        thread.join()
    assert killed, "no victim COPY was caught running"
    assert result.exit_code == 0, result.result
    ways = {e["destination"]: e["write"] for e in events if e["event"] == "spark.destination_written"}
    assert ways == {"victim": "partitions"}, ways
    assert result.result["destinations"]["victim"]["rows_written"] == 300
    rows = conn.execute(f"SELECT id, name FROM {qi(schema)}.victim ORDER BY id").fetchall()
    assert rows == [(i, f"name {i}") for i in range(1, 301)]  # every row once

"""A target table the user made may declare a column narrower than the source's values: fewer decimal places,
fewer fractional-second digits, an integer, a single-precision float, a shorter string. MySQL and PostgreSQL
would round or cut such a value (most of them without an error); wormhole refuses its row instead, naming
the column, and writes the rows whose values the target holds exactly.

One PostgreSQL source holds a row that fits every target column, one row per edge value, and a row of NULLs;
one task per target store writes it into a table of narrower types."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.mysql_helpers import Databases, Server, execute, q
from tests.pg_helpers import Schemas, pg_execute, pg_schemas
from tests.spark_helpers import dirty_lines, run_task
from wormhole.config import EngineConf, PathsConf

pytestmark = [pytest.mark.mysql, pytest.mark.postgres]

__all__ = ["pg_schemas"]  # the fixture, used by name

COLUMNS = ("id", "n", "ts", "ts0", "i_n", "i_f", "f", "dd", "s")
SOURCE = ('id int PRIMARY KEY, n numeric(20,6), ts timestamp(6), ts0 timestamp(6), i_n numeric(10,2), '
          'i_f double precision, f double precision, dd numeric(30,10), s varchar(10)')
FITS = (1, "1.500000", "2024-01-01 10:00:00.123", "2024-01-01 10:00:01", "2.00", 2.0, 0.1, "0.1", "abc")
EDGES = {  # id -> (column, a value the target column cannot hold exactly)
    2: ("n", "1.005"),  # more places than the target's scale 2
    3: ("ts", "2024-01-01 10:00:00.123456"),  # more fractional digits than the target's 3
    4: ("ts0", "2024-01-01 10:00:00.5"),  # a fraction for a target of whole seconds
    5: ("i_n", "1.50"),  # a decimal fraction into an integer
    6: ("i_f", 1.5),  # a float fraction into an integer
    7: ("f", 0.30000000000000004),  # reads back 0.3 from a single-precision float
    8: ("dd", "12345678901234567890.1234567891"),  # more digits than a double holds
    9: ("s", "abcd"),  # longer than the target's 3 characters: the server's own error
    11: ("s", "ab  "),  # 4 characters: MySQL and PostgreSQL would cut the trailing spaces without an error
}
NULLS = 12


def _source(pg_schemas: Schemas) -> str:
    schema = pg_schemas.create("narrow")
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".src ({SOURCE})')
    rows = [FITS]
    for i, (column, value) in EDGES.items():
        row = list(FITS)
        row[0], row[COLUMNS.index(column)] = i, value
        rows.append(tuple(row))
    rows.append((NULLS, *([None] * (len(COLUMNS) - 1))))
    marks = ", ".join(["%s"] * len(COLUMNS))
    for row in rows:
        pg_execute(pg_schemas.conn, f'INSERT INTO "{schema}".src VALUES ({marks})', row)
    return schema


def _run(tmp_path: Path, pg_schemas: Schemas, schema: str, destination: dict[str, Any],
         limit: int = 20) -> tuple[Any, dict[int, str]]:
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    result, _ = run_task(conf, {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src")},
        "destinations": [destination], "settings": {"error_limit": {"record": limit}}})
    reasons = {d["row"][0]: d["reason"] for d in map(json.loads, dirty_lines(conf, result))}
    return result, reasons


def _assert_refused(result: Any, reasons: dict[int, str], destination: str) -> None:
    assert result.exit_code == 201, result.result  # partial: rows refused within the error limit
    assert result.result["destinations"][destination]["rows_rejected"] == len(EDGES), reasons
    assert set(reasons) == set(EDGES), reasons
    for i, (column, _) in EDGES.items():
        assert f"column {column}" in reasons[i] or f"column '{column}'" in reasons[i], (i, reasons[i])


@pytest.mark.parametrize("method", ["load_data", "insert"])
def test_mysql_refuses_each_value_its_narrower_column_would_change(
        dbs: Databases, server: Server, pg_schemas: Schemas, tmp_path: Path, method: str) -> None:
    schema = _source(pg_schemas)
    admin = server.connect()
    db = dbs.create("narrow")
    execute(admin, f"CREATE TABLE {q(db)}.dst (id INT PRIMARY KEY, n DECIMAL(10,2), ts DATETIME(3), "
                   f"ts0 TIMESTAMP(0) NULL, i_n INT, i_f INT, f FLOAT, dd DOUBLE, s VARCHAR(3))")
    result, reasons = _run(tmp_path, pg_schemas, schema,
                           {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="dst", method=method)})
    landed = execute(admin, f"SELECT id, CAST(n AS CHAR), ts, ts0, i_n, i_f, f, dd, s FROM {q(db)}.dst ORDER BY id")
    admin.close()
    _assert_refused(result, reasons, "mysql")
    assert landed == [(1, "1.50", datetime(2024, 1, 1, 10, 0, 0, 123000), datetime(2024, 1, 1, 10, 0, 1), 2, 2,
                       pytest.approx(0.1), 0.1, "abc"),
                      (NULLS, None, None, None, None, None, None, None, None)]
    assert reasons[2] == ("ValueError: column n: 1.005000 has more decimal places than decimal(10,2) holds "
                          "(MySQL would round it)")
    assert reasons[4] == ("ValueError: column ts0: 2024-01-01 10:00:00.500000 has more fractional-second digits "
                          "than timestamp holds (MySQL would round or truncate it)")
    assert reasons[7] == ("ValueError: column f: 0.30000000000000004 does not read back as the same number from "
                          "float (MySQL would round it)")
    assert "(1406) Data too long for column 's'" in reasons[9]  # strict mode: MySQL refuses it itself
    assert reasons[11] == ("ValueError: column s: a string of 4 characters ('ab  ') is longer than varchar(3) holds "
                           "(MySQL would cut its trailing spaces)")


def test_postgres_refuses_each_value_its_narrower_column_would_change(
        pg_schemas: Schemas, tmp_path: Path) -> None:
    schema = _source(pg_schemas)
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".dst (id int PRIMARY KEY, n numeric(10,2), '
                                f'ts timestamp(3), ts0 timestamptz(0), i_n integer, i_f integer, f real, '
                                f'dd double precision, s varchar(3))')
    result, reasons = _run(tmp_path, pg_schemas, schema,
                           {"id": "pg", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="dst")})
    landed = pg_execute(pg_schemas.conn, f'SELECT id, n::text, ts, ts0 AT TIME ZONE \'UTC\', i_n, i_f, f::text, '
                                         f'dd, s FROM "{schema}".dst ORDER BY id')
    _assert_refused(result, reasons, "pg")
    # 2.00 and 2.0 go as the integer 2 (PostgreSQL's integer input reads no "2.00")
    assert landed == [(1, "1.50", datetime(2024, 1, 1, 10, 0, 0, 123000), datetime(2024, 1, 1, 10, 0, 1), 2, 2,
                       "0.1", 0.1, "abc"),
                      (NULLS, None, None, None, None, None, None, None, None)]
    assert reasons[2] == ("column n: 1.005000 has more decimal places than numeric(10,2) holds "
                          "(PostgreSQL would round it)")
    assert reasons[5] == "column i_n: 1.50 has a fraction, which integer cannot hold"
    assert reasons[8] == ("column dd: 12345678901234567890.1234567891 does not read back as the same number from "
                          "double precision (PostgreSQL would round it)")
    assert "(22001) value too long for type character varying(3)" in reasons[9]  # PostgreSQL refuses it itself
    assert reasons[11] == ("column s: a string of 4 characters ('ab  ') is longer than character varying(3) holds "
                           "(PostgreSQL would cut its trailing spaces)")


def test_mysql_to_mysql_checks_the_narrower_columns_and_loads_the_others_from_wire_text(
        dbs: Databases, server: Server, tmp_path: Path) -> None:
    # A column whose target declares the source's own type loads the reader's wire text unchecked (it holds
    # every value the source does); a narrower one goes through the typed form and is checked there.
    admin = server.connect()
    db = dbs.create("narrow")
    execute(admin, f"CREATE TABLE {q(db)}.src (id INT PRIMARY KEY, at DATETIME(6), amount DECIMAL(20,6), "
                   f"same DECIMAL(10,2))")
    execute(admin, f"INSERT INTO {q(db)}.src VALUES (1, '2024-01-01 10:00:01', 1.5, 3.25), "
                   f"(2, '2024-01-01 10:00:00.5', 1.5, 3.25), (3, '2024-01-01 10:00:01', 1.005, 3.25)")
    execute(admin, f"CREATE TABLE {q(db)}.dst (id INT PRIMARY KEY, at DATETIME, amount DECIMAL(10,2), "
                   f"same DECIMAL(10,2))")
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    result, events = run_task(conf, {
        "source": {"plugin": "mysql", "params": server.params(db, table="src")},
        "destinations": [{"id": "mysql", "plugin": "mysql",
                          "params": server.params(db, table="dst", method="load_data")}],
        "settings": {"error_limit": {"record": 5}}})
    landed = execute(admin, f"SELECT id, at, CAST(amount AS CHAR), CAST(same AS CHAR) FROM {q(db)}.dst ORDER BY id")
    admin.close()
    assert result.exit_code == 201, result.result
    assert landed == [(1, datetime(2024, 1, 1, 10, 0, 1), "1.50", "3.25")]
    reasons = {d["row"][0]: d["reason"] for d in map(json.loads, dirty_lines(conf, result))}
    assert reasons == {
        2: "ValueError: column at: 2024-01-01 10:00:00.500000 has more fractional-second digits than datetime holds "
           "(MySQL would round or truncate it)",
        3: "ValueError: column amount: 1.005000 has more decimal places than decimal(10,2) holds "
           "(MySQL would round it)"}
    (wired,) = [e["columns"] for e in events if e.get("event") == "writer.load_from_wire"]
    assert wired == ["id", "same"]


def test_postgres_binary_copy_is_checked_as_the_text_path_is(pg_schemas: Schemas, tmp_path: Path) -> None:
    # Every target type here has a binary form, so the rows go as binary COPY, whose numeric and timestamp
    # input apply the column's typmod (round) as the text input does: the rows are refused before either.
    schema = pg_schemas.create("narrow")
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".src (id int PRIMARY KEY, n numeric(12,4), ts timestamp(6), '
                                f's varchar(10))')
    pg_execute(pg_schemas.conn, f'INSERT INTO "{schema}".src VALUES (1, 1.5, \'2024-01-01 10:00:00.123\', \'abc\'), '
                                f'(2, 1.005, \'2024-01-01 10:00:00.123\', \'abc\'), '
                                f'(3, 1.5, \'2024-01-01 10:00:00.1235\', \'abc\'), '
                                f'(4, 1.5, \'2024-01-01 10:00:00.123\', \'ab  \')')
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".dst (id bigint PRIMARY KEY, n numeric(10,2), '
                                f'ts timestamp(3), s varchar(3))')
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    result, events = run_task(conf, {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src")},
        "destinations": [{"id": "pg", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="dst")}],
        "settings": {"error_limit": {"record": 5}}})
    assert [e["format"] for e in events if e.get("event") == "writer.copy_format"] == ["binary"]
    assert result.exit_code == 201, result.result
    assert pg_execute(pg_schemas.conn, f'SELECT id, n::text, ts, s FROM "{schema}".dst') == [
        (1, "1.50", datetime(2024, 1, 1, 10, 0, 0, 123000), "abc")]
    reasons = {d["row"][0]: d["reason"] for d in map(json.loads, dirty_lines(conf, result))}
    assert set(reasons) == {2, 3, 4}, reasons
    assert reasons[3].startswith("column ts: 2024-01-01 10:00:00.123500 has more fractional-second digits than "
                                 "timestamp(3) without time zone holds")


def test_refused_values_count_against_the_error_limit(pg_schemas: Schemas, tmp_path: Path) -> None:
    schema = _source(pg_schemas)
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".dst (id int PRIMARY KEY, n numeric(10,2), '
                                f'ts timestamp(3), ts0 timestamptz(0), i_n integer, i_f integer, f real, '
                                f'dd double precision, s varchar(3))')
    destination = {"id": "pg", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="dst")}
    result, _ = _run(tmp_path, pg_schemas, schema, destination, limit=2)
    assert result.exit_code == 203, result.result  # over the limit: the task fails
    assert pg_execute(pg_schemas.conn, f'SELECT count(*) FROM "{schema}".dst') == [(0,)]  # refused before any COPY

"""JSON numbers and BIT(64) on every path (issue 35, items 1, 2, 5): a JSON number arrives with its digits
(never through a double) and ``1e400`` is no error, MySQL -> MySQL with a zero date in the batch (an exact
column), into csv, jsonl, sqlite, parquet and postgres, and from PostgreSQL json/jsonb into mysql, csv and
sqlite; a jsonl ``decimal`` column is read from its text; a BIT(64) value >= 2**63 is a parquet uint64.

One run per source fans out to every destination; each destination's cells are compared in one table."""

from __future__ import annotations

import csv
import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, execute, q
from tests.pg_helpers import Schemas, pg_execute, pg_schemas
from tests.spark_helpers import run_task
from wormhole.config import EngineConf, PathsConf

pytestmark = [pytest.mark.mysql, pytest.mark.postgres]

__all__ = ["pg_schemas"]  # the fixture, used by name

DOCS = {
    1: "12345678901234567890.123456789",
    2: "0.1000000000000000055511151231257827",
    3: '{"price": 0.10000000000000000001}',
    4: "1e400",
    5: '[1.50, -0.0, 1.5e-7, {"n": 123456789012345678901234567890}]',
}
"""id -> the JSON text of a row (its other cells NULL)."""
BITS = {6: 18446744073709551615, 7: 9223372036854775808, 8: 1}
"""id -> a BIT(64) value (its row's JSON is NULL): sqlite has no int beyond int64 and rejects 6 and 7, as a
BIGINT UNSIGNED's."""
ZERO_DATE_ROW = 10
"""A row with a zero date: every batch holding it leaves the Arrow path for a MySQL destination (the stores
that have no such date reject this row alone)."""

CSV_NULL = "\\N"
"""The csv destination's NULL text."""


def exact(text: str) -> Any:
    """The JSON value of ``text``, numbers as decimals: equal only when every digit is."""
    return json.loads(text, parse_float=Decimal)


WANT = {i: exact(t) for i, t in DOCS.items()}


def _conf(tmp_path: Path) -> EngineConf:
    return EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))


def _file_rows(path: Path, fmt: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for part in sorted(path.glob(f"part-*.{fmt}")):
        text = part.read_text(encoding="utf-8")
        if fmt == "csv":
            rows += csv.DictReader(text.splitlines())
        else:
            rows += [json.loads(line, parse_float=Decimal) for line in text.splitlines()]
    return rows


def _docs(pairs: list[tuple[Any, Any]]) -> dict[int, Any]:
    """id -> the exact JSON value of each non-NULL document (a jsonl line holds the value itself)."""
    return {int(i): exact(v) if isinstance(v, str) else v for i, v in pairs if v is not None}


def test_json_numbers_and_bit64_from_mysql_arrive_digit_for_digit(dbs: Databases, server: Server,
                                                                  pg_schemas: Schemas, tmp_path: Path) -> None:
    admin = server.connect()
    db = dbs.create("jsnum")
    ddl = "(id INT PRIMARY KEY, zd DATE, js JSON, b64 BIT(64))"
    execute(admin, f"CREATE TABLE {q(db)}.src {ddl}")
    for table in ("dst", "dst_insert"):
        execute(admin, f"CREATE TABLE {q(db)}.{table} {ddl}")
    execute(admin, "SET sql_mode = ''")  # a zero date: the MySQL destination's batch leaves the Arrow path
    with admin.cursor() as cur:
        cur.executemany(f"INSERT INTO {q(db)}.src VALUES (%s, %s, %s, %s)",
                        [(i, None, t, None) for i, t in DOCS.items()] + [(i, None, None, v) for i, v in BITS.items()]
                        + [(9, None, None, None), (ZERO_DATE_ROW, "0000-00-00", None, None)])
    schema = pg_schemas.create("jsnum")
    files = {fmt: tmp_path / fmt for fmt in ("csv", "jsonl", "parquet")}
    result, _ = run_task(_conf(tmp_path), {
        "source": {"plugin": "mysql", "params": server.params(db, table="src")},  # one split
        "destinations": [
            {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="dst")},  # the wire text
            {"id": "insert", "plugin": "mysql", "params": server.params(db, table="dst_insert", method="insert")},
            {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.sqlite"), "table": "t"}},
            {"id": "postgres", "plugin": "postgres",
             "params": pg_schemas.server.params(schema, table="t", create_table=True)},
            *({"id": fmt, "plugin": "file", "params": {"path": str(p), "format": fmt}} for fmt, p in files.items())],
        "settings": {"error_limit": {"record": 20}}})
    assert result.exit_code == 201, result.result  # success with rows rejected (below)

    mysql_rows, insert_rows = ({int(r[0]): r for r in _fetch(admin, f"SELECT id, js, CAST(b64 + 0 AS CHAR) "
                                                                   f"FROM {q(db)}.{t}")} for t in ("dst", "dst_insert"))
    admin.close()
    lite = sqlite3.connect(tmp_path / "t.sqlite")
    sqlite_rows = lite.execute("SELECT id, js, b64 FROM t").fetchall()
    lite.close()
    pg_rows = pg_execute(pg_schemas.conn, f'SELECT id, js::text, b64::text FROM "{schema}".t')
    parquet = pq.read_table(str(files["parquet"]))
    csv_rows, jsonl_rows = _file_rows(files["csv"], "csv"), _file_rows(files["jsonl"], "jsonl")
    docs = {
        "mysql": _docs([(i, r[1]) for i, r in mysql_rows.items()]),
        "insert": _docs([(i, r[1]) for i, r in insert_rows.items()]),
        "sqlite": _docs([(r[0], r[1]) for r in sqlite_rows]),
        "postgres": _docs([(r[0], r[1]) for r in pg_rows]),
        "parquet": _docs(list(zip(parquet.column("id").to_pylist(), parquet.column("js").to_pylist(), strict=True))),
        "csv": _docs([(r["id"], None if r["js"] == CSV_NULL else r["js"]) for r in csv_rows]),
        "jsonl": _docs([(r["id"], r["js"]) for r in jsonl_rows]),
    }
    assert docs == dict.fromkeys(docs, WANT)
    # MariaDB keeps a JSON document's text: a batch with a zero date (an exact column) loads its JSON column's
    # text as the source sent it, by LOAD DATA and by INSERT (1e400 as 1e400)
    for rows in (mysql_rows, insert_rows):
        assert {i: rows[i][1] for i in (1, 2, 3, 4)} == {i: DOCS[i] for i in (1, 2, 3, 4)}
    jsonl_text = "".join(p.read_text(encoding="utf-8") for p in files["jsonl"].glob("part-*.jsonl"))
    assert '"js":{"price":0.10000000000000000001}' in jsonl_text  # the value itself, not a string

    bits = {
        "mysql": {i: int(r[2]) for i, r in mysql_rows.items() if r[2] is not None},
        "insert": {i: int(r[2]) for i, r in insert_rows.items() if r[2] is not None},
        "postgres": {int(r[0]): int(r[2]) for r in pg_rows if r[2] is not None},
        "parquet": {i: v for i, v in zip(parquet.column("id").to_pylist(), parquet.column("b64").to_pylist(),
                                         strict=True) if v is not None},
        "csv": {int(r["id"]): int(r["b64"]) for r in csv_rows if r["b64"] != CSV_NULL},
        "jsonl": {int(r["id"]): r["b64"] for r in jsonl_rows if r["b64"] is not None},
    }
    assert bits == dict.fromkeys(bits, BITS)
    assert str(parquet.schema.field("b64").type) == "uint64"
    assert {r[0]: r[2] for r in sqlite_rows if r[2] is not None} == {8: 1}  # 6 and 7 rejected, as BIGINT UNSIGNED's
    rejected = {d: r["rows_rejected"] for d, r in result.result["destinations"].items()}
    # the zero date: no date in sqlite, parquet, postgres; sqlite has no int beyond int64
    assert rejected == {"mysql": 0, "insert": 0, "sqlite": 3, "postgres": 1, "csv": 0, "jsonl": 0, "parquet": 1}


def _fetch(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def test_postgres_json_and_jsonb_arrive_digit_for_digit(dbs: Databases, server: Server, pg_schemas: Schemas,
                                                        tmp_path: Path) -> None:
    schema = pg_schemas.create("jsnum")
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".src (id int PRIMARY KEY, j json, jb jsonb)')
    for i, text in DOCS.items():
        pg_execute(pg_schemas.conn, f'INSERT INTO "{schema}".src VALUES (%s, %s, %s)', (i, text, text))
    admin = server.connect()
    db = dbs.create("jsnum")
    execute(admin, f"CREATE TABLE {q(db)}.dst (id INT PRIMARY KEY, j JSON, jb JSON)")
    result, _ = run_task(_conf(tmp_path), {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src")},
        "destinations": [
            {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="dst")},
            {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.sqlite"), "table": "t"}},
            {"id": "csv", "plugin": "file", "params": {"path": str(tmp_path / "csv"), "format": "csv"}}]})
    assert result.exit_code == 0, result.result
    mysql_rows = _fetch(admin, f"SELECT id, j, jb FROM {q(db)}.dst")
    admin.close()
    lite = sqlite3.connect(tmp_path / "t.sqlite")
    sqlite_rows = lite.execute("SELECT id, j, jb FROM t").fetchall()
    lite.close()
    csv_rows = [(r["id"], r["j"], r["jb"]) for r in _file_rows(tmp_path / "csv", "csv")]
    got = {store: {column: _docs([(r[0], r[k]) for r in rows]) for k, column in ((1, "json"), (2, "jsonb"))}
           for store, rows in (("mysql", mysql_rows), ("sqlite", sqlite_rows), ("csv", csv_rows))}
    assert got == {store: {"json": WANT, "jsonb": WANT} for store in got}


def test_a_jsonl_decimal_and_json_column_keep_their_digits(tmp_path: Path) -> None:
    """A jsonl source's decimal column reads a number's text, its json column exact numbers; a jsonl
    destination writes that json value itself, digit for digit."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": 1, "d": 12345678901234567890.123456789, "f": 0.1, '
                      '"j": {"price": 0.10000000000000000001}}\n'
                      '{"id": 2, "d": "-0.000000000000000000000000000001", "f": 2, "j": [1e400, 1.50]}\n',
                      encoding="utf-8")
    columns = [{"name": "id", "type": "int"}, {"name": "d", "type": "decimal"}, {"name": "f", "type": "float"},
               {"name": "j", "type": "json"}]
    result, _ = run_task(_conf(tmp_path), {
        "source": {"plugin": "file", "params": {"path": str(source), "format": "jsonl", "columns": columns}},
        "destinations": [
            {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.sqlite"), "table": "t"}},
            {"id": "jsonl", "plugin": "file", "params": {"path": str(tmp_path / "out"), "format": "jsonl"}}]})
    assert result.exit_code == 0, result.result
    lite = sqlite3.connect(tmp_path / "t.sqlite")
    assert lite.execute("SELECT id, d, f, j FROM t ORDER BY id").fetchall() == [
        (1, "12345678901234567890.123456789", 0.1, '{"price": 0.10000000000000000001}'),
        (2, "-0.000000000000000000000000000001", 2.0, "[1E+400, 1.50]")]
    lite.close()
    lines = sorted(line for p in (tmp_path / "out").glob("part-*.jsonl")
                   for line in p.read_text(encoding="utf-8").splitlines())
    assert lines == ['{"id":1,"d":"12345678901234567890.123456789","f":0.1,"j":{"price":0.10000000000000000001}}',
                     '{"id":2,"d":"-0.000000000000000000000000000001","f":2.0,"j":[1E+400,1.50]}']

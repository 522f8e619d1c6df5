"""The mysql writer loads Arrow batches (issue 28): the awkward-types table arrives exactly, dirty rows of an
Arrow batch are rejected one by one with MySQL's reason, and tuple batches are written as before."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from decimal import Decimal
from typing import Any
from urllib.parse import urlparse

import pymysql
import pytest

from tests.conftest import Workspace
from tests.mysql_load_reference import load_payload
from tests.mysql_types_table import TYPE_ROWS, fill_types_table
from tests.plugin_helpers import parse, read_ctx, tuples_of, write_ctx
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, Column, Schema, WriteResult, batch_memo
from wormhole.plugins.batch import BadValues, arrow_from_rows, as_batch
from wormhole.plugins.mysql.arrow_load import arrow_payload
from wormhole.plugins.mysql.options import MysqlReaderOptions, MysqlWriterOptions

pytestmark = pytest.mark.mysql

PLUGIN = registry.get("mysql")
NO_ZERO_DATES = {22: "2000-01-01", 23: "2000-01-01 00:00:00.000001", 24: "2024-01-10 00:00:00"}
"""Row 4's zero and partial dates (columns dt, dtm, dt0) replaced: a record batch has no such date."""


def connect(url: str) -> pymysql.Connection:
    u = urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                           password=u.password or "", database=u.path.lstrip("/"), autocommit=True,
                           charset="utf8mb4")


def run_sql(url: str, *statements: str) -> list[Any]:
    conn = connect(url)
    try:
        out: list[Any] = []
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
                out = list(cur.fetchall())
        return out
    finally:
        conn.close()


def params(url: str, **extra: Any) -> dict[str, Any]:
    u = urlparse(url)
    return {"host": "127.0.0.1", "port": u.port or 3306, "user": "root", "database": u.path.lstrip("/"), **extra}


def options(cls: type, url: str, **extra: Any) -> Any:
    parsed, problems = parse(cls, params(url, **extra))
    assert not problems, problems.items
    return parsed


def awkward_source(url: str, zero_dates: bool = True) -> None:
    """Table ``src``: the awkward-types rows (tests/mysql_types_table.py), FLOATs the text protocol would round."""
    rows = [tuple(NO_ZERO_DATES.get(i, v) for i, v in enumerate(r)) if r[0] == 4 and not zero_dates else r
            for r in TYPE_ROWS]
    fill_types_table(url, "copy_a", "copy_b", rows=rows, strict=True, then=[
        "UPDATE src SET fl = CASE id WHEN 1 THEN 16777216 WHEN 2 THEN 123456.7890625 "
        "WHEN 4 THEN 3.4028234663852886e38 END"])


DECLARED = {"dec65": (65, 30), "d2": (10, 2)}


def read_all(url: str, **extra: Any) -> tuple[Schema, list[tuple[Any, ...]]]:
    """``src`` as the mysql reader hands it on: its schema (with the decimals' declared precision and
    scale, which a decimal's Arrow type keeps) and its rows (tuples), by id."""
    assert PLUGIN.source is not None
    opts = options(MysqlReaderOptions, url, table="src", **extra)
    ctx = read_ctx()
    reader = PLUGIN.source.reader(opts, ctx)
    schema = Schema(tuple(replace(c, precision=DECLARED[c.name][0], scale=DECLARED[c.name][1])
                          if c.name in DECLARED else c for c in reader.schema().columns))
    splits = PLUGIN.source.splitter(opts, ctx).split(2)
    rows = sorted((tuple(row) for split in splits for batch in reader.read(split) for row in tuples_of(batch)),
                  key=lambda r: r[0])
    return schema, rows


def checksum(url: str, table: str) -> int:
    return int(run_sql(url, f"CHECKSUM TABLE `{table}`")[0][1])


def write(url: str, schema: Schema, batches: list[Sequence[Any]], destination: str = "out",
          **extra: Any) -> list[WriteResult]:
    """A destination's lifecycle (prepare, one writer, commit) writing ``batches``."""
    assert PLUGIN.sink is not None
    opts = options(MysqlWriterOptions, url, **extra)
    ctx = write_ctx(schema, concurrency=1, destination=destination)
    periphery = PLUGIN.sink.periphery(opts, ctx)
    periphery.prepare()
    writer = PLUGIN.sink.writer(opts, ctx, periphery, 0)
    writer.open()
    try:
        results = [writer.write(as_batch(batch)) for batch in batches]
    finally:
        writer.close()
    periphery.commit()
    periphery.release()
    return results


# ---------------------------------------------------------------------------------------------------------


def test_the_arrow_encoder_writes_the_row_encoders_payload_for_the_awkward_table(mysql_db: str) -> None:
    awkward_source(mysql_db)
    schema, rows = read_all(mysql_db)
    types = [c.type for c in schema.columns]
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    with pytest.raises(BadValues) as refused:  # zero dates kept as text have no Arrow form
        arrow_from_rows(schema, rows)
    assert set(refused.value.bad) == {3}
    plain = rows[:3]
    assert arrow_payload(arrow_from_rows(schema, plain)).to_pybytes() == load_payload(types, plain)
    schema, rows = read_all(mysql_db, zero_dates="null")
    assert arrow_payload(arrow_from_rows(schema, rows)).to_pybytes() == load_payload(types, rows)


def test_an_arrow_batch_is_loaded_exactly_without_making_tuples(mysql_db: str) -> None:
    awkward_source(mysql_db, zero_dates=False)
    schema, rows = read_all(mysql_db)
    batch = Batch.of_arrow(arrow_from_rows(schema, rows))
    for table in ("copy_a", "copy_b"):  # two destinations, one batch
        (result,) = write(mysql_db, schema, [batch], destination=table, table=table, method="load_data",
                          batch_size=3)
        assert result.written == 4 and not result.rejected
    assert checksum(mysql_db, "copy_a") == checksum(mysql_db, "src") == checksum(mysql_db, "copy_b")
    assert batch._rows is None  # no row was made into a tuple
    memo = batch_memo(batch)
    assert memo is not None and len([k for k in memo if k[:2] == ("mysql", "load_data")]) == 2  # built once


def test_a_copy_through_the_cli_holds_exactly_the_source(ws: Workspace, mysql_db: str) -> None:
    awkward_source(mysql_db, zero_dates=False)
    spec = {"source": {"plugin": "mysql", "params": params(mysql_db, table="src", split_pk="id")},
            "destinations": [{"id": "a", "plugin": "mysql", "params": params(mysql_db, table="copy_a",
                                                                              method="load_data")},
                             {"id": "b", "plugin": "mysql", "params": params(mysql_db, table="copy_b",
                                                                              method="load_data", batch_size=1)}]}
    proc = ws.run("--task-id", str(ws.submit(spec)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert checksum(mysql_db, "copy_a") == checksum(mysql_db, "src") == checksum(mysql_db, "copy_b")
    assert ws.show(1)["result"]["destinations"]["a"]["rows_written"] == 4


SCHEMA = Schema((Column("id", "int"), Column("name", "string"), Column("score", "float")))


@pytest.mark.parametrize("batch_size", [4, 100])
def test_dirty_rows_of_an_arrow_batch_are_rejected_one_by_one(mysql_db: str, batch_size: int) -> None:
    run_sql(mysql_db, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(5), score DOUBLE)",
            "INSERT INTO t VALUES (3, 'old', 0)")
    rows = [(i, f"n{i}", i + 0.5) for i in range(1, 11)]
    rows[4] = (5, "far too long", 5.5)
    rows[6] = (7, "inf", math.inf)
    (result,) = write(mysql_db, SCHEMA, [Batch.of_arrow(arrow_from_rows(SCHEMA, rows))], table="t",
                      method="load_data", batch_size=batch_size)
    reasons = {r.row[0]: r.reason for r in result.rejected}
    assert set(reasons) == {3, 5, 7} and result.written == 7
    assert reasons[3].startswith("(1062) Duplicate entry '3'") and reasons[5].startswith("(1406) Data too long")
    assert reasons[7] == "ValueError: column score: MySQL cannot store the float inf"
    assert run_sql(mysql_db, "SELECT id, name, score FROM t ORDER BY id") == [
        (1, "n1", 1.5), (2, "n2", 2.5), (3, "old", 0.0), (4, "n4", 4.5), (6, "n6", 6.5), (8, "n8", 8.5),
        (9, "n9", 9.5), (10, "n10", 10.5)]


def test_a_tuple_batch_arrow_cannot_hold_is_written_as_before(mysql_db: str) -> None:
    """A zero date kept as text and a bool in an int column have no Arrow form; the batch is written
    by the row encoder, every row (none is rejected for it)."""
    run_sql(mysql_db, "CREATE TABLE t (id INT PRIMARY KEY, d DATE, n INT)")
    schema = Schema((Column("id", "int"), Column("d", "date"), Column("n", "int")))
    batch = Batch.of_rows([(1, "0000-00-00", 5), (2, date(2024, 2, 29), True), (3, None, None)], schema)
    (result,) = write(mysql_db, schema, [batch], table="t", method="load_data")
    assert result.written == 3 and not result.rejected
    assert run_sql(mysql_db, "SELECT id, CAST(d AS CHAR), n FROM t ORDER BY id") == [
        (1, "0000-00-00", 5), (2, "2024-02-29", 1), (3, None, None)]


@pytest.mark.parametrize("method", ["load_data", "insert"])
def test_a_decimal_with_more_places_than_the_target_column_is_refused_not_rounded(mysql_db: str, method: str) -> None:
    # MySQL would round 1.2345 into a DECIMAL(10,2) with a note only: the writer refuses that row, naming the
    # column, the value and the column's type. 1.2300 has no digit beyond the scale: it goes in.
    run_sql(mysql_db, "CREATE TABLE t (id INT PRIMARY KEY, amount DECIMAL(10,2))")
    schema = Schema((Column("id", "int"), Column("amount", "decimal", precision=12, scale=4)))
    rows = [(1, Decimal("1.2300")), (2, Decimal("1.2345")), (3, None), (4, Decimal("-0.0050")),
            (5, Decimal("12345678.9900"))]
    (result,) = write(mysql_db, schema, [Batch.of_arrow(arrow_from_rows(schema, rows))], table="t", method=method)
    reasons = {r.row[0]: r.reason for r in result.rejected}
    assert reasons == {
        2: "ValueError: column amount: 1.2345 has more decimal places than decimal(10,2) holds (MySQL would round it)",
        4: "ValueError: column amount: -0.0050 has more decimal places than decimal(10,2) holds (MySQL would "
           "round it)"}
    assert result.written == 3
    assert run_sql(mysql_db, "SELECT id, CAST(amount AS CHAR) FROM t ORDER BY id") == [
        (1, "1.23"), (3, None), (5, "12345678.99")]

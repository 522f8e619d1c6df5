"""The mysql reader against the real MariaDB yields Arrow batches: exactly the schema's Arrow types, and
tuples exactly the values its conversion before Arrow gave (tests/mysql_old_read.py) on the awkward-types
table, pushed-down projections, query sources, the pymysql fallback and dirty rows included."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pymysql
import pytest

from tests.mysql_old_read import old_read
from tests.mysql_types_table import TYPE_COLUMNS, TYPE_ROWS, fill_types_table
from tests.plugin_helpers import ListDirtySink, parse, read_ctx
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, PushedQuery, Schema, Split
from wormhole.plugins.batch import arrow_schema, rows_of
from wormhole.plugins.mysql.connection import ENCODERS
from wormhole.plugins.mysql.options import MysqlReaderOptions
from wormhole.plugins.mysql.protocol import ColumnStream
from wormhole.plugins.values import JSON_NULL

pytestmark = pytest.mark.mysql

PLUGIN = registry.get("mysql")


def connect(url: str, **kw: Any) -> pymysql.Connection:
    u = urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root", password=u.password or "",
                           database=u.path.lstrip("/"), autocommit=True, charset="utf8mb4", **kw)


def run_sql(url: str, *statements: str) -> None:
    conn = connect(url)
    with conn.cursor() as cur:
        for s in statements:
            cur.execute(s)
    conn.close()


def options(url: str, **extra: Any) -> MysqlReaderOptions:
    u = urlparse(url)
    found, problems = parse(MysqlReaderOptions, {"host": "127.0.0.1", "port": u.port or 3306, "user": "root",
                                                 "database": u.path.lstrip("/"), **extra})
    assert not problems, problems.items
    return found


def read(opts: MysqlReaderOptions, sink: ListDirtySink | None = None, pushed: PushedQuery | None = None,
         ) -> tuple[Schema, list[tuple[Split, Any]]]:
    """The reader's schema and every (split, batch) it yields, in tiny batches (many per split)."""
    assert PLUGIN.source is not None
    ctx = read_ctx(sink, batch_rows=3)
    schema = PLUGIN.source.reader(opts, ctx).schema()
    splits = PLUGIN.source.splitter(opts, ctx).split(2)
    if pushed is not None:
        splits = [dataclasses.replace(s, params={**s.params, "pushdown": pushed}) for s in splits]
    reader = PLUGIN.source.reader(opts, ctx)
    return schema, [(split, batch) for split in splits for batch in reader.read(split)]


def before(url: str, splits: list[Split], zero_dates: str, pushed: PushedQuery | None = None) -> list[Any]:
    """The rows the reader gave before Arrow: the same split queries, read raw, converted the old way."""
    from wormhole.plugins.mysql.reader import MysqlReader

    conn = connect(url, conv=ENCODERS, use_unicode=False)
    rows: list[Any] = []
    with conn.cursor() as cur:
        for split in {s.id: s for s in splits}.values():
            sql, args, kinds = split.params["sql"], tuple(split.params["args"] or ()), split.params["kinds"]
            if pushed is not None:
                sql, args, kinds, _ = MysqlReader.pushed_sql(split, pushed)
            cur.execute(sql, args or None)
            raw = cur.fetchall()
            if raw:
                rows += old_read(kinds, [list(c) for c in zip(*raw, strict=True)], zero_dates)[0]
    conn.close()
    return sorted(rows, key=lambda r: r[0])


@pytest.fixture(name="types_db")
def fixture_types_db(mysql_db: str) -> str:
    fill_types_table(mysql_db, then=[
        "INSERT INTO src (id, js, dec65, d2) VALUES (5, 'null', '-0.000000000000000000000000000001', "
        "'-12345678.90'), (6, '\"text\"', 0, 0)",
        "UPDATE src SET fl = CASE id WHEN 1 THEN 16777216 WHEN 2 THEN 123456.7890625 "
        "WHEN 4 THEN 3.4028234663852886e38 WHEN 5 THEN 1.1 END"])
    return mysql_db


def check_batches(schema: Schema, batches: list[tuple[Split, Any]], projected: Schema | None = None) -> None:
    want = arrow_schema(projected or schema)
    for _, batch in batches:
        if isinstance(batch, Batch) and batch.native_arrow is not None:
            assert batch.arrow_form.schema.equals(want, check_metadata=True), batch.arrow_form.schema


@pytest.mark.parametrize("zero_dates", ["null", "reject", "keep"])
def test_the_awkward_types_table_reads_as_arrow_with_the_old_values(types_db: str, zero_dates: str) -> None:
    sink = ListDirtySink()
    schema, batches = read(options(types_db, table="src", split_pk="id", zero_dates=zero_dates), sink)
    fields = {f.name: f for f in arrow_schema(schema)}
    assert fields["bu"].type == pa.uint64() and fields["bi"].type == pa.int64()
    assert fields["dec65"].type == pa.decimal256(65, 30) and fields["d2"].type == pa.decimal128(10, 2)
    assert fields["js"].type == pa.string() and fields["js"].metadata == {b"wormhole.type": b"json"}
    assert fields["bl"].type == pa.binary() and fields["mt"].type == pa.string()
    assert fields["dtm"].type == pa.timestamp("us") and fields["dt"].type == pa.date32()
    assert not fields["id"].nullable and fields["ti"].nullable
    check_batches(schema, batches)
    got = sorted((row for _, batch in batches for row in rows_of(batch)), key=lambda r: r[0])
    assert repr(got) == repr(before(types_db, [s for s, _ in batches], zero_dates))
    arrow = [b for _, b in batches if b.native_arrow is not None]
    exact = [b for _, b in batches if b.exact]
    if zero_dates == "keep":  # only the batch with row 4's zero dates, kept as text, has exact columns
        assert [[r[0] for r in rows_of(b)] for b in exact] == [[4]] and arrow
        assert all(b.arrow_form.schema.field("dt").metadata[b"wormhole.exact"] == b"text" for b in exact)
    else:
        assert not exact and sum(len(b) for b in arrow) == len(got)
    by_id = {r[0]: r for r in got}
    assert by_id[1][10] == 2**64 - 1 and by_id[1][31] == 1023 and by_id[1][13] == 16777216.0
    assert by_id[1][11] == Decimal(TYPE_ROWS[0][11]) and str(by_id[5][11]) == "-1E-30"
    assert by_id[1][26] == "838:59:59.000000" and by_id[1][16] == TYPE_ROWS[0][16]
    assert by_id[1][21] == TYPE_ROWS[0][21] and by_id[2][21] == b""
    assert by_id[5][28] is JSON_NULL and by_id[6][28] == "text" and by_id[3][28] is None
    assert (4 in by_id) == (zero_dates != "reject")
    assert [r.row[0] for r in sink.rows] == ([4] if zero_dates == "reject" else [])


def test_a_pushed_projection_reads_as_the_projected_schema(types_db: str) -> None:
    keep = (0, 10, 11, 12, 23, 28, 31)
    pushed = PushedQuery(keep=keep, where="`id` <= \x00", args=(4,), plan="test")
    schema, batches = read(options(types_db, table="src", split_pk="id", zero_dates="null"), pushed=pushed)
    projected = Schema(tuple(schema.columns[k] for k in keep))
    assert batches and all(isinstance(b, Batch) and b.native_arrow is not None for _, b in batches)
    check_batches(schema, batches, projected)
    got = sorted((row for _, batch in batches for row in rows_of(batch)), key=lambda r: r[0])
    assert [r[0] for r in got] == [1, 2, 3, 4]
    assert repr(got) == repr(before(types_db, [s for s, _ in batches], "null", pushed))
    assert [TYPE_COLUMNS[k] for k in keep] == list(projected.names)


def test_a_query_source_carries_its_decimals_shape(types_db: str) -> None:
    query = "SELECT id, d2 * 3 AS d3, SUM(dec65) OVER (ORDER BY id) AS running, fl, bu, js FROM src WHERE id <> 3"
    schema, batches = read(options(types_db, query=query))
    fields = {f.name: f.type for f in arrow_schema(schema)}
    assert fields["d3"] == pa.decimal128(11, 2) and fields["bu"] == pa.uint64()
    assert isinstance(fields["running"], pa.Decimal256Type) and fields["running"].scale == 30
    assert all(isinstance(b, Batch) and b.native_arrow is not None for _, b in batches)
    check_batches(schema, batches)
    got = sorted((row for _, batch in batches for row in rows_of(batch)), key=lambda r: r[0])
    assert repr(got) == repr(before(types_db, [s for s, _ in batches], "keep"))
    assert got[0][1] == Decimal("37037036.70")


def test_the_pymysql_fallback_reads_the_same_batches(types_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, fast = read(options(types_db, table="src", split_pk="id", zero_dates="null"))
    monkeypatch.setattr(ColumnStream, "usable", staticmethod(lambda cursor: False))
    schema, slow = read(options(types_db, table="src", split_pk="id", zero_dates="null"))
    assert all(isinstance(b, Batch) and b.native_arrow is not None for _, b in slow)
    check_batches(schema, slow)
    rows = sorted((row for _, batch in slow for row in rows_of(batch)), key=lambda r: r[0])
    assert repr(rows) == repr(sorted((row for _, batch in fast for row in rows_of(batch)), key=lambda r: r[0]))


def test_a_json_column_holding_text_that_is_not_json_rejects_that_row(mysql_db: str) -> None:
    # MariaDB's JSON is LONGTEXT with a json_valid CHECK, which a session can switch off.
    run_sql(mysql_db, "CREATE TABLE j (id INT PRIMARY KEY, js JSON, n INT)",
            "INSERT INTO j VALUES (1, '{\"a\": 1}', 10), (2, 'null', 20), (4, NULL, 40)",
            "SET SESSION check_constraint_checks = 0", "INSERT INTO j VALUES (3, 'not json', 30)")
    sink = ListDirtySink()
    schema, batches = read(options(mysql_db, table="j"), sink)
    assert schema.columns[1].type == "json"
    assert all(isinstance(b, Batch) and b.native_arrow is not None for _, b in batches)
    assert sorted(row for _, batch in batches for row in rows_of(batch)) == [(1, {"a": 1}, 10), (2, JSON_NULL, 20),
                                                                    (4, None, 40)]
    assert [(r.row, r.reason[:46]) for r in sink.rows] == [((3, None, 30),
                                                            "column 1: cannot read b'not json' as json: Exp")]

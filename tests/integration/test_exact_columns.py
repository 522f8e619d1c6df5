"""Values Arrow cannot hold exactly, on the real stores (issue 36, item 4): a MySQL batch with zero dates and
a DECIMAL(65,0) beyond any 64-bit integer is one Arrow batch, the date column an exact column
(``wormhole.exact``), and every destination gets each value it can hold digit for digit; a PostgreSQL
``numeric`` without a declared scale reaches every store as equal values.

MySQL -> PostgreSQL, parquet, sqlite and MySQL; PostgreSQL -> MySQL, parquet and sqlite. One run per source."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, execute, q
from tests.pg_helpers import Schemas, pg_execute, pg_schemas
from tests.plugin_helpers import parse, read_ctx
from tests.spark_helpers import run_task
from wormhole.config import EngineConf, PathsConf
from wormhole.plugins import registry
from wormhole.plugins.batch import Batch, exact_codec, rows_of
from wormhole.plugins.mysql.options import MysqlReaderOptions

pytestmark = [pytest.mark.mysql, pytest.mark.postgres]

__all__ = ["pg_schemas"]  # the fixture, used by name

BIG = 10**64 - 1
"""A DECIMAL(65,0) value: 64 nines, far beyond 64 bits."""
MYSQL_ROWS = [(1, "2024-02-29", BIG), (2, "0000-00-00", -BIG), (3, None, 12), (4, "2020-00-10", None)]
"""id, a DATE (two zero or partial dates), a DECIMAL(65,0)."""
NUMERIC = {1: "1.50", 2: "0.000000000000000001", 3: "12345678901234567890.123456789012345678", 4: "-7", 5: None}
"""id -> a PostgreSQL ``numeric`` (no precision, no scale) as its text (the reader gives such a column as an
exact column of each value's own text: tests/integration/test_pg_free_numeric.py has the values beyond these)."""


def _conf(tmp_path: Path) -> EngineConf:
    return EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))


def _digest(values: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(repr(sorted(values)).encode()).hexdigest()


def test_a_mysql_batch_with_a_zero_date_and_a_wide_decimal_is_one_arrow_batch_every_store_reads_exactly(
        dbs: Databases, server: Server, pg_schemas: Schemas, tmp_path: Path) -> None:
    admin = server.connect()
    db = dbs.create("exact")
    execute(admin, "SET sql_mode = ''")  # zero dates
    for table in ("src", "dst"):
        execute(admin, f"CREATE TABLE {q(db)}.{table} (id INT PRIMARY KEY, d DATE, big DECIMAL(65,0))")
    with admin.cursor() as cur:
        cur.executemany(f"INSERT INTO {q(db)}.src VALUES (%s, %s, %s)", MYSQL_ROWS)

    # The reader's batch: Arrow columns, the date column exact (its text), the decimal typed (decimal256).
    options, problems = parse(MysqlReaderOptions, server.params(db, table="src"))
    assert not problems, problems.items
    source = registry.source("mysql")
    ctx = read_ctx()
    reader = source.reader(options, ctx)
    reader.schema()
    (batch,) = [b for split in source.splitter(options, ctx).split(1) for b in reader.read(split)]
    assert isinstance(batch, Batch)
    fields = batch.arrow_form.schema
    assert exact_codec(fields.field("d")) == b"text" and exact_codec(fields.field("big")) is None
    assert str(fields.field("big").type) == "decimal256(65, 0)"
    assert sorted(rows_of(batch)) == [(1, date(2024, 2, 29), Decimal(BIG)), (2, "0000-00-00", Decimal(-BIG)),
                                      (3, None, Decimal(12)), (4, "2020-00-10", None)]

    schema = pg_schemas.create("exact")
    result, _ = run_task(_conf(tmp_path), {
        "source": {"plugin": "mysql", "params": server.params(db, table="src")},
        "destinations": [
            {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="dst")},
            {"id": "postgres", "plugin": "postgres",
             "params": pg_schemas.server.params(schema, table="t", create_table=True)},
            {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.sqlite"), "table": "t"}},
            {"id": "parquet", "plugin": "file", "params": {"path": str(tmp_path / "pq"), "format": "parquet"}}],
        "settings": {"error_limit": {"record": 10}}})
    assert result.exit_code == 201, result.result  # the zero dates: no such date in postgres or parquet
    rejected = {d: r["rows_rejected"] for d, r in result.result["destinations"].items()}
    # no zero date in postgres, sqlite or parquet; parquet's decimal(38,18) holds no 64-digit value
    assert rejected == {"mysql": 0, "postgres": 2, "sqlite": 2, "parquet": 3}

    with admin.cursor() as cur:
        cur.execute(f"SELECT id, CAST(d AS CHAR), CAST(big AS CHAR) FROM {q(db)}.dst")
        mysql_rows = [tuple(r) for r in cur.fetchall()]
    admin.close()
    want = [(i, d, None if b is None else str(b)) for i, d, b in MYSQL_ROWS]
    assert _digest(mysql_rows) == _digest(want)  # the zero dates too, as their text
    pg_rows = pg_execute(pg_schemas.conn, f'SELECT id, d::text, big::text FROM "{schema}".t')
    assert sorted(pg_rows) == [(1, "2024-02-29", str(BIG)), (3, None, "12")]
    lite = sqlite3.connect(tmp_path / "t.sqlite")
    lite_rows = sorted(lite.execute("SELECT id, d, CAST(big AS TEXT) FROM t").fetchall())
    lite.close()
    assert lite_rows == [(1, "2024-02-29", str(BIG)), (3, None, "12")]
    table = pq.read_table(str(tmp_path / "pq"))
    got = sorted(zip(table.column("id").to_pylist(), table.column("big").to_pylist(), strict=True))
    assert got == [(3, Decimal(12))]


def test_a_postgres_numeric_of_no_declared_scale_keeps_each_values_digits_in_every_store(
        dbs: Databases, server: Server, pg_schemas: Schemas, tmp_path: Path) -> None:
    schema = pg_schemas.create("exact")
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".src (id int PRIMARY KEY, n numeric)')
    for i, text in NUMERIC.items():
        pg_execute(pg_schemas.conn, f'INSERT INTO "{schema}".src VALUES (%s, %s::numeric)', (i, text))
    admin = server.connect()
    db = dbs.create("exact")
    execute(admin, f"CREATE TABLE {q(db)}.dst (id INT PRIMARY KEY, n DECIMAL(65,30))")
    result, _ = run_task(_conf(tmp_path), {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src")},
        "destinations": [
            {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="dst")},
            {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.sqlite"), "table": "t"}},
            {"id": "parquet", "plugin": "file", "params": {"path": str(tmp_path / "pq"), "format": "parquet"}}],
        "settings": {"error_limit": {"record": 10}}})
    assert result.exit_code == 0, result.result
    with admin.cursor() as cur:
        cur.execute(f"SELECT id, n FROM {q(db)}.dst")
        mysql_rows = {int(r[0]): r[1] for r in cur.fetchall()}
    admin.close()
    assert mysql_rows == {i: None if t is None else Decimal(t) for i, t in NUMERIC.items()}  # equal values
    lite = sqlite3.connect(tmp_path / "t.sqlite")
    lite_rows = dict(lite.execute("SELECT id, n FROM t").fetchall())
    lite.close()
    assert lite_rows == NUMERIC  # the text itself (1.50, not 1.5), in the TEXT column the run creates
    table = pq.read_table(str(tmp_path / "pq"))  # decimal(38,18)
    got = dict(zip(table.column("id").to_pylist(), table.column("n").to_pylist(), strict=True))
    assert got == {i: None if t is None else Decimal(t) for i, t in NUMERIC.items()}
    rejected = {d: r["rows_rejected"] for d, r in result.result["destinations"].items()}
    assert rejected == {"mysql": 0, "sqlite": 0, "parquet": 0}

"""A PostgreSQL ``numeric`` of no declared precision and scale, read exactly: the reader's batch holds each
value's own text (an exact column), so no value bends on the way. PostgreSQL -> PostgreSQL keeps the text
(``::text`` equal), MySQL ``DECIMAL(65,30)`` and parquet (``decimal(38,18)``) take each value they hold and
refuse the others' rows with the reason, sqlite (a ``TEXT`` column it creates) keeps the text."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, execute, q
from tests.pg_helpers import Schemas, pg_execute, pg_schemas
from tests.plugin_helpers import parse, read_ctx
from tests.spark_helpers import dirty_lines, run_task
from wormhole.config import EngineConf, PathsConf
from wormhole.plugins import registry
from wormhole.plugins.batch import Batch, exact_codec, rows_of
from wormhole.plugins.postgres.options import PostgresReaderOptions

pytestmark = [pytest.mark.mysql, pytest.mark.postgres]

__all__ = ["pg_schemas"]  # the fixture, used by name

VALUES = {1: "1.50", 2: "0.000000000000000000001", 3: "123456789012345678901234567890123456789012.5",
          4: "NaN", 5: "-0.0", 6: "-7", 7: None}
"""id -> the text inserted into a ``numeric`` column (PostgreSQL's numeric has no negative zero: -0.0 is 0.0)."""
STORED = {**VALUES, 5: "0.0"}
"""id -> the source's ``n::text``."""


def _source(pg_schemas: Schemas) -> str:
    schema = pg_schemas.create("num")
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".src (id int PRIMARY KEY, n numeric)')
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".dst (id int PRIMARY KEY, n numeric)')
    for i, text in VALUES.items():
        pg_execute(pg_schemas.conn, f'INSERT INTO "{schema}".src VALUES (%s, %s::numeric)', (i, text))
    assert dict(pg_execute(pg_schemas.conn, f'SELECT id, n::text FROM "{schema}".src')) == STORED
    return schema


def _texts(pg_schemas: Schemas, schema: str, table: str) -> dict[int, str | None]:
    return dict(pg_execute(pg_schemas.conn, f'SELECT id, n::text FROM "{schema}".{table}'))


def _conf(tmp_path: Path) -> EngineConf:
    return EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))


def _run(tmp_path: Path, pg_schemas: Schemas, schema: str, destinations: list[dict[str, Any]]) -> Any:
    result, _ = run_task(_conf(tmp_path), {
        "source": {"plugin": "postgres", "params": pg_schemas.server.params(schema, table="src")},
        "destinations": destinations, "settings": {"error_limit": {"record": 10}}})
    return result


def test_the_reader_gives_a_free_scale_numeric_as_each_values_own_text(pg_schemas: Schemas) -> None:
    schema = _source(pg_schemas)
    options, problems = parse(PostgresReaderOptions, pg_schemas.server.params(schema, table="src"))
    assert not problems, problems.items
    source = registry.source("postgres")
    ctx = read_ctx()
    reader = source.reader(options, ctx)
    reader.schema()
    (batch,) = [b for split in source.splitter(options, ctx).split(1) for b in reader.read(split)]
    assert isinstance(batch, Batch)
    field = batch.arrow_form.schema.field("n")
    assert exact_codec(field) == b"text" and field.metadata[b"wormhole.type"] == b"decimal"
    texts = dict(zip(batch.arrow_form.column("id").to_pylist(), batch.arrow_form.column("n").to_pylist(), strict=True))
    assert texts == {i: None if t is None else t.encode() for i, t in STORED.items()}
    values = dict(rows_of(batch))  # Decimal of the text: its scale kept (1.50, not 1.5)
    assert {i: None if v is None else str(v) for i, v in values.items()} == {
        i: None if t is None else str(Decimal(t)) for i, t in STORED.items()}
    assert values[1].as_tuple().exponent == -2 and values[4].is_nan()


def test_postgres_to_postgres_alone_keeps_each_numerics_text(pg_schemas: Schemas, tmp_path: Path) -> None:
    # The only destination declares the source's types: the binary rows go as they are (passthrough).
    schema = _source(pg_schemas)
    result = _run(tmp_path, pg_schemas, schema, [
        {"id": "pg", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="dst")}])
    assert result.exit_code == 0, result.result
    assert _texts(pg_schemas, schema, "dst") == STORED


def test_a_free_scale_numeric_reaches_mysql_sqlite_and_parquet_exactly_or_its_row_is_refused(
        dbs: Databases, server: Server, pg_schemas: Schemas, tmp_path: Path) -> None:
    schema = _source(pg_schemas)
    admin = server.connect()
    db = dbs.create("num")
    execute(admin, f"CREATE TABLE {q(db)}.dst (id INT PRIMARY KEY, n DECIMAL(65,30))")
    result = _run(tmp_path, pg_schemas, schema, [
        {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="dst")},
        {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.sqlite"), "table": "t"}},
        {"id": "parquet", "plugin": "file", "params": {"path": str(tmp_path / "pq"), "format": "parquet"}}])
    assert result.exit_code == 201, result.result  # rows refused
    rejected = {d: r["rows_rejected"] for d, r in result.result["destinations"].items()}
    assert rejected == {"mysql": 2, "sqlite": 0, "parquet": 3}
    reasons = {(d["origin"], d["row"][0]): d["reason"] for d in map(json.loads, dirty_lines(_conf(tmp_path), result))}
    assert set(reasons) == {("mysql", 3), ("mysql", 4), ("parquet", 2), ("parquet", 3), ("parquet", 4)}
    assert "Out of range value for column 'n'" in reasons["mysql", 3]  # 42 digits before the point: 35 fit
    assert "NaN" in reasons["mysql", 4]
    assert all(reasons["parquet", i].startswith("column n: ") for i in (2, 3, 4))  # decimal(38,18)

    with admin.cursor() as cur:
        cur.execute(f"SELECT id, CAST(n AS CHAR) FROM {q(db)}.dst")
        mysql_rows = dict(cur.fetchall())
    admin.close()
    kept = {i: t for i, t in STORED.items() if i not in (3, 4)}
    assert mysql_rows == {i: None if t is None else f"{Decimal(t):.30f}" for i, t in kept.items()}  # scale 30
    lite = sqlite3.connect(tmp_path / "t.sqlite")
    assert dict(lite.execute("SELECT id, n FROM t").fetchall()) == STORED  # a TEXT column: the text itself
    lite.close()
    table = pq.read_table(str(tmp_path / "pq"))
    got = dict(zip(table.column("id").to_pylist(), table.column("n").to_pylist(), strict=True))
    assert got == {i: None if t is None else Decimal(t) for i, t in STORED.items() if i not in (2, 3, 4)}


def test_postgres_to_postgres_beside_other_stores_keeps_each_numerics_text(
        pg_schemas: Schemas, tmp_path: Path) -> None:
    # Beside a store of another kind (and into a table the run creates) the batch is values: the exact column.
    schema = _source(pg_schemas)
    result = _run(tmp_path, pg_schemas, schema, [
        {"id": "pg", "plugin": "postgres", "params": pg_schemas.server.params(schema, table="dst")},
        {"id": "made", "plugin": "postgres",
         "params": pg_schemas.server.params(schema, table="made", create_table=True)},
        {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.sqlite"), "table": "t"}}])
    assert result.exit_code == 0, result.result
    assert _texts(pg_schemas, schema, "dst") == STORED
    assert _texts(pg_schemas, schema, "made") == STORED


def test_a_free_scale_numeric_with_more_places_than_a_mysql_column_is_refused_not_rounded(
        dbs: Databases, server: Server, pg_schemas: Schemas, tmp_path: Path) -> None:
    # MySQL would round 1E-31 to 0 in a DECIMAL(65,30) without a word (a note, not a warning): the writer
    # refuses the row instead, naming the column, the value and the column's type. Rows that fit go in.
    schema = pg_schemas.create("num")
    pg_execute(pg_schemas.conn, f'CREATE TABLE "{schema}".src (id int PRIMARY KEY, n numeric)')
    pg_execute(pg_schemas.conn, f'INSERT INTO "{schema}".src VALUES (1, 1E-31), (2, 1.0000000000000000000000000000005),'
                                " (3, 2.5000000000000000000000000000000000), (4, NULL), (5, 'NaN')")
    admin = server.connect()
    db = dbs.create("num")
    execute(admin, f"CREATE TABLE {q(db)}.dst (id INT PRIMARY KEY, n DECIMAL(65,30))")
    result = _run(tmp_path, pg_schemas, schema, [
        {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="dst")}])
    with admin.cursor() as cur:
        cur.execute(f"SELECT id, CAST(n AS CHAR) FROM {q(db)}.dst")
        landed = dict(cur.fetchall())
    admin.close()
    assert result.exit_code == 201, result.result  # rows refused, within the error limit
    assert landed == {3: "2.500000000000000000000000000000", 4: None}, landed  # trailing zeros are no rounding
    assert result.result["destinations"]["mysql"]["rows_rejected"] == 3
    reasons = {d["row"][0]: d["reason"] for d in map(json.loads, dirty_lines(_conf(tmp_path), result))}
    assert set(reasons) == {1, 2, 5}
    assert reasons[1] == ("ValueError: column n: 0.0000000000000000000000000000001 has more decimal places than "
                          "decimal(65,30) holds (MySQL would round it)")
    assert "column n: " in reasons[2] and "1.0000000000000000000000000000005" in reasons[2]
    assert reasons[5] == "ValueError: column n: MySQL DECIMAL cannot hold NaN"

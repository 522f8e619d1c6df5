"""The table the postgres destination's create_table makes, as DDL text (no server): Greenplum's
DISTRIBUTED BY is tested here only, since PostgreSQL refuses the clause."""

from __future__ import annotations

from wormhole.plugins.base import Column, Schema, WriteContext
from wormhole.plugins.postgres.ddl import column_type, create_table_sql
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.sql.staging import default_name

SCHEMA = Schema((Column("id", "int", nullable=False), Column("Name", "string"),
                 Column("amount", "decimal", precision=12, scale=2)))


def test_distributed_by_is_appended_to_the_create_table() -> None:
    assert create_table_sql('"s"."t"', ("id", "Name", "amount"), SCHEMA, ("id", "Name")) == (
        'CREATE TABLE "s"."t" ("id" bigint NOT NULL, "Name" text, "amount" numeric(12,2)) '
        'DISTRIBUTED BY ("id", "Name")')
    assert create_table_sql('"s"."t"', ("a", "b", "c"), SCHEMA).endswith('"c" numeric(12,2))')


def test_a_declaration_of_another_store_or_type_falls_back_to_the_logical_type() -> None:
    assert column_type(Column("x", "int", native="tinyint(1)")) == "smallint"
    assert column_type(Column("x", "string", native="tinyint(1)")) == "text"  # a transform changed its type
    assert column_type(Column("x", "string", native="character varying(5)")) == "text"  # not MySQL's
    assert column_type(Column("x", "int", unsigned=True)) == "numeric(20)"
    assert column_type(Column("x", "decimal")) == "numeric"


def test_a_postgres_array_keeps_its_declaration_unless_a_transform_changed_its_type() -> None:
    assert column_type(Column("x", "json", native="numeric(12,3)[]")) == "numeric(12,3)[]"
    assert column_type(Column("x", "json", native="character varying(5)[]")) == "character varying(5)[]"
    assert column_type(Column("x", "string", native="integer[]")) == "text"
    assert column_type(Column("x", "json")) == "jsonb"  # an array of a query, or JSON of another store


def test_the_staging_name_is_cut_to_63_bytes_at_a_character_boundary() -> None:
    ctx = WriteContext(task_id=12, run_id=3, destination="out", schema=SCHEMA, batch_rows=10, concurrency=1,
                       taskdb_id="ab12cd34")
    name = default_name(POSTGRES, "é" * 40, ctx, 3)
    assert name.endswith("__wh12_3_ab12cd34") and len(name.encode()) <= 63 and name.startswith("é")


def test_plan_names_how_a_destination_loads() -> None:
    from wormhole.plugins import registry
    from wormhole.plugins.postgres.options import PostgresWriterOptions

    sink = registry.get("postgres").sink
    assert sink is not None and sink.plan_load is not None
    # Port 1: nothing listens, so whether the target exists stays unknown (the e2e tests plan real targets).
    upsert = PostgresWriterOptions(user="u", port=1, database="d", table="t", write_mode="upsert")
    staged = PostgresWriterOptions(user="u", port=1, database="d", table="t", load="staging")
    text = PostgresWriterOptions(user="u", port=1, database="d", table="t", copy_format="text")
    undecoded = "; a postgres source's binary rows as they are when every destination declares its column types"
    unreached = " (the target cannot be reached: "
    assert sink.plan_load(upsert, SCHEMA, False).startswith(
        "COPY binary from Arrow into a temporary table, then INSERT ... ON CONFLICT if the target's column types "
        "allow (chosen at prepare), else text" + undecoded + unreached)
    assert sink.plan_load(staged, SCHEMA, True).startswith(
        "COPY binary from Arrow into the staging table if the target's column types allow (chosen at prepare), "
        "else text" + unreached)  # transforms make the rows: never undecoded
    assert sink.plan_load(text, SCHEMA, False).startswith("COPY text from Arrow into the target" + unreached)

"""The catalogs of a whole database (issue 38) on real MariaDB, PostgreSQL and sqlite: which tables a task's
``tables`` patterns select (base tables only, never wormhole's own), and what each one is (columns in the
store's own words, keys, indexes, foreign keys, comments), names that need quoting included; and that the
options ``for_table`` gives read exactly that table."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.mysql_helpers import Databases, execute, q
from tests.pg_helpers import Schemas, pg_schemas, qi
from tests.plugin_helpers import read_all, read_ctx
from wormhole.database.facet import DatabaseSource
from wormhole.database.model import Catalog, ColumnDef, ForeignKeyDef, IndexDef, TableDef, TableRef
from wormhole.errors import InvalidTaskConfig, SplitError
from wormhole.plugins import registry
from wormhole.plugins.shared import RunShared
from wormhole.task_spec import TaskSpec

QUOTED = ("order", "my table", "dash-name", "ünï")
"""Names that need quoting: a reserved word, a space, a dash, non-ASCII letters."""
WIDE = 300

__all__ = ["pg_schemas"]  # the fixture, used by name


def database_source(plugin: str, params: dict[str, Any]) -> DatabaseSource:
    """The source's options as a task parses them."""
    spec = TaskSpec.from_mapping({"name": "t", "source": {"plugin": plugin, "params": params},
                                  "destinations": [{"id": "a", "plugin": "sqlite",
                                                    "params": {"path": "/tmp/wh-none.db"}}]})
    assert isinstance(spec.source.options, DatabaseSource)
    return spec.source.options


def catalog_of(plugin: str, options: DatabaseSource) -> Catalog:
    facet = registry.get(plugin).source.catalog
    return facet.open(options)


def listed(plugin: str, params: dict[str, Any]) -> dict[TableRef, int]:
    options = database_source(plugin, params)
    catalog = catalog_of(plugin, options)
    try:
        patterns = registry.get(plugin).source.catalog.patterns(options)
        return {t.ref: t.estimated_rows for t in catalog.list_tables(patterns)}
    finally:
        catalog.close()


def no_match(plugin: str, params: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidTaskConfig) as info:
        listed(plugin, params)
    return info.value.problems


def described(plugin: str, params: dict[str, Any], *refs: TableRef) -> tuple[list[TableDef], list[dict[str, Any]]]:
    """Each table's definition, and the warnings logged while describing them; described together (as a task's
    run asks, a few statements for many tables) they are the same."""
    catalog = catalog_of(plugin, database_source(plugin, params))
    try:
        with capture_logs() as logs:
            defs = [catalog.describe(ref) for ref in refs]
        assert catalog.describe_all([*refs, *refs[:1]]) == dict(zip(refs, defs, strict=True))
    finally:
        catalog.close()
    return defs, [e for e in logs if e["log_level"] == "warning"]


def skipped(logs: list[dict[str, Any]]) -> dict[str, str]:
    return {e["index"]: e["reason"] for e in logs if e["event"] == "catalog.index_skipped"}


def read_table(plugin: str, params: dict[str, Any], ref: TableRef) -> list[tuple[Any, ...]]:
    """The rows the options ``for_table`` gives read, through the store's own splitter and reader."""
    role = registry.get(plugin).source
    single = role.catalog.for_table(database_source(plugin, params), ref)
    return sorted(tuple(r) for r in read_all(role, single))


def quoted_and_wide(plugin: str, params: dict[str, Any], qualified: dict[str, Any], schema: str,
                    drop: Callable[[TableRef], None]) -> None:
    """The QUOTED tables of ``schema`` (``id``, ``the value``, ``parent id``; ``ix <name>`` on the last two; the
    ``my table`` -> ``order`` key ``fk-order``; rows (1, 'a<i>', NULL), (2, 'b', 1)) and its WIDE table are
    listed, described and read, by ``params`` (``*``) and by ``qualified`` (``<schema>.*``)."""
    refs = [TableRef(schema, n) for n in (*QUOTED, "wide")]
    assert set(listed(plugin, params)) == set(refs)
    defs, logs = described(plugin, params, *refs)
    assert logs == []
    for name, table in zip(QUOTED, defs):
        assert [c.name for c in table.columns] == ["id", "the value", "parent id"]
        assert table.primary_key == ("id",)
        assert IndexDef(f"ix {name}", ("the value", "id"), False) in table.indexes
    assert defs[1].foreign_keys == (ForeignKeyDef("fk-order", ("parent id",), TableRef(schema, "order"), ("id",)),)
    assert [c.name for c in defs[-1].columns] == ["id", *(f"c{i}" for i in range(1, WIDE))]
    for i, name in enumerate(QUOTED):
        assert read_table(plugin, params if i % 2 else qualified, TableRef(schema, name)) == \
            [(1, f"a{i}", None), (2, "b", 1)]
    described_ahead(plugin, params, refs, drop)


def described_ahead(plugin: str, params: dict[str, Any], refs: list[TableRef],
                    drop: Callable[[TableRef], None]) -> None:
    """A database task's tables described ahead, all at once (a table not there is left out): each table's
    reader then has the schema it would have described itself, without asking the server (the last table is
    dropped before its reader asks: described by its own reader now, it would not be there)."""
    role = registry.get(plugin).source
    options = database_source(plugin, params)
    own = [role.reader(role.catalog.for_table(options, ref), read_ctx()).schema() for ref in refs]
    ahead = dataclasses.replace(read_ctx(), shared=RunShared())
    gone = TableRef(refs[0].schema, "not there")
    assert role.catalog.describe_ahead(role.catalog.for_tables(options, [*refs, gone]), ahead) == len(refs)
    drop(refs[-1])
    assert [role.reader(role.catalog.for_table(options, ref), ahead).schema() for ref in refs] == own
    with pytest.raises(SplitError, match="not there"):
        role.reader(role.catalog.for_table(options, gone), ahead).schema()


def shop_orders(schema: str, columns: tuple[ColumnDef, ...]) -> TableDef:
    """The shop's orders table as every server's catalog describes it but for its columns (and sqlite's names)."""
    return TableDef(
        ref=TableRef(schema, "orders"), columns=columns, primary_key=("id",),
        indexes=(IndexDef("ix_status", ("status",), False), IndexDef("ix_status_total", ("status", "total"), False),
                 IndexDef("uq_ref", ("customer_id", "placed_at"), True)),
        foreign_keys=(ForeignKeyDef("fk_customer", ("customer_id",), TableRef(schema, "customers"), ("id",),
                                    "CASCADE", None),),
        comment="what was bought")


# -- MariaDB -----------------------------------------------------------------------------------------


@pytest.fixture
def shop(dbs: Databases) -> Iterator[tuple[Databases, str, str]]:
    """Two databases: a shop (customers, orders, lines, a scratch table, a view, wormhole's own tables) and a
    crm whose contacts reference the shop's customers."""
    b = dbs.create("hcat_crm")  # made first, dropped first: its contacts reference the shop
    a = dbs.create("hcat_shop")
    for sql in (
        f"CREATE TABLE {q(a)}.customers (id INT PRIMARY KEY, email VARCHAR(80) NOT NULL, UNIQUE KEY uq_email (email))",
        f"""CREATE TABLE {q(a)}.orders (
              id INT(10) UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'the order number',
              customer_id INT NOT NULL,
              status ENUM('new','paid') NOT NULL DEFAULT 'new',
              total DECIMAL(12,2) NOT NULL DEFAULT 0.00,
              note VARCHAR(25) NULL COMMENT '',
              placed_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
              body TEXT,
              PRIMARY KEY (id),
              UNIQUE KEY uq_ref (customer_id, placed_at),
              KEY ix_status (status),
              KEY ix_status_total (status, total),
              KEY ix_body (body(10)),
              CONSTRAINT fk_customer FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE CASCADE
            ) COMMENT 'what was bought'""",
        f"CREATE TABLE {q(a)}.lines (b INT NOT NULL, a INT NOT NULL, PRIMARY KEY (a, b))",
        f"CREATE TABLE {q(a)}.tmp_scratch (x INT)",
        f"CREATE VIEW {q(a)}.v_orders AS SELECT id FROM {q(a)}.orders",
        f"CREATE TABLE {q(a)}.wormhole_splits (x INT)",
        f"CREATE TABLE {q(a)}.orders__wh1_1 (x INT) COMMENT 'wormhole:task=1,run=1,dest=a'",
        f"""CREATE TABLE {q(b)}.contacts (id INT PRIMARY KEY, customer_id INT NULL,
              CONSTRAINT fk_contact FOREIGN KEY (customer_id) REFERENCES {q(a)}.customers (id)
              ON DELETE SET NULL ON UPDATE CASCADE)""",
        f"INSERT INTO {q(a)}.customers VALUES (1, 'a@x'), (2, 'b@x')",
        f"INSERT INTO {q(a)}.orders (customer_id, total, placed_at) VALUES (1, 1.50, '2024-01-01'), "
        f"(2, 2.50, '2024-01-01'), (1, 3.50, '2024-01-02')",
        f"ANALYZE TABLE {q(a)}.customers, {q(a)}.orders, {q(a)}.lines",
    ):
        execute(dbs.admin, sql)
    yield dbs, a, b


def test_mysql_lists_base_tables_across_databases(shop: tuple[Databases, str, str]) -> None:
    """Includes and excludes over two databases select base tables only: no view, no table of wormhole's own
    (its markers, a marked staging table); the row estimates are the server's statistics."""
    dbs, a, b = shop
    found = listed("mysql", dbs.server.params(tables=[f"{a}.*", f"!{a}.tmp_*", f"{b}.cont*"]))
    assert set(found) == {TableRef(a, "customers"), TableRef(a, "orders"), TableRef(a, "lines"),
                          TableRef(b, "contacts")}
    assert found[TableRef(a, "orders")] == 3
    assert next(iter(found)) == TableRef(a, "orders")  # the largest first
    own = listed("mysql", dbs.server.params(a, tables=["*"]))  # without a dot: the tables of database
    assert set(own) == {TableRef(a, t) for t in ("customers", "orders", "lines", "tmp_scratch")}


def test_mysql_pattern_matching_nothing_is_named(shop: tuple[Databases, str, str]) -> None:
    dbs, a, _ = shop
    assert no_match("mysql", dbs.server.params(a, tables=["orders", "nomatch_*", "v_orders"])) == [
        "source.params.tables: 'nomatch_*' matches no table", "source.params.tables: 'v_orders' matches no table"]


def test_mysql_describes_a_table(shop: tuple[Databases, str, str]) -> None:
    """Types as declared, defaults as SQL, comments, auto increment, the key in key order, every index a
    destination can make again (a prefix index is skipped and logged), foreign keys with their actions."""
    dbs, a, b = shop
    (orders, lines, contacts), logs = described("mysql", dbs.server.params(tables=[f"{a}.*"]), TableRef(a, "orders"),
                                                TableRef(a, "lines"), TableRef(b, "contacts"))
    assert orders == shop_orders(a, (
        ColumnDef("id", "int(10) unsigned", False, None, "the order number", True),
        ColumnDef("customer_id", "int(11)", False),
        ColumnDef("status", "enum('new','paid')", False, "'new'"),
        ColumnDef("total", "decimal(12,2)", False, "0.00"),
        ColumnDef("note", "varchar(25)", True),
        ColumnDef("placed_at", "datetime", False, "current_timestamp()"),
        ColumnDef("body", "text", True)))
    assert skipped(logs) == {"ix_body": "a prefix index (body(10))"}
    assert logs[0]["table"] == f"{a}.orders"
    assert lines.primary_key == ("a", "b") and [c.name for c in lines.columns] == ["b", "a"]
    assert lines.comment is None and lines.indexes == () and lines.foreign_keys == ()
    assert contacts.foreign_keys == (ForeignKeyDef("fk_contact", ("customer_id",), TableRef(a, "customers"),
                                                   ("id",), "SET NULL", "CASCADE"),)
    with pytest.raises(SplitError, match=rf"^table {a}\.v_orders does not exist in 127\.0\.0\.1:\d+/"):
        described("mysql", dbs.server.params(tables=[f"{a}.*"]), TableRef(a, "v_orders"))  # a view is no table


def test_mysql_quoted_names_and_a_wide_table(dbs: Databases) -> None:
    """Tables whose names need quoting are listed, described and read; a 300-column table is described."""
    a = dbs.create("hcat_quoted")
    for i, name in enumerate(QUOTED):
        execute(dbs.admin, f"CREATE TABLE {q(a)}.{q(name)} (id INT PRIMARY KEY, `the value` VARCHAR(10), "
                           f"`parent id` INT, KEY {q(f'ix {name}')} (`the value`, id))")
        execute(dbs.admin, f"INSERT INTO {q(a)}.{q(name)} VALUES (1, %s, NULL), (2, 'b', 1)", (f"a{i}",))
    execute(dbs.admin, f"ALTER TABLE {q(a)}.`my table` ADD CONSTRAINT `fk-order` FOREIGN KEY (`parent id`) "
                       f"REFERENCES {q(a)}.`order` (id)")
    execute(dbs.admin, f"CREATE TABLE {q(a)}.wide (id INT PRIMARY KEY, "
                       + ", ".join(f"c{i} INT" for i in range(1, WIDE)) + ")")
    quoted_and_wide("mysql", dbs.server.params(a, tables=["*"]), dbs.server.params(tables=[f"{a}.*"]), a,
                    lambda ref: execute(dbs.admin, f"DROP TABLE {q(ref.schema)}.{q(ref.name)}"))


# -- PostgreSQL --------------------------------------------------------------------------------------


@pytest.fixture
def pg_shop(pg_schemas: Schemas) -> tuple[Schemas, str, str]:
    """Two schemas: a shop (customers, orders, lines, a partitioned table, a scratch table, a view, wormhole's
    own tables) and a crm whose contacts reference the shop's customers."""
    a, b = pg_schemas.create("hcat_shop"), pg_schemas.create("hcat_crm")
    sa, sb = qi(a), qi(b)
    pg_schemas.conn.execute(f"""
        CREATE TABLE {sa}.customers (id integer PRIMARY KEY, email character varying(80) NOT NULL
                                     CONSTRAINT uq_email UNIQUE);
        CREATE TABLE {sa}.orders (
            id serial PRIMARY KEY,
            customer_id integer NOT NULL CONSTRAINT fk_customer REFERENCES {sa}.customers (id) ON DELETE CASCADE,
            status character varying(10) NOT NULL DEFAULT 'new',
            total numeric(12,2) NOT NULL DEFAULT 0,
            tags integer[],
            placed_at timestamp with time zone NOT NULL DEFAULT now(),
            note text);
        COMMENT ON TABLE {sa}.orders IS 'what was bought';
        COMMENT ON COLUMN {sa}.orders.id IS 'the order number';
        CREATE UNIQUE INDEX uq_ref ON {sa}.orders (customer_id, placed_at);
        CREATE INDEX ix_status ON {sa}.orders (status);
        CREATE INDEX ix_status_total ON {sa}.orders (status, total);
        CREATE INDEX ix_lower_note ON {sa}.orders (lower(note));
        CREATE INDEX ix_open ON {sa}.orders (status) WHERE status = 'new';
        CREATE INDEX ix_tags ON {sa}.orders USING gin (tags);
        CREATE TABLE {sa}.lines (b integer NOT NULL, a integer GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (a, b));
        CREATE TABLE {sa}.events (at date NOT NULL, n integer) PARTITION BY RANGE (at);
        CREATE TABLE {sa}.events_2024 PARTITION OF {sa}.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
        CREATE TABLE {sa}.tmp_scratch (x integer);
        CREATE VIEW {sa}.v_orders AS SELECT id FROM {sa}.orders;
        CREATE TABLE {sa}.wormhole_splits (x integer);
        CREATE TABLE {sa}.orders__wh1_1 (x integer);
        COMMENT ON TABLE {sa}.orders__wh1_1 IS 'wormhole:task=1,run=1,dest=a';
        CREATE TABLE {sb}.contacts (id integer PRIMARY KEY, customer_id integer CONSTRAINT fk_contact
                                    REFERENCES {sa}.customers (id) ON DELETE SET NULL ON UPDATE RESTRICT);
        INSERT INTO {sa}.customers VALUES (1, 'a@x'), (2, 'b@x');
        INSERT INTO {sa}.orders (customer_id, total, placed_at)
            VALUES (1, 1.5, '2024-01-01'), (2, 2.5, '2024-01-01'), (1, 3.5, '2024-01-02');
        INSERT INTO {sa}.events VALUES ('2024-05-01', 1), ('2024-06-01', 2), ('2024-07-01', 3), ('2024-08-01', 4);
        ANALYZE {sa}.customers; ANALYZE {sa}.orders; ANALYZE {sa}.events;""")
    return pg_schemas, a, b


def test_postgres_lists_base_tables_across_schemas(pg_shop: tuple[Schemas, str, str]) -> None:
    """Includes and excludes over two schemas select ordinary and partitioned tables (not their partitions),
    never a view nor wormhole's own; estimates are pg_class.reltuples (never analyzed: 0)."""
    schemas, a, b = pg_shop
    found = listed("postgres", schemas.server.params(tables=[f"{a}.*", f"!{a}.tmp_*", f"{b}.cont*"]))
    assert set(found) == {TableRef(a, t) for t in ("customers", "orders", "lines", "events")} | {
        TableRef(b, "contacts")}
    assert (found[TableRef(a, "events")], found[TableRef(a, "orders")], found[TableRef(b, "contacts")]) == (4, 3, 0)
    assert list(found)[:2] == [TableRef(a, "events"), TableRef(a, "orders")]  # the largest first
    own = listed("postgres", schemas.server.params(a, tables=["*"]))  # without a dot: the tables of schema
    assert set(own) == {TableRef(a, t) for t in ("customers", "orders", "lines", "events", "tmp_scratch")}


def test_postgres_pattern_matching_nothing_is_named(pg_shop: tuple[Schemas, str, str]) -> None:
    schemas, a, _ = pg_shop
    assert no_match("postgres", schemas.server.params(a, tables=["orders", "v_orders", "events_2024"])) == [
        "source.params.tables: 'v_orders' matches no table", "source.params.tables: 'events_2024' matches no table"]


def test_postgres_describes_a_table(pg_shop: tuple[Schemas, str, str]) -> None:
    """format_type()'s types, defaults as the catalog shows them (a serial's sequence is auto increment, not a
    default), comments, the key in key order, btree indexes (expression, partial and gin ones skipped and
    logged), foreign keys with their actions."""
    schemas, a, b = pg_shop
    (orders, lines, contacts), logs = described("postgres", schemas.server.params(tables=[f"{a}.*"]),
                                                TableRef(a, "orders"), TableRef(a, "lines"), TableRef(b, "contacts"))
    assert orders == shop_orders(a, (
        ColumnDef("id", "integer", False, None, "the order number", True),
        ColumnDef("customer_id", "integer", False),
        ColumnDef("status", "character varying(10)", False, "'new'::character varying"),
        ColumnDef("total", "numeric(12,2)", False, "0"),
        ColumnDef("tags", "integer[]", True),
        ColumnDef("placed_at", "timestamp with time zone", False, "now()"),
        ColumnDef("note", "text", True)))
    assert skipped(logs) == {"ix_lower_note": "an expression index", "ix_tags": "a gin index",
                             "ix_open": "a partial index (WHERE ((status)::text = 'new'::text))"}
    assert lines.primary_key == ("a", "b") and [c.name for c in lines.columns] == ["b", "a"]
    assert lines.columns[1].auto_increment and lines.columns[1].default_sql is None  # an identity column
    assert contacts.foreign_keys == (ForeignKeyDef("fk_contact", ("customer_id",), TableRef(a, "customers"),
                                                   ("id",), "SET NULL", "RESTRICT"),)
    (customers,), _ = described("postgres", schemas.server.params(tables=[f"{a}.*"]), TableRef(a, "customers"))
    assert customers.indexes == (IndexDef("uq_email", ("email",), True),)


def test_postgres_quoted_names_and_a_wide_table(pg_schemas: Schemas) -> None:
    a = pg_schemas.create("hcat_quoted")
    conn = pg_schemas.conn
    for i, name in enumerate(QUOTED):
        conn.execute(f'CREATE TABLE {qi(a)}.{qi(name)} (id integer PRIMARY KEY, "the value" varchar(10), '
                     f'"parent id" integer)')
        conn.execute(f'CREATE INDEX {qi("ix " + name)} ON {qi(a)}.{qi(name)} ("the value", id)')
        conn.execute(f"INSERT INTO {qi(a)}.{qi(name)} VALUES (1, %s, NULL), (2, 'b', 1)", (f"a{i}",))
    conn.execute(f'ALTER TABLE {qi(a)}."my table" ADD CONSTRAINT "fk-order" FOREIGN KEY ("parent id") '
                 f'REFERENCES {qi(a)}."order" (id)')
    conn.execute(f"CREATE TABLE {qi(a)}.wide (id integer PRIMARY KEY, "
                 + ", ".join(f"c{i} integer" for i in range(1, WIDE)) + ")")
    quoted_and_wide("postgres", pg_schemas.server.params(a, tables=["*"]),
                    pg_schemas.server.params(tables=[f"{a}.*"]), a,
                    lambda ref: conn.execute(f"DROP TABLE {qi(ref.schema)}.{qi(ref.name)}"))


# -- sqlite ------------------------------------------------------------------------------------------


@pytest.fixture
def shop_file(tmp_path: Path) -> str:
    path = str(tmp_path / "hcat shop.db")
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE customers (id INTEGER PRIMARY KEY, email VARCHAR(80) NOT NULL UNIQUE);
        CREATE TABLE orders (
            id INTEGER PRIMARY KEY,
            customer_id INTEGER NOT NULL REFERENCES customers ON DELETE CASCADE,
            status TEXT NOT NULL DEFAULT 'new',
            total DECIMAL(12,2) DEFAULT 0,
            placed_at TEXT DEFAULT CURRENT_TIMESTAMP,
            note);
        CREATE UNIQUE INDEX uq_ref ON orders (customer_id, placed_at);
        CREATE INDEX ix_status_total ON orders (status, total);
        CREATE INDEX ix_lower_note ON orders (lower(note));
        CREATE INDEX ix_open ON orders (status) WHERE status = 'new';
        CREATE TABLE lines (b INT NOT NULL, a INT NOT NULL, PRIMARY KEY (a, b));
        CREATE TABLE tmp_scratch (x INT);
        CREATE VIEW v_orders AS SELECT id FROM orders;
        CREATE TABLE _wh_splits (x INT);
        CREATE TABLE "_wh_stage_1_1_a" (x INT);
        INSERT INTO customers VALUES (1, 'a@x'), (2, 'b@x');
        INSERT INTO orders (customer_id, total, placed_at)
            VALUES (1, 1.5, '2024-01-01'), (2, 2.5, '2024-01-01'), (1, 3.5, '2024-01-02');
    """)
    for i, name in enumerate(QUOTED):
        conn.execute(f'CREATE TABLE {qi(name)} (id INTEGER PRIMARY KEY, "the value" TEXT, '
                     f'"parent id" INTEGER REFERENCES "order" (id) ON UPDATE SET NULL)')
        conn.execute(f'CREATE INDEX {qi("ix " + name)} ON {qi(name)} ("the value", id)')
        conn.execute(f"INSERT INTO {qi(name)} VALUES (1, ?, NULL), (2, 'b', 1)", (f"a{i}",))
    conn.execute("CREATE TABLE wide (id INTEGER PRIMARY KEY, " + ", ".join(f"c{i} INT" for i in range(1, WIDE))
                 + ")")
    conn.commit()
    conn.close()
    return path


def test_sqlite_lists_tables(shop_file: str) -> None:
    """The file's tables (no view, nothing of wormhole's own), by exact count."""
    found = listed("sqlite", {"path": shop_file, "tables": ["*", "!tmp_*", "!wide"]})
    assert set(found) == {TableRef("main", t) for t in ("customers", "orders", "lines", *QUOTED)}
    assert (found[TableRef("main", "orders")], next(iter(found))) == (3, TableRef("main", "orders"))
    assert set(listed("sqlite", {"path": shop_file, "tables": ["main.[cl]*"]})) == {
        TableRef("main", "customers"), TableRef("main", "lines")}
    assert no_match("sqlite", {"path": shop_file, "tables": ["orders", "v_orders", "other.*"]}) == [
        "source.params.tables: 'v_orders' matches no table", "source.params.tables: 'other.*' matches no table"]


def test_sqlite_describes_tables(shop_file: str) -> None:
    params = {"path": shop_file, "tables": ["*"]}
    refs = [TableRef("main", n) for n in ("orders", "lines", "customers", *QUOTED, "wide")]
    (orders, lines, customers, *quoted, wide), logs = described("sqlite", params, *refs)
    assert orders == TableDef(
        ref=TableRef("main", "orders"),
        columns=(ColumnDef("id", "INTEGER", True, None, None, True),
                 ColumnDef("customer_id", "INTEGER", False),
                 ColumnDef("status", "TEXT", False, "'new'"),
                 ColumnDef("total", "DECIMAL(12,2)", True, "0"),
                 ColumnDef("placed_at", "TEXT", True, "CURRENT_TIMESTAMP"),
                 ColumnDef("note", "", True)),
        primary_key=("id",),
        indexes=(IndexDef("ix_status_total", ("status", "total"), False),
                 IndexDef("uq_ref", ("customer_id", "placed_at"), True)),
        foreign_keys=(ForeignKeyDef("fk_orders_0", ("customer_id",), TableRef("main", "customers"), ("id",),
                                    "CASCADE", None),))
    assert skipped(logs) == {"ix_lower_note": "an expression index", "ix_open": "a partial index"}
    assert lines.primary_key == ("a", "b") and not any(c.auto_increment for c in lines.columns)
    assert customers.indexes == (IndexDef("sqlite_autoindex_customers_1", ("email",), True),)
    for name, table in zip(QUOTED, quoted):
        assert [c.name for c in table.columns] == ["id", "the value", "parent id"]
        assert table.indexes == (IndexDef(f"ix {name}", ("the value", "id"), False),)
        assert table.foreign_keys == (ForeignKeyDef(f"fk_{name}_0", ("parent id",), TableRef("main", "order"),
                                                    ("id",), None, "SET NULL"),)
    assert [c.name for c in wide.columns] == ["id", *(f"c{i}" for i in range(1, WIDE))]
    assert read_table("sqlite", params, TableRef("main", "my table")) == [(1, "a1", None), (2, "b", 1)]


def test_a_table_not_there_and_a_file_not_there_fail_with_their_names(shop_file: str, tmp_path: Path) -> None:
    """A table dropped since it was listed fails its describe naming it; a catalog that cannot be opened fails
    naming the file."""
    with pytest.raises(SplitError, match=r"^table main\.gone does not exist in .*hcat shop\.db$"):
        described("sqlite", {"path": shop_file, "tables": ["*"]}, TableRef("main", "gone"))
    missing = str(tmp_path / "missing.db")
    with pytest.raises(SplitError, match=r"^sqlite database .*missing\.db does not exist$"):
        catalog_of("sqlite", database_source("sqlite", {"path": missing, "tables": ["*"]}))

"""``source.params.tables`` (a database task) of the mysql, postgres and sqlite sources: what it parses into,
what the catalog facet makes of it, and every problem at its key path."""

from __future__ import annotations

from typing import Any

import pytest

from wormhole.database.facet import DatabaseSource
from wormhole.database.model import TableRef
from wormhole.errors import InvalidTaskConfig
from wormhole.plugins import registry
from wormhole.plugins.sql.source_options import TableSource
from wormhole.plugins.sqlite.options import SqliteReaderOptions
from wormhole.task_spec import TaskSpec

SERVERS: dict[str, dict[str, Any]] = {
    "mysql": {"host": "127.0.0.1", "user": "root"},
    "postgres": {"host": "127.0.0.1", "user": "postgres", "database": "shopdb"},
    "sqlite": {"path": "/tmp/shop.db"},
}


def task(plugin: str, **params: Any) -> dict[str, Any]:
    return {"name": "t", "source": {"plugin": plugin, "params": {**SERVERS[plugin], **params}},
            "destinations": [{"id": "a", "plugin": "sqlite",
                              "params": {"path": "/tmp/wh-none.db", "table": "{table}"}}]}


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidTaskConfig) as info:
        TaskSpec.from_mapping(raw)
    return info.value.problems


def source_of(raw: dict[str, Any]) -> Any:
    return TaskSpec.from_mapping(raw).source.options


@pytest.mark.parametrize("plugin", ["mysql", "postgres", "sqlite"])
def test_every_database_store_has_a_catalog(plugin: str) -> None:
    """The three stores that read a whole database say so with their source role's catalog facet."""
    role = registry.get(plugin).source
    assert role is not None and role.catalog is not None


def test_mysql_tables_parse_into_a_database_source_over_its_database() -> None:
    """Entries without a dot are in ``database``; each table's options read exactly that table."""
    options = source_of(task("mysql", database="shop", tables=["*", "!tmp_*", "crm.customers"]))
    assert isinstance(options, DatabaseSource)
    facet = registry.get("mysql").source.catalog
    patterns = facet.patterns(options)
    assert patterns is not None and patterns.default_schema == "shop"
    assert patterns.schemas == ("shop", "crm")
    single = facet.for_table(options, TableRef("crm", "order items"))
    assert isinstance(single, TableSource)
    (shard,) = single.shards
    assert (shard.endpoint.database, shard.schema, shard.tables) == ("crm", "crm", ("order items",))
    assert single.selection.columns is None and single.selection.where is None


def test_one_table_is_not_a_database_task() -> None:
    """Options naming one table or a query have no patterns: the facet says None."""
    facet = registry.get("mysql").source.catalog
    assert facet.patterns(source_of(task("mysql", database="shop", table="orders"))) is None
    assert facet.patterns(source_of(task("mysql", database="shop", query="SELECT 1"))) is None


def test_mysql_database_may_be_left_out_when_every_entry_names_its_own() -> None:
    options = source_of(task("mysql", tables=["shop.*", "!shop.tmp_*", "crm.c?"]))
    facet = registry.get("mysql").source.catalog
    single = facet.for_table(options, TableRef("shop", "orders"))
    assert (single.shards[0].endpoint.database, single.shards[0].tables) == ("shop", ("orders",))


def test_mysql_entries_without_a_database_need_database() -> None:
    """Without ``database`` an entry with no dot names nothing: the problem says to give one, at its path."""
    assert problems_of(task("mysql", tables=["shop.*", "orders", "!tmp_*"])) == [
        "source.params.database: is required by the tables entries that name no database ('orders', '!tmp_*'): "
        "give database, or write each as 'database.table'"]


@pytest.mark.parametrize(("key", "value", "why"), [
    ("table", "orders", "give either table or tables"),
    ("query", "SELECT 1", "give either query or tables"),
    ("columns", ["id"], "tables reads every column of each table"),
    ("split_pk", "id", "each table is split by its own primary key"),
])
@pytest.mark.parametrize("plugin", ["mysql", "postgres"])
def test_keys_that_say_what_one_table_reads_are_refused_with_tables(plugin: str, key: str, value: Any,
                                                                     why: str) -> None:
    raw = task(plugin, tables=["shop.*"], **{key: value})
    if plugin == "mysql":
        raw["source"]["params"]["database"] = "shop"
    assert problems_of(raw) == [f"source.params.{key}: not with tables ({why})"]


def test_connections_are_refused_with_tables() -> None:
    raw = task("mysql", tables=["shop.*"], connections=[{"host": "h", "database": "d", "tables": ["t"]}])
    assert problems_of(raw) == ["source.params.connections: not with tables (tables names the tables of one server)"]


@pytest.mark.parametrize(("entry", "problem"), [
    ("", "must not be empty or blank"),
    ("  ", "must not be empty or blank"),
    ("!", "'!' excludes nothing: write what to exclude after the '!' ('!shop.tmp_*')"),
    ("shop.", "'shop.' names no table after the dot (every table of 'shop': 'shop.*')"),
    (".orders", "'.orders' names no schema before the dot ('shop.*'; without a dot: the source's own)"),
])
@pytest.mark.parametrize("plugin", ["mysql", "postgres", "sqlite"])
def test_each_entry_must_be_a_pattern(plugin: str, entry: str, problem: str) -> None:
    raw = task(plugin, tables=["ok", entry])
    if plugin == "mysql":
        raw["source"]["params"]["database"] = "shop"
    assert problems_of(raw) == [f"source.params.tables[1]: {problem}"]


@pytest.mark.parametrize("plugin", ["mysql", "postgres", "sqlite"])
def test_tables_needs_an_entry(plugin: str) -> None:
    raw = task(plugin, tables=[], database="shop") if plugin == "mysql" else task(plugin, tables=[])
    assert problems_of(raw) == ["source.params.tables: needs at least 1 item(s)"]


def test_postgres_tables_are_over_schema_of_database() -> None:
    """Entries without a dot are in ``schema`` (default public); each table's options name its schema."""
    options = source_of(task("postgres", tables=["*", "sales.*"]))
    facet = registry.get("postgres").source.catalog
    assert facet.patterns(options).schemas == ("public", "sales")
    single = facet.for_table(options, TableRef("sales", "order"))
    assert isinstance(single, TableSource)
    (shard,) = single.shards
    assert (shard.endpoint.database, shard.schema, shard.tables) == ("shopdb", "sales", ("order",))
    other = source_of(task("postgres", schema="crm", tables=["c*"]))
    assert facet.patterns(other).schemas == ("crm",)


def test_postgres_tables_need_database() -> None:
    raw = task("postgres", tables=["sales.*"])
    del raw["source"]["params"]["database"]
    assert problems_of(raw) == ["source.params.database: is required (the database whose tables tables names)"]


def test_sqlite_tables_are_of_main() -> None:
    options = source_of(task("sqlite", tables=["*", "!tmp_*"]))
    facet = registry.get("sqlite").source.catalog
    patterns = facet.patterns(options)
    assert patterns.default_schema == "main" and patterns.schemas == ("main",)
    single = facet.for_table(options, TableRef("main", "my table"))
    assert single == SqliteReaderOptions(path="/tmp/shop.db", table="my table")
    where = facet.for_table(source_of(task("sqlite", tables=["*"], where="a > 0")), TableRef("main", "t"))
    assert (where.table, where.where) == ("t", "a > 0")  # every table is read with the task's where


def test_sqlite_needs_table_or_tables_and_refuses_both() -> None:
    assert problems_of(task("sqlite")) == ["source.params.table: is required (or give tables)"]
    assert problems_of(task("sqlite", table="t", tables=["*"], columns=["a"], where="a > 0")) == [
        "source.params.table: not with tables (give either table or tables)",
        "source.params.columns: not with tables (tables reads every column of each table)"]


def test_mysql_table_or_query_or_tables_is_required() -> None:
    assert problems_of(task("mysql", database="shop")) == [
        "source.params.table: is required (or give tables or a query)"]

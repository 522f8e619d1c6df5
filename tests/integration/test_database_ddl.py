"""A database task's DDL on real servers: hand-made table definitions of each source store (mysql, postgres,
sqlite) translated for each destination store, applied through the destination's DDL facet, and the
destination's own catalog read back (types, keys, indexes, foreign keys, comments, auto-increment)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import mysql_or_skip
from tests.pg_helpers import PgServer, fresh_schemas
from tests.plugin_helpers import parse, run_destination
from wormhole.database.ddl import DdlSession, TableDdl, TargetName, translate
from wormhole.database.model import ColumnDef, ForeignKeyDef, IndexDef, TableDef, TableRef
from wormhole.errors import PrepareError
from wormhole.plugins import registry
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.postgres.options import PostgresWriterOptions
from wormhole.plugins.sqlite.options import SqliteWriterOptions

pytestmark = [pytest.mark.mysql, pytest.mark.postgres]

PARENT, CHILD = "my table", "order"
UNI = "ünïcode"


def _c(name: str, type_sql: str, nullable: bool = True, default: str | None = None, comment: str | None = None,
       auto: bool = False) -> ColumnDef:
    return ColumnDef(name, type_sql, nullable, default, comment, auto)


def tables(store: str, schema: str) -> tuple[TableDef, TableDef]:
    """The parent and child tables as a ``store`` source's catalog would describe them."""
    t = {"mysql": ("int(11)", "varchar(40)", "int(11)", "varchar(25)", "decimal(12,2)", "0.00"),
         "postgres": ("integer", "character varying(40)", "integer", "character varying(25)", "numeric(12,2)", "0"),
         "sqlite": ("INTEGER", "VARCHAR(40)", "INTEGER", "VARCHAR(25)", "DECIMAL(12,2)", "0")}[store]
    parent = TableDef(TableRef(schema, PARENT), (
        _c("id", t[0], False, auto=True), _c(UNI, t[1], comment="名前 'quoted'"), _c("dash-name", t[2], default="7")),
        primary_key=("id",), comment="the parents")
    more = {
        "mysql": (_c("flag", "tinyint(1)", default="1"), _c("kind", "enum('a','bcd')", default="'a'"),
                  _c("at", "datetime(6)", default="current_timestamp(6)"), _c("ts", "timestamp(3)"), _c("js", "json"),
                  _c("b", "blob"), _c("big", "bigint(20) unsigned"), _c("y", "year(4)"), _c("t", "time(3)"),
                  _c("f", "float"), _c("d", "double"), _c("note", "text", comment="a note")),
        "postgres": (_c("flag", "boolean", default="true"), _c("at", "timestamp(6) without time zone", default="now()"),
                     _c("ts", "timestamp(3) with time zone"), _c("js", "jsonb"), _c("b", "bytea"), _c("u", "uuid"),
                     _c("t", "time(3) without time zone"), _c("f", "real"), _c("d", "double precision"),
                     _c("note", "text", comment="a note"), _c("n", "numeric"), _c("arr", "integer[]")),
        "sqlite": (_c("flag", "BOOLEAN", default="1"), _c("at", "DATETIME", default="CURRENT_TIMESTAMP"),
                   _c("js", "JSON"), _c("b", "BLOB"), _c("d", "REAL"), _c("note", "TEXT", comment="a note")),
    }[store]
    child = TableDef(TableRef(schema, CHILD), (
        _c("id", t[0], False, auto=True), _c("parent_id", t[2]), _c("order", t[3]), _c("price", t[4], False, t[5]),
        *more), primary_key=("id",),
        indexes=(IndexDef("u_parent_order", ("parent_id", "order"), True), IndexDef("ix_price", ("price",), False)),
        foreign_keys=(ForeignKeyDef("fk_parent", ("parent_id",), TableRef(schema, PARENT), ("id",),
                                    on_delete="CASCADE"),))
    return parent, child


EXPECTED: dict[tuple[str, str], dict[str, str]] = {
    ("mysql", "mysql"): {
        "id": "int(11)", "parent_id": "int(11)", "order": "varchar(25)", "price": "decimal(12,2)", "flag": "tinyint(1)",
        "kind": "enum('a','bcd')", "at": "datetime(6)", "ts": "timestamp(3)", "js": "longtext", "b": "blob",
        "big": "bigint(20) unsigned", "y": "year(4)", "t": "time(3)", "f": "float", "d": "double", "note": "text"},
    ("mysql", "postgres"): {
        "id": "integer", "parent_id": "integer", "order": "character varying(25)", "price": "numeric(12,2)",
        "flag": "smallint", "kind": "character varying(3)", "at": "timestamp(6) without time zone",
        "ts": "timestamp(3) with time zone", "js": "json", "b": "bytea", "big": "numeric(20,0)", "y": "smallint",
        "t": "time(3) without time zone", "f": "real", "d": "double precision", "note": "text"},
    ("mysql", "sqlite"): {
        "id": "INTEGER", "parent_id": "INTEGER", "order": "TEXT", "price": "TEXT", "flag": "INTEGER", "kind": "TEXT",
        "at": "DATETIME", "ts": "DATETIME", "js": "TEXT", "b": "BLOB", "big": "INTEGER", "y": "INTEGER", "t": "TEXT",
        "f": "REAL", "d": "REAL", "note": "TEXT"},
    ("postgres", "mysql"): {
        "id": "int(11)", "parent_id": "int(11)", "order": "varchar(25)", "price": "decimal(12,2)", "flag": "tinyint(1)",
        "at": "datetime(6)", "ts": "datetime(3)", "js": "longtext", "b": "longblob", "u": "char(36)", "t": "time(3)",
        "f": "float", "d": "double", "note": "longtext", "n": "decimal(65,30)", "arr": "longtext"},
    ("postgres", "postgres"): {
        "id": "integer", "parent_id": "integer", "order": "character varying(25)", "price": "numeric(12,2)",
        "flag": "boolean", "at": "timestamp(6) without time zone", "ts": "timestamp(3) with time zone",
        "js": "jsonb", "b": "bytea", "u": "uuid", "t": "time(3) without time zone", "f": "real",
        "d": "double precision", "note": "text", "n": "numeric", "arr": "integer[]"},
    ("postgres", "sqlite"): {
        "id": "INTEGER", "parent_id": "INTEGER", "order": "TEXT", "price": "TEXT", "flag": "BOOLEAN", "at": "DATETIME",
        "ts": "DATETIME", "js": "TEXT", "b": "BLOB", "u": "TEXT", "t": "TEXT", "f": "REAL", "d": "REAL", "note": "TEXT",
        "n": "TEXT", "arr": "TEXT"},
    ("sqlite", "mysql"): {
        "id": "bigint(20)", "parent_id": "bigint(20)", "order": "varchar(25)", "price": "decimal(12,2)",
        "flag": "tinyint(1)", "at": "datetime(6)", "js": "longtext", "b": "longblob", "d": "double",
        "note": "longtext"},
    ("sqlite", "postgres"): {
        "id": "bigint", "parent_id": "bigint", "order": "character varying(25)", "price": "numeric(12,2)",
        "flag": "boolean", "at": "timestamp without time zone", "js": "json", "b": "bytea", "d": "double precision",
        "note": "text"},
    ("sqlite", "sqlite"): {
        "id": "INTEGER", "parent_id": "INTEGER", "order": "VARCHAR(25)", "price": "DECIMAL(12,2)", "flag": "BOOLEAN",
        "at": "DATETIME", "js": "JSON", "b": "BLOB", "d": "REAL", "note": "TEXT"},
}
"""The child table's column types as the destination's catalog shows them, per (source, destination)."""

OVERRIDES = {("postgres", "mysql"): {"order.n": "decimal(65,30)", "src.order.arr": "json"}}
"""The choices the plan asks for: a PostgreSQL numeric without precision and an array have no MySQL type."""


@dataclass
class Catalog:
    """A table as the destination's catalog says it is."""

    types: dict[str, str]
    not_null: set[str]
    primary_key: list[str]
    indexes: set[tuple[bool, tuple[str, ...]]]
    foreign_keys: list[tuple[tuple[str, ...], str, tuple[str, ...]]]
    comments: dict[str, str] = field(default_factory=dict)
    """Column comments; the table's under ''."""


@dataclass
class Dest:
    plugin: str
    options: Any
    schema: str | None
    conn: Any

    def session(self) -> DdlSession:
        facet = registry.get(self.plugin).sink.ddl  # type: ignore[union-attr]
        assert facet is not None
        return facet.open(self.options)

    def quote(self, name: str) -> str:
        facet = registry.get(self.plugin).sink.ddl  # type: ignore[union-attr]
        assert facet is not None
        return facet.dialect.quote(name)  # type: ignore[attr-defined,no-any-return]

    def execute(self, sql: str) -> list[tuple[Any, ...]]:
        if self.plugin == "mysql":
            with self.conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        if self.plugin == "postgres":
            cur = self.conn.execute(sql)
            return list(cur.fetchall()) if cur.description is not None else []
        rows = list(self.conn.execute(sql).fetchall())
        self.conn.commit()
        return rows


def _mysql_catalog(conn: Any, target: TargetName) -> Catalog:
    with conn.cursor() as cur:
        args = (target.schema, target.table)
        cur.execute("SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_COMMENT FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", args)
        columns = cur.fetchall()
        cur.execute("SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS WHERE "
                    "TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY INDEX_NAME, SEQ_IN_INDEX", args)
        index: dict[str, tuple[bool, list[str]]] = {}
        for name, non_unique, column in cur.fetchall():
            index.setdefault(name, (not non_unique, []))[1].append(column)
        cur.execute("SELECT CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME FROM "
                    "information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND "
                    "REFERENCED_TABLE_NAME IS NOT NULL ORDER BY CONSTRAINT_NAME, ORDINAL_POSITION", args)
        fks = [((c,), rt, (rc,)) for _, c, rt, rc in cur.fetchall()]
        cur.execute("SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    args)
        table_comment = cur.fetchone()[0]
    comments = {n: c for n, _, _, c in columns if c}
    if table_comment:
        comments[""] = table_comment
    primary = index.pop("PRIMARY", (True, []))[1]
    return Catalog({n: t for n, t, _, _ in columns}, {n for n, _, null, _ in columns if null == "NO"}, primary,
                   {(u, tuple(cols)) for u, cols in index.values()}, fks, comments)


def _pg_catalog(conn: Any, target: TargetName) -> Catalog:
    relation = f'"{target.schema}"."{target.table}"'
    oid = conn.execute("SELECT to_regclass(%s)::oid", (relation,)).fetchone()[0]
    columns = conn.execute("SELECT attname, format_type(atttypid, atttypmod), attnotnull, col_description(attrelid, "
                           "attnum) FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
                           "ORDER BY attnum", (oid,)).fetchall()
    indexes = conn.execute("SELECT i.indisprimary, i.indisunique, array(SELECT a.attname FROM unnest(i.indkey) WITH "
                           "ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n "
                           "ORDER BY k.o) FROM pg_index i WHERE i.indrelid = %s", (oid,)).fetchall()
    fks = conn.execute("SELECT array(SELECT a.attname FROM unnest(c.conkey) k(n) JOIN pg_attribute a ON a.attrelid = "
                       "c.conrelid AND a.attnum = k.n), c.confrelid::regclass::text, array(SELECT a.attname FROM "
                       "unnest(c.confkey) k(n) JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n) "
                       "FROM pg_constraint c WHERE c.conrelid = %s AND c.contype = 'f'", (oid,)).fetchall()
    table_comment = conn.execute("SELECT obj_description(%s, 'pg_class')", (oid,)).fetchone()[0]
    comments = {n: c for n, _, _, c in columns if c}
    if table_comment:
        comments[""] = table_comment
    primary = next((list(cols) for p, _, cols in indexes if p), [])
    return Catalog({n: t for n, t, _, _ in columns}, {n for n, _, nn, _ in columns if nn}, primary,
                   {(u, tuple(cols)) for p, u, cols in indexes if not p},
                   [(tuple(c), rt.split(".")[-1].strip('"'), tuple(rc)) for c, rt, rc in fks], comments)


def _sqlite_catalog(conn: Any, target: TargetName) -> Catalog:
    info = conn.execute("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?) ORDER BY cid",
                        (target.table,)).fetchall()
    indexes = set()
    for name, unique, origin in conn.execute("SELECT name, \"unique\", origin FROM pragma_index_list(?)",
                                             (target.table,)).fetchall():
        if origin != "pk":
            cols = tuple(r[0] for r in conn.execute("SELECT name FROM pragma_index_info(?) ORDER BY seqno", (name,)))
            indexes.add((bool(unique), cols))
    fks = [((f,), t, (to,)) for t, f, to in conn.execute("SELECT \"table\", \"from\", \"to\" FROM "
                                                          "pragma_foreign_key_list(?)", (target.table,)).fetchall()]
    return Catalog({n: t for n, t, _, _ in info}, {n for n, _, nn, pk in info if nn}, [n for n, _, _, pk in
                                                                                       sorted(info, key=lambda r: r[3])
                                                                                       if pk], indexes, fks)


@pytest.fixture(name="dests")
def fixture_dests(tmp_path: Path) -> Iterator[dict[str, Dest]]:
    """A fresh destination in each store: a MariaDB database, a PostgreSQL schema, an sqlite file."""
    my = mysql_or_skip()
    database = f"hddl_{uuid.uuid4().hex[:8]}"
    with my.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
    path = tmp_path / "dest.db"
    lite = sqlite3.connect(path)
    try:
        for schemas in fresh_schemas():
            pg_schema = schemas.create("hddl")
            server = PgServer.from_url()
            pg_options, problems = parse(PostgresWriterOptions, {**server.params(pg_schema), "table": "x"})
            assert not problems
            my_options, problems = parse(MysqlWriterOptions, {"host": "127.0.0.1", "user": "root", "database": database,
                                                              "table": "x"})
            assert not problems
            lite_options, problems = parse(SqliteWriterOptions, {"path": str(path), "table": "x"})
            assert not problems
            yield {"mysql": Dest("mysql", my_options, database, my), "postgres": Dest("postgres", pg_options, pg_schema,
                                                                                      schemas.conn),
                   "sqlite": Dest("sqlite", lite_options, None, lite)}
    finally:
        with my.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        my.close()
        lite.close()


def with_overrides(options: Any, overrides: dict[str, str] | None) -> Any:
    from dataclasses import replace

    return replace(options, column_types=overrides) if overrides else options


def apply(dest: Dest, ddls: list[TableDdl], rows: dict[str, list[str]]) -> None:
    """As a database task does: create each table, load it, index it, set its auto-increment; then the foreign keys."""
    session = dest.session()
    try:
        for ddl in ddls:
            assert session.state(ddl).state == "missing"
            session.run(ddl.create)
            assert session.state(ddl).state == "same"
            for sql in rows.get(ddl.target.table, []):
                dest.execute(sql)
            session.run(ddl.after_load)
            session.set_sequences(ddl)
        for ddl in ddls:
            session.run(ddl.foreign_keys)
    finally:
        session.close()


@pytest.mark.parametrize("dest_store", ["mysql", "postgres", "sqlite"])
@pytest.mark.parametrize("source_store", ["mysql", "postgres", "sqlite"])
def test_tables_created_keyed_and_sequenced(dests: dict[str, Dest], source_store: str, dest_store: str) -> None:
    """Two tables of each source store made in each destination store: the destination's catalog has the translated
    types, NOT NULL, the primary key, the composite unique and secondary index, the foreign key and the comments;
    after rows with ids 5 and 7 are loaded, a row inserted without an id gets 8, and its defaults."""
    dest = dests[dest_store]
    suffix = f"{source_store}_{dest_store}"
    parent, child = tables(source_store, "src")
    targets = {PARENT: TargetName(dest.schema, f"{PARENT} {suffix}"), CHILD: TargetName(dest.schema,
                                                                                       f"{CHILD}-{suffix}")}
    options = with_overrides(dest.options, OVERRIDES.get((source_store, dest_store)))
    ddls = [translate(t, source_store, dest_store, options, targets[t.ref.name], lambda r: targets.get(r.name))
            for t in (parent, child)]
    q = dest.quote

    def table(name: str) -> str:
        target = targets[name]
        return q(target.table) if target.schema is None else f"{q(target.schema)}.{q(target.table)}"

    rows = {targets[PARENT].table: [f"INSERT INTO {table(PARENT)} ({q('id')}, {q(UNI)}) VALUES (1, 'ä'), (2, 'b')"],
            targets[CHILD].table: [f"INSERT INTO {table(CHILD)} ({q('id')}, {q('parent_id')}, {q('order')}) VALUES "
                                   f"(5, 1, 'x'), (7, 2, 'y')"]}
    apply(dest, ddls, rows)
    dest.execute(f"INSERT INTO {table(CHILD)} ({q('parent_id')}, {q('order')}) VALUES (1, 'z')")
    dest.execute(f"INSERT INTO {table(PARENT)} ({q(UNI)}) VALUES ('c')")
    assert dest.execute(f"SELECT {q('id')} FROM {table(CHILD)} WHERE {q('order')} = 'z'") == [(8,)]
    assert dest.execute(f"SELECT {q('id')} FROM {table(PARENT)} WHERE {q(UNI)} = 'c'") == [(3,)]
    # The defaults: a literal, and the current time (every source's child has one on "at").
    assert dest.execute(f"SELECT {q('dash-name')} FROM {table(PARENT)} WHERE {q('id')} = 3") == [(7,)]
    assert dest.execute(f"SELECT COUNT(*) FROM {table(CHILD)} WHERE {q('id')} = 8 AND {q('at')} IS NOT NULL AND "
                        f"{q('price')} + 0 = 0") == [(1,)]  # sqlite's is the text 0.00

    found = {name: _catalog_of(dest, targets[name]) for name in (PARENT, CHILD)}
    assert found[CHILD].types == EXPECTED[(source_store, dest_store)]
    assert found[CHILD].not_null == {"id", "price"}
    assert found[CHILD].primary_key == ["id"] and found[PARENT].primary_key == ["id"]
    unique = (True, ("parent_id", "order"))
    assert unique in found[CHILD].indexes and (False, ("price",)) in found[CHILD].indexes
    assert found[CHILD].foreign_keys == [(("parent_id",), targets[PARENT].table, ("id",))]
    if dest_store != "sqlite":
        assert found[PARENT].comments == {UNI: "名前 'quoted'", "": "the parents"}
        assert found[CHILD].comments == {"note": "a note"}
        with pytest.raises(Exception, match=r"(?i)foreign key"):
            dest.execute(f"INSERT INTO {table(CHILD)} ({q('parent_id')}, {q('order')}) VALUES (99, 'w')")
    else:
        assert ddls[0].lossy == ("src.my table: comments dropped (SQLite keeps none)",)


def _catalog_of(dest: Dest, target: TargetName) -> Catalog:
    return {"mysql": _mysql_catalog, "postgres": _pg_catalog, "sqlite": _sqlite_catalog}[dest.plugin](dest.conn, target)


@pytest.mark.parametrize("dest_store", ["mysql", "postgres", "sqlite"])
def test_a_table_of_300_columns(dests: dict[str, Dest], dest_store: str) -> None:
    """A MySQL table of 300 columns (ints, strings, decimals) is made whole in each destination."""
    dest = dests[dest_store]
    kinds = ("int(11)", "varchar(10)", "decimal(10,2)")  # within InnoDB's 8,126-byte row, as a MySQL source is
    table = TableDef(TableRef("src", "wide"), tuple(_c(f"c{i:03}", kinds[i % 3]) for i in range(300)),
                     primary_key=("c000",))
    target = TargetName(dest.schema, "wide")
    ddl = translate(table, "mysql", dest_store, dest.options, target, lambda r: None)
    apply(dest, [ddl], {})
    found = _catalog_of(dest, target)
    assert list(found.types) == [f"c{i:03}" for i in range(300)] and found.primary_key == ["c000"]


def test_state_says_what_differs(dests: dict[str, Dest]) -> None:
    """A target that exists with other columns is ``differs``, naming them."""
    dest = dests["postgres"]
    table = TableDef(TableRef("src", "st"), (_c("a", "integer"), _c("b", "integer")))
    target = TargetName(dest.schema, "st")
    dest.execute(f'CREATE TABLE "{dest.schema}"."st" (a integer, c integer)')
    ddl = translate(table, "postgres", "postgres", dest.options, target, lambda r: None)
    session = dest.session()
    try:
        state = session.state(ddl)
    finally:
        session.close()
    assert state.state == "differs"
    assert state.differences == ("missing columns: b", "columns the source has not: c")



def test_mysql_create_table_in_a_single_table_task_says_it_needs_a_database_task(dests: dict[str, Dest]) -> None:
    """A single-table task's missing mysql table with create_table fails at prepare, saying why."""
    options, problems = parse(MysqlWriterOptions, {"host": "127.0.0.1", "user": "root", "table": "missing",
                                                   "database": dests["mysql"].schema, "create_table": True})
    assert not problems
    sink = registry.get("mysql").sink
    assert sink is not None
    with pytest.raises(PrepareError, match=r"needs a database task \(source\.params\.tables\) for now"):
        run_destination(sink, options, [[]])


def test_sqlite_keeps_a_decimal_default_as_its_text(dests: dict[str, Dest]) -> None:
    """A decimal column is TEXT in SQLite: its default 0.50 is stored as that text, not the real 0.5."""
    dest = dests["sqlite"]
    table = TableDef(TableRef("src", "dflt"), (_c("id", "int(11)"), _c("price", "decimal(5,2)", default="0.50")))
    target = TargetName(None, "dflt")
    apply(dest, [translate(table, "mysql", "sqlite", dest.options, target, lambda r: None)], {})
    dest.execute('INSERT INTO "dflt" ("id") VALUES (1)')
    assert dest.execute('SELECT price, typeof(price) FROM "dflt"') == [("0.50", "text")]

"""A database source's table definitions translated into each SQL destination's DDL (pure: nothing connects)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.plugin_helpers import parse
from wormhole.database.ddl import TableDdl, TargetName, TypesRefused, translate
from wormhole.database.model import ColumnDef, ForeignKeyDef, IndexDef, TableDef, TableRef
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.postgres.options import PostgresWriterOptions
from wormhole.plugins.sqlite.options import SqliteWriterOptions


@dataclass(frozen=True)
class Dest:
    column_types: dict[str, str] | None = None


def one(store: str, type_sql: str, dest: str, **column: Any) -> TableDdl:
    table = TableDef(TableRef("s", "t"), (ColumnDef("c", type_sql, True, **column),))
    return translate(table, store, dest, Dest(), TargetName(None if dest == "sqlite" else "d", "t"), lambda r: None)


def type_of(store: str, type_sql: str, dest: str) -> str:
    return one(store, type_sql, dest).columns[0].type_sql


@pytest.mark.parametrize(("source", "postgres"), [
    ("int(11)", "integer"), ("int(10) unsigned", "bigint"), ("bigint(20) unsigned", "numeric(20,0)"),
    ("bigint(20)", "bigint"), ("tinyint(1)", "smallint"), ("tinyint(3) unsigned", "smallint"),
    ("smallint(5) unsigned", "integer"), ("mediumint(8) unsigned", "integer"), ("decimal(12,2)", "numeric(12,2)"),
    ("decimal(65,30) unsigned", "numeric(65,30)"), ("float", "real"), ("double", "double precision"),
    ("varchar(25)", "varchar(25)"), ("char(3)", "varchar(3)"), ("text", "text"), ("longtext", "text"),
    ("enum('a','bcd')", "varchar(3)"), ("set('a','bcd')", "varchar(5)"),
    ("datetime(6)", "timestamp(6) without time zone"), ("datetime", "timestamp(0) without time zone"),
    ("timestamp(3)", "timestamp(3) with time zone"), ("date", "date"),
    ("time(3)", "time(3) without time zone"), ("year(4)", "smallint"), ("json", "json"), ("blob", "bytea"),
    ("varbinary(16)", "bytea"), ("binary(4)", "bytea"), ("bit(3)", "bigint"), ("bit(64)", "numeric(20,0)"),
    ("point", "bytea"), ("uuid", "uuid"), ("inet6", "inet"),
])
def test_mysql_types_become_postgres_types(source: str, postgres: str) -> None:
    """Each MySQL COLUMN_TYPE becomes the PostgreSQL type that holds every value the mysql reader gives."""
    assert type_of("mysql", source, "postgres") == postgres


@pytest.mark.parametrize(("source", "mysql"), [
    ("smallint", "smallint"), ("integer", "int"), ("bigint", "bigint"), ("boolean", "tinyint(1)"),
    ("numeric(15,2)", "decimal(15,2)"), ("real", "float"), ("double precision", "double"),
    ("character varying(25)", "varchar(25)"), ("character varying", "longtext"), ("character(3)", "char(3)"),
    ("character varying(20000)", "mediumtext"), ("text", "longtext"), ("bytea", "longblob"), ("uuid", "char(36)"),
    ("jsonb", "json"), ("json", "json"), ("date", "date"), ("timestamp without time zone", "datetime(6)"),
    ("timestamp(3) without time zone", "datetime(3)"), ("timestamp with time zone", "datetime(6)"),
    ("time(0) without time zone", "time(0)"), ("inet", "varchar(43)"),
])
def test_postgres_types_become_mysql_types(source: str, mysql: str) -> None:
    """Each PostgreSQL format_type becomes the MySQL type that holds its values."""
    assert type_of("postgres", source, "mysql") == mysql


@pytest.mark.parametrize(("source", "sqlite"), [
    ("int(11)", "INTEGER"), ("decimal(12,2)", "TEXT"), ("double", "REAL"), ("varchar(25)", "TEXT"), ("blob", "BLOB"),
    ("datetime(6)", "DATETIME"), ("date", "DATE"), ("json", "TEXT"), ("tinyint(1)", "INTEGER"), ("time", "TEXT"),
])
def test_mysql_types_become_sqlite_declared_types(source: str, sqlite: str) -> None:
    """A sqlite table gets the declared types the sqlite store gives the reader's logical types."""
    assert type_of("mysql", source, "sqlite") == sqlite


@pytest.mark.parametrize(("source", "mysql", "postgres"), [
    ("INTEGER", "bigint", "bigint"), ("VARCHAR(25)", "varchar(25)", "varchar(25)"), ("TEXT", "longtext", "text"),
    ("", "longtext", "text"), ("REAL", "double", "double precision"), ("BOOLEAN", "tinyint(1)", "boolean"),
    ("DECIMAL(12,2)", "decimal(12,2)", "numeric(12,2)"), ("DATETIME", "datetime(6)", "timestamp without time zone"),
    ("BLOB", "longblob", "bytea"), ("JSON", "json", "json"), ("DATE", "date", "date"),
])
def test_sqlite_declared_types_become_server_types(source: str, mysql: str, postgres: str) -> None:
    assert (type_of("sqlite", source, "mysql"), type_of("sqlite", source, "postgres")) == (mysql, postgres)


def test_same_store_keeps_the_declaration() -> None:
    assert type_of("mysql", "enum('a','b')", "mysql") == "enum('a','b')"
    assert type_of("postgres", "integer[]", "postgres") == "integer[]"


def test_types_without_exact_mapping_are_refused_with_every_column_and_the_choices() -> None:
    """Every column of the table whose type has no exact mapping is named at once, with the choices."""
    table = TableDef(TableRef("public", "t"), (ColumnDef("n", "numeric", True), ColumnDef("ok", "integer", True),
                                               ColumnDef("a", "integer[]", True), ColumnDef("i", "interval", True)))
    with pytest.raises(TypesRefused) as caught:
        translate(table, "postgres", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    problems = caught.value.problems
    assert len(problems) == 3
    assert problems[0].startswith("public.t.n: postgres type 'numeric'") and "decimal(65,30) or longtext" in problems[0]
    assert problems[1].startswith("public.t.a: postgres type 'integer[]'") and "json or longtext" in problems[1]
    assert problems[2].startswith("public.t.i:") and "column_types {'t.i': ...}" in problems[2]


def test_column_types_override_the_translation() -> None:
    """``column_types`` names a column by table.column or schema.table.column (the longer wins)."""
    table = TableDef(TableRef("public", "t"), (ColumnDef("n", "numeric", True), ColumnDef("a", "integer[]", True),
                                               ColumnDef("k", "integer", True)))
    dest = Dest({"t.n": "decimal(65,30)", "t.a": "json", "public.t.k": "bigint", "t.k": "int"})
    ddl = translate(table, "postgres", "mysql", dest, TargetName("d", "t"), lambda r: None)
    assert [c.type_sql for c in ddl.columns] == ["decimal(65,30)", "json", "bigint"]
    assert "`n` decimal(65,30), `a` json, `k` bigint" in ddl.create[0]


def test_tinyint_one_is_smallint_in_postgres_with_a_note() -> None:
    ddl = one("mysql", "tinyint(1)", "postgres")
    assert ddl.lossy == ("s.t.c: tinyint(1) -> smallint: not boolean: a TINYINT(1) may hold any of -128..127",)


def test_defaults_portable_kept_others_dropped_with_a_note() -> None:
    """Literals and the current date/time are translated; a function of the source's dialect is dropped with a
    note (but kept between two tables of one store)."""
    table = TableDef(TableRef("s", "t"), (
        ColumnDef("a", "varchar(10)", True, "'it''s \\\\ x'"),
        ColumnDef("b", "datetime(6)", True, "current_timestamp(6)"),
        ColumnDef("c", "int(11)", True, "-1"), ColumnDef("d", "varchar(36)", True, "uuid()"),
        ColumnDef("e", "date", True, "curdate()"), ColumnDef("f", "int(11)", True, "NULL")))
    pg = translate(table, "mysql", "postgres", Dest(), TargetName("d", "t"), lambda r: None)
    assert [c.default_sql for c in pg.columns] == ["'it''s \\ x'", "CURRENT_TIMESTAMP", "-1", None, "CURRENT_DATE",
                                                   None]
    assert "s.t.d: default uuid() dropped (no postgres form of it)" in pg.lossy
    my = translate(table, "mysql", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    assert [c.default_sql for c in my.columns] == ["'it''s \\\\ x'", "CURRENT_TIMESTAMP(6)", "-1", "uuid()",
                                                   "(CURRENT_DATE)", None]
    pg_table = TableDef(TableRef("s", "t"), (ColumnDef("a", "character varying(5)", True, "'x'::character varying"),
                                             ColumnDef("z", "text", True, "NULL::text"),
                                             ColumnDef("b", "boolean", True, "true"),
                                             ColumnDef("c", "integer", False, "nextval('t_c_seq'::regclass)",
                                                       auto_increment=True)))
    my = translate(pg_table, "postgres", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    assert [c.default_sql for c in my.columns] == ["'x'", None, "1", None]
    assert my.lossy == ("s.t.b: boolean -> tinyint(1): MySQL's BOOLEAN is TINYINT(1): false and true are 0 and 1",)


def test_postgres_index_names_are_prefixed_and_cut_to_63_bytes() -> None:
    """PostgreSQL's index names are the schema's: prefixed by the target table, cut with a hash when too long."""
    long = "é" * 40
    table = TableDef(TableRef("s", "t"), (ColumnDef("a", "int(11)", True),),
                     indexes=(IndexDef(long + "1", ("a",), False), IndexDef(long + "2", ("a",), True)))
    ddl = translate(table, "mysql", "postgres", Dest(), TargetName("d", "tab"), lambda r: None)
    names = [s.split('"')[1] for s in ddl.after_load]
    assert all(len(n.encode()) <= 63 for n in names) and names[0] != names[1]
    assert all(n.startswith("tab_é") for n in names)
    assert ddl.after_load[1].startswith("CREATE UNIQUE INDEX")


def test_foreign_keys_to_tables_not_copied_are_skipped_with_a_note() -> None:
    fks = (ForeignKeyDef("fk_a", ("a",), TableRef("s", "p"), ("id",), on_delete="CASCADE"),
           ForeignKeyDef("fk_b", ("b",), TableRef("s", "gone"), ("id",)))
    table = TableDef(TableRef("s", "c"), (ColumnDef("a", "int(11)", True), ColumnDef("b", "int(11)", True)),
                     foreign_keys=fks)

    def where(ref: TableRef) -> TargetName | None:
        return TargetName("x", "p2") if ref.name == "p" else None

    ddl = translate(table, "mysql", "postgres", Dest(), TargetName("x", "c2"), where)
    assert ddl.foreign_keys == ('ALTER TABLE "x"."c2" ADD CONSTRAINT "fk_a" FOREIGN KEY ("a") REFERENCES "x"."p2" '
                                '("id") ON DELETE CASCADE',)
    assert ddl.lossy == ("s.c: foreign key fk_b skipped: s.gone is not copied by this task",)
    assert translate(table, "mysql", "postgres", Dest(), TargetName("x", "c2"), where,
                     foreign_keys=False).foreign_keys == ()
    my = translate(table, "mysql", "mysql", Dest(), TargetName("x", "c2"), where)
    assert "ADD CONSTRAINT `c2_fk_a`" in my.foreign_keys[0]  # InnoDB's names are the database's
    lite = translate(table, "mysql", "sqlite", Dest(), TargetName(None, "c2"), where)
    assert lite.foreign_keys == () and 'FOREIGN KEY ("a") REFERENCES "p2" ("id") ON DELETE CASCADE' in lite.create[0]


def test_mysql_refuses_a_text_key_and_prefixes_a_text_index() -> None:
    table = TableDef(TableRef("public", "t"), (ColumnDef("k", "text", False), ColumnDef("v", "text", True)),
                     primary_key=("k",), indexes=(IndexDef("iv", ("v",), False),))
    with pytest.raises(TypesRefused, match=r"public\.t\.k: longtext is in the primary key"):
        translate(table, "postgres", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    ddl = translate(table, "postgres", "mysql", Dest({"t.k": "varchar(200)"}), TargetName("d", "t"), lambda r: None)
    assert ddl.after_load == ("ALTER TABLE `d`.`t` ADD INDEX `iv` (`v`(255))",)
    assert "public.t: index iv keys the first 255 characters of v (longtext)" in ddl.lossy


def test_auto_increment_and_sequences_per_store() -> None:
    table = TableDef(TableRef("s", "t"), (ColumnDef("id", "int(10) unsigned", False, auto_increment=True),),
                     primary_key=("id",))
    pg = translate(table, "mysql", "postgres", Dest(), TargetName("d", "t"), lambda r: None)
    assert '"id" bigint NOT NULL GENERATED BY DEFAULT AS IDENTITY' in pg.create[0]
    assert pg.sequences[0].max_sql is None and "setval(pg_get_serial_sequence('\"d\".\"t\"', 'id')" in \
        pg.sequences[0].set_sql
    serial = TableDef(TableRef("s", "t"), (ColumnDef("id", "integer", False, "nextval('t_id_seq'::regclass)",
                                                     auto_increment=True),), primary_key=("id",))
    my = translate(serial, "postgres", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    assert "`id` int NOT NULL AUTO_INCREMENT" in my.create[0]
    assert my.sequences[0].max_sql == "SELECT COALESCE(MAX(`id`), 0) + 1 FROM `d`.`t`"
    lite = translate(table, "mysql", "sqlite", Dest(), TargetName(None, "t"), lambda r: None)
    assert lite.create[0] == 'CREATE TABLE "t" ("id" INTEGER NOT NULL PRIMARY KEY)' and lite.sequences == ()


def test_mysql_auto_increment_not_leading_the_key_gets_a_key_of_its_own() -> None:
    table = TableDef(TableRef("s", "t"), (ColumnDef("k", "integer", False), ColumnDef("n", "integer", False,
                                                                                     auto_increment=True)),
                     primary_key=("k",))
    ddl = translate(table, "postgres", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    assert ddl.create[0].startswith("CREATE TABLE `d`.`t` (`k` int NOT NULL, `n` int NOT NULL AUTO_INCREMENT, "
                                    "PRIMARY KEY (`k`), KEY (`n`))")


def test_mysql_bit_default_becomes_its_integer() -> None:
    ddl = one("mysql", "bit(3)", "postgres", default_sql="b'101'")
    assert ddl.columns[0].default_sql == "5"


def test_comments_per_store() -> None:
    table = TableDef(TableRef("s", "t"), (ColumnDef("a", "int(11)", True, comment="it's a"),), comment="the t")
    pg = translate(table, "mysql", "postgres", Dest(), TargetName("d", "t"), lambda r: None)
    assert pg.create[1:] == ('COMMENT ON TABLE "d"."t" IS \'the t\'', 'COMMENT ON COLUMN "d"."t"."a" IS \'it\'\'s a\'')
    my = translate(table, "mysql", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    assert my.create == ("CREATE TABLE `d`.`t` (`a` int(11) COMMENT 'it''s a') DEFAULT CHARSET=utf8mb4 "
                         "COMMENT='the t'",)
    lite = translate(table, "mysql", "sqlite", Dest(), TargetName(None, "t"), lambda r: None)
    assert lite.lossy == ("s.t: comments dropped (SQLite keeps none)",)
    long = TableDef(TableRef("s", "t"), (ColumnDef("a", "integer", True, comment="x" * 1100),), comment="y" * 2100)
    my = translate(long, "postgres", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    assert my.lossy == ("s.t.a: comment cut to 1024 characters (MySQL's most)",
                        "s.t: comment cut to 2048 characters (MySQL's most)")
    assert f"COMMENT '{'x' * 1024}'" in my.create[0] and f"COMMENT='{'y' * 2048}'" in my.create[0]


@pytest.mark.parametrize("cls", [MysqlWriterOptions, PostgresWriterOptions, SqliteWriterOptions])
def test_column_types_is_a_destination_param(cls: type) -> None:
    base = {"path": "/tmp/x.db", "table": "t"} if cls is SqliteWriterOptions else \
        {"host": "h", "user": "u", "database": "d", "table": "t"}
    options, problems = parse(cls, {**base, "column_types": {"t.n": "decimal(65,30)"}})
    assert not problems and options.column_types == {"t.n": "decimal(65,30)"}
    _, problems = parse(cls, {**base, "column_types": {"n": "x", "t.m": ""}})
    assert problems.items == ["destinations[0].params.column_types.n: must be 'table.column' or 'schema.table.column'",
                              "destinations[0].params.column_types.t.m: must be a type (non-empty text)"]


def test_a_small_table_gets_its_key_and_indexes_with_the_table() -> None:
    """``indexes_with_table`` (a small table): the key and indexes are in CREATE TABLE (MySQL) or right after it
    (PostgreSQL, sqlite); ``after_load`` keeps them for a table a crashed run may have made without them."""
    table = TableDef(TableRef("s", "t"), (ColumnDef("id", "int(11)", False), ColumnDef("v", "varchar(20)", True)),
                     primary_key=("id",), indexes=(IndexDef("iv", ("v",), False), IndexDef("uv", ("v", "id"), True)))
    my = translate(table, "mysql", "mysql", Dest(), TargetName("d", "t"), lambda r: None, indexes_with_table=True)
    assert my.indexed and len(my.create) == 1
    assert "PRIMARY KEY (`id`), INDEX `iv` (`v`), UNIQUE INDEX `uv` (`v`, `id`))" in my.create[0]
    assert my.after_load == ("ALTER TABLE `d`.`t` ADD INDEX `iv` (`v`), ADD UNIQUE INDEX `uv` (`v`, `id`)",)
    later = translate(table, "mysql", "mysql", Dest(), TargetName("d", "t"), lambda r: None)
    assert not later.indexed and "INDEX" not in later.create[0] and later.after_load == my.after_load
    pg = translate(table, "mysql", "postgres", Dest(), TargetName("d", "t"), lambda r: None, indexes_with_table=True)
    assert pg.indexed and 'PRIMARY KEY ("id")' in pg.create[0]
    assert pg.create[1:] == pg.after_load[1:] and pg.after_load[0].endswith('ADD PRIMARY KEY ("id")')
    assert [s.split()[1] for s in pg.create[1:]] == ["INDEX", "UNIQUE"]
    lite = translate(table, "mysql", "sqlite", Dest(), TargetName(None, "t"), lambda r: None, indexes_with_table=True)
    assert lite.indexed and lite.create[1:] == lite.after_load and len(lite.after_load) == 2

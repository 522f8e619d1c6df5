"""The table ``create_table`` makes (types: docs/manual/postgres.md, *create_table*): a column by its logical
type, or, read by a mysql source (its COLUMN_TYPE in :attr:`Column.native`), the closest type that holds
every value; a postgres array of a built-in type keeps its declaration. And PostgreSQL's DDL words for a
whole-database task (:class:`PostgresDdl`, :mod:`wormhole.database.ddl`; docs/manual/types.md, *Whole-database DDL*)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from wormhole.database.model import ColumnDef
from wormhole.errors import PrepareError
from wormhole.plugins.ddl import (
    Default,
    Kind,
    Mapped,
    PlannedColumn,
    Refused,
    SequenceStep,
    SqlType,
    TablePlan,
    TargetName,
)
from wormhole.plugins.postgres.connection import PLUGIN_NAME, connect
from wormhole.plugins.schema import Column, Schema
from wormhole.plugins.sql import quote
from wormhole.plugins.sql.ddl import SqlDdl, SqlDdlSession, auto_column, int_args, string_literal, utf8_bytes

_LOGICAL = {"int": "bigint", "float": "double precision", "string": "text", "bytes": "bytea", "bool": "boolean",
            "date": "date", "datetime": "timestamp(6)", "json": "jsonb"}

_MYSQL = re.compile(r"(?P<type>[a-z]+)(?:\((?P<args>[^)]*)\))?(?P<unsigned> unsigned)?(?: zerofill)?(?: [a-z0-9_]+)?")
"""A MySQL COLUMN_TYPE as the mysql reader keeps it (``varchar(40) utf8mb4``, ``int(10) unsigned``)."""

_INTS = {"tinyint": ("smallint", "smallint"), "smallint": ("smallint", "integer"),
         "mediumint": ("integer", "integer"), "int": ("integer", "bigint"), "bigint": ("bigint", "numeric(20)"),
         "year": ("smallint", "smallint")}
"""MySQL integer type -> (signed, unsigned) PostgreSQL type holding every value."""
_TEXTS = frozenset({"tinytext", "text", "mediumtext", "longtext", "enum", "set", "time"})
_BYTES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point",
                    "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection"})


def logical_type(column: Column) -> str:
    if column.type == "int" and column.unsigned:
        return "numeric(20)"
    if column.type == "decimal":
        return "numeric" if column.precision is None else f"numeric({column.precision},{column.scale or 0})"
    return _LOGICAL[column.type]


def mysql_type(native: str, logical: str) -> str | None:
    """The PostgreSQL type of a MySQL COLUMN_TYPE whose values travel as ``logical``; None when ``native``
    is not one (or does not agree with the logical type)."""
    found = _MYSQL.fullmatch(native.strip().lower())
    if found is None:
        return None
    kind, args, unsigned = found["type"], found["args"], found["unsigned"] is not None
    wants, pg = _mysql_type(kind, args, unsigned)
    return pg if wants == logical else None


def _mysql_type(kind: str, args: str | None, unsigned: bool) -> tuple[str, str | None]:
    """(the logical type the mysql reader gives such a column, its PostgreSQL type)."""
    if kind in _INTS:
        return "int", _INTS[kind][unsigned]
    return _mysql_number(kind, args) or _mysql_other(kind, args)


def _mysql_number(kind: str, args: str | None) -> tuple[str, str | None] | None:
    """As :func:`_mysql_type`, for the bit, decimal and floating point types (None: another kind)."""
    if kind == "bit":
        width = int(args) if args and args.isdigit() else 1
        return "int", "boolean" if width == 1 else "numeric(20)" if width == 64 else "bigint"
    if kind in ("decimal", "numeric"):
        return "decimal", f"numeric({args})" if args else "numeric"
    if kind in ("float", "double", "real"):
        return "float", "real" if kind == "float" and not args else "double precision"
    return None


def _mysql_other(kind: str, args: str | None) -> tuple[str, str | None]:
    """As :func:`_mysql_type`, for the text, bytes, time and json types; ``("", None)`` for another kind."""
    if kind in ("char", "varchar"):
        return "string", f"varchar({args})" if args and args.isdigit() else "text"
    if kind in _TEXTS:
        return "string", "text"
    if kind in _BYTES:
        return "bytes", "bytea"
    if kind in ("datetime", "timestamp"):
        return "datetime", f"timestamp({args})" if args and args.isdigit() else "timestamp(0)"
    if kind == "date":
        return "date", "date"
    if kind == "json":
        return "json", "jsonb"
    return "", None


def column_type(column: Column) -> str:
    """The PostgreSQL type ``create_table`` gives ``column``."""
    if column.native and column.type == "json" and column.native.endswith("[]"):
        return column.native  # a postgres array's own declaration (no MySQL type ends so)
    if column.native:
        found = mysql_type(column.native, column.type)
        if found is not None:
            return found
    return logical_type(column)


def create_table_sql(target: str, names: Sequence[str], schema: Schema,
                     distributed_by: Sequence[str] | None = None) -> str:
    """``CREATE TABLE`` of ``target`` (a qualified, quoted name) with the columns ``names`` (by position,
    of ``schema``'s columns), NOT NULL where the source's column is, Greenplum's distribution appended."""
    columns = []
    for name, column in zip(names, schema.columns, strict=True):
        columns.append(f"{quote(name)} {column_type(column)}" + ("" if column.nullable else " NOT NULL"))
    sql = f"CREATE TABLE {target} ({', '.join(columns)})"
    if distributed_by:
        sql += f" DISTRIBUTED BY ({', '.join(quote(c) for c in distributed_by)})"
    return sql


# -- whole-database DDL (wormhole.database.ddl) ------------------------------------------------------------

_PG_TYPE = re.compile(r"(?P<head>[a-z\" ._]+?)\s*(?:\((?P<args>[^)]*)\))?(?P<tail>(?:\s+[a-z ]*)?)")
_PG_INTS = {"smallint": 2, "integer": 4, "bigint": 8, "int2": 2, "int4": 4, "int8": 8, "int": 4}
_PG_NAMES: dict[str, Kind] = {
    "boolean": "bool", "real": "float4", "double precision": "float8", "text": "text", "bytea": "blob",
    "date": "date", "json": "json", "jsonb": "jsonb", "uuid": "uuid", "inet": "inet", "cidr": "inet",
    "macaddr": "macaddr", "macaddr8": "macaddr", "xml": "xml", "character varying": "varchar",
    "character": "char", "bit": "bit", "bit varying": "varbit", "numeric": "decimal",
    "timestamp without time zone": "datetime", "timestamp with time zone": "timestamptz",
    "time without time zone": "time", "time with time zone": "timetz"}
_CAST = re.compile(r"(?:::[a-z_ \"]+(?:\([0-9, ]*\))?(?:\[\])?)+$", re.IGNORECASE)
"""The casts PostgreSQL's catalog shows after a default (``'a'::character varying``, ``'{}'::jsonb``)."""
_IDENTITY_TYPES = frozenset({"smallint", "integer", "bigint"})


class PostgresDdl(SqlDdl):
    """PostgreSQL (Greenplum alike)."""

    key_after_load = True

    name = PLUGIN_NAME
    name_measure = staticmethod(utf8_bytes)  # NAMEDATALEN counts bytes
    cast = _CAST

    def quote(self, identifier: str) -> str:
        return quote(identifier)

    # -- as a source ------------------------------------------------------------------------------

    def parse_type(self, type_sql: str) -> SqlType:
        text = type_sql.strip()
        if text.endswith("[]"):
            return SqlType("array", type_sql, element=self.parse_type(text[:-2]))
        found = _PG_TYPE.fullmatch(text.lower())
        if found is None:
            return SqlType("other", type_sql)
        name = " ".join((found["head"] + " " + found["tail"]).split())
        numbers = int_args(found["args"])
        if name in _PG_INTS:
            return SqlType("int", type_sql, _PG_INTS[name])
        kind = _PG_NAMES.get(name)
        if kind is None:
            return SqlType("interval" if name.startswith("interval") else "other", type_sql)
        if kind == "decimal":
            return SqlType(kind, type_sql, precision=numbers[0] if numbers else None,
                           scale=(numbers[1] if len(numbers) > 1 else 0) if numbers else None)
        if kind in ("datetime", "timestamptz", "time", "timetz"):
            return SqlType(kind, type_sql, precision=numbers[0] if numbers else None)
        if kind in ("varchar", "char", "bit", "varbit"):
            return SqlType(kind, type_sql, numbers[0] if numbers else (1 if kind in ("char", "bit") else None))
        return SqlType(kind, type_sql)

    def parse_default(self, default_sql: str) -> Default | None:
        if default_sql.strip().lower().startswith("nextval("):
            return None  # a serial's sequence: the column is auto_increment
        return super().parse_default(default_sql)

    # -- as a destination -------------------------------------------------------------------------

    def column_type(self, source: SqlType, column: ColumnDef) -> Mapped | Refused:
        if source.kind == "int":
            return _pg_int(source, column)
        if source.kind in _PG_FIXED:
            return Mapped(*_PG_FIXED[source.kind])
        made = _PG_MADE.get(source.kind)
        return Refused("has no PostgreSQL type", ("text", "bytea")) if made is None else made(source)

    def render_default(self, default: Default, type_sql: str) -> str | None:
        boolean = type_sql.strip().lower() == "boolean"
        if default.kind == "bool" or (boolean and default.value in ("0", "1")):
            return "true" if default.value in ("true", "1") else "false"
        if default.kind == "clock":
            return "LOCALTIME"
        return super().render_default(default, type_sql)

    def column_sql(self, column: PlannedColumn, plan: TablePlan) -> str:
        sql = super().column_sql(column, plan)
        if column.auto_increment and column.type_sql.strip().lower() in _IDENTITY_TYPES:
            sql += " GENERATED BY DEFAULT AS IDENTITY"
        return sql

    def comments(self, plan: TablePlan) -> list[str]:
        table = self.qualified(plan.target)
        out = [f"COMMENT ON TABLE {table} IS {string_literal(plan.comment)}"] if plan.comment else []
        return out + [f"COMMENT ON COLUMN {table}.{quote(c.name)} IS {string_literal(c.comment)}"
                      for c in plan.columns if c.comment]

    def sequences(self, plan: TablePlan) -> list[SequenceStep]:
        auto = auto_column(plan)
        if auto is None or auto.type_sql.strip().lower() not in _IDENTITY_TYPES:
            return []
        table = self.qualified(plan.target)
        return [SequenceStep(auto.name, f"SELECT setval(pg_get_serial_sequence({string_literal(table)}, "
                                        f"{string_literal(auto.name)}), COALESCE(MAX({quote(auto.name)}), 0) + 1, "
                                        f"false) FROM {table}")]

    def lossy(self, plan: TablePlan) -> list[str]:
        auto = auto_column(plan)
        if auto is not None and auto.type_sql.strip().lower() not in _IDENTITY_TYPES:
            return [f"{plan.source.key}.{auto.name}: auto-increment dropped (a PostgreSQL identity must be smallint, "
                    f"integer or bigint, not {auto.type_sql})"]
        return []


_MYSQL_INT = {1: "tinyint", 2: "smallint", 3: "mediumint", 4: "int", 8: "bigint"}


def _pg_int(source: SqlType, column: ColumnDef) -> Mapped:
    if source.length == 8 and source.unsigned:
        if column.auto_increment:
            return Mapped("bigint", "an auto-increment BIGINT UNSIGNED as bigint (identity): an id beyond "
                                    "9223372036854775807 would be a refused row")
        return Mapped("numeric(20,0)", "PostgreSQL has no unsigned integers: numeric(20,0) holds every value")
    pg = _INTS[_MYSQL_INT[source.length or 8]][source.unsigned]
    if source.declared.strip().lower().startswith("tinyint(1)"):
        return Mapped(pg, "not boolean: a TINYINT(1) may hold any of -128..127")
    return Mapped(pg)


def _digits(source: SqlType) -> str:
    return "" if source.precision is None else f"({min(source.precision, 6)})"


def _pg_time(source: SqlType) -> Mapped:
    if source.kind == "time":
        return Mapped(f"time{_digits(source)} without time zone",
                      "PostgreSQL's time holds 00:00:00 to 24:00:00: a MySQL TIME beyond (a duration) is a refused row "
                      "(interval or text keeps it)")
    zone = "with" if source.kind == "timestamptz" else "without"
    return Mapped(f"timestamp{_digits(source)} {zone} time zone")


def _pg_labels(source: SqlType) -> Mapped:
    labels = source.labels
    width = max((len(x) for x in labels), default=1) if source.kind == "enum" else \
        max(1, sum(len(x) for x in labels) + len(labels) - 1)
    return Mapped(f"varchar({width})", f"the labels as text (the list of allowed {source.kind} values is not kept)")


_PG_FIXED: dict[str, tuple[str, str | None]] = {
    "bool": ("boolean", None), "float4": ("real", None), "float8": ("double precision", None), "text": ("text", None),
    "xml": ("text", None), "date": ("date", None), "year": ("smallint", None), "json": ("json", None),
    "jsonb": ("jsonb", None), "uuid": ("uuid", None), "inet": ("inet", None),
    **dict.fromkeys(("binary", "varbinary", "blob"), ("bytea", None))}
"""Neutral kinds with one PostgreSQL type (and a note when it is another type of the same values)."""
_PG_MADE: dict[str, Callable[[SqlType], Mapped]] = {
    "decimal": lambda t: Mapped("numeric" if t.precision is None else f"numeric({t.precision},{t.scale or 0})"),
    "char": lambda t: Mapped(f"varchar({t.length})", "CHAR(n) as varchar(n): the values as read, without "
                                                      "PostgreSQL's padding (MySQL drops a CHAR's trailing spaces)"),
    "varchar": lambda t: Mapped(f"varchar({t.length})" if t.length else "text"),
    "enum": _pg_labels, "set": _pg_labels,
    "bit": lambda t: Mapped("numeric(20,0)" if (t.length or 1) >= 64 else "bigint",
                            "a BIT(n)'s value as an integer (PostgreSQL's bit(n) takes no integer)"),
    **dict.fromkeys(("datetime", "timestamptz", "time"), _pg_time)}
"""Neutral kinds whose PostgreSQL type depends on their length, digits or labels."""


def _columns_of(conn: Any, target: TargetName) -> list[str] | None:
    relation = f"{quote(target.schema or 'public')}.{quote(target.table)}"
    rows = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                        "AND NOT attisdropped ORDER BY attnum", (relation,)).fetchall()
    return [str(r[0]) for r in rows] or None


def open_session(options: Any) -> SqlDdlSession:
    """A DDL session on a postgres destination (its ``database``, autocommit)."""
    conn = connect(options.endpoint(options.database), PrepareError, attempts=options.connect_retries,
                   timeout=options.connect_timeout_s)
    return SqlDdlSession(conn, _columns_of, fold=False, plugin=PLUGIN_NAME)


POSTGRES_DDL = PostgresDdl()

"""MySQL's DDL words (:mod:`wormhole.database.ddl`): its COLUMN_TYPEs read as neutral types, and another store's
table written as a MySQL table (docs/manual/types.md, *Whole-database DDL*)."""

from __future__ import annotations

import dataclasses
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
    TableDdl,
    TablePlan,
    TargetName,
    TypesRefused,
)
from wormhole.plugins.mysql.connection import PLUGIN_NAME, connect
from wormhole.plugins.sql import backquote
from wormhole.plugins.sql.ddl import (
    SqlDdl,
    SqlDdlSession,
    auto_column,
    int_args,
    quoted_strings,
    split_type,
    string_literal,
)

_INT_BYTES = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 8}
_INT_NAMES = {1: "tinyint", 2: "smallint", 3: "mediumint", 4: "int", 8: "bigint"}
_TEXTS = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": None}
_BLOBS = {"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": None}
_GEOMETRY = ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
              "multipolygon", "geometrycollection")
MAX_VARCHAR = 16383
"""The longest VARCHAR of utf8mb4 characters a row of 65,535 bytes can hold; a longer one becomes a TEXT type."""
MAX_KEY_CHARS = 768
"""utf8mb4 characters InnoDB can index whole (3,072 bytes); a longer column is indexed by a prefix."""
KEY_PREFIX = 255
MAX_COLUMN_COMMENT, MAX_TABLE_COMMENT = 1024, 2048
"""MySQL's longest comments, in characters: a longer one is an error in strict mode."""
_BIT = re.compile(r"b'([01]+)'", re.IGNORECASE)


class MysqlDdl(SqlDdl):
    """MySQL and MariaDB."""

    name = PLUGIN_NAME
    backslashes = True  # wormhole's sessions run without NO_BACKSLASH_ESCAPES
    name_limit = 64
    index_per_table = True
    fk_per_table = False  # InnoDB's foreign key names are the database's

    def quote(self, identifier: str) -> str:
        return backquote(identifier)

    # -- as a source ------------------------------------------------------------------------------

    def parse_type(self, type_sql: str) -> SqlType:
        name, args, rest = split_type(type_sql)
        numbers = int_args(args)
        if name in _INT_BYTES:
            return SqlType("int", type_sql, _INT_BYTES[name], numbers[0] if numbers else None,
                           unsigned="unsigned" in rest)
        if name in ("decimal", "numeric", "dec", "fixed"):
            return SqlType("decimal", type_sql, precision=numbers[0] if numbers else 10,
                           scale=numbers[1] if len(numbers) > 1 else 0, unsigned="unsigned" in rest)
        if name in ("float", "double", "real", "double precision"):
            # FLOAT(p) with p > 24 is a DOUBLE; the deprecated FLOAT(M,D) is a single still.
            single = name == "float" and (len(numbers) != 1 or numbers[0] <= 24)
            return SqlType("float4" if single else "float8", type_sql)
        if name in ("enum", "set"):
            return SqlType(_SIZED[name], type_sql, labels=quoted_strings(args or "", backslashes=True) or ())
        if name in _SIZED:
            return SqlType(_SIZED[name], type_sql, numbers[0] if numbers else 1)
        if name in _TEXTS or name in _BLOBS:
            return SqlType("text" if name in _TEXTS else "blob", type_sql, {**_TEXTS, **_BLOBS}[name])
        if name in _TIMES:
            return SqlType(_TIMES[name], type_sql, precision=numbers[0] if numbers else 0)
        return SqlType(_SIMPLE.get(name, "other"), type_sql)

    def parse_default(self, default_sql: str) -> Default | None:
        bits = _BIT.fullmatch(default_sql.strip())
        if bits is not None:
            return Default("number", str(int(bits[1], 2)))  # a BIT's default: the integer the reader gives
        return super().parse_default(default_sql)

    # -- as a destination -------------------------------------------------------------------------

    def column_type(self, source: SqlType, column: ColumnDef) -> Mapped | Refused:
        if source.kind in _FIXED:
            return Mapped(*_FIXED[source.kind])
        made = _MADE.get(source.kind)
        return _refused(source) if made is None else made(source)

    def render_default(self, default: Default, type_sql: str) -> str | None:
        name, args, _ = split_type(type_sql)
        if default.kind == "now":
            if name not in ("datetime", "timestamp"):
                return None
            fsp = int_args(args)
            return f"CURRENT_TIMESTAMP({fsp[0]})" if fsp and fsp[0] else "CURRENT_TIMESTAMP"
        if default.kind in ("today", "clock"):
            return "(CURRENT_DATE)" if default.kind == "today" else "(CURRENT_TIME)"
        rendered = super().render_default(default, type_sql)
        if rendered is not None and (name in _TEXTS or name in _BLOBS or name == "json"):
            return f"({rendered})"  # MySQL 8 takes a literal default for these only as an expression
        return rendered

    def column_sql(self, column: PlannedColumn, plan: TablePlan) -> str:
        sql = super().column_sql(column, plan)
        if column.auto_increment:
            sql += " AUTO_INCREMENT"
        if column.comment:
            sql += f" COMMENT {self.literal(column.comment[:MAX_COLUMN_COMMENT])}"
        return sql

    def literal(self, text: str) -> str:
        return string_literal(text, backslashes=True)

    def extra_definitions(self, plan: TablePlan, foreign_keys: bool) -> list[str]:
        auto = auto_column(plan)
        if auto is not None and (not plan.primary_key or plan.primary_key[0] != auto.name):
            return [f"KEY ({self.quote(auto.name)})"]  # MySQL's auto-increment column must lead a key
        return []

    def table_suffix(self, plan: TablePlan) -> str:
        # Another store's strings compare byte for byte (a unique 'a' and 'A' are two values): a binary collation.
        suffix = " DEFAULT CHARSET=utf8mb4" + ("" if plan.source_plugin == PLUGIN_NAME else " COLLATE=utf8mb4_bin")
        return suffix + (f" COMMENT={self.literal(plan.comment[:MAX_TABLE_COMMENT])}" if plan.comment else "")

    def index_statements(self, plan: TablePlan) -> list[str]:
        if not plan.indexes:
            return []
        adds = [f"ADD {d}" for d in self.index_definitions(plan)]
        # One ALTER: InnoDB reads the rows once for all the table's indexes.
        return [f"ALTER TABLE {self.qualified(plan.target)} {', '.join(adds)}"]

    def index_definitions(self, plan: TablePlan) -> list[str]:
        types = {c.name.casefold(): c.type_sql for c in plan.columns}
        out = []
        for index in plan.indexes:
            parts = [self.quote(c) + (f"({KEY_PREFIX})" if _too_long(types.get(c.casefold(), "")) else "")
                     for c in index.columns]
            out.append(f"{'UNIQUE ' if index.unique else ''}INDEX {self.quote(self.index_name(plan, index))} "
                       f"({', '.join(parts)})")
        return out

    def sequences(self, plan: TablePlan) -> list[SequenceStep]:
        auto = auto_column(plan)
        if auto is None:
            return []
        table = self.qualified(plan.target)
        return [SequenceStep(auto.name, f"ALTER TABLE {table} AUTO_INCREMENT = {{next}}",
                             f"SELECT COALESCE(MAX({self.quote(auto.name)}), 0) + 1 FROM {table}")]

    def statements(self, plan: TablePlan, foreign_keys: bool) -> TableDdl:
        problems = _key_problems(plan)
        if problems:
            raise TypesRefused(problems, where=f"mysql DDL of {plan.source.key}")
        ddl = super().statements(plan, foreign_keys)
        types = {c.name.casefold(): c.type_sql for c in plan.columns}
        notes = [f"{plan.source.key}{'.' + c.name if c.name else ''}: comment cut to {limit} characters (MySQL's most)"
                 for c, limit in [*((c, MAX_COLUMN_COMMENT) for c in plan.columns),
                                  (PlannedColumn("", "", True, comment=plan.comment), MAX_TABLE_COMMENT)]
                 if c.comment and len(c.comment) > limit]
        notes += [f"{plan.source.key}: index {i.name} keys the first {KEY_PREFIX} characters of {c} "
                 f"({types[c.casefold()]})" for i in plan.indexes for c in i.columns
                 if not i.unique and _too_long(types.get(c.casefold(), ""))]
        return dataclasses.replace(ddl, lossy=ddl.lossy + tuple(notes))


def _int(source: SqlType) -> Mapped:
    return Mapped(_INT_NAMES[source.length or 8] + (" unsigned" if source.unsigned else ""))


def _char(source: SqlType) -> Mapped:
    n = source.length
    return Mapped(f"char({n})" if n and n <= 255 else f"varchar({n})")


def _bytes(source: SqlType) -> Mapped:
    n = source.length
    return Mapped(f"{source.kind}({n})" if source.kind != "blob" and n else "longblob")


def _time(source: SqlType) -> Mapped:
    if source.kind == "timestamptz":
        return Mapped(f"datetime({_fsp(source)})", "the time in UTC (wormhole's sessions are UTC; MySQL's TIMESTAMP "
                                                   "holds only 1970 to 2038)")
    return Mapped(f"{source.kind}({_fsp(source)})")


def _fsp(source: SqlType) -> int:
    """Fractional-second digits of a MySQL date-time: the source's, at most 6 (None: PostgreSQL's default, 6)."""
    return 6 if source.precision is None else min(source.precision, 6)


def _decimal(source: SqlType) -> Mapped | Refused:
    p, s = source.precision, source.scale or 0
    if p is None:
        return Refused("declares no precision (any number of digits) and MySQL's DECIMAL needs one",
                       ("decimal(65,30)", "longtext"))
    if p <= 65 and 0 <= s <= 30:
        return Mapped(f"decimal({p},{s})")
    return Refused("holds more digits than MySQL's DECIMAL (at most 65, 30 after the point)",
                   ("decimal(65,30)", "longtext"))


def _text(source: SqlType) -> Mapped:
    n = source.length
    if source.kind in ("enum", "set"):
        return Mapped(source.declared)  # the same declaration (a sqlite or PostgreSQL source has none)
    if source.kind == "varchar" and n is not None and n <= MAX_VARCHAR:
        return Mapped(f"varchar({n})")
    if n is None:
        return Mapped("longtext")
    # A TEXT type's size is in bytes; a utf8mb4 character takes up to 4.
    note = f"longer than a VARCHAR a row holds ({MAX_VARCHAR} characters)"
    return Mapped("text" if n * 4 <= 65535 else "mediumtext" if n * 4 <= 16777215 else "longtext", note)


def _refused(source: SqlType) -> Refused:
    if source.kind == "array":
        return Refused("is an array, which MySQL has not", ("json", "longtext"))
    if source.kind == "decimal":
        return Refused("has no MySQL DECIMAL", ("decimal(65,30)", "longtext"))
    if source.kind in ("bit", "varbit"):
        return Refused("is a bit string (read as its text of 0s and 1s), which MySQL's BIT does not take",
                       (f"varchar({source.length or 64})", "longtext"))
    if source.kind == "timetz":
        return Refused("has a time zone offset, which MySQL's TIME has not", ("time(6) (the offset dropped)",
                                                                              "varchar(32)"))
    if source.kind == "interval":
        return Refused("is an interval, which MySQL has not (read as its ISO 8601 text)", ("varchar(64)", "longtext"))
    return Refused("has no MySQL type (read as its text)", ("longtext",))


_SIZED: dict[str, Kind] = {"char": "char", "varchar": "varchar", "binary": "binary", "varbinary": "varbinary",
                           "bit": "bit", "enum": "enum", "set": "set"}
_TIMES: dict[str, Kind] = {"datetime": "datetime", "timestamp": "timestamptz", "time": "time"}
"""MySQL's TIMESTAMP is an instant (stored in UTC, shown in the session's zone); DATETIME a wall-clock time."""
_SIMPLE: dict[str, Kind] = {"date": "date", "year": "year", "json": "json", "uuid": "uuid", "inet4": "inet",
                            "inet6": "inet", **dict.fromkeys(_GEOMETRY, "blob")}
"""MySQL types read as one neutral kind each (MariaDB's uuid and inet; a geometry as its bytes, SRID + WKB, as the
reader gives it)."""
_FIXED: dict[str, tuple[str, str | None]] = {
    "date": ("date", None), "json": ("json", None), "jsonb": ("json", None), "year": ("year", None),
    "float4": ("float", None), "float8": ("double", None),
    "bool": ("tinyint(1)", "MySQL's BOOLEAN is TINYINT(1): false and true are 0 and 1"),
    "uuid": ("char(36)", "its text: MySQL has no uuid type"),
    "inet": ("varchar(43)", "its text: MySQL has no network address type"),
    "macaddr": ("varchar(23)", "its text: MySQL has no network address type")}
"""Neutral kinds with one MySQL type (and a note when it is another type of the same values)."""
_MADE: dict[str, Callable[[SqlType], Mapped | Refused]] = {
    "int": _int, "decimal": _decimal, "char": _char, **dict.fromkeys(("varchar", "text", "enum", "set", "xml"), _text),
    **dict.fromkeys(("binary", "varbinary", "blob"), _bytes),
    **dict.fromkeys(("datetime", "time", "timestamptz"), _time)}
"""Neutral kinds whose MySQL type depends on their length, digits or labels."""

_LONG = re.compile(r"(?:tiny|medium|long)?(?:text|blob)|json", re.IGNORECASE)


def _too_long(type_sql: str) -> bool:
    """A column InnoDB cannot key whole: a TEXT or BLOB type, or a VARCHAR longer than 768 characters."""
    name, args, _ = split_type(type_sql)
    if _LONG.fullmatch(name):
        return True
    n = int_args(args)
    return name in ("varchar", "varbinary") and bool(n) and n[0] > MAX_KEY_CHARS


def _key_problems(plan: TablePlan) -> list[str]:
    """A primary key or unique index on a column InnoDB cannot key whole: a prefix would make two values one."""
    types = {c.name.casefold(): c.type_sql for c in plan.columns}
    keys = [("the primary key", plan.primary_key)] + [(f"unique index {i.name}", i.columns) for i in plan.indexes
                                                      if i.unique]
    problems = []
    for what, columns in keys:
        for c in columns:
            declared = types.get(c.casefold(), "")
            if _too_long(declared):
                problems.append(f"{plan.source.key}.{c}: {declared} is in {what}, and MySQL keys such a column only "
                                f"by a prefix, which would make two values one; choose one with the destination's "
                                f"column_types {{{f'{plan.source.name}.{c}'!r}: ...}}: varchar({MAX_KEY_CHARS}) or "
                                f"varbinary({MAX_KEY_CHARS * 4})")
    return problems


def _columns_of(conn: Any, target: TargetName) -> list[str] | None:
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "ORDER BY ORDINAL_POSITION", (target.schema, target.table))
        names = [str(r[0]) for r in cur.fetchall()]
    return names or None


def _tables_of(conn: Any, schemas: Sequence[str]) -> list[tuple[str, str]]:
    marks = ", ".join(["%s"] * len(schemas))
    with conn.cursor() as cur:
        cur.execute(f"SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA IN ({marks})",
                    tuple(schemas))
        return [(str(s), str(t)) for s, t in cur.fetchall()]


def open_session(options: Any) -> SqlDdlSession:
    """A DDL session on a mysql destination (its ``database``, autocommit, strict)."""
    conn = connect(options.endpoint, PrepareError, attempts=options.retries + 1, strict=True)
    return SqlDdlSession(conn, _columns_of, fold=True, plugin=PLUGIN_NAME, tables_of=_tables_of)


MYSQL_DDL = MysqlDdl()

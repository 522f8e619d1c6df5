"""SQLite's DDL words (:mod:`wormhole.database.ddl`): its declared types read as neutral types, and another
store's table written as an SQLite table, with the declared types this store gives a table it creates
(:data:`~wormhole.plugins.sqlite.types.DECLARED_TYPES`; docs/manual/types.md, *Whole-database DDL*)."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from wormhole.database.model import ColumnDef
from wormhole.plugins.ddl import Default, Mapped, PlannedColumn, Refused, SqlType, TablePlan, TargetName
from wormhole.plugins.sql import quote
from wormhole.plugins.sql.ddl import SqlDdl, SqlDdlSession, auto_column, int_args, split_type, string_literal
from wormhole.plugins.sqlite.connection import PLUGIN_NAME
from wormhole.plugins.sqlite.types import DECLARED_TYPES, logical_type

_BY_KIND = {"int": "int", "bool": "bool", "decimal": "decimal", "float4": "float", "float8": "float", "char": "string",
            "varchar": "string", "text": "string", "enum": "string", "set": "string", "binary": "bytes",
            "varbinary": "bytes", "blob": "bytes", "bit": "int", "varbit": "string", "date": "date",
            "datetime": "datetime", "timestamptz": "datetime", "time": "string", "timetz": "string", "year": "int",
            "interval": "string", "json": "json", "jsonb": "json", "uuid": "string", "inet": "string",
            "macaddr": "string", "xml": "string", "array": "json", "other": "string"}
"""Each neutral kind's logical type: what the source's reader gives, so what the sqlite store declares for it."""


class SqliteDdl(SqlDdl):
    """SQLite: a table of the destination's file (no schema)."""

    name = PLUGIN_NAME
    name_limit = 1000  # SQLite has no limit on names; this only bounds a generated one

    def quote(self, identifier: str) -> str:
        return quote(identifier)

    def qualified(self, target: TargetName) -> str:
        return quote(target.table)  # the destination's file is the only schema

    # -- as a source ------------------------------------------------------------------------------

    def parse_type(self, type_sql: str) -> SqlType:
        name, args, _ = split_type(type_sql)
        numbers = int_args(args)
        logical = logical_type(type_sql)
        if logical == "int":
            return SqlType("int", type_sql, 8)
        if logical == "decimal":
            return SqlType("decimal", type_sql, precision=numbers[0] if numbers else None,
                           scale=(numbers[1] if len(numbers) > 1 else 0) if numbers else None)
        if logical == "string":
            upper = type_sql.upper()
            if "CHAR" in upper and numbers:
                fixed = name in ("char", "character", "nchar", "native character")
                return SqlType("char" if fixed else "varchar", type_sql, numbers[0])
            return SqlType("text", type_sql)
        kinds = {"bool": "bool", "float": "float8", "bytes": "blob", "date": "date", "datetime": "datetime",
                 "json": "json"}
        return SqlType(kinds[logical], type_sql)  # type: ignore[arg-type]

    # -- as a destination -------------------------------------------------------------------------

    def column_type(self, source: SqlType, column: ColumnDef) -> Mapped | Refused:
        declared = DECLARED_TYPES[_BY_KIND[source.kind]]
        if source.kind == "int" and source.unsigned and source.length == 8:
            return Mapped(declared, "SQLite's integers stop at 9223372036854775807: a larger value is a refused row")
        if source.kind == "timestamptz":
            return Mapped(declared, "the time in UTC (wormhole's sessions are UTC)")
        if source.kind == "array":
            return Mapped(declared, "the array as its JSON text")
        return Mapped(declared)

    def render_default(self, default: Default, type_sql: str) -> str | None:
        if default.kind == "number" and type_sql == DECLARED_TYPES["decimal"]:
            return string_literal(default.value)  # a decimal is its text here: 0.00 stays 0.00, not the real 0.0
        return super().render_default(default, type_sql)

    def column_sql(self, column: PlannedColumn, plan: TablePlan) -> str:
        sql = super().column_sql(column, plan)
        if self.key_inline(plan) and plan.primary_key[0] == column.name:
            sql += " PRIMARY KEY"  # INTEGER PRIMARY KEY: the rowid, which gives a new row max + 1
        return sql

    def key_inline(self, plan: TablePlan) -> bool:
        auto = auto_column(plan)
        return (auto is not None and plan.primary_key == (auto.name,)
                and auto.type_sql.strip().upper() == "INTEGER")

    def fks_inline(self) -> bool:
        return True

    def extra_definitions(self, plan: TablePlan, foreign_keys: bool) -> list[str]:
        # SQLite adds no constraint to a table: its foreign keys are declared with it (enforced only under
        # PRAGMA foreign_keys, which wormhole's writer leaves off, so the load order does not matter).
        return [self.fk_clause(fk) for fk in plan.foreign_keys] if foreign_keys else []

    def lossy(self, plan: TablePlan) -> list[str]:
        notes = []
        if plan.comment or any(c.comment for c in plan.columns):
            notes.append(f"{plan.source.key}: comments dropped (SQLite keeps none)")
        auto = auto_column(plan)
        if auto is not None and not self.key_inline(plan):
            notes.append(f"{plan.source.key}.{auto.name}: auto-increment dropped (SQLite's is an INTEGER column that "
                         f"is the whole primary key)")
        return notes


def _columns_of(conn: sqlite3.Connection, target: TargetName) -> list[str] | None:
    names = [str(r[0]) for r in conn.execute("SELECT name FROM pragma_table_info(?) ORDER BY cid", (target.table,))]
    return names or None


def open_session(options: Any) -> SqlDdlSession:
    """A DDL session on a sqlite destination's file (created, with its missing directories, when needed)."""
    path = os.path.abspath(options.path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)
    return SqlDdlSession(conn, _columns_of, fold=True, plugin=PLUGIN_NAME, commit=True)


SQLITE_DDL = SqliteDdl()

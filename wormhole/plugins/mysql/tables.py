"""The catalog of a MySQL/MariaDB server for a database task (``tables``), read from ``information_schema``
(:mod:`wormhole.plugins.sql.tables` says what every SQL store's does alike).

A MySQL schema is a database. Row estimates are ``TABLES.TABLE_ROWS`` (InnoDB's, approximate); types are
``COLUMN_TYPE`` as declared (``int(10) unsigned``, ``enum('a','b')``); defaults are SQL expressions (MariaDB
shows them so, MySQL shows a literal's bare text, quoted here unless the column's type is numeric).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pymysql

from wormhole.database.facet import DatabaseSource
from wormhole.database.model import ColumnDef, TableRef
from wormhole.errors import SplitError
from wormhole.plugins.mysql.connection import PLUGIN_NAME, connect, describe
from wormhole.plugins.sql.tables import ForeignKeyPart, KeyPart, SqlCatalog, action
from wormhole.plugins.sql.target import fetch_all, fetch_one

SYSTEM_SCHEMAS = frozenset({"information_schema", "performance_schema", "mysql", "sys"})
BASE_TABLES = ("BASE TABLE", "SYSTEM VERSIONED")  # MariaDB's system-versioned tables read as base tables
DEFAULT_ACTIONS = ("RESTRICT", "NO ACTION")
"""What the catalog shows for a foreign key without ON DELETE / ON UPDATE (MariaDB: RESTRICT, MySQL: NO ACTION;
InnoDB treats both alike)."""
NUMERIC = ("int", "tinyint", "smallint", "mediumint", "bigint", "decimal", "float", "double", "bit", "year")
REMADE = ("BTREE", "HASH")
"""Index methods a destination's plain index stands for (not FULLTEXT, SPATIAL)."""


class MysqlCatalog(SqlCatalog):
    plugin = PLUGIN_NAME
    db_error = pymysql.err.MySQLError

    def __init__(self, conn: pymysql.Connection, where: str) -> None:
        super().__init__(conn, where)
        self.mariadb = "mariadb" in str(conn.get_server_info()).lower()

    def reason(self, exc: BaseException) -> str:
        return describe(exc)

    def schemas(self) -> list[str]:
        return [str(s) for (s,) in fetch_all(self.conn, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")]

    def is_system(self, schema: str) -> bool:
        return schema.lower() in SYSTEM_SCHEMAS

    def tables(self, schemas: Sequence[str]) -> list[tuple[str, str, Any, str | None]]:
        marks = ", ".join(["%s"] * len(schemas))
        rows = fetch_all(self.conn, f"SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS, TABLE_COMMENT "
                                    f"FROM information_schema.TABLES WHERE TABLE_TYPE IN (%s, %s) "
                                    f"AND TABLE_SCHEMA IN ({marks})", (*BASE_TABLES, *schemas))
        return [(str(s), str(t), n, c) for s, t, n, c in rows]

    def find(self, ref: TableRef) -> tuple[Any, str | None] | None:
        row = fetch_one(self.conn, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                                   "AND TABLE_NAME = %s AND TABLE_TYPE IN (%s, %s)",
                        (ref.schema, ref.name, *BASE_TABLES))
        return None if row is None else (None, row[0])

    def find_all(self, schema: str, names: Sequence[str]) -> dict[str, tuple[Any, str | None]]:
        rows = fetch_all(self.conn, f"SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES "
                                    f"WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({_marks(names)}) "
                                    f"AND TABLE_TYPE IN (%s, %s)", (schema, *names, *BASE_TABLES))
        return {str(name): (None, comment) for name, comment in rows if name in names}

    def columns(self, ref: TableRef, handle: Any) -> list[ColumnDef]:
        return self.columns_all(ref.schema, {ref.name: handle}).get(ref.name, [])

    def columns_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[ColumnDef]]:
        out: dict[str, list[ColumnDef]] = {name: [] for name in handles}
        for table, name, ctype, nullable, default, extra, comment, dtype in fetch_all(
                self.conn, f"SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA, "
                           f"COLUMN_COMMENT, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                           f"AND TABLE_NAME IN ({_marks(handles)}) ORDER BY TABLE_NAME, ORDINAL_POSITION",
                (schema, *handles)):
            if table not in out:  # another table's name but for case (the catalog compares without it)
                continue
            out[str(table)].append(ColumnDef(
                str(name), str(ctype), nullable == "YES", self._default(default, str(extra), str(dtype)),
                comment or None, "auto_increment" in str(extra).lower()))
        return out

    def _default(self, default: str | None, extra: str, data_type: str) -> str | None:
        """The default as an SQL expression (None: none, or NULL)."""
        if default is None or (self.mariadb and default == "NULL"):
            return None
        if self.mariadb or "DEFAULT_GENERATED" in extra.upper() or data_type.lower() in NUMERIC:
            return default  # MariaDB's is an expression; MySQL's generated one and a number need no quotes
        return "'" + default.replace("\\", "\\\\").replace("'", "''") + "'"

    def key_parts(self, ref: TableRef, handle: Any) -> list[KeyPart]:
        return self.key_parts_all(ref.schema, {ref.name: handle}).get(ref.name, [])

    def key_parts_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[KeyPart]]:
        out: dict[str, list[KeyPart]] = {name: [] for name in handles}
        for table, index, column, non_unique, sub_part, method in fetch_all(
                self.conn, f"SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME, NON_UNIQUE, SUB_PART, INDEX_TYPE "
                           f"FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
                           f"AND TABLE_NAME IN ({_marks(handles)}) ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
                (schema, *handles)):
            skip = None
            if str(method).upper() not in REMADE:
                skip = f"a {str(method).upper()} index"
            elif sub_part is not None:
                skip = f"a prefix index ({column}({sub_part}))"
            if table not in out:
                continue
            out[str(table)].append(KeyPart(str(index), None if column is None else str(column),
                                           index == "PRIMARY", int(non_unique) == 0, skip))
        return out

    def foreign_key_parts(self, ref: TableRef, handle: Any) -> list[ForeignKeyPart]:
        return self.foreign_key_parts_all(ref.schema, {ref.name: handle}).get(ref.name, [])

    def foreign_key_parts_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[ForeignKeyPart]]:
        out: dict[str, list[ForeignKeyPart]] = {name: [] for name in handles}
        for own, name, column, ref_schema, table, ref_column, delete, update in fetch_all(
                self.conn, f"SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA, "
                           f"k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE "
                           f"FROM information_schema.KEY_COLUMN_USAGE k "
                           f"JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
                           f"ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA "
                           f"AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME "
                           f"WHERE k.TABLE_SCHEMA = %s AND k.TABLE_NAME IN ({_marks(handles)}) "
                           f"AND k.REFERENCED_TABLE_NAME IS NOT NULL "
                           f"ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION", (schema, *handles)):
            if own not in out:
                continue
            out[str(own)].append(ForeignKeyPart(
                str(name), str(column), TableRef(str(ref_schema), str(table)), str(ref_column),
                action(delete, DEFAULT_ACTIONS), action(update, DEFAULT_ACTIONS)))
        return out


def _marks(names: Sequence[str] | Mapping[str, Any]) -> str:
    return ", ".join(["%s"] * len(names))


def open_catalog(options: DatabaseSource) -> MysqlCatalog:
    """The catalog of the source's server (in its ``database``, else ``information_schema``); SplitError when
    it cannot connect."""
    params = options.params
    server = params.source_endpoint(params.database or "information_schema")
    conn = connect(server, SplitError, attempts=params.connect_retries, timeout=params.connect_timeout_s)
    return MysqlCatalog(conn, server.mark)

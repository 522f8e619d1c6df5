"""The catalog of a PostgreSQL database for a database task (``tables``), read from ``pg_catalog``
(:mod:`wormhole.plugins.sql.tables` says what every SQL store's does alike).

Tables are the ordinary and partitioned ones (``relkind`` r, p), never a partition (its parent reads it).
Row estimates are ``pg_class.reltuples`` (-1, never analyzed, counts 0), summed over the leaf partitions of a
partitioned table. Types are ``format_type()``'s (``numeric(15,2)``, ``character varying(25)``,
``integer[]``); an identity column, or one whose default is a sequence's ``nextval`` (serial), is
auto-increment, and its default (the sequence) is not carried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from wormhole.database.facet import DatabaseSource
from wormhole.database.model import ColumnDef, TableRef
from wormhole.errors import SplitError
from wormhole.plugins.postgres.connection import PLUGIN_NAME, connect, describe
from wormhole.plugins.sql.tables import ForeignKeyPart, KeyPart, SqlCatalog
from wormhole.plugins.sql.target import fetch_all, fetch_one

SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})
ACTIONS = {"r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}
"""``pg_constraint.confdeltype`` / ``confupdtype``; ``a`` (NO ACTION) is the default."""

_TABLES_SQL = """
SELECT n.nspname, c.relname,
       CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(sum(greatest(l.reltuples, 0)), 0)
                                       FROM pg_partition_tree(c.oid) t JOIN pg_class l ON l.oid = t.relid
                                       WHERE t.isleaf)
            ELSE greatest(c.reltuples, 0) END,
       obj_description(c.oid, 'pg_class')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = ANY(%s)"""

_FIND_SQL = """
SELECT c.oid, obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')"""

_FIND_ALL_SQL = """
SELECT c.relname, c.oid, obj_description(c.oid, 'pg_class')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p')"""

_COLUMNS_SQL = """
SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END, a.attidentity <> '',
       col_description(a.attrelid, a.attnum)
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum"""

_KEYS_SQL = """
SELECT x.indrelid, i.relname, a.attname, x.indisprimary, x.indisunique,
       CASE WHEN NOT x.indisvalid THEN 'an invalid index'
            WHEN am.amname <> 'btree' THEN 'a ' || am.amname || ' index'
            WHEN x.indpred IS NOT NULL THEN 'a partial index (WHERE ' || pg_get_expr(x.indpred, x.indrelid) || ')'
       END
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_am am ON am.oid = i.relam
CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum AND k.attnum > 0
WHERE x.indrelid = ANY(%s) AND k.ord <= x.indnkeyatts
ORDER BY x.indrelid, i.relname, k.ord"""

_FOREIGN_SQL = """
SELECT con.conrelid, con.conname, a.attname, rn.nspname, rc.relname, ra.attname, con.confdeltype, con.confupdtype
FROM pg_constraint con
CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(attnum, refnum, ord)
JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
JOIN pg_class rc ON rc.oid = con.confrelid
JOIN pg_namespace rn ON rn.oid = rc.relnamespace
JOIN pg_attribute ra ON ra.attrelid = con.confrelid AND ra.attnum = k.refnum
WHERE con.conrelid = ANY(%s) AND con.contype = 'f'
ORDER BY con.conrelid, con.conname, k.ord"""


class PostgresCatalog(SqlCatalog):
    plugin = PLUGIN_NAME
    db_error = psycopg.Error

    def reason(self, exc: BaseException) -> str:
        return describe(exc)

    def schemas(self) -> list[str]:
        return [str(s) for (s,) in fetch_all(self.conn, "SELECT nspname FROM pg_namespace")]

    def is_system(self, schema: str) -> bool:
        return schema in SYSTEM_SCHEMAS or schema.startswith(("pg_temp_", "pg_toast_temp_"))

    def tables(self, schemas: Sequence[str]) -> list[tuple[str, str, Any, str | None]]:
        return [(str(s), str(t), n, c) for s, t, n, c in fetch_all(self.conn, _TABLES_SQL, (list(schemas),))]

    def find(self, ref: TableRef) -> tuple[Any, str | None] | None:
        row = fetch_one(self.conn, _FIND_SQL, (ref.schema, ref.name))
        return None if row is None else (row[0], row[1])

    def find_all(self, schema: str, names: Sequence[str]) -> dict[str, tuple[Any, str | None]]:
        return {str(name): (oid, comment) for name, oid, comment in fetch_all(self.conn, _FIND_ALL_SQL,
                                                                               (schema, list(names)))}

    def columns(self, ref: TableRef, handle: Any) -> list[ColumnDef]:
        return self.columns_all(ref.schema, {ref.name: handle})[ref.name]

    def columns_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[ColumnDef]]:
        names, out = _by_oid(handles)
        for oid, name, declared, nullable, default, identity, comment in fetch_all(self.conn, _COLUMNS_SQL,
                                                                                   (list(names),)):
            serial = default is not None and str(default).startswith("nextval(")
            out[names[oid]].append(ColumnDef(str(name), str(declared), bool(nullable), None if serial else default,
                                             comment or None, bool(identity) or serial))
        return out

    def key_parts(self, ref: TableRef, handle: Any) -> list[KeyPart]:
        return self.key_parts_all(ref.schema, {ref.name: handle})[ref.name]

    def key_parts_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[KeyPart]]:
        names, out = _by_oid(handles)
        for oid, index, column, primary, unique, skip in fetch_all(self.conn, _KEYS_SQL, (list(names),)):
            out[names[oid]].append(KeyPart(str(index), column, bool(primary), bool(unique), skip))
        return out

    def foreign_key_parts(self, ref: TableRef, handle: Any) -> list[ForeignKeyPart]:
        return self.foreign_key_parts_all(ref.schema, {ref.name: handle})[ref.name]

    def foreign_key_parts_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[ForeignKeyPart]]:
        names, out = _by_oid(handles)
        for oid, name, column, ref_schema, table, ref_column, delete, update in fetch_all(
                self.conn, _FOREIGN_SQL, (list(names),)):
            out[names[oid]].append(ForeignKeyPart(str(name), str(column), TableRef(str(ref_schema), str(table)),
                                                  str(ref_column), ACTIONS.get(str(delete)), ACTIONS.get(str(update))))
        return out


def _by_oid(handles: Mapping[str, Any]) -> tuple[dict[Any, str], dict[str, list[Any]]]:
    """oid -> table name, and an empty list per table (what a table's rows are gathered in)."""
    return {oid: name for name, oid in handles.items()}, {name: [] for name in handles}


def open_catalog(options: DatabaseSource) -> PostgresCatalog:
    """The catalog of the source's database; SplitError when it cannot connect."""
    params = options.params
    server = params.source_endpoint(params.database)
    conn = connect(server, SplitError, attempts=params.connect_retries, timeout=params.connect_timeout_s)
    return PostgresCatalog(conn, server.mark)

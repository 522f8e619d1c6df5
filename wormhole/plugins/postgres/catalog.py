"""What PostgreSQL's catalog says about the tables and queries a source reads: each column's *kind* (how the
reader selects and parses it; :func:`select_expr` for the few read through an expression) and its logical
type (docs/manual/postgres.md, *Types*)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from wormhole.errors import SplitError
from wormhole.plugins.postgres.connection import PLUGIN_NAME, describe
from wormhole.plugins.sql import quote
from wormhole.plugins.sql.catalog import CatalogColumn
from wormhole.plugins.sql.source_options import Shard

KIND_TYPES: dict[str, str] = {
    "int": "int", "float4": "float", "float": "float", "decimal": "decimal", "bool": "bool", "date": "date",
    "datetime": "datetime", "timestamptz": "datetime", "bytes": "bytes", "json": "json", "array": "json",
    "string": "string"}
"""Each kind's logical type (:mod:`wormhole.plugins.schema`)."""

_BY_TYPE = {"int2": "int", "int4": "int", "int8": "int", "float4": "float4", "float8": "float",
            "numeric": "decimal", "bool": "bool", "date": "date", "timestamp": "datetime",
            "timestamptz": "timestamptz", "bytea": "bytes", "json": "json", "jsonb": "json"}
MAX_ARROW_PRECISION = 76
"""The widest decimal Arrow holds (decimal256)."""


@dataclass(frozen=True, slots=True)
class ColumnInfo(CatalogColumn):
    type_name: str
    """The declared type as ``format_type`` writes it (``numeric(10,2)``, ``timestamp with time zone``)."""
    nullable: bool = True
    precision: int | None = None
    scale: int | None = None
    base: str = ""
    """The base type's ``pg_type.typname`` (a domain's underlying type), for tables."""
    element: str = ""
    """An array's element type (``pg_type.typname``) when it is built in (its OID, which the array's binary
    form names, is the same in every database), for tables; else empty."""


def relation(schema: str, table: str) -> str:
    return f"{quote(schema)}.{quote(table)}"


def kind_of(type_name: str, category: str, typmod: int) -> tuple[str, int | None, int | None]:
    """(kind, precision, scale) of a base type (``pg_type.typname``, its ``typcategory``) and its typmod."""
    if category == "A":
        return "array", None, None
    kind = _BY_TYPE.get(type_name, "string")
    if kind != "decimal":
        return kind, None, None
    if typmod < 4:  # numeric without a declared precision
        return kind, None, None
    precision = ((typmod - 4) >> 16) & 0xFFFF
    scale = (((typmod - 4) & 0x7FF) ^ 1024) - 1024  # an 11-bit signed scale (PostgreSQL 15 allows negative ones)
    if scale < 0:  # numeric(5, -2) holds 12300: an integer of precision - scale digits
        precision, scale = precision - scale, 0
    if precision > MAX_ARROW_PRECISION or scale > precision:
        return kind, None, None
    return kind, precision, scale


_COLUMNS_SQL = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, b.typname, b.typcategory,
       CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END, coalesce(e.typname, '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_type e ON e.oid = b.typelem AND b.typcategory = 'A' AND e.oid < 16384  -- built in
WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum"""


def describe_table(conn: psycopg.Connection[Any], shard: Shard, table: str) -> list[ColumnInfo]:
    """The columns of ``schema.table`` in order; SplitError naming it when it does not exist."""
    found = describe_tables(conn, shard, [table]).get(table)
    if not found:
        raise SplitError(f"table {relation(shard.schema, table)} does not exist in {shard.endpoint.mark}",
                         plugin=PLUGIN_NAME)
    return found


def describe_tables(conn: psycopg.Connection[Any], shard: Shard, tables: Sequence[str]) -> dict[str, list[ColumnInfo]]:
    """The columns of each of ``tables`` (of ``shard``'s schema) in order, asked in one statement; a table that
    does not exist is not in the result."""
    ep, schema = shard.endpoint, shard.schema
    try:
        found = conn.execute(_COLUMNS_SQL, (schema, list(tables))).fetchall()
    except psycopg.Error as exc:
        what = relation(schema, tables[0]) if len(tables) == 1 else f"{len(tables)} tables of schema {schema}"
        raise SplitError(f"cannot describe {what} on {ep.mark}: {describe(exc)}", plugin=PLUGIN_NAME) from exc
    out: dict[str, list[ColumnInfo]] = {}
    for table, name, declared, nullable, type_name, category, typmod, element in found:
        kind, precision, scale = kind_of(str(type_name), str(category), int(typmod))
        out.setdefault(str(table), []).append(ColumnInfo(str(name), kind, str(declared), bool(nullable), precision,
                                                         scale, str(type_name), str(element)))
    return out


def describe_query(conn: psycopg.Connection[Any], query: str) -> list[ColumnInfo]:
    """Each column a query returns, from a LIMIT 0 result's description."""
    cur = conn.execute(f"SELECT * FROM ({query}) AS wh_q LIMIT 0")
    description = cur.description or []
    oids = sorted({c.type_code for c in description})
    types = {int(oid): (str(name), str(cat), int(base), int(mod)) for oid, name, cat, base, mod in conn.execute(
        "SELECT t.oid, b.typname, b.typcategory, t.typbasetype, t.typtypmod FROM pg_type t "
        "JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END "
        "WHERE t.oid = ANY(%s)", (oids,)).fetchall()}
    infos = []
    for c in description:
        type_name, category, base, domain_mod = types.get(c.type_code, ("text", "S", 0, -1))
        # A domain's result column carries the domain's typmod, a plain one its own (psycopg's ``_fmod``).
        kind, precision, scale = kind_of(type_name, category, domain_mod if base else _typmod(c))
        infos.append(ColumnInfo(c.name, kind, type_name, True, precision, scale))
    return infos


def _typmod(column: Any) -> int:
    """A result column's typmod (psycopg keeps it as ``_fmod``; its precision and scale derive from it)."""
    mod = getattr(column, "_fmod", -1)
    return int(mod) if isinstance(mod, int) else -1


_TEXT_TYPES = frozenset({"text", "varchar"})
"""The string types whose SQL value is the text the reader gives (a domain over one too)."""
OUTPUT_TEXT = "(CASE WHEN {0} IS NOT NULL THEN format('%s', {0}) END)"
"""A column's output text in SQL (``format`` calls the type's output function, as COPY does), NULL kept."""


def as_read(info: ColumnInfo) -> str | None:
    """The SQL a pushed-down expression reads a string column through (:attr:`Column.as_read`): the value as COPY
    prints it, for every string type but text and varchar (``char(n)`` padded; docs/manual/postgres.md)."""
    if info.kind != "string" or (info.base or info.type_name) in _TEXT_TYPES:
        return None
    return OUTPUT_TEXT


def select_expr(name: str, kind: str) -> str:
    """What the reader selects for a column of ``kind``, named as the column (see the module's text)."""
    q = quote(name)
    if kind == "float4":
        return f"CAST({q} AS double precision) AS {q}"
    if kind == "timestamptz":
        return f"({q} AT TIME ZONE 'UTC') AS {q}"
    if kind == "array":
        return f"to_json({q}) AS {q}"
    return q

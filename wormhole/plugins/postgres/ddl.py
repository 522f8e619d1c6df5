"""The table ``create_table`` makes (types: docs/manual/postgres.md, *create_table*): a column by its logical
type, or, read by a mysql source (its COLUMN_TYPE in :attr:`Column.native`), the closest type that holds
every value; a postgres array of a built-in type keeps its declaration."""

from __future__ import annotations

import re
from collections.abc import Sequence

from wormhole.plugins.schema import Column, Schema
from wormhole.plugins.sql import quote

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

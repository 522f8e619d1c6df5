"""What the server says about the tables and queries a source reads: columns, their kinds, their keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pymysql
from pymysql.constants.FLAG import UNSIGNED as UNSIGNED_FLAG

from wormhole.errors import SplitError
from wormhole.plugins.mysql.connection import PLUGIN_NAME
from wormhole.plugins.mysql.types import JSON_CHECK, kind_of_data_type, kind_of_field, wide_unsigned
from wormhole.plugins.sql import backquote as quote
from wormhole.plugins.sql.catalog import CatalogColumn
from wormhole.plugins.sql.source_options import Shard
from wormhole.plugins.sql.target import fetch_all


@dataclass(frozen=True, slots=True)
class ColumnInfo(CatalogColumn):
    data_type: str
    nullable: bool
    charset: str | None
    collation: str | None
    precision: int | None = None
    """A decimal column's declared digits (NUMERIC_PRECISION); None for other kinds."""
    scale: int | None = None
    """A decimal column's declared digits after the point (NUMERIC_SCALE)."""
    column_type: str = ""
    """COLUMN_TYPE as the server declares it (``int(10) unsigned``, ``decimal(65,30)``), lower case."""
    unsigned: bool = False
    """An int column whose values reach 2**64 - 1 (:func:`~wormhole.plugins.mysql.types.wide_unsigned`)."""


@dataclass(frozen=True, slots=True)
class ResultColumn(CatalogColumn):
    """A column of a query's result, as its metadata describes it."""

    unsigned: bool
    """An int column whose values reach 2**64 - 1 (:func:`~wormhole.plugins.mysql.types.wide_unsigned`)."""
    precision: int | None = None
    scale: int | None = None


def describe_table(conn: pymysql.Connection, shard: Shard, table: str) -> list[ColumnInfo]:
    """The columns of ``table`` in order; SplitError naming it when it does not exist."""
    found = describe_tables(conn, shard, [table]).get(table)
    if not found:
        raise SplitError(f"table {quote(table)} does not exist in {shard.endpoint.mark}", plugin=PLUGIN_NAME)
    return found


def describe_tables(conn: pymysql.Connection, shard: Shard, tables: Sequence[str]) -> dict[str, list[ColumnInfo]]:
    """The columns of each of ``tables`` (of ``shard``'s database) in order, asked in one statement (a database
    task's table runs find theirs described: :func:`wormhole.plugins.sql.reader.table_columns`); a table that
    does not exist is not in the result."""
    database = shard.endpoint.database
    marks = ", ".join(["%s"] * len(tables))
    found = fetch_all(conn, "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, "
                            "COLLATION_NAME, COLUMN_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE "
                            f"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({marks}) "
                            "ORDER BY TABLE_NAME, ORDINAL_POSITION", (database, *tables))
    json_columns: dict[str, set[str]] = {}
    with_text = sorted({str(r[0]) for r in found if str(r[2]).lower() == "longtext"})
    if with_text:  # MariaDB's JSON is LONGTEXT with a JSON_VALID check
        in_text = ", ".join(["%s"] * len(with_text))
        checks = fetch_all(conn, "SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
                                 f"WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME IN ({in_text})", (database, *with_text))
        for table, clause in checks:
            json_columns.setdefault(str(table), set()).update(
                m.replace("``", "`").lower() for m in JSON_CHECK.findall(str(clause)))
    out: dict[str, list[ColumnInfo]] = {}
    for table, name, dt, nullable, cs, coll, ctype, precision, scale in found:
        kind = kind_of_data_type(str(dt), str(name).lower() in json_columns.get(str(table), ()),
                                 "unsigned" in str(ctype).lower())
        decimal = kind == "decimal" and precision is not None
        out.setdefault(str(table), []).append(ColumnInfo(
            name=str(name), kind=kind, data_type=str(dt).lower(), nullable=nullable == "YES", charset=cs,
            collation=coll, precision=int(precision) if decimal else None,
            scale=int(scale or 0) if decimal else None, column_type=str(ctype).lower(),
            unsigned=wide_unsigned(kind, int(precision or 0))))  # BIT(n): precision n
    return out


def describe_query(conn: pymysql.Connection, query: str) -> list[ResultColumn]:
    """Each column a query returns, from its result metadata (no rows read)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM ({query}) AS wh_q LIMIT 0")
        result = cur._result  # type: ignore[attr-defined]  # pymysql's metadata of a LIMIT 0 result
        fields = result.fields if result is not None else []
        columns = []
        for f in fields:
            unsigned = bool(f.flags & UNSIGNED_FLAG)
            kind = kind_of_field(f.type_code, f.charsetnr, unsigned)
            shape = result_decimal(f.length, f.scale, unsigned) if kind == "decimal" else (None, None)
            columns.append(ResultColumn(str(f.name), kind, wide_unsigned(kind, f.length), *shape))
        return columns


def result_decimal(length: int, scale: int, unsigned: bool) -> tuple[int, int]:
    """(precision, scale) of a DECIMAL result column from its metadata: the display length counts a sign
    (unless unsigned) and a point (when it has a scale) besides the digits."""
    digits = length - (1 if scale else 0) - (0 if unsigned else 1)
    return min(max(digits, scale, 1), 65), scale

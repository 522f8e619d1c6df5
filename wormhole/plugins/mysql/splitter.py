"""The mysql store's splits: DataX-style key ranges of each table, or one split per query connection.

Splitting follows DataX's SingleTableSplitUtil: ``MIN``/``MAX`` of ``split_pk`` (an integer or a
string column), ranges that are half-open except the last, which is closed, plus one split for
``split_pk IS NULL`` when the column is nullable; each range is read ``ORDER BY split_pk``, never
paged with LIMIT/OFFSET. String boundaries are interpolated in ASCII like DataX's, then sorted and
de-duplicated by the server under the column's own collation, so the ranges are disjoint and
cover every key whatever the collation (DataX compares in Java order and can lose or repeat rows
under a case-insensitive collation).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pymysql

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, Split
from wormhole.plugins.mysql.catalog import ColumnInfo, ResultColumn, choose_columns, describe_query, describe_table
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    close_quietly,
    describe,
    fetch_all,
    fetch_one,
    source_connection,
)
from wormhole.plugins.mysql.options import Endpoint, MysqlSource, QuerySource, Selection
from wormhole.plugins.mysql.types import KIND_TYPES, select_expr
from wormhole.plugins.sql import ascii_points, int_points, key_ranges
from wormhole.plugins.sql import backquote as quote

_INT_KINDS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_STRING_KINDS = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_]+")
_ARG = "\x00wh-arg\x00"


class MysqlSplitter:
    def __init__(self, options: MysqlSource, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx

    def split(self, advice: int) -> list[Split]:
        source = self.source
        if isinstance(source, QuerySource):
            return [self._query_split(source, index, ep) for index, ep in enumerate(source.endpoints)]
        table_count = sum(len(shard.tables) for shard in source.shards)
        per_table = math.ceil(advice / table_count)
        if table_count == 1 and source.selection.split_pk is not None:
            per_table *= source.selection.split_factor  # DataX: small splits so one slow range does not drag the end
        splits: list[Split] = []
        reference: list[tuple[str, str]] | None = None
        for index, shard in enumerate(source.shards):
            conn = source_connection(source, shard.endpoint, SplitError, self.ctx)
            try:
                for table in shard.tables:
                    infos = describe_table(conn, shard.endpoint, table)
                    chosen = choose_columns(infos, source.selection.columns, shard.endpoint, table)
                    reference = _same_shape(reference, chosen, shard.endpoint, table)
                    cutter = _TableCutter(conn, index, shard.endpoint, table, source.selection, chosen)
                    splits.extend(cutter.splits(infos, per_table))
            finally:
                close_quietly(conn)
        return splits

    def _query_split(self, source: QuerySource, index: int, ep: Endpoint) -> Split:
        conn = source_connection(source, ep, SplitError, self.ctx)
        try:
            shape = query_columns(conn, ep, source.query)
        finally:
            close_quietly(conn)
        sql = source.query
        if any(c.kind == "float32" for c in shape):
            sql = f"SELECT {', '.join(select_expr(quote(c.name), c.kind) for c in shape)} FROM ({sql}) AS wh_q"
        return Split(id=f"{ep.mark}/query", resource_mark=ep.mark,
                     params={"shard": index, "sql": sql, "args": (), "kinds": tuple(c.kind for c in shape),
                             "relation": f"({source.query}) wormhole_query", "predicate": None,
                             "columns": tuple(c.name for c in shape)})


def query_columns(conn: pymysql.Connection, ep: Endpoint, query: str) -> list[ResultColumn]:
    """The query's columns; SplitError with MySQL's reason when it fails."""
    try:
        return describe_query(conn, query)
    except pymysql.err.MySQLError as exc:
        raise SplitError(f"the query fails on {ep.mark}: {describe(exc)}", plugin=PLUGIN_NAME) from exc


def _same_shape(reference: list[tuple[str, str]] | None, chosen: list[ColumnInfo], ep: Endpoint,
                table: str) -> list[tuple[str, str]]:
    """Every table of a source must read as the first one does (names and logical types)."""
    shape: list[tuple[str, str]] = [(c.name.lower(), KIND_TYPES[c.kind]) for c in chosen]
    if reference is not None and shape != reference:
        raise SplitError(f"table {quote(table)} in {ep.mark} has columns {_show(shape)}, unlike "
                         f"the first table's {_show(reference)}", plugin=PLUGIN_NAME)
    return shape if reference is None else reference


def _show(shape: list[tuple[str, str]]) -> str:
    return ", ".join(f"{n} {t}" for n, t in shape)


@dataclass(frozen=True, slots=True)
class _TableCutter:
    """Cuts one table into key-range splits."""

    conn: pymysql.Connection
    index: int
    ep: Endpoint
    table: str
    selection: Selection
    chosen: list[ColumnInfo]

    @property
    def relation(self) -> str:
        return f"{quote(self.ep.database)}.{quote(self.table)}"

    @property
    def where(self) -> str | None:
        return f"({self.selection.where})" if self.selection.where else None

    def make(self, suffix: str, condition: str | None, args: tuple[Any, ...], order: str | None) -> Split:
        conditions = [c for c in (self.where, condition) if c]
        # Spark's JDBC read takes one literal predicate per partition; the values are escaped
        # by this connection, so they follow its character set.
        predicate = " AND ".join(conditions) or None
        for arg in args:
            assert predicate is not None
            predicate = predicate.replace(_ARG, self.conn.escape(arg), 1)
        sql = f"SELECT {', '.join(select_expr(quote(c.name), c.kind) for c in self.chosen)} FROM {self.relation}"
        sql += f" WHERE {' AND '.join(conditions)}" if conditions else ""
        if order:
            sql += f" ORDER BY {order}"
        if args:  # the driver formats with %: a % in the task's where or a name must stay literal
            sql = sql.replace("%", "%%").replace(_ARG, "%s")
        return Split(id=f"{self.ep.mark}/{self.table}{suffix}", resource_mark=self.ep.mark,
                     params={"shard": self.index, "sql": sql, "args": args, "kinds": tuple(c.kind for c in self.chosen),
                             "relation": self.relation, "predicate": predicate,
                             "columns": tuple(c.name for c in self.chosen)})

    def splits(self, infos: list[ColumnInfo], count: int) -> list[Split]:
        split_pk = self.selection.split_pk
        if split_pk is None:
            return [self.make("", None, (), None)]
        pk = self._key_column(infos, split_pk)
        if count <= 1:
            return [self.make("", None, (), None)]
        points = self._points(pk, count)
        if points is None:  # no non-NULL key (an empty table, or only NULL keys): one split reads it all
            return [self.make("", None, (), None)]
        key = quote(pk.name)
        splits = [self.make(f"#{i}", f"{key} >= {_ARG} AND {key} {op} {_ARG}", (low, high), key)
                  for i, (low, high, op) in enumerate(key_ranges(points))]
        if len(points) == 1:  # one distinct key value
            splits.append(self.make("#0", f"{key} = {_ARG}", (points[0],), None))
        if pk.nullable:
            splits.append(self.make("#null", f"{key} IS NULL", (), None))
        return splits

    def _key_column(self, infos: list[ColumnInfo], split_pk: str) -> ColumnInfo:
        pk = {c.name.lower(): c for c in infos}.get(split_pk.lower())
        if pk is None:
            raise SplitError(f"split_pk {split_pk} is not a column of {quote(self.table)} in {self.ep.mark}",
                             plugin=PLUGIN_NAME)
        if pk.data_type not in _INT_KINDS and pk.data_type not in _STRING_KINDS:
            raise SplitError(f"split_pk {pk.name} of {quote(self.table)} in {self.ep.mark} is "
                             f"{pk.data_type.upper()}; only integer and string keys can be split (leave split_pk "
                             f"out to read the table as one split)", plugin=PLUGIN_NAME)
        return pk

    def _points(self, pk: ColumnInfo, count: int) -> list[Any] | None:
        key = quote(pk.name)
        try:
            low, high = fetch_one(self.conn, f"SELECT MIN({key}), MAX({key}) FROM {self.relation}"
                                  + (f" WHERE {self.where}" if self.where else ""))
        except pymysql.err.MySQLError as exc:
            raise SplitError(f"cannot find the key range of {quote(self.table)} in {self.ep.mark}: "
                             f"{describe(exc)}", plugin=PLUGIN_NAME) from exc
        if low is None:
            return None
        if pk.data_type in _INT_KINDS:
            return list(int_points(int(low), int(high), count))
        return self._string_points(pk, str(low), str(high), count)

    def _string_points(self, pk: ColumnInfo, low: str, high: str, count: int) -> list[Any]:
        candidates = ascii_points(low, high, count)[1:-1]
        if not candidates:
            return [low, high] if low != high else [low]
        charset, collation = pk.charset or "utf8mb4", pk.collation or "utf8mb4_general_ci"
        if not (_SAFE_NAME.fullmatch(charset) and _SAFE_NAME.fullmatch(collation)):
            raise SplitError(f"unexpected character set {charset!r} / collation {collation!r} of {pk.name}",
                             plugin=PLUGIN_NAME)
        value = f"CONVERT(%s USING {charset}) COLLATE {collation}"
        union = " UNION ALL ".join(f"SELECT {value} AS b" for _ in candidates)
        # The server orders and de-duplicates the candidates exactly as it will compare the keys.
        sql = f"SELECT DISTINCT b FROM ({union}) AS wh_b WHERE b > {value} AND b < {value} ORDER BY b"
        inner = [str(r[0]) for r in fetch_all(self.conn, sql, (*candidates, low, high))]
        if low == high:
            return [low]
        return [low, *inner, high]

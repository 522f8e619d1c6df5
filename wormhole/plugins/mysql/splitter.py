"""The mysql store's splits (docs/manual/mysql.md, *Reading*): DataX's key ranges of ``split_pk`` (integer or
string; half-open but the last, ``IS NULL`` for a nullable key), string boundaries ordered and de-duplicated
by the server under the column's own collation, so the ranges are disjoint whatever the collation."""

from __future__ import annotations

import re
from typing import Any

from wormhole.errors import SplitError
from wormhole.plugins.base import Split
from wormhole.plugins.mysql.catalog import ColumnInfo
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.mysql.types import select_expr
from wormhole.plugins.sql import ascii_points, int_points, key_ranges
from wormhole.plugins.sql import backquote as quote
from wormhole.plugins.sql.source_options import QuerySource
from wormhole.plugins.sql.splitter import SqlSplitter, TableCut
from wormhole.plugins.sql.target import fetch_all

_INT_KINDS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_STRING_KINDS = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_]+")
_ARG = "\x00wh-arg\x00"


class _Cutter(TableCut):
    """Cuts one table into key-range splits."""

    __slots__ = ()

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
        return self.split(suffix, sql, args, predicate)

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
        return self.key_column(infos, split_pk, lambda pk: pk.data_type in _INT_KINDS or pk.data_type in _STRING_KINDS,
                               lambda pk: pk.data_type.upper(), "integer and string",
                               "read the table as one split")

    def _points(self, pk: ColumnInfo, count: int) -> list[Any] | None:
        key = quote(pk.name)
        found = self.min_max(f"SELECT MIN({key}), MAX({key}) FROM {self.relation}"
                             + (f" WHERE {self.where}" if self.where else ""))
        if found is None or found[0] is None:
            return None
        low, high = found
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
                             plugin=MYSQL.name)
        value = f"CONVERT(%s USING {charset}) COLLATE {collation}"
        union = " UNION ALL ".join(f"SELECT {value} AS b" for _ in candidates)
        # The server orders and de-duplicates the candidates exactly as it will compare the keys.
        sql = f"SELECT DISTINCT b FROM ({union}) AS wh_b WHERE b > {value} AND b < {value} ORDER BY b"
        inner = [str(r[0]) for r in fetch_all(self.conn, sql, (*candidates, low, high))]
        if low == high:
            return [low]
        return [low, *inner, high]


class MysqlSplitter(SqlSplitter):
    DIALECT = MYSQL
    CUTTER = _Cutter

    def query_sql(self, query: str, shape: list[Any]) -> str:
        if any(c.kind == "float32" for c in shape):
            return f"SELECT {', '.join(select_expr(quote(c.name), c.kind) for c in shape)} FROM ({query}) AS wh_q"
        return query

    def query_params(self, source: QuerySource) -> dict[str, Any]:
        return {"relation": f"({source.query}) wormhole_query", "predicate": None}

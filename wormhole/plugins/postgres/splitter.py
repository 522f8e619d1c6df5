"""The postgres store's splits (docs/manual/postgres.md, *Reading*): ``split_pk`` ranges of the key's finite
values (the first open below, the last open above, ``IS NULL`` for a nullable key), else ranges of physical
blocks (``ctid``) for a table large enough, one split per connection for a query. A split's statement binds
``%s`` (``%%`` for a literal ``%``): the reader runs it inside ``COPY (...) TO STDOUT``."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

import psycopg
from psycopg.sql import Literal

from wormhole.errors import SplitError
from wormhole.plugins.base import Split
from wormhole.plugins.postgres.catalog import ColumnInfo, select_expr
from wormhole.plugins.postgres.connection import PLUGIN_NAME, describe
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.sql import int_points, quote
from wormhole.plugins.sql.splitter import SqlSplitter, TableCut

MIN_SPLIT_PAGES = 128
"""A table without ``split_pk`` is cut into block ranges of at least this many 8 KiB pages (1 MiB)."""
TID_RANGE_VERSION = 140000
"""PostgreSQL 14 reads a ctid range with a TID range scan; an older server would scan the whole table per split."""
_KEY_KINDS = ("int", "date", "datetime", "timestamptz")
_EPOCH = datetime(1970, 1, 1)
_PLACEHOLDER = re.compile("%%|%s")


def escape(text: str) -> str:
    """SQL text run with bound values: psycopg reads ``%`` as a placeholder's start."""
    return text.replace("%", "%%")


def table_select(chosen: list[ColumnInfo], relation: str, *, encoded: bool = False) -> str:
    """``SELECT <columns> FROM relation`` of a table split: each column as the values read selects it, or
    (``encoded``) as it is, for the binary rows read undecoded."""
    columns = (quote(c.name) if encoded else select_expr(c.name, c.kind) for c in chosen)
    return f"SELECT {', '.join(columns)} FROM {relation}"


def encoded_sql(sql: str, chosen: list[ColumnInfo], relation: str) -> str | None:
    """A table split's query (made by :func:`table_select`, values read) selecting its columns as they are;
    None when ``sql`` is not such a query."""
    values, encoded = (escape(table_select(chosen, relation, encoded=e)) for e in (False, True))
    return encoded + sql[len(values):] if sql.startswith(values) else None


class _Cutter(TableCut):
    """Cuts one table into key-range or block-range splits."""

    __slots__ = ()

    def make(self, suffix: str, condition: str | None, args: tuple[Any, ...]) -> Split:
        conditions = [c for c in (escape(self.where) if self.where else None, condition) if c]
        sql = escape(table_select(self.chosen, self.relation)) + (f" WHERE {' AND '.join(conditions)}"
                                                                  if conditions else "")
        return self.split(suffix, sql, args, self._literal(" AND ".join(conditions), args) if conditions else None)

    @property
    def split_name(self) -> str:
        return f"{self.shard.schema}.{self.table}"

    def _literal(self, condition: str, args: tuple[Any, ...]) -> str:
        """The condition with its values as SQL literals (what ``wormhole plan`` shows, and what a JDBC
        read takes as a partition's predicate)."""
        values = iter(args)
        return _PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else Literal(next(values)).as_string(self.conn),
                                condition)

    def splits(self, infos: list[ColumnInfo], count: int) -> list[Split]:
        if self.selection.split_pk is None:
            return self._block_splits(count)
        pk = self._key_column(infos, self.selection.split_pk)
        points = self._points(pk, count) if count > 1 else None
        key = escape(quote(pk.name))
        if points is None or len(points) < 3:  # one range: every non-NULL key in one split
            splits = [self.make("", None, ())] if not pk.nullable else [self.make("#0", f"{key} IS NOT NULL", ())]
        else:
            last = len(points) - 2
            splits = []
            for i in range(last + 1):
                if i == 0:
                    splits.append(self.make(f"#{i}", f"{key} < %s", (points[1],)))
                elif i == last:
                    splits.append(self.make(f"#{i}", f"{key} >= %s", (points[i],)))
                else:
                    splits.append(self.make(f"#{i}", f"{key} >= %s AND {key} < %s", (points[i], points[i + 1])))
        if pk.nullable:
            splits.append(self.make("#null", f"{key} IS NULL", ()))
        return splits

    def _key_column(self, infos: list[ColumnInfo], split_pk: str) -> ColumnInfo:
        return self.key_column(infos, split_pk, lambda pk: pk.kind in _KEY_KINDS, lambda pk: pk.type_name,
                               "integer, date and timestamp", "cut the table into block ranges")

    def _points(self, pk: ColumnInfo, count: int) -> list[Any] | None:
        key = quote(pk.name)
        finite = f"isfinite({key})" if pk.kind != "int" else f"{key} IS NOT NULL"
        where = " AND ".join(c for c in (self.where, finite) if c)
        row = self.min_max(f"SELECT MIN({key}), MAX({key}) FROM {self.relation} WHERE {where}")
        if row is None or row[0] is None:
            return None
        low, high = row
        if isinstance(low, datetime):  # timestamp (naive) or timestamptz (aware, UTC): cut in microseconds
            zero = _EPOCH.replace(tzinfo=low.tzinfo)
            micros = int_points(_micros(low - zero), _micros(high - zero), count)
            return [zero + timedelta(microseconds=m) for m in micros]
        if isinstance(low, date):
            return [date.fromordinal(d) for d in int_points(low.toordinal(), high.toordinal(), count)]
        return list(int_points(int(low), int(high), count))

    def _block_splits(self, count: int) -> list[Split]:
        pages = self._pages() if count > 1 else 0
        if pages < 2 * MIN_SPLIT_PAGES:
            return [self.make("", None, ())]
        ranges = min(count, pages // MIN_SPLIT_PAGES)
        starts = [pages * i // ranges for i in range(ranges)]
        splits = []
        for i, start in enumerate(starts):
            low = f"ctid >= '({start},0)'::tid" if i else None
            high = f"ctid < '({starts[i + 1]},0)'::tid" if i + 1 < ranges else None
            splits.append(self.make(f"@{i}", " AND ".join(c for c in (low, high) if c), ()))
        return splits

    def _pages(self) -> int:
        """The table's size in blocks now; 0 for what has no ctid ranges to cut (a view, a partitioned
        table, a foreign table) or a server without TID range scans."""
        if self.conn.info.server_version < TID_RANGE_VERSION:
            return 0
        try:
            row = self.conn.execute(
                "SELECT CASE WHEN c.relkind IN ('r', 'm') THEN pg_relation_size(c.oid) "
                "/ current_setting('block_size')::bigint ELSE 0 END FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
                (self.shard.schema, self.table)).fetchone()
        except psycopg.Error as exc:
            raise SplitError(f"cannot find the size of {self.relation} in {self.shard.endpoint.mark}: "
                             f"{describe(exc)}", plugin=PLUGIN_NAME) from exc
        return int(row[0]) if row is not None and row[0] is not None else 0


class PostgresSplitter(SqlSplitter):
    DIALECT = POSTGRES
    CUTTER = _Cutter
    CUT_WITHOUT_KEY = True  # a table without split_pk is cut into block ranges

    def sql_text(self, text: str) -> str:
        return escape(text)

    def query_sql(self, query: str, shape: list[Any]) -> str:
        return escape(f"SELECT {', '.join(select_expr(c.name, c.kind) for c in shape)} FROM ({query}) AS wh_q")


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds

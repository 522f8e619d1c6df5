"""The postgres store's splits: key ranges, physical block ranges, or one split per query connection.

- ``split_pk`` (an integer, date or timestamp column): ``MIN``/``MAX`` of its finite values cut into
  near-equal ranges (:func:`wormhole.plugins.sql.int_points` over integers, days or microseconds). The
  first range is open below and the last open above, so keys outside the finite range read (infinity,
  a row written since) still belong to exactly one split; a nullable key adds a ``IS NULL`` split.
- no ``split_pk``: a table (or materialized view) of twice :data:`MIN_SPLIT_PAGES` pages or more is cut into
  ranges of physical blocks, ``ctid >= '(a,0)' AND ctid < '(b,0)'``, which PostgreSQL 14 and later read
  with a TID range scan (only those blocks). The size is the relation's file size now, not
  ``pg_class.relpages`` (0 until the first VACUUM or ANALYZE); the last range is open above, so blocks
  added since are read too.
- ``query``: one split per connection, the query as a derived table.

Every split's statement is ``SELECT <columns> FROM <relation> WHERE ...`` with ``%s`` for its bound
values (and ``%%`` for a literal ``%``): the reader runs it inside ``COPY (...) TO STDOUT``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import psycopg
from psycopg.sql import Literal

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, Split
from wormhole.plugins.postgres.catalog import (
    KIND_TYPES,
    ColumnInfo,
    choose_columns,
    describe_query,
    describe_table,
    relation,
    select_expr,
)
from wormhole.plugins.postgres.connection import PLUGIN_NAME, close_quietly, connect, describe
from wormhole.plugins.postgres.options import Endpoint
from wormhole.plugins.postgres.source_options import PostgresSource, QuerySource, Selection, Shard
from wormhole.plugins.sql import int_points, quote

MIN_SPLIT_PAGES = 128
"""A table without ``split_pk`` is cut into block ranges of at least this many 8 KiB pages (1 MiB)."""
TID_RANGE_VERSION = 140000
"""PostgreSQL 14 reads a ctid range with a TID range scan; an older server would scan the whole table per split."""
_KEY_KINDS = ("int", "date", "datetime", "timestamptz")
_EPOCH = datetime(1970, 1, 1)
_PLACEHOLDER = re.compile("%%|%s")


def source_connection(source: PostgresSource, ep: Endpoint, error: type[Any], ctx: ReadContext,
                      log: Any = None) -> psycopg.Connection[Any]:
    return connect(ep, error, attempts=source.connect_retries, timeout=source.connect_timeout_s, stop=ctx.stop,
                   log=ctx.log if log is None else log)


def escape(text: str) -> str:
    """SQL text run with bound values: psycopg reads ``%`` as a placeholder's start."""
    return text.replace("%", "%%")


class PostgresSplitter:
    def __init__(self, options: PostgresSource, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx

    def split(self, advice: int) -> list[Split]:
        source = self.source
        if isinstance(source, QuerySource):
            return [self._query_split(source, index, shard) for index, shard in enumerate(source.shards)]
        table_count = sum(len(shard.tables) for shard in source.shards)
        per_table = math.ceil(advice / table_count)
        if table_count == 1:
            per_table *= source.selection.split_factor  # DataX: small splits so one slow range does not drag the end
        splits: list[Split] = []
        reference: list[tuple[str, str]] | None = None
        for index, shard in enumerate(source.shards):
            conn = source_connection(source, shard.endpoint, SplitError, self.ctx)
            try:
                for table in shard.tables:
                    infos = describe_table(conn, shard.endpoint, shard.schema, table)
                    where = relation(shard.schema, table)
                    chosen = choose_columns(infos, source.selection.columns, shard.endpoint, where)
                    reference = same_shape(reference, chosen, shard.endpoint, where)
                    cutter = _TableCutter(conn, index, shard, table, source.selection, chosen)
                    splits.extend(cutter.splits(infos, per_table))
            finally:
                close_quietly(conn)
        self.ctx.log.info("splitter.done", splits=len(splits), tables=table_count)
        return splits

    def _query_split(self, source: QuerySource, index: int, shard: Shard) -> Split:
        ep = shard.endpoint
        conn = source_connection(source, ep, SplitError, self.ctx)
        try:
            shape = describe_query(conn, ep, source.query)
        finally:
            close_quietly(conn)
        sql = f"SELECT {', '.join(select_expr(c.name, c.kind) for c in shape)} FROM ({source.query}) AS wh_q"
        return Split(id=f"{ep.mark}/query", resource_mark=ep.mark,
                     params={"shard": index, "sql": escape(sql), "args": (), "kinds": tuple(c.kind for c in shape),
                             "columns": tuple(c.name for c in shape)})


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


def same_shape(reference: list[tuple[str, str]] | None, chosen: list[ColumnInfo], ep: Endpoint,
               where: str) -> list[tuple[str, str]]:
    """Every table of a source must read as the first one does (names and logical types)."""
    shape = [(c.name.lower(), KIND_TYPES[c.kind]) for c in chosen]
    if reference is not None and shape != reference:
        show = lambda s: ", ".join(f"{n} {t}" for n, t in s)  # noqa: E731
        raise SplitError(f"table {where} in {ep.mark} has columns {show(shape)}, unlike the first "
                         f"table's {show(reference)}", plugin=PLUGIN_NAME)
    return shape if reference is None else reference


@dataclass(frozen=True, slots=True)
class _TableCutter:
    """Cuts one table into key-range or block-range splits."""

    conn: psycopg.Connection[Any]
    index: int
    shard: Shard
    table: str
    selection: Selection
    chosen: list[ColumnInfo]

    @property
    def relation(self) -> str:
        return relation(self.shard.schema, self.table)

    def make(self, suffix: str, condition: str | None, args: tuple[Any, ...]) -> Split:
        conditions = [c for c in (f"({escape(self.selection.where)})" if self.selection.where else None,
                                  condition) if c]
        sql = escape(table_select(self.chosen, self.relation)) + (f" WHERE {' AND '.join(conditions)}"
                                                                  if conditions else "")
        mark = self.shard.endpoint.mark
        return Split(id=f"{mark}/{self.shard.schema}.{self.table}{suffix}", resource_mark=mark,
                     params={"shard": self.index, "sql": sql, "args": args,
                             "kinds": tuple(c.kind for c in self.chosen),
                             "columns": tuple(c.name for c in self.chosen), "relation": self.relation,
                             "predicate": self._literal(" AND ".join(conditions), args) if conditions else None})

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
        pk = {c.name: c for c in infos}.get(split_pk) or {c.name.lower(): c for c in infos}.get(split_pk.lower())
        if pk is None:
            raise SplitError(f"split_pk {split_pk} is not a column of {self.relation} in {self.shard.endpoint.mark}",
                             plugin=PLUGIN_NAME)
        if pk.kind not in _KEY_KINDS:
            raise SplitError(f"split_pk {pk.name} of {self.relation} in {self.shard.endpoint.mark} is "
                             f"{pk.type_name}; only integer, date and timestamp keys can be split (leave split_pk "
                             f"out to cut the table into block ranges)", plugin=PLUGIN_NAME)
        return pk

    def _points(self, pk: ColumnInfo, count: int) -> list[Any] | None:
        key = quote(pk.name)
        finite = f"isfinite({key})" if pk.kind != "int" else f"{key} IS NOT NULL"
        where = " AND ".join(c for c in (f"({self.selection.where})" if self.selection.where else "", finite) if c)
        try:
            row = self.conn.execute(f"SELECT MIN({key}), MAX({key}) FROM {self.relation} WHERE {where}").fetchone()
        except psycopg.Error as exc:
            raise SplitError(f"cannot find the key range of {self.relation} in {self.shard.endpoint.mark}: "
                             f"{describe(exc)}", plugin=PLUGIN_NAME) from exc
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


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds

"""The mysql source's incremental bounds: the column's type, its maximum over every table (or query) the
source reads, and the server's clock (:mod:`wormhole.incremental`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pymysql

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, SourceBounds, not_a_column
from wormhole.plugins.mysql.catalog import describe_table
from wormhole.plugins.mysql.connection import PLUGIN_NAME, close_quietly, describe, fetch_one, source_connection
from wormhole.plugins.mysql.options import Endpoint, MysqlSource, QuerySource
from wormhole.plugins.mysql.splitter import query_columns
from wormhole.plugins.mysql.types import KIND_TYPES
from wormhole.plugins.sql import backquote as quote


def bounds(source: MysqlSource, ctx: ReadContext, column: str) -> SourceBounds:
    kinds: set[str] = set()
    highest: Any = None
    now: datetime | None = None
    for shard in source.shards:
        conn = source_connection(source, shard.endpoint, SplitError, ctx)
        try:
            for relation, kind, local in _relations(conn, source, shard.endpoint, shard.tables, column):
                kinds.add(kind)
                high, clock = _max_and_now(conn, shard.endpoint, relation, column, local)
                highest = high if highest is None or (high is not None and high > highest) else highest
                now = clock if now is None else min(now, clock)  # the slowest clock: no shard reads ahead
        finally:
            close_quietly(conn)
    assert now is not None  # a source has at least one connection
    if len(kinds) > 1:
        raise SplitError(f"incremental column {column} has different types across the source: "
                         f"{', '.join(sorted(kinds))}", plugin=PLUGIN_NAME)
    return SourceBounds(kind=kinds.pop(), maximum=highest, now=now)


def _relations(conn: pymysql.Connection, source: MysqlSource, ep: Endpoint, tables: tuple[str, ...],
               column: str) -> list[tuple[str, str, bool]]:
    """(the FROM clause with its WHERE, the column's logical type, whether its values are the server's local
    time) of each relation read on ``ep``. A DATETIME holds what its writers' sessions said, the server's
    time zone unless they chose another; a TIMESTAMP reads in this session's, UTC."""
    if isinstance(source, QuerySource):
        found = {c.name.lower(): c.kind for c in query_columns(conn, ep, source.query)}
        relation = f"({source.query}) AS wh_q"
        return [(relation, KIND_TYPES[_kind(found, column, f"the query on {ep.mark}")], False)]
    where = source.selection.where
    out: list[tuple[str, str, bool]] = []
    for table in tables:
        infos = {c.name.lower(): c for c in describe_table(conn, ep, table)}
        kind = _kind({n: c.kind for n, c in infos.items()}, column, f"{quote(table)} in {ep.mark}")
        relation = f"{quote(ep.database)}.{quote(table)}" + (f" WHERE ({where})" if where else "")
        out.append((relation, KIND_TYPES[kind], infos[column.lower()].data_type == "datetime"))
    return out


def _kind(found: dict[str, str], column: str, where: str) -> str:
    kind = found.get(column.lower())
    if kind is None:
        raise not_a_column(column, where)
    return kind


def _max_and_now(conn: pymysql.Connection, ep: Endpoint, relation: str, column: str,
                 local: bool) -> tuple[Any, datetime]:
    # NOW() is the statement's start, to the whole second: a row written in that second is the next run's.
    # The session runs in UTC; a DATETIME column is compared with the server's own zone's clock (NOW() when
    # the server has no time zone tables to convert a named zone).
    now = "COALESCE(CONVERT_TZ(NOW(), '+00:00', @@global.time_zone), NOW())" if local else "NOW()"
    sql = f"SELECT (SELECT MAX({quote(column)}) FROM {relation}), {now}"
    try:
        high, now = fetch_one(conn, sql)
    except pymysql.err.MySQLError as exc:
        raise SplitError(f"cannot read the incremental bound of {column} on {ep.mark}: {describe(exc)}",
                         plugin=PLUGIN_NAME) from exc
    return high, now

"""The postgres source's incremental bounds: the column's type, its maximum over every table (or query)
the source reads, and the server's clock (:mod:`wormhole.incremental`).

The maximum is over finite values (``infinity`` has no Python value). The clock is ``now()`` to the whole
second: in UTC for a ``timestamptz`` column (the reader gives its values in UTC), and for a ``timestamp``
column in the server's own time zone (its configured ``TimeZone``, what its writers' sessions use unless
they chose another), as the mysql store compares a DATETIME.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, SourceBounds, not_a_column
from wormhole.plugins.postgres.catalog import KIND_TYPES, ColumnInfo, describe_query, describe_table
from wormhole.plugins.postgres.catalog import relation as table_relation
from wormhole.plugins.postgres.connection import PLUGIN_NAME, close_quietly, describe
from wormhole.plugins.postgres.source_options import PostgresSource, QuerySource, Shard
from wormhole.plugins.postgres.splitter import source_connection
from wormhole.plugins.sql import quote

_UTC_NOW = "date_trunc('second', now() AT TIME ZONE 'UTC')"
_LOCAL_NOW = ("date_trunc('second', now() AT TIME ZONE "
              "(SELECT reset_val FROM pg_settings WHERE name = 'TimeZone'))")


def bounds(source: PostgresSource, ctx: ReadContext, column: str) -> SourceBounds:
    kinds: set[str] = set()
    highest: Any = None
    now: datetime | None = None
    for shard in source.shards:
        conn = source_connection(source, shard.endpoint, SplitError, ctx)
        try:
            for relation, info in _relations(conn, source, shard, column):
                kinds.add(KIND_TYPES[info.kind])
                high, clock = _max_and_now(conn, shard, relation, info)
                highest = high if highest is None or (high is not None and high > highest) else highest
                now = clock if now is None else min(now, clock)  # the slowest clock: no shard reads ahead
        finally:
            close_quietly(conn)
    assert now is not None  # a source has at least one connection
    if len(kinds) > 1:
        raise SplitError(f"incremental column {column} has different types across the source: "
                         f"{', '.join(sorted(kinds))}", plugin=PLUGIN_NAME)
    return SourceBounds(kind=kinds.pop(), maximum=highest, now=now)


def _relations(conn: psycopg.Connection[Any], source: PostgresSource, shard: Shard,
               column: str) -> list[tuple[str, ColumnInfo]]:
    """(the FROM clause with its WHERE, the column) of each relation read on ``shard``."""
    ep = shard.endpoint
    if isinstance(source, QuerySource):
        info = _column(describe_query(conn, ep, source.query), column, f"the query on {ep.mark}")
        return [(f"({source.query}) AS wh_q", info)]
    where = source.selection.where
    out = []
    for table in shard.tables:
        name = table_relation(shard.schema, table)
        info = _column(describe_table(conn, ep, shard.schema, table), column, f"{name} in {ep.mark}")
        out.append((name + (f" WHERE ({where})" if where else ""), info))
    return out


def _column(infos: list[ColumnInfo], column: str, where: str) -> ColumnInfo:
    found = {c.name: c for c in infos}.get(column) or {c.name.lower(): c for c in infos}.get(column.lower())
    if found is None:
        raise not_a_column(column, where)
    return found


def _max_and_now(conn: psycopg.Connection[Any], shard: Shard, relation: str, info: ColumnInfo) -> tuple[Any, datetime]:
    q = quote(info.name)
    value = f"({q} AT TIME ZONE 'UTC')" if info.kind == "timestamptz" else q
    finite = f" FILTER (WHERE isfinite({q}))" if info.kind in ("date", "datetime", "timestamptz") else ""
    clock = _LOCAL_NOW if info.kind == "datetime" else _UTC_NOW
    try:
        row = conn.execute(f"SELECT (SELECT MAX({value}){finite} FROM {relation}), {clock}").fetchone()
    except psycopg.Error as exc:
        raise SplitError(f"cannot read the incremental bound of {info.name} on {shard.endpoint.mark}: "
                         f"{describe(exc)}", plugin=PLUGIN_NAME) from exc
    assert row is not None
    return row[0], row[1]

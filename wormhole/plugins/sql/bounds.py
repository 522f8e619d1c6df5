"""A SQL source's incremental bounds (:mod:`wormhole.incremental`): the column's type, its maximum over every
table (or query) the source reads, and the server's clock. The store's dialect writes the SQL that asks
one relation for its maximum and the clock (:meth:`.dialect.Dialect.max_and_now`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, SourceBounds, not_a_column
from wormhole.plugins.sql.catalog import find_column, query_columns
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.snapshot import planning_session
from wormhole.plugins.sql.source_options import QuerySource, Shard, SqlSource


def bounds(dialect: Dialect, source: SqlSource, ctx: ReadContext, column: str) -> SourceBounds:
    kinds: set[str] = set()
    highest: Any = None
    now: datetime | None = None
    for shard in source.shards:
        # With a consistent snapshot, the window ends at the largest value its instant holds.
        with planning_session(dialect, source, shard.endpoint, SplitError, ctx) as conn:
            for relation, info in _relations(dialect, conn, source, shard, column):
                kinds.add(dialect.kind_types[info.kind])
                try:
                    high, clock = dialect.max_and_now(conn, shard, relation, info, column)
                except dialect.db_error as exc:
                    raise SplitError(f"cannot read the incremental bound of {column} on {shard.endpoint.mark}: "
                                     f"{dialect.describe(exc)}", plugin=dialect.name) from exc
                highest = high if highest is None or (high is not None and high > highest) else highest
                now = clock if now is None else min(now, clock)  # the slowest clock: no shard reads ahead
    assert now is not None  # a source has at least one connection
    if len(kinds) > 1:
        raise SplitError(f"incremental column {column} has different types across the source: "
                         f"{', '.join(sorted(kinds))}", plugin=dialect.name)
    return SourceBounds(kind=kinds.pop(), maximum=highest, now=now)


def _relations(dialect: Dialect, conn: Any, source: SqlSource, shard: Shard,
               column: str) -> list[tuple[str, Any]]:
    """(the FROM clause with its WHERE, the column) of each relation read on ``shard``."""
    ep = shard.endpoint
    if isinstance(source, QuerySource):
        info = find_column(query_columns(dialect, conn, ep, source.query), column)
        if info is None:
            raise not_a_column(column, f"the query on {ep.mark}")
        return [(f"({source.query}) AS wh_q", info)]
    where = source.selection.where
    out = []
    for table in shard.tables:
        info = find_column(dialect.describe_table(conn, shard, table), column)
        if info is None:
            raise not_a_column(column, f"{dialect.table_label(shard, table)} in {ep.mark}")
        out.append((dialect.relation(shard, table) + (f" WHERE ({where})" if where else ""), info))
    return out

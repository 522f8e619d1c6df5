"""A SQL source's incremental bounds (:mod:`wormhole.incremental`): the column's type, its maximum over every
table (or query) the source reads, and the server's clock. The store's dialect writes the SQL that asks
one relation for its maximum and the clock (:meth:`BoundsDialect.max_and_now`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from wormhole.errors import SplitError
from wormhole.incremental import not_a_column
from wormhole.plugins.base import ReadContext, SourceBounds
from wormhole.plugins.sql.catalog import find_column
from wormhole.plugins.sql.source_dialect import SourceDialect
from wormhole.plugins.sql.source_options import QuerySource, Shard, SqlSource


class BoundsDialect(SourceDialect, Protocol):
    def max_and_now(self, conn: Any, shard: Shard, relation: str, info: Any, column: str) -> tuple[Any, datetime]:
        """The largest value of column ``info`` (``column`` as the task names it) in ``relation`` (a FROM
        clause with its WHERE), and the server's clock to the whole second as that column's values read."""


def bounds(dialect: BoundsDialect, source: SqlSource, ctx: ReadContext, column: str) -> SourceBounds:
    kinds: set[str] = set()
    highest: Any = None
    now: datetime | None = None
    for shard in source.shards:
        conn = dialect.connect(source, shard.endpoint, SplitError, ctx)
        try:
            for relation, info in _relations(dialect, conn, source, shard, column):
                kinds.add(dialect.kind_types[info.kind])
                high, clock = dialect.max_and_now(conn, shard, relation, info, column)
                highest = high if highest is None or (high is not None and high > highest) else highest
                now = clock if now is None else min(now, clock)  # the slowest clock: no shard reads ahead
        finally:
            dialect.close(conn)
    assert now is not None  # a source has at least one connection
    if len(kinds) > 1:
        raise SplitError(f"incremental column {column} has different types across the source: "
                         f"{', '.join(sorted(kinds))}", plugin=dialect.name)
    return SourceBounds(kind=kinds.pop(), maximum=highest, now=now)


def _relations(dialect: SourceDialect, conn: Any, source: SqlSource, shard: Shard,
               column: str) -> list[tuple[str, Any]]:
    """(the FROM clause with its WHERE, the column) of each relation read on ``shard``."""
    ep = shard.endpoint
    if isinstance(source, QuerySource):
        info = find_column(dialect.describe_query(conn, ep, source.query), column)
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

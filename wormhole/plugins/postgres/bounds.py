"""The postgres source's incremental bounds: the column's type, its maximum over every table (or query)
the source reads, and the server's clock (:mod:`wormhole.plugins.sql.bounds`, with
:meth:`~.source_dialect.PostgresSourceDialect.max_and_now`)."""

from __future__ import annotations

from wormhole.plugins.base import ReadContext, SourceBounds
from wormhole.plugins.postgres.source_dialect import POSTGRES
from wormhole.plugins.sql import bounds as sql_bounds
from wormhole.plugins.sql.source_options import SqlSource


def bounds(source: SqlSource, ctx: ReadContext, column: str) -> SourceBounds:
    return sql_bounds.bounds(POSTGRES, source, ctx, column)

"""The mysql source's incremental bounds: the column's type, its maximum over every table (or query) the
source reads, and the server's clock (:mod:`wormhole.plugins.sql.bounds`, with
:meth:`~.source_dialect.MysqlSourceDialect.max_and_now`)."""

from __future__ import annotations

from wormhole.plugins.base import ReadContext, SourceBounds
from wormhole.plugins.mysql.source_dialect import MYSQL
from wormhole.plugins.sql import bounds as sql_bounds
from wormhole.plugins.sql.source_options import SqlSource


def bounds(source: SqlSource, ctx: ReadContext, column: str) -> SourceBounds:
    return sql_bounds.bounds(MYSQL, source, ctx, column)

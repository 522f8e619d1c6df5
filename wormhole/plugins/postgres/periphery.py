"""The postgres source's periphery: every connection answers, how many rows the source holds, and how
busy its servers are (``busy_threads``, for adaptive push-up). The destination's is
:mod:`.writer_periphery`."""

from __future__ import annotations

from typing import Any

import psycopg

from wormhole.errors import ReadError
from wormhole.plugins.postgres.catalog import relation
from wormhole.plugins.postgres.connection import describe
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.postgres.source_options import PostgresSource, QuerySource, Shard
from wormhole.plugins.postgres.splitter import source_connection
from wormhole.plugins.sql.reader_periphery import SqlReaderPeriphery

_STATS_SQL = ("SELECT c.reltuples::bigint, pg_relation_size(c.oid) FROM pg_class c "
              "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s")
_BUSY_SQL = ("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() "
             "AND backend_type = 'client backend'")


class PostgresReaderPeriphery(SqlReaderPeriphery):
    """Reachability of every connection (bounded retry) and an estimate of the rows to read."""

    dialect = POSTGRES
    source: PostgresSource

    def _shards(self) -> tuple[Shard, ...]:
        return tuple(self.source.shards)

    def _connect(self, shard: Shard) -> psycopg.Connection[Any]:
        return source_connection(self.source, shard.endpoint, ReadError, self.ctx)

    def _running(self, conn: psycopg.Connection[Any]) -> int:
        """Active client backends, this session excluded."""
        found = conn.execute(_BUSY_SQL).fetchone()
        return int(found[0]) if found else 0

    def _estimate(self, conn: psycopg.Connection[Any], shard: Shard) -> tuple[int | None, int | None]:
        source = self.source
        where = None if isinstance(source, QuerySource) else source.selection.where
        if source.estimate == "none":
            return None, None
        if source.estimate == "stats":
            if isinstance(source, QuerySource) or where is not None:
                return None, None  # a where or a query: the statistics say nothing about the rows selected
            return self._stats(conn, shard)
        return self._count(conn, shard, where)

    def _stats(self, conn: psycopg.Connection[Any], shard: Shard) -> tuple[int | None, int | None]:
        rows, size = 0, 0
        for table in shard.tables:
            found = conn.execute(_STATS_SQL, (shard.schema, table)).fetchone()
            if found is None or found[0] is None or int(found[0]) < 0:
                return None, None  # a view, or a table never analyzed (reltuples -1): no estimate
            rows += int(found[0])
            size += int(found[1] or 0)
        return rows, size

    def _count(self, conn: psycopg.Connection[Any], shard: Shard, where: str | None) -> tuple[int | None, None]:
        source = self.source
        selects = [f"SELECT 1 FROM ({source.query}) AS wh_q"] if isinstance(source, QuerySource) else \
            [f"SELECT 1 FROM {relation(shard.schema, t)}" + (f" WHERE ({where})" if where else "")
             for t in shard.tables]
        total = 0
        try:
            # statement_timeout cancels a count slower than count_timeout_s (SQLSTATE 57014).
            conn.execute(f"SET statement_timeout = {max(1, round(source.count_timeout_s * 1000))}")
            for sql in selects:
                found = conn.execute(f"SELECT COUNT(*) FROM ({sql}) AS wh_c").fetchone()
                total += int(found[0]) if found else 0
        except psycopg.Error as exc:
            # Too slow, or not countable: the estimate is only a hint.
            self.ctx.log.warning("reader.estimate_skipped", resource=shard.endpoint.mark, reason=describe(exc))
            return None, None
        return total, None

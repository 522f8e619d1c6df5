"""The postgres source's periphery: every connection answers, how many rows the source holds, and how
busy its servers are (``busy_threads``, for adaptive push-up). The destination's is
:mod:`.writer_periphery`."""

from __future__ import annotations

from typing import Any

import psycopg

from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.postgres.source_options import PostgresSource, Shard
from wormhole.plugins.sql.reader_periphery import SqlReaderPeriphery

_STATS_SQL = ("SELECT c.reltuples::bigint, pg_relation_size(c.oid) FROM pg_class c "
              "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s")
_BUSY_SQL = ("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() "
             "AND backend_type = 'client backend'")


class PostgresReaderPeriphery(SqlReaderPeriphery):
    """Reachability of every connection (bounded retry) and an estimate of the rows to read."""

    dialect = POSTGRES
    source: PostgresSource

    def _running(self, conn: psycopg.Connection[Any]) -> int:
        """Active client backends, this session excluded."""
        found = conn.execute(_BUSY_SQL).fetchone()
        return int(found[0]) if found else 0

    def _stats(self, conn: psycopg.Connection[Any], shard: Shard) -> tuple[int | None, int | None]:
        rows, size = 0, 0
        for table in shard.tables:
            found = conn.execute(_STATS_SQL, (shard.schema, table)).fetchone()
            if found is None or found[0] is None or int(found[0]) < 0:
                return None, None  # a view, or a table never analyzed (reltuples -1): no estimate
            rows += int(found[0])
            size += int(found[1] or 0)
        return rows, size

    def _count(self, conn: psycopg.Connection[Any], statements: list[str]) -> int:
        # statement_timeout cancels a count slower than count_timeout_s (SQLSTATE 57014).
        conn.execute(f"SET statement_timeout = {max(1, round(self.source.count_timeout_s * 1000))}")
        return sum(int(found[0]) if (found := conn.execute(sql).fetchone()) else 0 for sql in statements)

"""The postgres store's read side as the SQL store kit asks it
(:class:`wormhole.plugins.sql.source_dialect.SourceDialect`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext
from wormhole.plugins.postgres import catalog, connection
from wormhole.plugins.sql import quote as sql_quote
from wormhole.plugins.sql.source_options import Endpoint, Shard, SourceSettings

_UTC_NOW = "date_trunc('second', now() AT TIME ZONE 'UTC')"
_LOCAL_NOW = ("date_trunc('second', now() AT TIME ZONE "
              "(SELECT reset_val FROM pg_settings WHERE name = 'TimeZone'))")


class PostgresSourceDialect:
    name = connection.PLUGIN_NAME
    kind_types = catalog.KIND_TYPES
    driver_error = psycopg.Error

    quote = staticmethod(sql_quote)

    @staticmethod
    def relation(shard: Shard, table: str) -> str:
        return catalog.relation(shard.schema, table)

    @staticmethod
    def table_label(shard: Shard, table: str) -> str:
        return catalog.relation(shard.schema, table)

    describe = staticmethod(connection.describe)

    @staticmethod
    def connect(source: SourceSettings, endpoint: Endpoint, error: type[Any], ctx: ReadContext,
                log: Any = None) -> psycopg.Connection[Any]:
        return connection.connect(endpoint, error, attempts=source.connect_retries, timeout=source.connect_timeout_s,
                                  stop=ctx.stop, log=ctx.log if log is None else log)

    close = staticmethod(connection.close_quietly)

    @staticmethod
    def fetch_one(conn: psycopg.Connection[Any], sql: str, args: Sequence[Any] | None = None) -> Any:
        return conn.execute(sql, args).fetchone()

    @staticmethod
    def describe_table(conn: psycopg.Connection[Any], shard: Shard, table: str) -> list[catalog.ColumnInfo]:
        return catalog.describe_table(conn, shard.endpoint, shard.schema, table)

    @staticmethod
    def choose_columns(infos: list[catalog.ColumnInfo], wanted: Sequence[str] | None, shard: Shard,
                       table: str) -> list[catalog.ColumnInfo]:
        return catalog.choose_columns(infos, wanted, shard.endpoint, catalog.relation(shard.schema, table))

    describe_query = staticmethod(catalog.describe_query)

    @staticmethod
    def max_and_now(conn: psycopg.Connection[Any], shard: Shard, relation: str, info: catalog.ColumnInfo,
                    column: str) -> tuple[Any, datetime]:
        """The maximum is over finite values (``infinity`` has no Python value). The clock is ``now()`` to the
        whole second: in UTC for a ``timestamptz`` column (the reader gives its values in UTC), and for a
        ``timestamp`` column in the server's own time zone (its configured ``TimeZone``, what its writers'
        sessions use unless they chose another), as the mysql store compares a DATETIME."""
        q = sql_quote(info.name)
        value = f"({q} AT TIME ZONE 'UTC')" if info.kind == "timestamptz" else q
        finite = f" FILTER (WHERE isfinite({q}))" if info.kind in ("date", "datetime", "timestamptz") else ""
        clock = _LOCAL_NOW if info.kind == "datetime" else _UTC_NOW
        try:
            row = conn.execute(f"SELECT (SELECT MAX({value}){finite} FROM {relation}), {clock}").fetchone()
        except psycopg.Error as exc:
            raise SplitError(f"cannot read the incremental bound of {info.name} on {shard.endpoint.mark}: "
                             f"{connection.describe(exc)}", plugin=connection.PLUGIN_NAME) from exc
        assert row is not None
        return row[0], row[1]


POSTGRES = PostgresSourceDialect()

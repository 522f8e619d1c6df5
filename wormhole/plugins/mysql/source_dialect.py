"""The mysql store's read side as the SQL store kit asks it
(:class:`wormhole.plugins.sql.source_dialect.SourceDialect`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pymysql

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext
from wormhole.plugins.mysql import catalog, connection
from wormhole.plugins.mysql.types import KIND_TYPES
from wormhole.plugins.sql import backquote
from wormhole.plugins.sql.source_options import Endpoint, Shard, SourceSettings


class MysqlSourceDialect:
    name = connection.PLUGIN_NAME
    kind_types = KIND_TYPES
    driver_error = pymysql.err.MySQLError

    quote = staticmethod(backquote)

    @staticmethod
    def relation(shard: Shard, table: str) -> str:
        return f"{backquote(shard.schema)}.{backquote(table)}"  # a MySQL schema is its database

    @staticmethod
    def table_label(shard: Shard, table: str) -> str:
        return backquote(table)

    describe = staticmethod(connection.describe)

    @staticmethod
    def connect(source: SourceSettings, endpoint: Endpoint, error: type[Any], ctx: ReadContext,
                log: Any = None) -> pymysql.Connection:
        return connection.source_connection(source, endpoint, error, ctx, log=log)

    close = staticmethod(connection.close_quietly)

    fetch_one = staticmethod(connection.fetch_one)

    @staticmethod
    def describe_table(conn: pymysql.Connection, shard: Shard, table: str) -> list[catalog.ColumnInfo]:
        return catalog.describe_table(conn, shard.endpoint, table)

    @staticmethod
    def choose_columns(infos: list[catalog.ColumnInfo], wanted: Sequence[str] | None, shard: Shard,
                       table: str) -> list[catalog.ColumnInfo]:
        return catalog.choose_columns(infos, wanted, shard.endpoint, table)

    @staticmethod
    def describe_query(conn: pymysql.Connection, endpoint: Endpoint, query: str) -> list[catalog.ResultColumn]:
        """The query's columns; SplitError with MySQL's reason when it fails."""
        try:
            return catalog.describe_query(conn, query)
        except pymysql.err.MySQLError as exc:
            raise SplitError(f"the query fails on {endpoint.mark}: {connection.describe(exc)}",
                             plugin=connection.PLUGIN_NAME) from exc

    @staticmethod
    def max_and_now(conn: pymysql.Connection, shard: Shard, relation: str, info: Any,
                    column: str) -> tuple[Any, datetime]:
        # A DATETIME holds what its writers' sessions said, the server's time zone unless they chose another;
        # a TIMESTAMP reads in this session's, UTC. NOW() is the statement's start, to the whole second: a row
        # written in that second is the next run's. A DATETIME column is compared with the server's own
        # zone's clock (NOW() when the server has no time zone tables to convert a named zone).
        local = isinstance(info, catalog.ColumnInfo) and info.data_type == "datetime"
        now = "COALESCE(CONVERT_TZ(NOW(), '+00:00', @@global.time_zone), NOW())" if local else "NOW()"
        sql = f"SELECT (SELECT MAX({backquote(column)}) FROM {relation}), {now}"
        try:
            high, clock = connection.fetch_one(conn, sql)
        except pymysql.err.MySQLError as exc:
            raise SplitError(f"cannot read the incremental bound of {column} on {shard.endpoint.mark}: "
                             f"{connection.describe(exc)}", plugin=connection.PLUGIN_NAME) from exc
        return high, clock


MYSQL = MysqlSourceDialect()

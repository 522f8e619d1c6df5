"""MySQL's (and MariaDB's) :class:`~wormhole.plugins.sql.dialect.Dialect`: how the SQL store kit's
statements are spelled for it and how pymysql answers, for its source and its destination."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pymysql
from pymysql.constants import SERVER_STATUS

from wormhole.plugins.mysql import catalog, connection
from wormhole.plugins.mysql.options import MAX_IDENTIFIER
from wormhole.plugins.mysql.types import KIND_TYPES
from wormhole.plugins.sql import backquote
from wormhole.plugins.sql.connection import SessionDialect
from wormhole.plugins.sql.source_options import Shard
from wormhole.plugins.sql.target import fetch_all, fetch_one

_DUPLICATE_KEY = 1062
_UNKNOWN_THREAD = 1094
_DUPLICATE_COLUMN = 1060


class MysqlDialect(SessionDialect):
    """The mysql store's dialect (one instance, :data:`MYSQL`)."""

    # -- both sides -------------------------------------------------------------------------------

    name = connection.PLUGIN_NAME
    db_error: type[Exception] = pymysql.err.MySQLError

    quote = staticmethod(backquote)
    describe = staticmethod(connection.describe)
    open = staticmethod(connection.connect)
    end_session_sql = "KILL CONNECTION %s"  # a COMMIT still running or queued ends with it
    session_alive_sql = "SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = %s"

    def end_refused(self, exc: BaseException) -> bool:
        return connection.error_code(exc) == _UNKNOWN_THREAD  # already gone: nothing to wait for

    def let_go(self, conn: Any) -> None:
        connection.abandon(conn)  # "already closed", or a socket that died under the QUIT

    # -- read side (the source's kit) ------------------------------------------------------------

    kind_types: Mapping[str, str] = KIND_TYPES

    @staticmethod
    def table_label(shard: Shard, table: str) -> str:
        return backquote(table)

    describe_table = staticmethod(catalog.describe_table)
    describe_tables = staticmethod(catalog.describe_tables)
    describe_query = staticmethod(catalog.describe_query)

    @staticmethod
    def max_and_now(conn: pymysql.Connection, shard: Shard, relation: str, info: Any,
                    column: str) -> tuple[Any, datetime]:
        # A DATETIME holds what its writers' sessions said, the server's time zone unless they chose another;
        # a TIMESTAMP reads in this session's, UTC. NOW() is the statement's start, to the whole second: a row
        # written in that second is the next run's. A DATETIME column is compared with the server's own
        # zone's clock (NOW() when the server has no time zone tables to convert a named zone).
        local = isinstance(info, catalog.ColumnInfo) and info.data_type == "datetime"
        now = "COALESCE(CONVERT_TZ(NOW(), '+00:00', @@global.time_zone), NOW())" if local else "NOW()"
        high, clock = fetch_one(conn, f"SELECT (SELECT MAX({backquote(column)}) FROM {relation}), {now}")
        return high, clock

    # -- write side (the destination's kit) ------------------------------------------------------

    namespace_kind = "database"
    markers_ddl = (
        "CREATE TABLE IF NOT EXISTS {table} (taskdb VARCHAR(32) NOT NULL DEFAULT '', task_id BIGINT NOT NULL, "
        "state_run BIGINT NOT NULL, destination VARCHAR(64) NOT NULL, split_id VARCHAR(255) NOT NULL, "
        "`rows` BIGINT NULL, phase VARCHAR(16) NULL, done_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
        "PRIMARY KEY (taskdb, task_id, state_run, destination, split_id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
        "COMMENT='wormhole: splits each destination holds durably'")
    markers_upgrade: str | None = (
        "ALTER TABLE {table} ADD COLUMN taskdb VARCHAR(32) NOT NULL DEFAULT '' FIRST, DROP PRIMARY KEY, "
        "ADD PRIMARY KEY (taskdb, task_id, state_run, destination, split_id)")
    """A table made by an older version lacks ``taskdb``: its rows keep ``''`` (no task database's)."""

    is_transient = staticmethod(connection.is_transient)

    def fit_name(self, table: str, suffix: str) -> str:
        return table[: MAX_IDENTIFIER - len(suffix)] + suffix

    def upsert_prepared_sql(self, table: str) -> str:
        return (f"REPLACE INTO {table} (taskdb, task_id, state_run, destination, split_id, `rows`, phase) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s)")

    def marker_columns(self, conn: Any, namespace: str, table: str) -> set[str]:
        return {str(c[0]).lower() for c in fetch_all(
            conn, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (namespace, table))}

    def created_meanwhile(self, exc: BaseException) -> bool:
        return connection.error_code(exc) == _DUPLICATE_COLUMN  # another run upgraded it meanwhile

    def missing_namespace(self, exc: BaseException) -> bool:
        return False  # a database that does not exist fails the connection already

    def commented_tables(self, conn: Any, namespace: str) -> list[tuple[str, str]]:
        return [(str(name), str(comment or "")) for name, comment in fetch_all(
            conn, "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                  "AND TABLE_COMMENT LIKE %s ORDER BY TABLE_NAME", (namespace, "wormhole:%"))]

    def table_comment(self, conn: Any, namespace: str, name: str) -> str | None:
        """The comment of table ``name`` (a view's is 'VIEW'), or None when there is no such table."""
        found = fetch_one(conn, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE "
                                           "TABLE_SCHEMA = %s AND TABLE_NAME = %s", (namespace, name))
        return None if found is None else str(found[0] or "")

    def run_text(self, conn: Any, statement: str) -> None:
        with conn.cursor() as cur:
            cur.execute(statement)
        conn.commit()

    def abandon(self, conn: Any) -> None:
        connection.abandon(conn)

    def session_id(self, conn: Any) -> int:
        return int(conn.thread_id())

    def is_duplicate(self, exc: BaseException) -> bool:
        return connection.error_code(exc) == _DUPLICATE_KEY

    def idle(self, conn: Any, autocommit: bool = True) -> bool:
        status = conn.server_status  # as the server's last answer left it
        pending = conn._result is not None and conn._result.unbuffered_active  # pymysql's result, if any
        return bool(conn.open and bool(status & SERVER_STATUS.SERVER_STATUS_AUTOCOMMIT) == autocommit
                    and not status & SERVER_STATUS.SERVER_STATUS_IN_TRANS and not pending)

    def commit_unknown(self, exc: BaseException, conn: Any) -> bool:
        return isinstance(exc, pymysql.err.InterfaceError) or connection.error_code(exc) in connection.NO_ANSWER


MYSQL = MysqlDialect()

"""MySQL's (and MariaDB's) :class:`~wormhole.plugins.sql.dialect.Dialect`: how the SQL store kit's
statements are spelled for it and how pymysql answers."""

from __future__ import annotations

from typing import Any

import pymysql

from wormhole.plugins.base import StopSignal
from wormhole.plugins.mysql import connection
from wormhole.plugins.mysql.options import MAX_IDENTIFIER
from wormhole.plugins.sql import backquote

_DUPLICATE_KEY = 1062
_DUPLICATE_COLUMN = 1060
_COMMIT_UNKNOWN = (2013, 2055)
"""Lost while waiting for COMMIT's answer: whether the server committed is unknown."""


class MysqlDialect:
    """The mysql store's dialect (one instance, :data:`MYSQL`)."""

    # -- write side (the destination's kit) ------------------------------------------------------

    name = connection.PLUGIN_NAME
    db_error: type[Exception] = pymysql.err.MySQLError
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

    quote = staticmethod(backquote)
    describe = staticmethod(connection.describe)
    close_quietly = staticmethod(connection.close_quietly)
    is_transient = staticmethod(connection.is_transient)

    def fit_name(self, table: str, suffix: str) -> str:
        return table[: MAX_IDENTIFIER - len(suffix)] + suffix

    def upsert_prepared_sql(self, table: str) -> str:
        return (f"REPLACE INTO {table} (taskdb, task_id, state_run, destination, split_id, `rows`, phase) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s)")

    def marker_columns(self, conn: Any, namespace: str, table: str) -> set[str]:
        return {str(c[0]).lower() for c in connection.fetch_all(
            conn, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (namespace, table))}

    def created_meanwhile(self, exc: BaseException) -> bool:
        return connection.error_code(exc) == _DUPLICATE_COLUMN  # another run upgraded it meanwhile

    def missing_namespace(self, exc: BaseException) -> bool:
        return False  # a database that does not exist fails the connection already

    def commented_tables(self, conn: Any, namespace: str) -> list[tuple[str, str]]:
        return [(str(name), str(comment or "")) for name, comment in connection.fetch_all(
            conn, "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                  "AND TABLE_COMMENT LIKE %s ORDER BY TABLE_NAME", (namespace, "wormhole:%"))]

    def table_comment(self, conn: Any, namespace: str, name: str) -> str | None:
        """The comment of table ``name`` (a view's is 'VIEW'), or None when there is no such table."""
        found = connection.fetch_one(conn, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE "
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

    def wait_session_ended(self, conn: Any, session: int, stop: StopSignal, wait_s: float) -> None:
        connection.wait_session_ended(conn, session, stop, wait_s)

    def is_duplicate(self, exc: BaseException) -> bool:
        return connection.error_code(exc) == _DUPLICATE_KEY

    def commit_unknown(self, exc: BaseException, conn: Any) -> bool:
        return isinstance(exc, pymysql.err.InterfaceError) or connection.error_code(exc) in _COMMIT_UNKNOWN

    # -- end of the write side -------------------------------------------------------------------


MYSQL = MysqlDialect()

"""MySQL/MariaDB task store (pymysql): UTC sessions, autocommit, bounded retry of transient connects."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from typing import Any, ClassVar

import pymysql
import structlog
from pymysql.constants import CLIENT

from wormhole.errors import TaskDbError
from wormhole.plugins.mysql.connection import CONNECT_TRANSIENT_CODES
from wormhole.plugins.mysql.connection import error_code as _errno
from wormhole.retry import policy
from wormhole.taskdb.base import SqlTaskStore
from wormhole.taskdb.schema import (
    MYSQL_ACTION_DDL,
    MYSQL_ADDED_COLUMNS,
    MYSQL_DDL,
    MYSQL_DIGEST_DDL,
    MYSQL_STATE_LOCK_DDL,
    MYSQL_WATERMARK_DDL,
)
from wormhole.taskdb.sql import Result

DEFAULT_PORT = 3306
DEFAULT_CONNECT_TIMEOUT_S = 10.0
CONNECT_ATTEMPTS = 3

_ER_ACCESS_DENIED = 1045
_ER_BAD_DB = 1049
_ER_NO_SUCH_TABLE = 1146
_ER_BAD_FIELD = 1054

_log = structlog.get_logger(__name__)


def _is_transient(exc: BaseException) -> bool:
    # The same judgement as the mysql store's connections: refused, too many, or dropped.
    return _errno(exc) in CONNECT_TRANSIENT_CODES


class MysqlTaskStore(SqlTaskStore):
    """Task store on a MySQL or MariaDB database; ``url`` is already redacted."""

    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (pymysql.err.Error,)
    ddl: ClassVar[tuple[str, ...]] = MYSQL_DDL
    watermark_ddl: ClassVar[str] = MYSQL_WATERMARK_DDL
    state_lock_ddl: ClassVar[str] = MYSQL_STATE_LOCK_DDL
    action_ddl: ClassVar[tuple[str, ...]] = MYSQL_ACTION_DDL
    digest_ddl: ClassVar[str] = MYSQL_DIGEST_DDL
    added_columns: ClassVar[tuple[tuple[str, str, str], ...]] = MYSQL_ADDED_COLUMNS
    insert_ignore: ClassVar[str] = "INSERT IGNORE"

    def __init__(self, url: str, *, host: str, database: str, user: str = "root", password: str = "",
                 port: int = DEFAULT_PORT, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        super().__init__(url)
        self.host = host
        self.port = port
        self.database = database
        self._params: dict[str, Any] = {
            "host": host, "port": port, "user": user, "password": password, "database": database,
            "charset": "utf8mb4", "autocommit": True, "connect_timeout": connect_timeout,
            # Re-run on every reconnect too: all timestamps the store reads and writes are UTC.
            "init_command": "SET time_zone = '+00:00'",
            # rowcount = rows matched, as in SQLite, not rows whose values happened to change.
            "client_flag": CLIENT.FOUND_ROWS,
        }
        self._conn: pymysql.connections.Connection = self._connect()

    def _connect(self) -> pymysql.connections.Connection:
        # No task (and so no stop signal) exists yet: the waits are short and bounded instead.
        retrying = policy(attempts=CONNECT_ATTEMPTS, wait_s=0.2, max_wait_s=2.0, retry_on=_is_transient, log=_log,
                          event="taskdb.connect_retry", url=self.url)
        try:
            return retrying(lambda: pymysql.connect(**self._params))
        except pymysql.err.Error as exc:
            raise self._connect_error(exc) from exc

    def _connect_error(self, exc: BaseException) -> TaskDbError:
        code = _errno(exc)
        if code == _ER_BAD_DB:
            what = f"database {self.database!r} does not exist: create it, then run `wormhole db init`"
        elif code == _ER_ACCESS_DENIED:
            what = f"access denied: {exc.args[1] if len(exc.args) > 1 else exc}"
        else:
            what = f"cannot connect to {self.host}:{self.port}: {exc}"
        return TaskDbError(f"task database {self.url}: {what}", url=self.url)

    def _ensure_connected(self) -> None:
        # A long engine run outlives wait_timeout; reconnect lazily instead of failing the final update.
        # (pymysql deprecates ping(reconnect=True), so the reconnect is a fresh connection.)
        try:
            self._conn.ping(reconnect=False)
            return
        except pymysql.err.Error:
            with suppress(pymysql.err.Error):
                self._conn.close()
        self._conn = self._connect()

    def _execute(self, sql: str, params: Sequence[Any]) -> Result:
        # pymysql formats with %s; a literal % must be doubled. Values are still bound, never spliced.
        query = sql.replace("%", "%%").replace("?", "%s")
        with self._conn.cursor() as cur:
            count = cur.execute(query, tuple(params))
            rows = list(cur.fetchall())
            return Result(rows=rows, rowcount=count, lastrowid=cur.lastrowid)

    def _begin(self) -> None:
        self._conn.begin()

    def _commit(self) -> None:
        self._conn.commit()

    def _rollback(self) -> None:
        self._conn.rollback()

    def _is_missing_table(self, exc: BaseException) -> bool:
        return isinstance(exc, pymysql.err.Error) and _errno(exc) == _ER_NO_SUCH_TABLE

    def _is_missing_column(self, exc: BaseException) -> bool:
        return isinstance(exc, pymysql.err.Error) and _errno(exc) == _ER_BAD_FIELD

    def _columns(self, table: str) -> set[str]:
        rows = self._execute("SELECT column_name FROM information_schema.columns"
                             " WHERE table_schema = DATABASE() AND table_name = ?", (table,)).rows
        return {str(row[0]).lower() for row in rows}

    def _close_connection(self) -> None:
        with suppress(pymysql.err.Error):
            self._conn.close()

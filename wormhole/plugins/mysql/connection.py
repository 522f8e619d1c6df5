"""Connections to MySQL/MariaDB: sessions in UTC (TIMESTAMP values cross servers unchanged), without
``NO_BACKSLASH_ESCAPES`` (the driver's escaping means what it says), and for writers ``STRICT_ALL_TABLES``
unless told otherwise (a value a column cannot hold is a rejected row, never truncated); error classes."""

from __future__ import annotations

import ssl
import threading
from typing import Any

import pymysql
import pymysql.converters

from wormhole.errors import StorageError
from wormhole.plugins.base import StopSignal
from wormhole.plugins.sql.connection import answering_server as answering_server  # spark's JDBC URL
from wormhole.plugins.sql.connection import open_session
from wormhole.plugins.sql.source_options import Endpoint

PLUGIN_NAME = "mysql"

_TLS_LOCK = threading.Lock()
_preferred_tls: ssl.SSLContext | None = None


class _Connection(pymysql.connections.Connection):  # type: ignore[misc]
    """pymysql's connection, but the TLS context of its default mode (TLS when the server offers it,
    unverified, as pymysql sets it up) is made once per process and shared: pymysql makes one per
    connection, about 40 ms of CPU each (the system's certificates loaded), 0.8 CPU s of a 21-connection
    copy. An ``SSLContext`` is safe to share between threads."""

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        global _preferred_tls
        if not isinstance(sslp, dict) or sslp:
            return super()._create_ssl_ctx(sslp)  # type: ignore[misc,no-any-return]
        with _TLS_LOCK:
            if _preferred_tls is None:
                _preferred_tls = super()._create_ssl_ctx(sslp)  # type: ignore[misc]
            return _preferred_tls

TRANSIENT_CODES = frozenset({
    1205,  # lock wait timeout
    1213,  # deadlock: InnoDB rolled the transaction back
    1927,  # MariaDB: connection was killed
    2006,  # server has gone away
    2013,  # lost connection during query
    2055,  # lost connection (system error)
})
"""Errors after which the same batch, retried on a fresh transaction, can succeed."""

NO_ANSWER = frozenset({2013, 2055})
"""The connection lost while a statement's answer was awaited: it may have run (a COMMIT, a RENAME)."""

CONNECT_TRANSIENT_CODES = frozenset({1040, 1129, 2002, 2003, 2006, 2013})
"""Connection failures worth another attempt (refused, too many connections, dropped); bad
credentials (1045) or an unknown database (1049) are not."""

ROW_ERROR_CODES = frozenset({
    1048,  # column cannot be null
    1062,  # duplicate entry
    1264,  # out of range
    1265,  # data truncated
    1292,  # incorrect date/time value
    1364,  # field has no default
    1366,  # incorrect value for the column's character set or type
    1367,  # illegal value
    1406,  # data too long
    1411,  # incorrect value for function
    1416,  # cannot get geometry object
    1451, 1452,  # foreign key
    1690,  # value out of range
    3140,  # MySQL: invalid JSON
    3819,  # MySQL: check constraint violated
    4025,  # MariaDB: check constraint violated (JSON_VALID of a JSON column among them)
})
"""Errors that belong to one row's values: the row is rejected, the destination goes on."""

ENCODERS: dict[Any, Any] = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}
"""pymysql's Python->SQL encoders without its SQL->Python decoders: readers convert values
themselves, column by column, from the raw bytes."""


def error_code(exc: BaseException) -> int | None:
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def is_transient(exc: BaseException) -> bool:
    return error_code(exc) in TRANSIENT_CODES or isinstance(exc, (ConnectionError, pymysql.err.InterfaceError))


def is_row_error(exc: BaseException) -> bool:
    return error_code(exc) in ROW_ERROR_CODES


def describe(exc: BaseException) -> str:
    """``(1406) Data too long for column 'name' at row 1``: MySQL's own code and text."""
    code = error_code(exc)
    if code is not None and len(exc.args) > 1:
        return f"({code}) {exc.args[1]}"
    return f"{type(exc).__name__}: {exc}"


def connect(endpoint: Endpoint, error: type[StorageError], *, attempts: int = 3, timeout: float = 10.0,
            raw: bool = False, local_infile: bool = False, strict: bool = False, autocommit: bool = True,
            destination: str | None = None, stop: StopSignal | None = None, log: Any = None) -> pymysql.Connection:
    """A configured connection (:func:`wormhole.plugins.sql.connection.open_session`); ``raw``: values come back as
    bytes (readers decode them column by column, much faster)."""

    def one(host: str, port: int, password: str) -> pymysql.Connection:
        return _Connection(host=host, port=port, user=endpoint.user, password=password, database=endpoint.database,
                           charset="utf8mb4", connect_timeout=timeout, autocommit=autocommit,
                           local_infile=local_infile, conv=ENCODERS if raw else None, use_unicode=not raw)

    return open_session(endpoint, error, PLUGIN_NAME, one, lambda conn: _configure(conn, strict),
                        lambda conn: conn.close(), failed=pymysql.err.MySQLError,
                        no_answer=lambda exc: error_code(exc) in CONNECT_TRANSIENT_CODES, describe=describe,
                        attempts=attempts, stop=stop, log=log, destination=destination)


_MODE = "CONCAT(',', @@SESSION.sql_mode, {strict}, ',')"
_CONFIGURE = ("SET SESSION time_zone = '+00:00', "
              "SESSION sql_mode = TRIM(BOTH ',' FROM REPLACE({mode}, ',NO_BACKSLASH_ESCAPES,', ',')), "
              "SESSION net_write_timeout = 3600, SESSION net_read_timeout = 3600")
_STRICT = "IF(FIND_IN_SET('STRICT_ALL_TABLES', @@SESSION.sql_mode), '', ',STRICT_ALL_TABLES')"
CONFIGURE_SQL = {strict: _CONFIGURE.format(mode=_MODE.format(strict=_STRICT if strict else "''"))
                 for strict in (False, True)}
"""The session's settings in one statement (one round trip per connection, and a database task opens many):
UTC, the server's sql_mode without ``NO_BACKSLASH_ESCAPES`` (and with ``STRICT_ALL_TABLES`` for a strict
session), and long network timeouts: a slow consumer (back-pressure from a slow destination) must not make
the server drop a streaming read after its default 60 s ``net_write_timeout``."""


def _configure(conn: pymysql.Connection, strict: bool) -> None:
    with conn.cursor() as cur:
        cur.execute(CONFIGURE_SQL[strict])


def abandon(conn: pymysql.Connection, cursor: Any = None) -> None:
    """Close ``conn`` without another word to the server, even mid-result or on a dead socket.

    pymysql drains a pending unbuffered result when its cursor or result is garbage-collected
    (``SSCursor.__del__``, ``MySQLResult.__del__``): on a socket closed or killed that read fails and
    Python prints "Exception ignored in ..." tracebacks on stderr, and on a live one it would read
    the rest of the result. Marking the result finished first leaves them nothing to do.
    """
    results = [getattr(conn, "_result", None), getattr(cursor, "_result", None)]
    for result in results:
        if result is not None:
            result.unbuffered_active = False
            result.connection = None
    if cursor is not None:
        cursor._result = None
        cursor.connection = None  # its close() then has nothing to finish
    conn._result = None  # type: ignore[attr-defined]
    conn._closed = True  # type: ignore[attr-defined]
    try:
        conn._force_close()  # type: ignore[attr-defined]  # closes the socket and its file without a QUIT
    except OSError:
        pass
    conn._sock = None  # type: ignore[attr-defined]
    conn._rfile = None  # type: ignore[attr-defined]

"""Connections to PostgreSQL through psycopg 3: sessions in UTC with ISO dates and ``extra_float_digits = 3``
(values cross in text exactly), ``application_name`` ``wormhole``; errors classed by SQLSTATE."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from wormhole.errors import StorageError
from wormhole.plugins.base import StopSignal
from wormhole.plugins.sql.connection import open_session
from wormhole.plugins.sql.source_options import Endpoint

PLUGIN_NAME = "postgres"

SESSION_SETTINGS = ("SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, YMD'", "SET IntervalStyle = 'iso_8601'",
                    "SET extra_float_digits = 3", "SET client_encoding = 'UTF8'")
"""Sent once per connection (one round trip): values then read and write the same on every server."""

TRANSIENT_STATES = frozenset({
    "40001",  # serialization failure
    "40P01",  # deadlock detected
    "55P03",  # lock not available
    "57P01",  # admin shutdown (pg_terminate_backend, a server stopping)
    "57P02",  # crash shutdown
    "57P03",  # cannot connect now (starting up)
    "53300",  # too many connections
})
"""Errors after which the same batch, retried on a fresh connection and transaction, can succeed;
with every connection failure (SQLSTATE class 08, or none at all: the socket died)."""

ROW_ERROR_CLASSES = ("22", "23")
"""SQLSTATE classes that belong to a row's values: data exceptions (out of range, bad text, NUL in text)
and integrity violations (not null, unique, check, foreign key)."""


def sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None) if isinstance(exc, psycopg.Error) else None


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (psycopg.OperationalError, ConnectionError)):
        state = sqlstate(exc)
        return state is None or state.startswith("08") or state in TRANSIENT_STATES
    return sqlstate(exc) in TRANSIENT_STATES


def is_row_error(exc: BaseException) -> bool:
    state = sqlstate(exc)
    return state is not None and state.startswith(ROW_ERROR_CLASSES)


def describe(exc: BaseException) -> str:
    """``(22001) value too long for type character varying(5)``: PostgreSQL's own state and text."""
    state = sqlstate(exc)
    if state is not None and isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        return f"({state}) {exc.diag.message_primary}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def connect(endpoint: Endpoint, error: type[StorageError], *, attempts: int = 3, timeout: float = 10.0,
            autocommit: bool = True, destination: str | None = None, stop: StopSignal | None = None,
            log: Any = None) -> psycopg.Connection[Any]:
    """A configured connection; ``error`` when it cannot be had (:func:`wormhole.plugins.sql.connection.open_session`:
    a server that does not answer is retried, one that refuses is not)."""

    def one(host: str, port: int, password: str) -> psycopg.Connection[Any]:
        return psycopg.connect(host=host, port=port, user=endpoint.user, password=password or None,
                               dbname=endpoint.database, connect_timeout=max(1, round(timeout)), autocommit=True,
                               application_name="wormhole")

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("; ".join(SESSION_SETTINGS))
        conn.autocommit = autocommit

    return open_session(endpoint, error, PLUGIN_NAME, one, configure, lambda conn: conn.close(),
                        failed=psycopg.OperationalError,
                        no_answer=lambda exc: not _refused_for_good(exc), unconfigured=psycopg.Error,
                        describe=describe, attempts=attempts,
                        stop=stop, log=log, destination=destination)


_FOR_GOOD = ("password authentication failed", "does not exist", "no pg_hba.conf entry", "permission denied")


def _refused_for_good(exc: BaseException) -> bool:
    """The server answered and refused (credentials, database): another attempt would be refused too.
    libpq gives no SQLSTATE for a failed connection, only its text."""
    text = str(exc)
    return sqlstate(exc) in ("28P01", "28000", "3D000") or any(m in text for m in _FOR_GOOD)


def backend_pid(conn: psycopg.Connection[Any]) -> int:
    """The server process of ``conn`` (what ``pg_terminate_backend`` and ``pg_stat_activity`` name)."""
    return int(conn.info.backend_pid)


_LINE = re.compile(r"\bline (\d+)(?:, column (.+?)(?::|$))?")


def copy_line(exc: BaseException) -> tuple[int, str | None] | None:
    """The line (1-based) and column a failed COPY names in its error context, when it names one."""
    context = exc.diag.context if isinstance(exc, psycopg.Error) else None
    first = (context or "").splitlines()[0] if context else ""
    found = _LINE.search(first) if first.startswith("COPY ") else None
    return None if found is None else (int(found[1]), found[2])


def reason_of(exc: psycopg.Error) -> str:
    """PostgreSQL's reason for refusing a row: its state and text, and the column when it names one."""
    where = copy_line(exc)
    column = exc.diag.column_name or (where[1] if where else None)
    detail = exc.diag.message_detail
    return describe(exc) + (f" (column {column})" if column else "") + (f": {detail}" if detail else "")

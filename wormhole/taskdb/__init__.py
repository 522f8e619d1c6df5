"""The task database: open a store from a URL (SQLite file by default, or MySQL/MariaDB).

URLs::

    sqlite:///var/wormhole.db          relative to the current working directory (the default)
    sqlite:////srv/wormhole/tasks.db   absolute (four slashes)
    mysql://user:pass@host:3306/db?connect_timeout=10

Special characters in a MySQL user or password must be percent-encoded (an ``@`` or ``:`` is read
right; a ``/ ? #`` makes the URL unreadable, refused). Without a password in the URL,
``WORMHOLE_TASK_DB_PASSWORD`` is used when set. Passwords never appear in messages: every message
names the URL through :func:`redact_url`, which shows nothing after the scheme of a URL it cannot read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn
from urllib.parse import parse_qs, unquote

from wormhole.errors import TaskDbError
from wormhole.redaction import redact_url, split_url, url_scheme
from wormhole.taskdb.base import (
    CRASHED,
    DEFAULT_STALE_S,
    TASK_STATUSES,
    RunRecord,
    SqlTaskStore,
    TaskRecord,
    TaskStore,
)

DEFAULT_TASK_DB_URL = "sqlite:///var/wormhole.db"
TASK_DB_ENV = "WORMHOLE_TASK_DB"
PASSWORD_ENV = "WORMHOLE_TASK_DB_PASSWORD"

__all__ = [
    "CRASHED",
    "DEFAULT_STALE_S",
    "DEFAULT_TASK_DB_URL",
    "PASSWORD_ENV",
    "TASK_DB_ENV",
    "TASK_STATUSES",
    "RunRecord",
    "SqlTaskStore",
    "TaskRecord",
    "TaskStore",
    "open_store",
    "redact_url",
]

_MYSQL_QUERY_KEYS = frozenset({"connect_timeout"})
_UNREADABLE = ("cannot be read: percent-encode the special characters (such as @ : / ? # %) in the user "
               "and the password")


def open_store(url: str | None = None, *, create: bool = False) -> SqlTaskStore:
    """Open (connect to) the task store at ``url``, else ``$WORMHOLE_TASK_DB``, else the SQLite default.

    Does not create the schema (that is ``init_schema``, i.e. ``wormhole db init``). A SQLite file
    (and its directory) is created only with ``create``: commands that only read or update tasks
    must not leave an empty ``var/wormhole.db`` behind in whatever directory they ran.
    Raises TaskDbError for a bad URL or an unreachable (or, without ``create``, missing) database.
    """
    if url is None:
        url = os.environ.get(TASK_DB_ENV) or DEFAULT_TASK_DB_URL
    url = url.strip()
    scheme = (url_scheme(url) or "").lower()  # text before a ':' that is no scheme may be a password
    if scheme == "sqlite":
        return _open_sqlite(url, create)
    if scheme == "mysql":
        return _open_mysql(url)
    _bad(url, "expected sqlite:///path/to/file.db or mysql://user:password@host:port/database"
              + (f", not the scheme {scheme!r}" if scheme else ""))


def _bad(url: str, what: str) -> NoReturn:
    raise TaskDbError(f"invalid task database URL {redact_url(url)!r}: {what}", url=redact_url(url))


def _open_sqlite(url: str, create: bool) -> SqlTaskStore:
    from wormhole.taskdb.sqlite import MEMORY, SqliteTaskStore

    prefix = "sqlite:///"
    if url[: len(prefix)].lower() != prefix:
        _bad(url, "expected sqlite:///relative/path.db or sqlite:////absolute/path.db (no host)")
    raw, _, query = url[len(prefix):].partition("?")
    if query:
        _bad(url, "a sqlite URL takes no query parameters")
    path = unquote(raw)
    if not path or path.endswith("/"):
        _bad(url, "no database file name")
    if path == MEMORY:
        return SqliteTaskStore(url, MEMORY)
    # Resolved now, so the store keeps using the same file if the process changes directory later.
    return SqliteTaskStore(url, Path(path).absolute(), create=create)


def _open_mysql(url: str) -> SqlTaskStore:
    from wormhole.taskdb.mysql import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_PORT, MysqlTaskStore

    # Read the way redact_url shows it: a URL it cannot show is not guessed at, nor echoed in part.
    parts = split_url(url)
    if parts is None:
        _bad(url, _UNREADABLE)
    port = parts.port or DEFAULT_PORT
    if not parts.hostname:
        _bad(url, "no host")
    database = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
    if not database:
        _bad(url, "no database name (mysql://user:password@host:port/database)")
    if "/" in database:
        _bad(url, f"database name {database!r} contains '/'")
    user = unquote(parts.username or "") or "root"
    password = unquote(parts.password) if parts.password else os.environ.get(PASSWORD_ENV, "")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - _MYSQL_QUERY_KEYS)
    if unknown:
        _bad(url, f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(_MYSQL_QUERY_KEYS))}")
    connect_timeout = DEFAULT_CONNECT_TIMEOUT_S
    if "connect_timeout" in query:
        text = query["connect_timeout"][-1]
        try:
            connect_timeout = float(text)
        except ValueError:
            connect_timeout = -1.0
        if not connect_timeout > 0 or connect_timeout == float("inf"):
            _bad(url, "connect_timeout must be a positive number of seconds")  # its value, like all, is ***
    return MysqlTaskStore(redact_url(url), host=parts.hostname, port=port, user=user, password=password,
                          database=database, connect_timeout=connect_timeout)

"""What a postgres source and destination share: where to connect, with which credentials, and the
rules for PostgreSQL names. The source's keys are in :mod:`.source_options`, the destination's in
:mod:`.sink_options`.

Identifiers (schemas, tables, columns) are checked here against what PostgreSQL can name and always
quoted with ``"`` in SQL, so their case is kept as written; values are always bound by the driver.
"""

from __future__ import annotations

from dataclasses import dataclass

from wormhole.options import Problems, opt
from wormhole.plugins.sql import check_names
from wormhole.plugins.sql.source_options import Endpoint, Naming, check_credentials

__all__ = ["Endpoint", "check_credentials"]

MAX_IDENTIFIER_BYTES = 63
"""PostgreSQL's limit on a name (NAMEDATALEN - 1, in bytes): a longer one is cut silently by the server,
so it is refused here instead."""

DEFAULT_PORT = 5432


def check_identifier(name: str, path: str, problems: Problems) -> None:
    size = len(name.encode())
    if not name:
        problems.add(path, "must not be empty")
    elif size > MAX_IDENTIFIER_BYTES:
        problems.add(path, f"is {size} bytes long; PostgreSQL names have at most {MAX_IDENTIFIER_BYTES} "
                           "(a longer one is cut by the server)")
    elif "\x00" in name:
        problems.add(path, f"{name!r} is not a valid PostgreSQL name (NUL)")


NAMING = Naming("postgres", DEFAULT_PORT, check_identifier)


def check_column_names(names: tuple[str, ...] | None, path: str, problems: Problems) -> None:
    check_names(names, path, problems, check_identifier)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerOptions:
    """The connection keys a postgres source and a postgres destination share."""

    host: str = opt("127.0.0.1", nonempty=True)
    """The server's host name or address (Greenplum: the coordinator's)."""
    port: int = opt(DEFAULT_PORT, min=1, max=65535)
    """The server's TCP port."""
    user: str = opt(nonempty=True)
    """The user to connect as."""
    password: str | None = None
    """The password, inline (never logged or printed; prefer ``password_env``)."""
    password_env: str | None = opt(None, nonempty=True)
    """Name of an environment variable holding the password (keeps secrets out of the task row)."""
    connect_timeout_s: float = opt(10.0, min=1.0)
    """Seconds to wait for a connection before the attempt fails (libpq counts whole seconds)."""
    connect_retries: int = opt(3, min=1, max=20)
    """Attempts to connect (a refused or dropped connection is retried with backoff; bad credentials are not)."""

    def endpoint(self, database: str) -> Endpoint:
        return Endpoint(self.host, self.port, self.user, self.password, self.password_env, database)

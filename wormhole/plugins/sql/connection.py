"""Opening and ending SQL sessions, the same way for every SQL store: the password resolved first, a
refused or dropped connection retried with backoff, a session configured or closed, and a lost session
ended and waited for. The store gives its driver's parts (how one attempt connects, how a session is
configured, how a statement's error reads). An endpoint with failover servers is connected to the first
that answers, and later connections go to that one first."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import structlog

from wormhole.errors import PeripheryError, StorageError, TransientReadError, TransientWriteError, WriteError
from wormhole.plugins.base import ReadContext, StopSignal
from wormhole.plugins.sql import resolve_password
from wormhole.plugins.sql.catalog import ColumnT, choose_columns
from wormhole.plugins.sql.source_options import Endpoint, Shard, SourceSettings
from wormhole.plugins.sql.target import fetch_one
from wormhole.retry import policy

C = TypeVar("C")


def transient_class(side: type[StorageError]) -> type[StorageError]:
    """The retryable error class on ``side`` (a read-side or write-side error class)."""
    return TransientWriteError if issubclass(side, (WriteError, PeripheryError)) else TransientReadError


def open_session(endpoint: Endpoint, error: type[StorageError], plugin: str,
                 connect: Callable[[str, int, str], C], configure: Callable[[C], None], close: Callable[[C], None], *,
                 failed: type[BaseException], no_answer: Callable[[BaseException], bool],
                 unconfigured: type[BaseException] | None = None,
                 describe: Callable[[BaseException], str], attempts: int, stop: StopSignal | None, log: Any,
                 destination: str | None) -> C:
    """A configured connection to ``endpoint``; ``error`` when it cannot be had.

    ``connect(host, port, password)`` connects to one server of the endpoint (they are tried in
    :func:`servers_in_order`). When it raises ``failed`` and the server did not answer (``no_answer``: refused,
    too many connections, dropped), the next server is tried; once none answered, the whole attempt is retried
    by :func:`wormhole.retry.policy` up to ``attempts`` times with backoff (the waits end at once when ``stop``
    is set; ``log`` gets ``connection.retry`` before each). A server that answered and refused (bad
    credentials, no such database) fails at once. ``configure`` sets the session up; when it raises
    ``unconfigured`` (default ``failed``), ``close`` ends the session and the error says why."""
    try:
        password = resolve_password(endpoint.password, endpoint.password_env)
    except KeyError as exc:
        raise error(f"environment variable {exc.args[0]} (password_env) is not set",
                    plugin=plugin, destination=destination) from None
    transient = transient_class(error)

    def attempt() -> C:
        failures: list[str] = []
        last: BaseException | None = None
        for host, port in servers_in_order(endpoint):
            try:
                conn = connect(host, port, password)
            except failed as exc:
                failures.append(f"{host}:{port}: {describe(exc)}")
                last = exc
                if no_answer(exc):
                    continue  # the next server of a failover list, if any
                # It answered and refused (credentials, database): a later server would not be the choice.
                raise error(_cannot_connect(plugin, endpoint, failures), plugin=plugin,
                            destination=destination) from exc
            _chosen(endpoint, (host, port), failures, log)
            return conn
        raise transient(_cannot_connect(plugin, endpoint, failures), plugin=plugin, destination=destination) from last

    try:
        conn = policy(attempts=attempts, wait_s=0.5, max_wait_s=5.0, stop=stop, log=log, event="connection.retry",
                      resource=endpoint.mark)(attempt)
    except StorageError as exc:
        if type(exc) is error:
            raise
        raise error(str(exc), plugin=plugin, destination=destination) from exc.__cause__
    bad_session = failed if unconfigured is None else unconfigured
    try:
        configure(conn)
    except bad_session as exc:
        close(conn)
        raise error(f"cannot configure the session on {endpoint.mark}: {describe(exc)}",
                    plugin=plugin, destination=destination) from exc
    return conn


_ANSWERED: dict[tuple[tuple[str, int], ...], tuple[str, int]] = {}
"""Per process, the server of each failover list that last answered: later connections go to it first
(a dead primary costs its connect timeout once, not on every connection) and the choice is logged once."""


def servers_in_order(endpoint: Endpoint) -> list[tuple[str, int]]:
    """The endpoint's servers in the order to try them: the one that last answered first, then the list."""
    servers = endpoint.servers
    chosen = _ANSWERED.get(servers)
    return list(servers) if chosen is None else [chosen, *(s for s in servers if s != chosen)]


def answering_server(endpoint: Endpoint) -> tuple[str, int]:
    """The server to use (Spark's JDBC URL): the one that last answered here, else the first."""
    return servers_in_order(endpoint)[0]


def _chosen(endpoint: Endpoint, server: tuple[str, int], failures: list[str], log: Any) -> None:
    if len(endpoint.servers) == 1 or _ANSWERED.get(endpoint.servers) == server:
        return
    _ANSWERED[endpoint.servers] = server
    logger = log if log is not None else structlog.get_logger("wormhole")
    emit = logger.warning if failures else logger.info  # a failed-over primary is worth a look
    emit("connection.server_chosen", resource=endpoint.mark, server=f"{server[0]}:{server[1]}",
         failed=failures)


def _cannot_connect(plugin: str, endpoint: Endpoint, failures: list[str]) -> str:
    if len(failures) == 1 and len(endpoint.servers) == 1:
        return f"cannot connect to {plugin} {endpoint.user}@{endpoint.mark}: {failures[0].split(': ', 1)[1]}"
    return (f"cannot connect to {plugin} {endpoint.user}@{endpoint.mark} (tried {len(failures)} of "
            f"{len(endpoint.servers)} servers in order): {'; '.join(failures)}")


def wait_session_gone(still_there: Callable[[], bool], session: int, stop: StopSignal, wait_s: float) -> None:
    """Wait until server session ``session`` is gone (``still_there`` asks the server); TimeoutError after
    ``wait_s`` or once ``stop`` (an Event) is set."""
    deadline = time.monotonic() + wait_s
    while still_there():
        if stop.wait(0.05):
            raise TimeoutError(f"the task stopped before session {session} ended")
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {session} did not end within {wait_s:.0f} s")


class SessionDialect:
    """What a :class:`~.dialect.Dialect` of a networked SQL store spells alike from a few of its own parts:
    connecting with a source's settings (the store's :meth:`open`), a table's relation, closing quietly, and
    ending a lost session (its :attr:`end_session_sql`) and waiting until :attr:`session_alive_sql` finds it
    gone."""

    name: str
    db_error: type[Exception]
    end_session_sql: str
    """Ends server session ``%s``: a statement it still runs is cut short, a COMMIT that got through stays."""
    session_alive_sql: str
    """Returns a row while server session ``%s`` is there."""

    def quote(self, identifier: str) -> str:
        raise NotImplementedError

    open: Callable[..., Any]
    """The store's ``connect(endpoint, error, **settings)``: a configured connection."""

    def connect(self, source: SourceSettings, endpoint: Endpoint, error: type[Any], ctx: ReadContext,
                log: Any = None, **settings: Any) -> Any:
        return self.open(endpoint, error, attempts=source.connect_retries, timeout=source.connect_timeout_s,
                         stop=ctx.stop, log=ctx.log if log is None else log, **settings)

    def relation(self, shard: Shard, table: str) -> str:
        return f"{self.quote(shard.schema)}.{self.quote(table)}"

    def table_label(self, shard: Shard, table: str) -> str:
        return self.relation(shard, table)

    def choose_columns(self, infos: list[ColumnT], wanted: Sequence[str] | None, shard: Shard,
                       table: str) -> list[ColumnT]:
        return choose_columns(infos, wanted, f"table {self.table_label(shard, table)} in {shard.endpoint.mark}",
                              self.name)

    def fetch_one(self, conn: Any, sql: str, args: Any = None) -> Any:
        return fetch_one(conn, sql, args)

    def close_quietly(self, conn: Any) -> None:
        """Close ``conn`` (if any); a connection already closed or dead is let go (:meth:`let_go`)."""
        if conn is None:
            return
        try:
            conn.close()
        except (self.db_error, OSError):
            self.let_go(conn)

    def let_go(self, conn: Any) -> None:
        """What is left to release of a connection whose close failed (nothing, unless the driver holds some)."""

    def abandon(self, conn: Any) -> None:
        """Drop ``conn`` (a COMMIT's answer was lost): closed quietly, unless the store's driver needs more."""
        self.close_quietly(conn)

    def idle(self, conn: Any, autocommit: bool = True) -> bool:
        """Whether another step may use ``conn`` as a new session (:meth:`Dialect.idle`); the store says."""
        return False

    def end_refused(self, exc: BaseException) -> bool:
        """Ending the session failed for a reason that leaves it to end on its own (or already gone)."""
        return True

    def wait_session_ended(self, conn: Any, session: int, stop: StopSignal, wait_s: float) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute(self.end_session_sql, (session,))
        except self.db_error as exc:
            if not self.end_refused(exc):
                raise
        wait_session_gone(lambda: fetch_one(conn, self.session_alive_sql, (session,)) is not None, session, stop,
                          wait_s)

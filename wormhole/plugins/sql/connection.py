"""Opening and ending SQL sessions, the same way for every SQL store: the password resolved first, a
refused or dropped connection retried with backoff, a session configured or closed, and a lost session
ended and waited for. The store gives its driver's parts (how one attempt connects, how a session is
configured, how a statement's error reads)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from wormhole.errors import PeripheryError, StorageError, TransientReadError, TransientWriteError, WriteError
from wormhole.plugins.base import StopSignal
from wormhole.plugins.sql import resolve_password
from wormhole.plugins.sql.source_options import Endpoint
from wormhole.retry import policy

C = TypeVar("C")


def transient_class(side: type[StorageError]) -> type[StorageError]:
    """The retryable error class on ``side`` (a read-side or write-side error class)."""
    return TransientWriteError if issubclass(side, (WriteError, PeripheryError)) else TransientReadError


def open_session(endpoint: Endpoint, error: type[StorageError], plugin: str,
                 attempt: Callable[[str, type[StorageError]], C], configure: Callable[[C], None],
                 close: Callable[[C], None], *, failed: type[BaseException], describe: Callable[[BaseException], str],
                 attempts: int, stop: StopSignal | None, log: Any, destination: str | None) -> C:
    """A configured connection to ``endpoint``; ``error`` when it cannot be had.

    ``attempt(password, transient)`` connects once: it raises ``transient`` when the server did not answer
    (or dropped the connection), which is retried by :func:`wormhole.retry.policy` up to ``attempts`` times
    with backoff (the waits end at once when ``stop`` is set; ``log`` gets ``connection.retry`` before each),
    and ``error`` when it answered and refused (bad credentials, no such database). ``configure`` sets the
    session up; when it raises ``failed``, ``close`` ends the session and the error says why."""
    try:
        password = resolve_password(endpoint.password, endpoint.password_env)
    except KeyError as exc:
        raise error(f"environment variable {exc.args[0]} (password_env) is not set",
                    plugin=plugin, destination=destination) from None
    transient = transient_class(error)
    try:
        conn = policy(attempts=attempts, wait_s=0.5, max_wait_s=5.0, stop=stop, log=log, event="connection.retry",
                      resource=endpoint.mark)(lambda: attempt(password, transient))
    except StorageError as exc:
        if type(exc) is error:
            raise
        raise error(str(exc), plugin=plugin, destination=destination) from exc.__cause__
    try:
        configure(conn)
    except failed as exc:
        close(conn)
        raise error(f"cannot configure the session on {endpoint.mark}: {describe(exc)}",
                    plugin=plugin, destination=destination) from exc
    return conn


def wait_session_gone(still_there: Callable[[], bool], session: int, stop: StopSignal, wait_s: float) -> None:
    """Wait until server session ``session`` is gone (``still_there`` asks the server); TimeoutError after
    ``wait_s`` or once ``stop`` (an Event) is set."""
    deadline = time.monotonic() + wait_s
    while still_there():
        if stop.wait(0.05):
            raise TimeoutError(f"the task stopped before session {session} ended")
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {session} did not end within {wait_s:.0f} s")

"""Asking what a lost step did: a COMMIT or a RENAME sent, its answer lost with the connection.

The step may have happened or not. Once the server has ended the session that sent it (so it can no
longer happen later), the database itself says which: a phase or marker row written in the same
transaction, or the tables a swap renames. Until then nothing is undone nor repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from wormhole.errors import StorageError
from wormhole.plugins.base import StopSignal
from wormhole.plugins.sql.dialect import Dialect

T = TypeVar("T")

SETTLE_WAIT_S = 30.0
"""How long a lost step's session is waited for (its ending on the server)."""


class Unsettled(Exception):
    """Whether the lost step happened cannot be told; the text ends a sentence ('whether it ... <text>')."""


def settle(dialect: Dialect, session: int, stop: StopSignal, ask: Callable[[Any], T], *,
           connect: Callable[[], Any] | None = None, conn: Any = None, wait_s: float = SETTLE_WAIT_S) -> T:
    """What ``ask`` finds once the server is done with ``session``, asked on ``conn`` or on a connection of
    its own (``connect``); :class:`Unsettled` when that connection or the wait fails."""
    check = conn
    if check is None:
        assert connect is not None
        try:
            check = connect()
        except StorageError as error:
            raise Unsettled(f"cannot be asked: {error}") from error
    try:
        dialect.wait_session_ended(check, session, stop, wait_s)
        return ask(check)
    except (dialect.db_error, TimeoutError) as error:
        raise Unsettled(f"cannot be settled: {error}") from error
    finally:
        if conn is None:
            dialect.close_quietly(check)

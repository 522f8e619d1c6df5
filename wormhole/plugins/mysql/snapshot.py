"""The mysql store's consistent snapshot (``settings.snapshot: consistent``): mydumper's method.

Per server (and user): the reader connections are opened first, each set to REPEATABLE READ; then a
coordinating connection waits while another session runs a statement of a second or more (the global read lock
would wait for it while already holding every write of the server: mydumper's long query guard), takes
``FLUSH TABLES WITH READ LOCK`` (waiting at most ``lock_wait_timeout``: what is left of
``settings.snapshot_lock_timeout_s``), every connection (the coordinator too) starts ``START TRANSACTION WITH
CONSISTENT SNAPSHOT, READ ONLY``, the binary log position is read (no commit can land while the lock is held,
so it is exactly the snapshot's), and ``UNLOCK TABLES`` lets writes go on: the lock is held for a few round
trips (``snapshot.locked``, ``held_s``). The readers then read every split through the pool
(:class:`~wormhole.plugins.sql.snapshot.SnapshotPool`), the splitter and the bounds through the coordinator.

Why not MariaDB's ``BACKUP STAGE START`` + ``BLOCK_COMMIT``: it is MariaDB's alone, and measured on MariaDB
10.11 it timed out behind the same things as the global read lock (another session's ``LOCK TABLES ... WRITE``,
a running SELECT of the table, an open transaction with a write), so it would not make the lock easier to get;
it did get through while another database's long SELECT ran, which the long query guard above waits out
instead. Only transactional (InnoDB) tables are read at the instant: a MyISAM table is read as it is when its
split runs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pymysql

from wormhole.errors import ReadError, SnapshotError
from wormhole.plugins.base import ReadContext, SnapshotRequest
from wormhole.plugins.mysql.connection import PLUGIN_NAME, abandon, describe, error_code
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.sql.snapshot import Lease, SnapshotPool, SqlSnapshot, open_sql_snapshot
from wormhole.plugins.sql.source_options import Endpoint, SqlSource
from wormhole.plugins.sql.target import fetch_all, fetch_one

_LOCK_WAIT_TIMEOUT = 1205
_BAD_SYNTAX = 1064
_IDLE_S = 31_536_000
"""A pooled connection may wait a long time between splits: the server must not drop it (``wait_timeout``)."""


def open_snapshot(options: SqlSource, ctx: ReadContext, request: SnapshotRequest) -> SqlSnapshot:
    return open_sql_snapshot(options, PLUGIN_NAME, lambda ep: (ep.servers, ep.user),
                             lambda ep: ServerSnapshot.take(options, ep, ctx, request))


class ServerSnapshot:
    """The snapshot on one server: its coordinating connection and its pooled reader connections."""

    def __init__(self, label: str, coordinator: Any, pool: SnapshotPool, position: Mapping[str, str]) -> None:
        self.label = label
        self.position = position
        self._coordinator = coordinator
        self._pool = pool
        self._planning = threading.Lock()
        self._databases: dict[int, str] = {}
        """The database each connection is in (by id): a split of another database's query switches it."""

    @classmethod
    def take(cls, source: SqlSource, endpoint: Endpoint, ctx: ReadContext, request: SnapshotRequest) -> ServerSnapshot:
        label = f"{endpoint.host}:{endpoint.port}"
        conns: list[Any] = []
        try:
            coordinator = MYSQL.connect(source, endpoint, ReadError, ctx)
            conns.append(coordinator)
            readers: list[Any] = []
            for _ in range(max(1, request.readers)):  # raw: the reader decodes values column by column
                readers.append(MYSQL.connect(source, endpoint, ReadError, ctx, raw=True))
                conns.append(readers[-1])
            for conn in conns:  # before the lock: it is held for as few round trips as can be
                _run(conn, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                _run(conn, f"SET SESSION wait_timeout = {_IDLE_S}")
            position = _under_lock(coordinator, conns, label, request.lock_timeout_s, ctx)
        except BaseException:
            for conn in conns:
                MYSQL.close_quietly(conn)  # a connection that ends releases its lock and its transaction
            raise
        pool = SnapshotPool(readers, _drop, label, PLUGIN_NAME)
        snapshot = cls(label, coordinator, pool, position)
        for conn in conns:
            snapshot._databases[id(conn)] = endpoint.database
        return snapshot

    @contextmanager
    def reading(self, endpoint: Endpoint, ctx: ReadContext, log: Any) -> Iterator[Lease]:
        with self._pool.lease(ctx.stop, log, lambda conn: self._use(conn, endpoint.database)) as lease:
            yield lease

    @contextmanager
    def planning(self, endpoint: Endpoint, ctx: ReadContext) -> Iterator[Any]:
        with self._planning:  # one coordinator: the table runs sharing the snapshot plan one at a time
            self._use(self._coordinator, endpoint.database)
            yield self._coordinator

    def _use(self, conn: Any, database: str) -> None:
        """Put ``conn`` in ``database`` (a query split's names are unqualified); the transaction goes on."""
        if self._databases.get(id(conn)) != database:
            conn.select_db(database)
            self._databases[id(conn)] = database

    def close(self) -> None:
        self._pool.close()
        with self._planning:
            MYSQL.close_quietly(self._coordinator)


def _drop(conn: Any, spoiled: bool) -> None:
    """A pooled connection let go: one that cannot read again (mid-result, broken) without a word to the server."""
    if spoiled:
        abandon(conn)
    else:
        MYSQL.close_quietly(conn)


def _under_lock(coordinator: Any, conns: list[Any], label: str, timeout_s: float, ctx: ReadContext) -> dict[str, str]:
    """Take the global read lock, start every connection's snapshot, read the position, unlock; the position."""
    asked = time.monotonic()
    _quiet(coordinator, label, asked + timeout_s, ctx)
    wait = max(1, math.ceil(asked + timeout_s - time.monotonic()))
    _run(coordinator, f"SET SESSION lock_wait_timeout = {wait}")
    try:
        _run(coordinator, "FLUSH TABLES WITH READ LOCK")
    except pymysql.err.MySQLError as exc:
        if error_code(exc) == _LOCK_WAIT_TIMEOUT:
            raise SnapshotError(
                f"cannot take the consistent snapshot on {label}: FLUSH TABLES WITH READ LOCK waited "
                f"{wait} s (settings.snapshot_lock_timeout_s) for a session holding a table lock or running a "
                f"statement or DDL; nothing was locked. Let it finish, or raise the timeout",
                plugin=PLUGIN_NAME) from exc
        raise SnapshotError(f"cannot take the consistent snapshot on {label}: FLUSH TABLES WITH READ LOCK: "
                            f"{describe(exc)}", plugin=PLUGIN_NAME) from exc
    locked = time.monotonic()
    try:
        for conn in conns:
            _run(conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        position = _position(coordinator)
    finally:
        _run(coordinator, "UNLOCK TABLES")
    ctx.log.info("snapshot.locked", resource=label, held_s=round(time.monotonic() - locked, 4),
                 waited_s=round(locked - asked, 4), connections=len(conns))
    return position


_LONG_STATEMENT = ("SELECT ID, TIME, LEFT(INFO, 60) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' "
                   "AND ID <> CONNECTION_ID() AND TIME >= 1 AND INFO IS NOT NULL ORDER BY TIME DESC LIMIT 1")


def _quiet(coordinator: Any, label: str, deadline: float, ctx: ReadContext) -> None:
    """Wait (until ``deadline``) while another session has run a statement for a second or more: the global
    read lock would wait for it to end while already holding every other session's writes (mydumper's long
    query guard). A session the user cannot see (no PROCESS privilege) is not waited for here."""
    waited = False
    while True:
        found = fetch_one(coordinator, _LONG_STATEMENT)
        if found is None:
            return
        session, seconds, text = found
        if time.monotonic() >= deadline:
            raise SnapshotError(
                f"cannot take the consistent snapshot on {label}: session {session} has run a statement for "
                f"{seconds} s ({text!r}) past settings.snapshot_lock_timeout_s; FLUSH TABLES WITH READ LOCK would "
                f"hold every write of the server until it ends, so it was not asked: nothing was locked",
                plugin=PLUGIN_NAME)
        if not waited:
            ctx.log.info("snapshot.waiting", resource=label, session=session, running_s=seconds)
            waited = True
        if ctx.stop.wait(0.2):
            raise SnapshotError("the task stopped while the snapshot waited for a long statement", plugin=PLUGIN_NAME)


def _position(conn: Any) -> dict[str, str]:
    """The binary log's file and position, and the GTID state, at the snapshot; ``binlog: off`` without one."""
    mariadb = "mariadb" in str(fetch_one(conn, "SELECT VERSION()")[0]).lower()
    (log_bin,) = fetch_one(conn, "SELECT @@GLOBAL.log_bin")
    position: dict[str, str] = {}
    if str(log_bin) in ("1", "ON"):
        rows = _master_status(conn)
        if rows:
            position["binlog_file"], position["binlog_pos"] = str(rows[0][0]), str(rows[0][1])
            if not mariadb and len(rows[0]) > 4 and rows[0][4]:
                position["gtid_executed"] = str(rows[0][4]).replace("\n", "")
    else:
        position["binlog"] = "off"
    if mariadb:
        binlog_pos, current_pos = fetch_one(conn, "SELECT @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_current_pos")
        for key, value in (("gtid_binlog_pos", binlog_pos), ("gtid_current_pos", current_pos)):
            if value:
                position[key] = str(value)
    return position


def _master_status(conn: Any) -> list[tuple[Any, ...]]:
    try:
        return fetch_all(conn, "SHOW MASTER STATUS")
    except pymysql.err.MySQLError as exc:
        if error_code(exc) != _BAD_SYNTAX:
            raise
        return fetch_all(conn, "SHOW BINARY LOG STATUS")  # MySQL 8.4 renamed it


def _run(conn: Any, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)

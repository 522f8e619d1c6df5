"""The mysql store's consistent snapshot (``settings.snapshot: consistent``): mydumper's method, per table.

Per server (and user): the reader connections (and a planner, the splitter's and the bounds' session) are
opened first, each set to REPEATABLE READ; then a coordinating connection takes ``FLUSH TABLES <the tables
read> WITH READ LOCK`` (waiting at most ``lock_wait_timeout``: what is left of
``settings.snapshot_lock_timeout_s``), every connection starts ``START TRANSACTION WITH CONSISTENT SNAPSHOT, READ
ONLY``, the binary log position is read, and ``UNLOCK TABLES`` lets writes go on: the lock is held for a few
round trips (``snapshot.locked``, ``held_s``), and the coordinator is closed. No transaction that writes a table
read can commit while the lock is held, so every connection sees the same state of those tables, and the
position is exact for them (commits to other tables may land meanwhile: they are not read). Locking only the
tables read, not the server (mydumper's ``FLUSH TABLES WITH READ LOCK``), the lock waits only for statements on
them, and holds only their writes while it waits. A query source names no table: the server's global lock is
taken then, and not asked while another session has run a statement for a second or more (it would wait for
it while already holding every write of the server: mydumper's long query guard). The readers then read
every split through the pool (:class:`~wormhole.plugins.sql.snapshot.SnapshotPool`).

Why not MariaDB's ``BACKUP STAGE START`` + ``BLOCK_COMMIT``: it is MariaDB's alone, and measured on MariaDB
10.11 it timed out behind the same things as the global read lock (another session's ``LOCK TABLES ... WRITE``,
a running SELECT of the table, an open transaction with a write), so it would not make the lock easier to get;
it did get through while another database's long SELECT ran, which locking only the tables read gets through
as well. Only transactional (InnoDB) tables are read at the instant: a MyISAM table is read as it is when its
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

    def __init__(self, label: str, planner: Any, pool: SnapshotPool, position: Mapping[str, str]) -> None:
        self.label = label
        self.position = position
        self._planner = planner
        self._pool = pool
        self._planning = threading.Lock()
        self._databases: dict[int, str] = {}
        """The database each connection is in (by id): a split of another database's query switches it."""

    @classmethod
    def take(cls, source: SqlSource, endpoint: Endpoint, ctx: ReadContext, request: SnapshotRequest) -> ServerSnapshot:
        label = f"{endpoint.host}:{endpoint.port}"
        tables = [MYSQL.relation(shard, table) for shard in source.shards for table in shard.tables
                  if (shard.endpoint.servers, shard.endpoint.user) == (endpoint.servers, endpoint.user)]
        conns: list[Any] = []
        coordinator = None
        try:
            coordinator = MYSQL.connect(source, endpoint, ReadError, ctx)
            planner = MYSQL.connect(source, endpoint, ReadError, ctx)  # the splitter's and the bounds' session
            conns.append(planner)
            readers: list[Any] = []
            for _ in range(max(1, request.readers)):  # raw: the reader decodes values column by column
                readers.append(MYSQL.connect(source, endpoint, ReadError, ctx, raw=True))
                conns.append(readers[-1])
            for conn in conns:  # before the lock: it is held for as few round trips as can be
                _run(conn, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                _run(conn, f"SET SESSION wait_timeout = {_IDLE_S}")
            position = _under_lock(coordinator, conns, tables, label, request.lock_timeout_s, ctx)
        except BaseException:
            for conn in conns:
                MYSQL.close_quietly(conn)  # a connection that ends releases its transaction
            raise
        finally:
            MYSQL.close_quietly(coordinator)  # and its lock (it has none left by now, unless it failed)
        pool = SnapshotPool(readers, _drop, label, PLUGIN_NAME)
        snapshot = cls(label, planner, pool, position)
        for conn in conns:
            snapshot._databases[id(conn)] = endpoint.database
        return snapshot

    @contextmanager
    def reading(self, endpoint: Endpoint, ctx: ReadContext, log: Any) -> Iterator[Lease]:
        with self._pool.lease(ctx.stop, log, lambda conn: self._use(conn, endpoint.database)) as lease:
            yield lease

    @contextmanager
    def planning(self, endpoint: Endpoint, ctx: ReadContext) -> Iterator[Any]:
        with self._planning:  # one planner: the table runs sharing the snapshot plan one at a time
            self._use(self._planner, endpoint.database)
            yield self._planner

    def _use(self, conn: Any, database: str) -> None:
        """Put ``conn`` in ``database`` (a query split's names are unqualified); the transaction goes on."""
        if self._databases.get(id(conn)) != database:
            conn.select_db(database)
            self._databases[id(conn)] = database

    def close(self) -> None:
        self._pool.close()
        with self._planning:
            MYSQL.close_quietly(self._planner)


def _drop(conn: Any, spoiled: bool) -> None:
    """A pooled connection let go: one that cannot read again (mid-result, broken) without a word to the server."""
    if spoiled:
        abandon(conn)
    else:
        MYSQL.close_quietly(conn)


def _under_lock(coordinator: Any, conns: list[Any], tables: list[str], label: str, timeout_s: float,
                ctx: ReadContext) -> dict[str, str]:
    """Lock the tables read (every table when they are not known: a query), start every connection's snapshot,
    read the position, unlock; the position."""
    asked = time.monotonic()
    if not tables:  # the global lock holds every write of the server while it waits: wait out long statements
        _quiet(coordinator, label, asked + timeout_s, ctx)
    wait = max(1, math.ceil(asked + timeout_s - time.monotonic()))
    _run(coordinator, f"SET SESSION lock_wait_timeout = {wait}")
    lock = f"FLUSH TABLES {', '.join(tables)} WITH READ LOCK" if tables else "FLUSH TABLES WITH READ LOCK"
    shown = "FLUSH TABLES ... WITH READ LOCK" if tables else lock
    try:
        _run(coordinator, lock)
    except pymysql.err.MySQLError as exc:
        if error_code(exc) == _LOCK_WAIT_TIMEOUT:
            raise SnapshotError(
                f"cannot take the consistent snapshot on {label}: {shown} waited {wait} s "
                f"(settings.snapshot_lock_timeout_s) for a session holding a table lock or running a statement "
                f"or DDL on {'the tables read' if tables else 'the server'}; nothing was locked. Let it finish, "
                f"or raise the timeout", plugin=PLUGIN_NAME) from exc
        raise SnapshotError(f"cannot take the consistent snapshot on {label}: {shown}: {describe(exc)}",
                            plugin=PLUGIN_NAME) from exc
    locked = time.monotonic()
    try:
        for conn in conns:
            _run(conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        position = _position(coordinator)
    finally:
        _run(coordinator, "UNLOCK TABLES")
    ctx.log.info("snapshot.locked", resource=label, held_s=round(time.monotonic() - locked, 4),
                 waited_s=round(locked - asked, 4), connections=len(conns), tables=len(tables) or "all")
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

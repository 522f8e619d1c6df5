"""The postgres store's consistent snapshot (``settings.snapshot: consistent``): an exported snapshot.

Per database (an exported snapshot is imported only in the database it was taken in): a coordinating session
reads the WAL position, then opens ``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`` and takes
``pg_export_snapshot()``, and stays open until the run ends (the snapshot lives as long as its transaction).
Every reader connection, and the splitter's and the bounds' sessions, start with the same ``BEGIN`` and
``SET TRANSACTION SNAPSHOT '<id>'``: they see exactly what the coordinator sees. No lock is taken.

The position (``lsn``) is read just before the snapshot: a change stream started there replays a few changes
the copy may already hold (apply them idempotently), and misses none. On a standby it is the last WAL
replayed (``pg_last_wal_replay_lsn()``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg

from wormhole.errors import ReadError, SnapshotError, StorageError
from wormhole.plugins.base import ReadContext, SnapshotRequest
from wormhole.plugins.postgres.connection import PLUGIN_NAME, describe
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.sql.snapshot import Lease, SqlSnapshot, open_sql_snapshot
from wormhole.plugins.sql.source_options import Endpoint, SqlSource

_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def open_snapshot(options: SqlSource, ctx: ReadContext, request: SnapshotRequest) -> SqlSnapshot:
    return open_sql_snapshot(options, PLUGIN_NAME, lambda ep: (ep.servers, ep.database),
                             lambda ep: DatabaseSnapshot.take(options, ep, ctx))


class DatabaseSnapshot:
    """The snapshot of one database: its coordinating session, holding the exported snapshot open."""

    def __init__(self, label: str, source: SqlSource, coordinator: psycopg.Connection[Any], snapshot_id: str,
                 position: Mapping[str, str]) -> None:
        self.label = label
        self.position = position
        self._source = source
        self._coordinator = coordinator
        self._id = snapshot_id

    @classmethod
    def take(cls, source: SqlSource, endpoint: Endpoint, ctx: ReadContext) -> DatabaseSnapshot:
        conn = POSTGRES.connect(source, endpoint, ReadError, ctx)
        try:
            (standby,) = conn.execute("SELECT pg_is_in_recovery()").fetchone() or (False,)
            lsn_sql = "SELECT pg_last_wal_replay_lsn()" if standby else "SELECT pg_current_wal_lsn()"
            (lsn,) = conn.execute(lsn_sql).fetchone() or (None,)  # before the snapshot: a stream misses nothing
            conn.execute(_BEGIN)
            (snapshot_id,) = conn.execute("SELECT pg_export_snapshot()").fetchone() or ("",)
        except psycopg.Error as exc:
            POSTGRES.close_quietly(conn)
            raise SnapshotError(f"cannot take the consistent snapshot of {endpoint.mark}: {describe(exc)}",
                                plugin=PLUGIN_NAME) from exc
        except BaseException:
            POSTGRES.close_quietly(conn)
            raise
        position = {"lsn": str(lsn), "snapshot": str(snapshot_id)}
        if standby:
            position["standby"] = "true"
        return cls(endpoint.mark, source, conn, str(snapshot_id), position)

    def _joined(self, endpoint: Endpoint, ctx: ReadContext, error: type[StorageError], log: Any = None) -> Any:
        """A new session of ``endpoint`` inside the snapshot."""
        conn = POSTGRES.connect(self._source, endpoint, error, ctx, log=log)
        try:
            conn.execute(_BEGIN)
            conn.execute(f"SET TRANSACTION SNAPSHOT '{self._id}'")  # the id is the server's: [0-9A-F-]
        except psycopg.Error as exc:
            POSTGRES.close_quietly(conn)
            raise SnapshotError(f"cannot read in the consistent snapshot of {self.label}: {describe(exc)}",
                                plugin=PLUGIN_NAME) from exc
        return conn

    @contextmanager
    def reading(self, endpoint: Endpoint, ctx: ReadContext, log: Any) -> Iterator[Lease]:
        lease = Lease(self._joined(endpoint, ctx, ReadError, log))
        try:
            yield lease
        finally:
            POSTGRES.close_quietly(lease.conn)  # one connection per split, as without a snapshot

    @contextmanager
    def planning(self, endpoint: Endpoint, ctx: ReadContext) -> Iterator[Any]:
        conn = self._joined(endpoint, ctx, ReadError)
        try:
            yield conn
        finally:
            POSTGRES.close_quietly(conn)

    def close(self) -> None:
        POSTGRES.close_quietly(self._coordinator)  # ends its transaction: the snapshot can no longer be imported

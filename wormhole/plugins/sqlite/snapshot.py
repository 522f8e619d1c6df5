"""The sqlite store's consistent snapshot (``settings.snapshot: consistent``): one read transaction.

SQLite has no snapshot another connection can join, so the snapshot is one connection that opens a read
transaction (``BEGIN`` and a first read) and stays in it for the whole run: every split, and the incremental
bounds, read through it, one at a time (a reader holds it for its whole split; SQLite reads one file, so the
channels gain little over one reader anyway). In WAL mode writers go on meanwhile; in a rollback-journal
database the open read keeps writers from committing until the run ends. The position is empty: a file has
no change stream to start from.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from wormhole.errors import SnapshotError
from wormhole.plugins.base import ReadContext, SnapshotRequest
from wormhole.plugins.sqlite.connection import PLUGIN_NAME
from wormhole.plugins.sqlite.options import SqliteReaderOptions


class FileSnapshot:
    """The read transaction every reader of one SQLite file shares."""

    def __init__(self, path: str, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        self._lock = threading.Lock()
        self._closed = False

    @property
    def position(self) -> Mapping[str, str]:
        return {}

    @contextmanager
    def session(self, path: str) -> Iterator[sqlite3.Connection]:
        """The snapshot's connection, held by this thread until the block ends."""
        if os.path.abspath(path) != self.path:
            raise SnapshotError(f"the consistent snapshot was taken of {self.path}, not {path}", plugin=PLUGIN_NAME)
        with self._lock:
            if self._closed:
                raise SnapshotError(f"the consistent snapshot of {self.path} is closed", plugin=PLUGIN_NAME)
            yield self._conn

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()  # ends the read transaction


def open_snapshot(options: SqliteReaderOptions, ctx: ReadContext, request: SnapshotRequest) -> FileSnapshot:
    path = os.path.abspath(options.path)
    if not os.path.isfile(path):
        raise SnapshotError(f"sqlite database {path} does not exist", plugin=PLUGIN_NAME)
    try:
        # Shared by the reader threads one at a time (the lock above); no implicit transactions of Python's.
        conn = sqlite3.connect(Path(path).as_uri() + "?mode=ro", uri=True, timeout=30, check_same_thread=False,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise SnapshotError(f"cannot open sqlite database {path}: {exc}", plugin=PLUGIN_NAME) from exc
    try:
        conn.execute("BEGIN")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # the read transaction starts at a read
    except sqlite3.Error as exc:
        conn.close()
        raise SnapshotError(f"cannot start a read transaction in {path}: {exc}", plugin=PLUGIN_NAME) from exc
    ctx.log.info("snapshot.read_transaction", path=path)
    return FileSnapshot(path, conn)


def of(ctx: ReadContext) -> FileSnapshot | None:
    snapshot = ctx.snapshot
    return snapshot if isinstance(snapshot, FileSnapshot) else None

"""SQLite task store: the embedded default, one file in WAL mode, autocommit, 30 s busy timeout."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar

from wormhole.errors import TaskDbError
from wormhole.recovery.checkpoint import TASKDB_WRITES
from wormhole.taskdb.base import SqlTaskStore
from wormhole.taskdb.schema import (
    SQLITE_ACTION_DDL,
    SQLITE_ADDED_COLUMNS,
    SQLITE_DDL,
    SQLITE_DIGEST_DDL,
    SQLITE_STATE_LOCK_DDL,
    SQLITE_WATERMARK_DDL,
)
from wormhole.taskdb.sql import Result

BUSY_TIMEOUT_S = 30.0
MEMORY = ":memory:"


class SqliteTaskStore(SqlTaskStore):
    """Task store on a SQLite file; ``path`` is absolute (or ``:memory:``, handy in tests)."""

    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (sqlite3.Error,)
    ddl: ClassVar[tuple[str, ...]] = SQLITE_DDL
    watermark_ddl: ClassVar[str] = SQLITE_WATERMARK_DDL
    state_lock_ddl: ClassVar[str] = SQLITE_STATE_LOCK_DDL
    action_ddl: ClassVar[tuple[str, ...]] = SQLITE_ACTION_DDL
    digest_ddl: ClassVar[str] = SQLITE_DIGEST_DDL
    added_columns: ClassVar[tuple[tuple[str, str, str], ...]] = SQLITE_ADDED_COLUMNS

    def __init__(self, url: str, path: str | Path, *, create: bool = False) -> None:
        super().__init__(url)
        self.path = str(path)
        if self.path != MEMORY and not create and not Path(self.path).is_file():
            raise TaskDbError(f"task database {url}: {self.path} does not exist; `wormhole db init` creates it",
                              url=url)
        if self.path != MEMORY:
            try:
                # So var/ appears on first use of the default URL.
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TaskDbError(f"task database {url}: cannot create the directory of {self.path}: {exc}",
                                  url=url) from exc
        conn: sqlite3.Connection | None = None
        try:
            # isolation_level=None: autocommit, transactions only where the store asks (BEGIN IMMEDIATE).
            # check_same_thread=False: the engine's main thread may hand the store to another thread.
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            # WAL: readers (wormhole task list) never block the running engine, nor it them.
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise TaskDbError(f"task database {url}: cannot open {self.path}: {exc}", url=url) from exc
        self._conn = conn

    def _execute(self, sql: str, params: Sequence[Any]) -> Result:
        with TASKDB_WRITES:  # (reentrant: inside a transaction this thread holds it already)
            cur = self._conn.execute(sql, tuple(params))
            try:
                rows = cur.fetchall()
                return Result(rows=rows, rowcount=cur.rowcount, lastrowid=cur.lastrowid)
            finally:
                cur.close()

    def _ensure_connected(self) -> None:
        pass  # a local file: nothing to reconnect

    def run_together(self, calls: Sequence[Callable[[], None]]) -> list[BaseException | None]:
        """``calls`` (this store's writes, each as it would run alone) in one transaction, each under a
        savepoint of its own: one commit, one sync of the file, for all (a database task's table runs write
        their checkpoint rows at once). Each one's outcome (None: done), or raises when the commit failed."""
        outcomes: list[BaseException | None] = []
        with self._guard("write checkpoint rows together"):
            self._begin()
            self._together = True
            try:
                for call in calls:
                    self._conn.execute("SAVEPOINT wh_call")
                    try:
                        call()
                    except Exception as exc:
                        self._conn.execute("ROLLBACK TO wh_call")
                        outcomes.append(exc)
                    else:
                        outcomes.append(None)
                    self._conn.execute("RELEASE wh_call")
            except BaseException:
                self._together = False
                with suppress(Exception):
                    self._rollback()
                raise
            self._together = False
            self._commit()
        return outcomes

    _together = False
    """Inside :meth:`run_together`: a transaction of a call is a savepoint of the one that holds them all."""

    def _begin(self) -> None:
        # IMMEDIATE takes the write lock up front, so the transaction never fails half-way on a lock upgrade.
        TASKDB_WRITES.acquire()  # released by _commit or _rollback
        try:
            self._conn.execute("SAVEPOINT wh_atomic" if self._together else "BEGIN IMMEDIATE")
        except BaseException:
            TASKDB_WRITES.release()
            raise

    def _commit(self) -> None:
        try:
            self._conn.execute("RELEASE wh_atomic" if self._together else "COMMIT")
        finally:
            TASKDB_WRITES.release()

    def _rollback(self) -> None:
        try:
            if self._together:
                self._conn.execute("ROLLBACK TO wh_atomic")
                self._conn.execute("RELEASE wh_atomic")
            else:
                self._conn.execute("ROLLBACK")
        finally:
            TASKDB_WRITES.release()

    def _is_missing_table(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc)

    def _is_missing_column(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and "no such column" in str(exc)

    def _columns(self, table: str) -> set[str]:
        # PRAGMA takes no bound parameters; table names come from the schema module, never from input.
        return {str(row[1]).lower() for row in self._execute(f"PRAGMA table_info({table})", ()).rows}

    def _close_connection(self) -> None:
        with suppress(sqlite3.Error):
            self._conn.close()

"""What the database stores' writers share as :class:`~wormhole.plugins.base.SplitWriter`: one transaction
per open split, each on a connection of its own, made durable with the split's marker row.

- A split's connection is opened on its first batch, or taken from a few kept after a commit.
- ``end_split`` inserts the split's marker and commits: its rows and the record that they are in are one
  transaction. A marker already there (another attempt made the split durable first) rolls ours back, so the
  split lands once.
- A connection lost while COMMIT was in flight is settled once the server has ended that session: the marker
  found, the split is durable; missing, it is lost.
- A split whose transaction is gone is lost (``SplitLost``): the engine writes it again from its start.
- Transient errors of a piece are retried by the one retry policy (:func:`wormhole.retry.policy`); when a
  piece fails for good, the destination is broken and nothing more is written to it.

A store's writer subclasses :class:`SplitTransactions` and supplies its driver's part: connecting, the
marker's INSERT, which errors are transient, duplicate keys or a COMMIT of unknown outcome, and waiting for a
session to end on the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, NoReturn, Protocol, TypeVar

from wormhole.errors import SplitLost, TransientWriteError, WriteError
from wormhole.plugins.base import Batch, WriteContext, WriteResult
from wormhole.retry import policy


class Connection(Protocol):
    """What this module asks of a driver's connection (pymysql's and psycopg's have it)."""

    def commit(self) -> None: ...
    def rollback(self) -> None: ...


C = TypeVar("C", bound=Connection)
T = TypeVar("T")

_MAX_WAIT_S = 30.0
"""The longest wait between a piece's retries."""


class Broken(Exception):
    """A piece failed in a way no retry can mend (or COMMIT's outcome is unknown): the load is broken."""


class SplitTransactions(Generic[C]):
    """A writer's plain connection (``conn``) and its open splits' transactions, with the split lifecycle.

    ``periphery`` is the destination's: ``target``, ``broken``, ``markers`` (``table``, ``rows_of``,
    ``has``), ``add_written`` and ``connect``.
    """

    plugin: ClassVar[str]
    db_error: ClassVar[type[Exception]]
    """The driver's base error: what a step raises that this class classifies."""
    keep_connections: ClassVar[int] = 2
    """Connections kept for the next splits after a commit; more open splits open more."""
    settle_wait_s: ClassVar[float] = 30.0
    """How long a lost COMMIT's outcome is waited for (its old session ending on the server)."""
    lost_fails_without_retries: ClassVar[bool] = False
    """With ``retries: 0``, a lost split fails the destination instead of being written again."""

    def __init__(self, options: Any, ctx: WriteContext, periphery: Any, worker: int) -> None:
        self.options = options
        self.ctx = ctx
        self.periphery = periphery
        self.worker = worker
        self.log = ctx.log.bind(worker=worker)
        self.conn: C | None = None
        self._splits: dict[str, C] = {}
        """The open splits' transactions, each on its own connection."""
        self._split_written: dict[str, int] = {}
        self._free: list[C] = []

    # -- the store's part -----------------------------------------------------------------------

    def _connect(self) -> C:
        raise NotImplementedError

    def _give_back(self, conn: C) -> bool:
        """Keep ``conn`` (no transaction open) for another table's writer of a database task; False: it is
        closed (the store lends none)."""
        return False

    def _write(self, batch: Batch, split_id: str | None, source: Any = None) -> WriteResult:
        """Write ``batch`` (in split ``split_id``'s transaction, or committed piece by piece); ``source``: the
        batch's own form of its source (wire text, an encoding) when the destination chose it
        (:class:`~wormhole.plugins.writing.EncodedWriter`), else None."""
        raise NotImplementedError

    def _classify(self, exc: Any, split_id: str | None) -> Exception:
        """The store boundary: ``TransientWriteError`` (retried), ``SplitLost`` or :class:`Broken`."""
        raise NotImplementedError

    def _insert_marker(self, conn: C, split_id: str, rows: int) -> None:
        raise NotImplementedError

    def _session(self, conn: C) -> int:
        """The server's id of ``conn``'s session, known without asking the server."""
        raise NotImplementedError

    def _commit_unknown(self, exc: Exception, conn: C) -> bool:
        """COMMIT failed with the connection lost while its answer was awaited: it may have committed."""
        raise NotImplementedError

    def _wait_ended(self, check: C, session: int) -> None:
        """Return once the server is done with ``session``; TimeoutError when it is not in time."""
        raise NotImplementedError

    @staticmethod
    def _close(conn: C | None) -> None:
        raise NotImplementedError

    @staticmethod
    def _is_transient(exc: Exception) -> bool:
        raise NotImplementedError

    @staticmethod
    def _is_duplicate(exc: Exception) -> bool:
        raise NotImplementedError

    @staticmethod
    def _describe(exc: Exception) -> str:
        raise NotImplementedError

    def _abandon(self, conn: C) -> None:
        """Drop ``conn`` without another word to the server (its COMMIT's answer was lost)."""
        self._close(conn)

    def _reusable(self, conn: C) -> bool:
        return True

    # -- connections ----------------------------------------------------------------------------

    def _error(self, message: str) -> WriteError:
        return WriteError(message, destination=self.ctx.destination, plugin=self.plugin)

    def _check_not_broken(self) -> None:
        p = self.periphery
        if p.broken is not None:
            raise self._error(f"cannot write {p.target}: {p.broken}")

    def _connection(self, split_id: str | None = None) -> C:
        if split_id is not None:
            conn = self._splits.get(split_id)
            if conn is None:
                conn = self._splits[split_id] = self._split_connection()
            return conn
        if self.conn is None:
            self.conn = self._connect()
        return self.conn

    def _split_connection(self) -> C:
        return self._free.pop() if self._free else self._connect()

    def _release(self, conn: C) -> None:
        if len(self._free) < self.keep_connections and self._reusable(conn):
            self._free.append(conn)
        else:
            self._close(conn)

    def _rollback_quietly(self) -> None:
        """Roll the plain connection's transaction back; a connection that cannot is dropped."""
        if self.conn is None:
            return
        try:
            self.conn.rollback()
        except self.db_error:
            self._drop_connection()
            return
        if not self._reusable(self.conn):
            self._drop_connection()

    def _drop_connection(self) -> None:
        self._close(self.conn)
        self.conn = None

    def _close_connections(self) -> None:
        # Splits still open are not committed: closing their connections rolls them back.
        for conn in self._splits.values():
            self._close(conn)
        for kept in [*self._free, self.conn]:
            if kept is not None and not self._give_back(kept):
                self._close(kept)
        self._splits.clear()
        self._split_written.clear()
        self._free.clear()
        self.conn = None

    # -- retries and failures -------------------------------------------------------------------

    def _retrying(self, split_id: str | None, step: Callable[[], T]) -> T:
        """``step``, retried on transient errors by the one retry policy; when it fails for good the
        destination is broken. In a split, only what undoes the piece alone is retried; losing the split's
        transaction raises ``SplitLost``."""
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            try:
                return step()
            except self.db_error as exc:
                raise self._classify(exc, split_id) from exc

        retrying = policy(attempts=self.options.retries + 1, wait_s=self.options.retry_wait_s,
                          max_wait_s=_MAX_WAIT_S, stop=self.ctx.stop, log=self.log, event="writer.retry")
        try:
            return retrying(attempt)
        except TransientWriteError as exc:
            stopping = " (the task is stopping)" if self.ctx.stop.is_set() else ""
            self._fail(f"writing {self.periphery.target} failed after {attempts} attempt(s){stopping}: {exc}",
                       split_id)
        except Broken as exc:
            self._fail(str(exc), split_id)

    def _transient(self, exc: Exception) -> TransientWriteError:
        return TransientWriteError(self._describe(exc), destination=self.ctx.destination, plugin=self.plugin)

    def _lose(self, split_id: str, reason: str) -> SplitLost:
        """Forget the split (its connection closed, so nothing of it can commit) and say it is lost: the
        engine writes it again."""
        if self.lost_fails_without_retries and self.options.retries == 0:
            self._fail(f"{reason} (retries is 0)", split_id)
        self._close(self._splits.pop(split_id, None))
        self._split_written.pop(split_id, None)
        self.log.warning("writer.split_lost", split_id=split_id, reason=reason)
        return SplitLost(reason, split_id=split_id, destination=self.ctx.destination, plugin=self.plugin)

    def _fail(self, reason: str, split_id: str | None = None) -> NoReturn:
        if split_id is None:
            self._rollback_quietly()
        else:
            self._close(self._splits.pop(split_id, None))
            self._split_written.pop(split_id, None)
        self.periphery.broken = reason
        raise self._error(reason)

    # -- splits ---------------------------------------------------------------------------------

    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        """Write a batch of ``split_id`` inside the split's transaction (not durable until ``end_split``)."""
        return self._write_as(batch, split_id, None)

    def _write_as(self, batch: Batch, split_id: str | None, source: Any) -> WriteResult:
        """``_write``, counting a split's rows for ``end_split``."""
        result = self._write(batch, split_id, source)
        if split_id is not None:
            self._split_written[split_id] = self._split_written.get(split_id, 0) + result.written
        return result

    def end_split(self, split_id: str, rows: int) -> None:
        """Insert the split's marker and commit: its rows and the marker are one transaction."""
        p = self.periphery
        self._check_not_broken()
        conn = self._connection(split_id)  # a split without rows still gets its marker
        try:
            self._insert_marker(conn, split_id, rows)
        except self.db_error as exc:
            if self._is_transient(exc):
                raise self._lose(split_id, f"split {split_id!r} lost its transaction on {p.target}: "
                                           f"{self._describe(exc)}") from exc
            if self._is_duplicate(exc):
                self._already_durable(split_id, conn)
                return
            self._fail(f"recording split {split_id!r} in {p.markers.table} failed: {self._describe(exc)}",
                       split_id)
        session = self._session(conn)
        try:
            conn.commit()
        except self.db_error as exc:
            if self._commit_unknown(exc, conn):
                self._settle(split_id, conn, session, exc)
            elif self._is_transient(exc):  # not sent, or refused: the transaction did not commit
                raise self._lose(split_id, f"committing split {split_id!r} to {p.target} failed: "
                                           f"{self._describe(exc)}") from exc
            else:
                self._fail(f"committing split {split_id!r} to {p.target} failed: {self._describe(exc)}",
                           split_id)
        else:
            self._splits.pop(split_id, None)
            self._release(conn)
        p.add_written(self._split_written.pop(split_id, 0), split_id)
        self.log.debug("writer.split_committed", split_id=split_id, rows=rows)

    def _already_durable(self, split_id: str, conn: C) -> None:
        """The split's marker is there already: another attempt made it durable (a Spark task run twice, or
        a process whose claim was taken over finishing the split first). Ours is rolled back: it lands once."""
        p = self.periphery
        self._splits.pop(split_id, None)
        self._split_written.pop(split_id, None)
        try:
            conn.rollback()
            rows = p.markers.rows_of(conn, split_id)
            conn.rollback()  # the read's snapshot, before the next split
        except self.db_error as exc:
            self._close(conn)
            raise self._lose(split_id, f"split {split_id!r} was already recorded in {p.markers.table}, and "
                                       f"reading that record failed: {self._describe(exc)}") from exc
        self._release(conn)
        p.add_written(rows, split_id)  # its rows are in the table (once): verify counts them
        self.log.warning("writer.split_already_durable", split_id=split_id)

    def _settle(self, split_id: str, conn: C, session: int, exc: Exception) -> None:
        """COMMIT was sent but its answer lost: once the server has ended that session, the split's marker
        says whether it committed. Returns when it did; raises ``SplitLost`` when not."""
        p = self.periphery
        self._splits.pop(split_id, None)
        self._abandon(conn)
        lost = f"the connection was lost while split {split_id!r} was being committed"
        try:
            check = p.connect(WriteError, log=self.log)
        except WriteError as error:
            self._fail(f"{lost} ({self._describe(exc)}) and the server cannot be asked whether it was: {error}",
                       split_id)
        try:
            self._wait_ended(check, session)
            durable = p.markers.has(check, split_id)
        except (self.db_error, TimeoutError) as error:
            self._fail(f"{lost} ({self._describe(exc)}) and its outcome cannot be settled: {error}", split_id)
        finally:
            self._close(check)
        self.log.warning("writer.commit_settled", split_id=split_id, durable=durable, error=self._describe(exc))
        if not durable:
            raise self._lose(split_id, f"{lost} and it did not commit: {self._describe(exc)}") from exc

    def abort_split(self, split_id: str) -> None:
        """Roll back what this writer holds of the split; a split it does not know is a no-op."""
        self._split_written.pop(split_id, None)
        conn = self._splits.pop(split_id, None)
        if conn is None:
            return
        try:
            conn.rollback()
        except self.db_error:
            self._close(conn)  # a dead connection rolled back with the session
        else:
            self._release(conn)
        self.log.info("writer.split_aborted", split_id=split_id)

"""What every SQL store's writer does alike on top of :mod:`wormhole.plugins.split_transactions`: the
driver's part of the splits' transactions asked of the store's :class:`~.dialect.Dialect` (closing and
abandoning connections, which errors are transient or duplicate keys, a COMMIT of unknown outcome, the
session's id and waiting for it to end), the split marker's INSERT, and the writer's lifecycle checks.
A store's writer adds how it loads a piece (LOAD DATA, INSERT, COPY) and classifies its errors."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from wormhole.errors import WriteError
from wormhole.plugins.base import Batch, Rejected, WriteResult
from wormhole.plugins.split_transactions import Broken, Connection, SplitTransactions
from wormhole.plugins.sql import room_left
from wormhole.plugins.sql.dialect import Dialect

C = TypeVar("C", bound=Connection)

SAVEPOINT = "wh_piece"
"""The savepoint each piece of a split runs under: undoing it keeps the split's earlier pieces."""


class SqlWriter(SplitTransactions[C]):
    """A writer of an SQL destination whose periphery is a :class:`~.periphery.SqlWriterPeriphery`."""

    dialect: ClassVar[Dialect]
    periphery: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "dialect" in cls.__dict__:  # a store's writer: its plugin and driver errors are its dialect's
            cls.plugin, cls.db_error = cls.dialect.name, cls.dialect.db_error

    def open(self) -> None:
        p = self.periphery
        if not p.prepared or p.finished:
            raise self._error(f"{p.target} is not prepared for writing")

    def flush(self) -> None:
        """Nothing buffered: every piece is committed before ``write`` returns."""

    def close(self) -> None:
        self._close_connections()

    def write(self, batch: Batch) -> WriteResult:
        return self._write(batch, None)

    def _write(self, batch: Batch, split_id: str | None, source: Any = None) -> WriteResult:
        """The batch as the store loads it (:meth:`_pieces`), in pieces of ``batch_size`` rows, each written by
        :meth:`_write_piece` (its own transaction, or in the split's); a plain write's rows are counted once
        committed, a split's once the split is. Past the record limit the rest is not tried (``stopped``)."""
        pieces, rejected = self._pieces(batch, source)
        written, size = 0, self.options.batch_size
        for piece, start, end in ((p, s, min(s + size, n)) for p, n in pieces for s in range(0, n, size)):
            room = room_left(self.ctx.record_limit, len(rejected))
            if room is not None and room < 0:
                break
            try:
                done, bad = self._write_piece(piece, start, end, split_id, room)
            except WriteError as exc:
                if split_id is None:
                    exc.details["written_before_failure"] = written  # pieces of this batch already committed
                raise
            rejected.extend(bad)
            written += done
            if split_id is None:
                self.periphery.add_written(done)
            if room is not None and len(bad) > room:  # over the record limit: the destination fails
                break
        return WriteResult(written=written, rejected=tuple(rejected), stopped=len(batch) - written - len(rejected))

    def _pieces(self, batch: Batch, source: Any) -> tuple[list[tuple[Any, int]], list[Rejected]]:
        """What the batch is loaded as, each with its row count, and the rows refused on the way."""
        raise NotImplementedError

    def _write_piece(self, piece: Any, start: int, end: int, split_id: str | None,
                     room: int | None) -> tuple[int, list[Rejected]]:
        """Rows ``start`` to ``end`` of ``piece``: how many were written, and those rejected (more than ``room``:
        the rest was not tried)."""
        raise NotImplementedError

    # -- the store boundary ---------------------------------------------------------------------

    def _classify(self, exc: Exception, split_id: str | None) -> Exception:
        """A transient error becomes ``TransientWriteError`` (retried): a plain piece's transaction is redone
        whole, a split's piece from its savepoint while :meth:`_piece_undoable`, else the split is lost
        (``SplitLost``); any other error breaks the destination."""
        if not self.dialect.is_transient(exc):
            return Broken(f"writing {self.periphery.target} failed: {self._describe(exc)}")
        if split_id is None:
            self._rollback_quietly()
            self._after_transient(exc)
            return self._transient(exc)
        conn = self._splits[split_id]
        if self._piece_undoable(exc, conn):
            try:
                with conn.cursor() as cur:  # type: ignore[attr-defined]
                    cur.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")  # the split's earlier pieces stay
            except self.db_error:
                pass  # the savepoint went with the transaction: lost
            else:
                return self._transient(exc)
        return self._lose(split_id, f"split {split_id!r} lost its transaction on {self.periphery.target}: "
                                    f"{self._describe(exc)}")

    def _commit(self, conn: C | None = None) -> None:
        """COMMIT a plain piece (on ``conn``, else the plain connection). Lost while its answer was awaited
        (:meth:`_commit_lost`), the server may or may not have committed: the destination is broken."""
        conn = self._connection() if conn is None else conn
        try:
            conn.commit()
        except self.db_error as exc:
            if not self._commit_lost(exc):
                raise
            raise Broken(f"the connection was lost while a batch was being committed, so whether its rows are in "
                         f"{self.periphery.target} is unknown: {self._describe(exc)}") from exc

    def _commit_lost(self, exc: Exception) -> bool:
        raise NotImplementedError

    def _after_transient(self, exc: Exception) -> None:
        """After a plain piece's transient error (its transaction rolled back)."""

    def _piece_undoable(self, exc: Exception, conn: C) -> bool:
        """The transient ``exc`` left the split's transaction (and its piece's savepoint) in place."""
        raise NotImplementedError

    # -- the driver's part of the splits' transactions, from the dialect ----------------------------

    def _close(self, conn: Any) -> None:  # type: ignore[override]
        self.dialect.close_quietly(conn)

    def _is_transient(self, exc: Exception) -> bool:  # type: ignore[override]
        return self.dialect.is_transient(exc)

    def _is_duplicate(self, exc: Exception) -> bool:  # type: ignore[override]
        return isinstance(exc, self.dialect.db_error) and self.dialect.is_duplicate(exc)

    def _describe(self, exc: Exception) -> str:  # type: ignore[override]
        return self.dialect.describe(exc)

    def _insert_marker(self, conn: C, split_id: str, rows: int) -> None:
        markers = self.periphery.markers
        with conn.cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(markers.insert_sql, markers.insert_args(split_id, rows))

    def _session(self, conn: C) -> int:
        return self.dialect.session_id(conn)

    def _commit_unknown(self, exc: Exception, conn: C) -> bool:
        return self.dialect.commit_unknown(exc, conn)

    def _wait_ended(self, check: C, session: int) -> None:
        self.dialect.wait_session_ended(check, session, self.ctx.stop, self.settle_wait_s)

    def _abandon(self, conn: C) -> None:
        self.dialect.abandon(conn)

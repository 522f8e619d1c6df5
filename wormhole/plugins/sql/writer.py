"""What every SQL store's writer does alike on top of :mod:`wormhole.plugins.split_transactions`: the
driver's part of the splits' transactions asked of the store's :class:`~.dialect.Dialect` (closing and
abandoning connections, which errors are transient or duplicate keys, a COMMIT of unknown outcome, the
session's id and waiting for it to end), the split marker's INSERT, and the writer's lifecycle checks.
A store's writer adds how it loads a piece (LOAD DATA, INSERT, COPY) and classifies its errors."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from wormhole.plugins.split_transactions import Connection, SplitTransactions
from wormhole.plugins.sql.dialect import Dialect

C = TypeVar("C", bound=Connection)


class SqlWriter(SplitTransactions[C]):
    """A writer of an SQL destination whose periphery is a :class:`~.periphery.SqlWriterPeriphery`."""

    dialect: ClassVar[Dialect]
    periphery: Any

    def open(self) -> None:
        p = self.periphery
        if not p.prepared or p.finished:
            raise self._error(f"{p.target} is not prepared for writing")

    def flush(self) -> None:
        """Nothing buffered: every piece is committed before ``write`` returns."""

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

"""The sqlite store's writers: batches converted and staged on the periphery's shared connection.

Writers take turns on the connection under one lock (SQLite has one writer per file). Each batch runs
in a savepoint: it is first tried on the target and undone (so the target's constraints and existing
rows reject rows now, as a direct write would), then staged; a row-level failure replays the batch row
by row to reject only the bad rows. In ``insert`` mode the staging table carries the target's unique
keys too, so a key written twice in the run is rejected when written, not at commit. A split is made
durable with its marker by ``end_split`` (:mod:`.periphery` says how the staged rows reach the target).

A batch of Arrow columns is bound from its columns: the values sqlite3 binds as text (dates, datetimes,
decimals, json) are made column-wise by :mod:`wormhole.plugins.arrow_text`, the same text the row
converters make, so the batch is never turned into Python rows unless a row must be replayed alone.

Note: SQLite itself stores a float NaN as NULL (sqlite3_bind_double); that is not checked per value.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from wormhole.errors import WriteError
from wormhole.plugins.arrow_text import NotExact, date_text, datetime_text, decimal_text, json_values, own_text_arrow
from wormhole.plugins.base import Batch, Row, WriteContext, WriteResult
from wormhole.plugins.batch import arrow_type, rows_of
from wormhole.plugins.sql import VALUE_ERRORS, batch_then_rows, quote, rows_one_by_one
from wormhole.plugins.sqlite.connection import PLUGIN_NAME
from wormhole.plugins.sqlite.dialect import SQLITE
from wormhole.plugins.sqlite.options import SqliteWriterOptions
from wormhole.plugins.sqlite.periphery import ROW_ERRORS, SqliteWriterPeriphery
from wormhole.plugins.sqlite.staging import SPLIT_COLUMN
from wormhole.plugins.sqlite.types import WRITE_CONVERTERS
from wormhole.plugins.values import json_dumps

_ARROW_TEXT: dict[str, Callable[[pa.Array], pa.Array]] = {
    "date": date_text, "datetime": lambda a: datetime_text(a, " "), "decimal": decimal_text,
    "json": lambda a: json_values(a, json_dumps),
}
"""The columns bound as the text WRITE_CONVERTERS makes of their values, made from Arrow columns."""


class SqliteWriter:
    """Converts batches and stages them on the periphery's shared connection; a SplitWriter."""

    def __init__(self, options: SqliteWriterOptions, ctx: WriteContext, periphery: SqliteWriterPeriphery,
                 worker: int) -> None:
        self.options = options
        self.ctx = ctx
        self.periphery = periphery
        self.worker = worker
        self._fns = [(i, WRITE_CONVERTERS[c.type]) for i, c in enumerate(ctx.schema.columns)
                     if c.type in WRITE_CONVERTERS]

    def _error(self, message: str) -> WriteError:
        return WriteError(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def open(self) -> None:
        if self.periphery.conn is None:
            raise self._error(f"{self.periphery.path} is not prepared for writing")

    def _convert(self, rows: Sequence[Row]) -> Sequence[Sequence[Any]]:
        if not self._fns:
            return rows
        cols: list[Sequence[Any]] = list(zip(*rows, strict=True))
        for i, fn in self._fns:
            cols[i] = [None if v is None else fn(v) for v in cols[i]]
        return list(zip(*cols, strict=True))

    def _columns(self, rows: Batch) -> Sequence[Sequence[Any]] | None:
        """The parameters of a batch of Arrow columns (None for tuples, or a batch to convert row-wise)."""
        batch = own_text_arrow(rows)
        columns = self.ctx.schema.columns
        if batch is None or batch.schema.types != [arrow_type(c) for c in columns]:
            return None
        try:
            values = [(_ARROW_TEXT[c.type](batch.column(i)) if c.type in _ARROW_TEXT else batch.column(i)).to_pylist()
                      for i, c in enumerate(columns)]
        except (NotExact, pa.ArrowException, *VALUE_ERRORS):
            return None
        return list(zip(*values, strict=True))

    def write(self, batch: Batch) -> WriteResult:
        """Rows of no split (a plain writer): staged untagged, loaded at commit, never durable before."""
        return self._write(None, batch)

    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        return self._write(split_id, batch)

    def _write(self, split: str | None, rows: Batch) -> WriteResult:
        if not rows:
            return WriteResult(written=0)
        try:
            params: Sequence[Sequence[Any]] | None = self._columns(rows) or self._convert(rows_of(rows))
        except VALUE_ERRORS:
            params = None  # some value is bad: the row-by-row pass finds which
        with self.periphery.lock:
            conn = self._connection()
            guard = self.periphery.guard
            if params is not None and guard is not None and guard.changed(params):
                params = None  # the row-by-row pass rejects the rows whose values SQLite would change
            batch = None if params is None else (lambda: self._batch(conn, params, split))
            return batch_then_rows(len(rows), batch, lambda: self._row_by_row(conn, rows_of(rows), split))

    def end_split(self, split_id: str, rows: int) -> None:
        p = self.periphery
        with p.lock:
            conn = self._connection()
            try:
                conn.execute(SQLITE.marker_sql, (*p._marker_key(), split_id, rows))
                # Other splits' rows are committed too, without a marker: a resumed run deletes them.
                conn.execute("COMMIT")
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                p.broken = f"{type(exc).__name__}: {exc}"
                raise self._error(f"cannot make split {split_id} durable in {p.path}: {p.broken}") from exc
        self.ctx.log.debug("sqlite.split_durable", split_id=split_id, rows=rows)

    def abort_split(self, split_id: str) -> None:
        p = self.periphery
        with p.lock:
            conn = p.conn
            if conn is None or p.broken is not None or not conn.in_transaction:
                return  # nothing to keep apart: the destination is failing or gone
            try:
                conn.execute(f"DELETE FROM {quote(p.stage)} WHERE {quote(SPLIT_COLUMN)} = ?", (split_id,))
            except sqlite3.Error as exc:
                raise self._broken(conn, exc) from exc

    def _stage_params(self, params: Sequence[Sequence[Any]], split: str | None) -> list[tuple[Any, ...]]:
        return [(*row, split) for row in params]

    def _batch(self, conn: sqlite3.Connection, params: Sequence[Sequence[Any]], split: str | None) -> bool:
        """The batch in one savepoint; False (and the savepoint undone) when a row is at fault."""
        p = self.periphery
        try:
            conn.execute("SAVEPOINT wh_batch")
            if p.sql:
                conn.executemany(p.sql, params)  # the target's own constraints judge the rows...
                conn.execute("ROLLBACK TO wh_batch")  # ...which wait in staging until the commit
            conn.executemany(p.stage_sql, self._stage_params(params, split))
            conn.execute("RELEASE wh_batch")
            return True
        except ROW_ERRORS:
            self._undo_batch(conn)
            return False
        except sqlite3.Error as exc:
            raise self._broken(conn, exc) from exc

    def _connection(self) -> sqlite3.Connection:
        p = self.periphery
        if p.broken is not None:
            raise self._error(f"cannot write {p.path}: {p.broken}")
        conn = p.conn
        if conn is None:
            raise self._error(f"{p.path} is not prepared for writing (or already committed or rolled back)")
        if not conn.in_transaction:
            # SQLite ended the transaction itself (after disk full, say): writing now would autocommit.
            p.broken = "SQLite rolled back the transaction"
            raise self._error(f"cannot write {p.path}: {p.broken}")
        return conn

    def _undo_batch(self, conn: sqlite3.Connection) -> None:
        self._run(conn, "ROLLBACK TO wh_batch", "RELEASE wh_batch")

    def _run(self, conn: sqlite3.Connection, *statements: str | tuple[str, Sequence[Sequence[Any]]]) -> None:
        """Each statement (or one run over many rows' parameters); an error breaks the destination."""
        try:
            for statement in statements:
                if isinstance(statement, tuple):
                    conn.executemany(*statement)
                else:
                    conn.execute(statement)
        except sqlite3.Error as exc:
            raise self._broken(conn, exc) from exc

    def _broken(self, conn: sqlite3.Connection, exc: sqlite3.Error) -> WriteError:
        p = self.periphery
        p.broken = f"{type(exc).__name__}: {exc}"
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK TO wh_batch")
        except sqlite3.Error:
            pass  # best effort: the destination is failing and will be rolled back as a whole
        return self._error(f"cannot write {p.path}: {p.broken}")

    def _row_by_row(self, conn: sqlite3.Connection, rows: Sequence[Row], split: str | None) -> WriteResult:
        p = self.periphery
        good: list[Sequence[Any]] = []
        self._run(conn, "SAVEPOINT wh_batch")
        result = rows_one_by_one(rows, lambda row: self._write_row(conn, row, split, good), self.ctx.record_limit)
        if p.sql:
            # The rows tried on the target are undone with the savepoint; the good ones are staged again,
            # in order (they went in before, so they go in again).
            self._run(conn, "ROLLBACK TO wh_batch", (p.stage_sql, self._stage_params(good, split)))
        self._run(conn, "RELEASE wh_batch")
        return result

    def _write_row(self, conn: sqlite3.Connection, row: Row, split: str | None,
                   good: list[Sequence[Any]]) -> str | None:
        p = self.periphery
        try:
            params = self._convert((row,))[0]
            changed = None if p.guard is None else p.guard.changed((params,)).get(0)
            if changed is not None:
                return changed
            conn.execute("SAVEPOINT wh_row")
        except VALUE_ERRORS as exc:
            return f"{type(exc).__name__}: {exc}"
        except sqlite3.Error as exc:
            raise self._broken(conn, exc) from exc
        try:
            if p.sql:
                conn.execute(p.sql, params)
            conn.execute(p.stage_sql, (*params, split))
        except VALUE_ERRORS + ROW_ERRORS as exc:
            self._run(conn, "ROLLBACK TO wh_row", "RELEASE wh_row")
            return f"{type(exc).__name__}: {exc}"
        except sqlite3.Error as exc:
            raise self._broken(conn, exc) from exc
        self._run(conn, "RELEASE wh_row")
        good.append(params)
        return None

    def flush(self) -> None:
        """Nothing to do: rows become durable when a split ends or the periphery commits."""

    def close(self) -> None:
        """Nothing to do: the connection belongs to the periphery."""

"""The sqlite store's reader: the schema the table declares, read-only connection, typed batches.

SQLite returns int, float, str, bytes and None, each value of its own type whatever its column declares.
A batch is made Arrow columns (:mod:`.arrow_columns`: one ``pa.array`` per column, text cast by pyarrow
compute); a batch holding a value those casts do not read as the Python conversions (:mod:`.types`) do,
a bad value or one of another type (a text in an INTEGER column, an integer in a column with no declared
type) is converted value by value, to tuples: a value its column's type holds exactly is kept (an integer
or real in a string column as its text), any other rejects its row, the reason naming column and value.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from wormhole.errors import ReadError, StorageError
from wormhole.plugins.base import Batch, Column, PushedQuery, ReadContext, Rejected, Row, Schema, Split
from wormhole.plugins.sql import VALUE_ERRORS, quote
from wormhole.plugins.sql.reader import SchemaOnce
from wormhole.plugins.sqlite.arrow_columns import arrow_batch
from wormhole.plugins.sqlite.connection import PLUGIN_NAME, connect_readonly, table_columns
from wormhole.plugins.sqlite.options import SqliteReaderOptions
from wormhole.plugins.sqlite.snapshot import of as snapshot_of
from wormhole.plugins.sqlite.types import READ_CONVERTERS, as_read, logical_type


def resolve_schema(conn: sqlite3.Connection, options: SqliteReaderOptions,
                   error: type[StorageError]) -> Schema:
    try:
        found = table_columns(conn, options.read_table)
    except sqlite3.Error as exc:
        raise error(f"cannot read the columns of {options.table} in {options.path}: {exc}",
                    plugin=PLUGIN_NAME) from exc
    if not found:
        raise error(f"table {options.table} does not exist in {options.path}", plugin=PLUGIN_NAME)
    if options.columns is None:
        chosen = found
    else:
        by_name = {name.lower(): (name, decl) for name, decl in found}
        unknown = [c for c in options.columns if c.lower() not in by_name]
        if unknown:
            raise error(f"table {options.table} in {options.path} has no column {', '.join(unknown)}",
                        plugin=PLUGIN_NAME)
        chosen = [by_name[c.lower()] for c in options.columns]
    return Schema(tuple(Column(name, logical_type(decl), as_read=as_read(decl)) for name, decl in chosen))


class SqliteReader(SchemaOnce):
    """Reads the table in batches of ``batch_rows`` with ``fetchmany``."""

    def __init__(self, options: SqliteReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.ctx = ctx

    def _describe(self) -> Schema:
        conn = connect_readonly(self.options.path, ReadError)
        try:
            return resolve_schema(conn, self.options, ReadError)
        finally:
            conn.close()

    def read(self, split: Split) -> Iterator[Batch | Sequence[Row]]:
        schema = self.schema()
        opts = self.options
        pushed: PushedQuery | None = split.params.get("pushdown")
        if pushed is not None:  # the task's leading filters and projection, evaluated here
            schema = Schema(tuple(schema.columns[k] for k in pushed.keep))
        sql = f"SELECT {', '.join(quote(n) for n in schema.names)} FROM {quote(opts.read_table)}"
        conditions = [f"({opts.where})"] if opts.where is not None else []
        args: tuple[Any, ...] = ()
        if pushed is not None and pushed.where is not None:
            conditions.append(pushed.render("?") or "")
            args = pushed.args
        if conditions:
            sql += f" WHERE {' AND '.join(conditions)}"
        if pushed is not None:
            self.ctx.log.debug("reader.split_query", split_id=split.id, plan=pushed.plan, sql=sql)
        fns = [(i, READ_CONVERTERS[c.type]) for i, c in enumerate(schema.columns) if c.type in READ_CONVERTERS]
        with self._connection() as conn:
            try:
                cursor = conn.execute(sql, args)
            except sqlite3.Error as exc:
                raise ReadError(f"cannot read {opts.table} from {opts.path}: {exc}",
                                plugin=PLUGIN_NAME) from exc
            try:
                while True:
                    try:
                        raw = cursor.fetchmany(self.ctx.batch_rows)
                    except sqlite3.Error as exc:
                        raise ReadError(f"cannot read {opts.table} from {opts.path}: {exc}",
                                        plugin=PLUGIN_NAME) from exc
                    if not raw:
                        return
                    batch = self._batch(raw, fns, schema, split.id)
                    if batch:
                        yield batch
            finally:
                cursor.close()

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection for a split, closed after; the run's snapshot's when it has one."""
        snapshot = snapshot_of(self.ctx)
        if snapshot is not None:
            with snapshot.session(self.options.path) as conn:
                yield conn
            return
        conn = connect_readonly(self.options.path, ReadError)
        try:
            yield conn
        finally:
            conn.close()

    def _batch(self, raw: list[Row], fns: list[tuple[int, Callable[[Any], Any]]], schema: Schema,
               split_id: str) -> Batch | Sequence[Row]:
        """A batch as Arrow columns, else converted in Python (its bad rows rejected)."""
        batch = arrow_batch(schema, raw)
        if batch is not None:
            return batch
        if not fns:
            return raw
        rows, rejected = self._convert(raw, fns, schema.names)
        if not rejected:
            return rows
        self.ctx.dirty.reject("source", rejected, split_id)
        # The rows left may all be held by Arrow: only the bad ones made the batch fail.
        bad = {id(r.row) for r in rejected}
        return arrow_batch(schema, [r for r in raw if id(r) not in bad]) or rows

    def _convert(self, raw: list[Row], fns: list[tuple[int, Callable[[Any], Any]]],
                 names: tuple[str, ...]) -> tuple[list[Row], list[Rejected]]:
        try:
            cols: list[Sequence[Any]] = list(zip(*raw, strict=True))
            for i, fn in fns:
                cols[i] = [None if v is None else fn(v) for v in cols[i]]
            return list(zip(*cols, strict=True)), []
        except VALUE_ERRORS:
            pass  # find the bad rows one by one
        rows: list[Row] = []
        rejected: list[Rejected] = []
        for r in raw:
            out = list(r)
            for i, fn in fns:
                if out[i] is None:
                    continue
                try:
                    out[i] = fn(out[i])
                except VALUE_ERRORS as exc:
                    rejected.append(Rejected(r, f"{self.options.path}:{self.options.table}: column "
                                                       f"{names[i]}: {exc}"))
                    break
            else:
                rows.append(tuple(out))
        return rows, rejected

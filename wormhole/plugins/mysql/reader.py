"""The mysql store's reader: streaming reads of each split.

Splits are cut by :mod:`.splitter`; reachability, size and the servers' load are the reader
periphery's (:mod:`.periphery`). Reads stream (unbuffered cursor) and parse rows column-major
off the wire (:mod:`.protocol`); values are converted a column at a time. A value the reader
cannot convert rejects its row to the dirty-record file (origin ``source``) instead of failing the split.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
import pymysql.cursors

from wormhole.errors import ReadError, SplitError
from wormhole.plugins.base import Column, PushedQuery, ReadContext, Rejected, Row, Schema, Split
from wormhole.plugins.mysql.catalog import choose_columns, describe_table
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    abandon,
    close_quietly,
    describe,
    source_connection,
)
from wormhole.plugins.mysql.options import Endpoint, MysqlSource, QuerySource
from wormhole.plugins.mysql.protocol import column_batches
from wormhole.plugins.mysql.splitter import query_columns
from wormhole.plugins.mysql.types import KIND_TYPES, READ_CONVERTERS, ZeroDate, convert_column
from wormhole.plugins.sql import backquote as quote


def endpoints(source: MysqlSource) -> list[tuple[Endpoint, tuple[str, ...]]]:
    """Every (endpoint, tables) the source reads; tables is empty for a ``query`` source."""
    return [(shard.endpoint, shard.tables) for shard in source.shards]


def pushed_sql(split: Split, pushed: PushedQuery) -> tuple[str, tuple[Any, ...], tuple[str, ...]]:
    """The split's query with the pushed-down filters and projection around it: a derived table,
    which the server merges into the split's own scan (key range included)."""
    inner, args = split.params["sql"], tuple(split.params["args"] or ())
    names: tuple[str, ...] = split.params["columns"]
    all_args = (*args, *pushed.args)
    if all_args and not args:  # the driver formats with % once there are arguments
        inner = inner.replace("%", "%%")
    where = pushed.render("%s", escape_percent=bool(all_args))
    select = ", ".join(quote(names[k]) for k in pushed.keep)
    if all_args:
        select = select.replace("%", "%%")
    sql = f"SELECT {select} FROM ({inner}) AS wh_push" + (f" WHERE {where}" if where else "")
    kinds = tuple(split.params["kinds"][k] for k in pushed.keep)
    return sql, all_args, kinds


class MysqlReader:
    """Streams the rows of each split (one connection per split, closed after it)."""

    def __init__(self, options: MysqlSource, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx
        self._shards = endpoints(options)

    def schema(self) -> Schema:
        source = self.source
        ep, tables = self._shards[0]
        conn = source_connection(source, ep, SplitError, self.ctx)
        try:
            if isinstance(source, QuerySource):
                cols = query_columns(conn, ep, source.query)
                return Schema(tuple(Column(name, KIND_TYPES[kind], unsigned=kind == "uint64") for name, kind in cols))
            chosen = choose_columns(describe_table(conn, ep, tables[0]), source.selection.columns, ep, tables[0])
            return Schema(tuple(Column(c.name, KIND_TYPES[c.kind], c.nullable, c.kind == "uint64") for c in chosen))
        finally:
            close_quietly(conn)

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        ep, _ = self._shards[split.params["shard"]]
        kinds: tuple[str, ...] = split.params["kinds"]
        sql, args = split.params["sql"], tuple(split.params["args"] or ())
        pushed: PushedQuery | None = split.params.get("pushdown")
        if pushed is not None:
            sql, args, kinds = pushed_sql(split, pushed)
            self.ctx.log.debug("reader.split_query", split_id=split.id, plan=pushed.plan, sql=sql)
        conn = source_connection(self.source, ep, ReadError, self.ctx, raw=True,
                                 log=self.ctx.log.bind(split_id=split.id))
        finished = False
        cur = None
        try:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            try:
                cur.execute(sql, args or None)
                for count, columns in column_batches(cur, self.ctx.batch_rows, self.ctx.batch_bytes):
                    if len(columns) != len(kinds):
                        raise ReadError(f"split {split.id} returned {len(columns)} columns, expected {len(kinds)}",
                                        plugin=PLUGIN_NAME)
                    rows = self._convert(split, kinds, count, columns)
                    if rows:
                        yield rows
            except pymysql.err.MySQLError as exc:
                raise ReadError(f"reading {split.id} failed: {describe(exc)}", plugin=PLUGIN_NAME,
                                split_id=split.id) from exc
            finished = True
        finally:
            # After an early stop (or a killed connection) the stream is mid-result: closing the
            # connection is the only clean way out (draining it could take as long as the rest of the read).
            if finished:
                close_quietly(conn)
            else:
                abandon(conn, cur)

    def _convert(self, split: Split, kinds: tuple[str, ...], count: int, columns: list[list[Any]]) -> list[Row]:
        bad: dict[int, str] = {}
        for i, kind in enumerate(kinds):
            try:
                columns[i] = convert_column(kind, columns[i])
            except (ValueError, ArithmeticError, UnicodeDecodeError):
                columns[i] = self._convert_slowly(kind, columns[i], bad, i)
        rows: list[Row] = list(zip(*columns, strict=True))
        if bad:
            rejected = [Rejected(rows[r], reason) for r, reason in sorted(bad.items())]
            self.ctx.dirty.reject("source", rejected, split.id)
            rows = [row for r, row in enumerate(rows) if r not in bad]
        return rows

    def _convert_slowly(self, kind: str, values: list[Any], bad: dict[int, str], index: int) -> list[Any]:
        fn = READ_CONVERTERS[kind]
        assert fn is not None
        policy = self.source.zero_dates
        out: list[Any] = []
        for r, v in enumerate(values):
            if v is None:
                out.append(None)
                continue
            try:
                out.append(fn(v))
            except ZeroDate as exc:
                if policy == "keep":
                    out.append(str(exc))
                elif policy == "null":
                    out.append(None)
                else:
                    bad.setdefault(r, f"column {index}: zero date {exc} has no value (zero_dates is 'reject')")
                    out.append(None)
            except (ValueError, ArithmeticError, UnicodeDecodeError) as exc:
                bad.setdefault(r, f"column {index}: cannot read {v[:40]!r} as {kind}: {exc}")
                out.append(None)
        return out


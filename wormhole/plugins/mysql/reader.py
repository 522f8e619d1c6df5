"""The mysql store's reader: streaming reads of each split.

Splits are cut by :mod:`.splitter`; reachability, size and the servers' load are the reader
periphery's (:mod:`.periphery`). Reads stream (unbuffered cursor) and parse rows column-major
off the wire (:mod:`.protocol`); each column becomes an Arrow array by vectorised casts
(:mod:`.arrow_read`), so batches go on as Arrow record batches. A value the reader cannot convert
rejects its row to the dirty-record file (origin ``source``) instead of failing the split.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
import pymysql.cursors

from wormhole.errors import ReadError, SplitError
from wormhole.plugins.base import Column, PushedQuery, ReadContext, Row, Schema, Split
from wormhole.plugins.mysql.arrow_read import BatchDecoder
from wormhole.plugins.mysql.catalog import choose_columns, describe_table
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    abandon,
    close_quietly,
    describe,
    source_connection,
)
from wormhole.plugins.mysql.options import Endpoint, MysqlSource, QuerySource
from wormhole.plugins.mysql.passthrough import native_type
from wormhole.plugins.mysql.protocol import column_batches
from wormhole.plugins.mysql.splitter import query_columns
from wormhole.plugins.mysql.types import KIND_TYPES
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
        self._schema: Schema | None = None

    def schema(self) -> Schema:
        if self._schema is None:
            self._schema = self._describe()
        return self._schema

    def _describe(self) -> Schema:
        source = self.source
        ep, tables = self._shards[0]
        conn = source_connection(source, ep, SplitError, self.ctx)
        try:
            if isinstance(source, QuerySource):
                return Schema(tuple(Column(c.name, KIND_TYPES[c.kind], unsigned=c.unsigned,
                                           precision=c.precision, scale=c.scale)
                                    for c in query_columns(conn, ep, source.query)))
            chosen = choose_columns(describe_table(conn, ep, tables[0]), source.selection.columns, ep, tables[0])
            # native: a mysql destination declaring the same type takes the column's wire text (passthrough)
            return Schema(tuple(Column(c.name, KIND_TYPES[c.kind], c.nullable, c.unsigned, c.precision,
                                       c.scale, native_type(c.column_type, c.charset)) for c in chosen))
        finally:
            close_quietly(conn)

    def _decoder(self, split: Split, kinds: tuple[str, ...], pushed: PushedQuery | None) -> BatchDecoder:
        """How the split's columns become batches: the schema's columns the split selects (the pushed
        projection's), as Arrow. Splits planned before the table changed (a resumed run) keep their kinds."""
        columns = self.schema().columns
        if pushed is not None:
            columns = tuple(columns[k] for k in pushed.keep)
        if len(columns) != len(kinds) or any(c.type != KIND_TYPES[k] for c, k in zip(columns, kinds, strict=False)):
            names = [split.params["columns"][k] for k in pushed.keep] if pushed else split.params["columns"]
            columns = tuple(Column(n, KIND_TYPES[k], unsigned=k == "uint64") for n, k in zip(names, kinds, strict=True))
        return BatchDecoder(columns, kinds, self.source.zero_dates, keep_wire=self.ctx.keep_wire)

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        ep, _ = self._shards[split.params["shard"]]
        kinds: tuple[str, ...] = tuple(split.params["kinds"])
        sql, args = split.params["sql"], tuple(split.params["args"] or ())
        pushed: PushedQuery | None = split.params.get("pushdown")
        if pushed is not None:
            sql, args, kinds = pushed_sql(split, pushed)
            self.ctx.log.debug("reader.split_query", split_id=split.id, plan=pushed.plan, sql=sql)
        decoder = self._decoder(split, kinds, pushed)
        conn = source_connection(self.source, ep, ReadError, self.ctx, raw=True,
                                 log=self.ctx.log.bind(split_id=split.id))
        finished = False
        cur = None
        try:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            try:
                cur.execute(sql, args or None)
                for _count, columns in column_batches(cur, self.ctx.batch_rows, self.ctx.batch_bytes):
                    if len(columns) != len(kinds):
                        raise ReadError(f"split {split.id} returned {len(columns)} columns, expected {len(kinds)}",
                                        plugin=PLUGIN_NAME)
                    rows, rejected = decoder.decode(columns)
                    if rejected:
                        self.ctx.dirty.reject("source", rejected, split.id)
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

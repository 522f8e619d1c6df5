"""The mysql store's reader: each split streamed from an unbuffered cursor and parsed column-major off the
wire (:mod:`.protocol`), each column cast to Arrow whole (:mod:`.arrow_read`); a value that does not convert
rejects its row (origin ``source``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pymysql
import pymysql.cursors

from wormhole.errors import ReadError
from wormhole.plugins.base import Batch, Column, Row, Schema, Split
from wormhole.plugins.mysql.arrow_read import BatchDecoder
from wormhole.plugins.mysql.connection import PLUGIN_NAME, abandon
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.mysql.passthrough import native_type
from wormhole.plugins.mysql.protocol import column_batches
from wormhole.plugins.mysql.types import KIND_TYPES
from wormhole.plugins.sql.reader import SqlReader
from wormhole.plugins.sql.snapshot import of
from wormhole.plugins.sql.source_options import QuerySource


class MysqlReader(SqlReader):
    """Streams the rows of each split (one connection per split, closed after it; with a consistent snapshot,
    one of the snapshot's connections, borrowed and given back)."""

    DIALECT = MYSQL

    def _describe(self) -> Schema:
        infos = self.first_columns()
        if isinstance(self.source, QuerySource):
            return Schema(tuple(Column(c.name, KIND_TYPES[c.kind], unsigned=c.unsigned, precision=c.precision,
                                       scale=c.scale) for c in infos))
        # native: a mysql destination declaring the same type takes the column's wire text (passthrough)
        return Schema(tuple(Column(c.name, KIND_TYPES[c.kind], c.nullable, c.unsigned, c.precision,
                                   c.scale, native_type(c.column_type, c.charset)) for c in infos))

    def column_of(self, name: str, kind: str) -> Column:
        return Column(name, KIND_TYPES[kind], unsigned=kind == "uint64")

    def read(self, split: Split) -> Iterator[Batch | Sequence[Row]]:
        ep = self.source.shards[split.params["shard"]].endpoint
        sql, args, kinds, names, pushed = self.split_query(split)
        # Splits planned before the table changed (a resumed run) keep their kinds.
        decoder = BatchDecoder(self.split_columns(names, kinds, pushed), kinds, self.source.dates,
                               keep_wire=self.ctx.keep_wire)
        log = self.ctx.log.bind(split_id=split.id)
        cursor: list[Any] = []
        snapshot = of(self.ctx)
        if snapshot is not None:  # a connection of the snapshot's, borrowed for this split and given back
            with snapshot.reading(ep, self.ctx, log) as lease:
                yield from self._stream(lease.conn, split, sql, args, decoder, cursor)
                cursor[0].close()  # the result was read whole: the connection reads the next split
            return
        # In a database task, a session another table's reader left idle on this server (ctx.shared).
        shared, key = self.ctx.shared, ("reader", MYSQL.name, ep)
        conn = shared.lend(key) if shared is not None else None
        if conn is None:
            conn = MYSQL.connect(self.source, ep, ReadError, self.ctx, log=log, raw=True)
        finished = False
        try:
            yield from self._stream(conn, split, sql, args, decoder, cursor)
            cursor[0].close()
            finished = True
        finally:
            # After an early stop (or a killed connection) the stream is mid-result: closing the
            # connection is the only clean way out (draining it could take as long as the rest of the read).
            if not finished:
                abandon(conn, cursor[0] if cursor else None)
            elif shared is not None and MYSQL.idle(conn):
                shared.keep(key, conn, MYSQL.close_quietly)
            else:
                MYSQL.close_quietly(conn)

    def _stream(self, conn: pymysql.Connection, split: Split, sql: str, args: tuple[Any, ...], decoder: BatchDecoder,
                cursor: list[Any]) -> Iterator[Batch]:
        """The split's batches off ``conn`` (its unbuffered cursor put in ``cursor``, for the caller's clean-up)."""
        cur = conn.cursor(pymysql.cursors.SSCursor)
        cursor.append(cur)
        kinds = decoder.kinds
        with self.reading(split):
            cur.execute(sql, args or None)
            for _count, columns in column_batches(cur, self.ctx.batch_rows, self.ctx.batch_bytes):
                if len(columns) != len(kinds):
                    raise ReadError(f"split {split.id} returned {len(columns)} columns, expected {len(kinds)}",
                                    plugin=PLUGIN_NAME)
                yield from self.batch(split, *decoder.decode(columns))

"""The mysql store's reader: each split streamed from an unbuffered cursor and parsed column-major off the
wire (:mod:`.protocol`), each column cast to Arrow whole (:mod:`.arrow_read`); a value that does not convert
rejects its row (origin ``source``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
from wormhole.plugins.sql.source_options import QuerySource


class MysqlReader(SqlReader):
    """Streams the rows of each split (one connection per split, closed after it)."""

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
        conn = MYSQL.connect(self.source, ep, ReadError, self.ctx, log=self.ctx.log.bind(split_id=split.id), raw=True)
        finished = False
        cur = None
        try:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            with self.reading(split):
                cur.execute(sql, args or None)
                for _count, columns in column_batches(cur, self.ctx.batch_rows, self.ctx.batch_bytes):
                    if len(columns) != len(kinds):
                        raise ReadError(f"split {split.id} returned {len(columns)} columns, expected {len(kinds)}",
                                        plugin=PLUGIN_NAME)
                    yield from self.batch(split, *decoder.decode(columns))
            finished = True
        finally:
            # After an early stop (or a killed connection) the stream is mid-result: closing the
            # connection is the only clean way out (draining it could take as long as the rest of the read).
            if finished:
                MYSQL.close_quietly(conn)
            else:
                abandon(conn, cur)

"""The SQL source's periphery, what every SQL store's does alike: each shard's server answers (the store's
connect retries, bounded), the rows (and bytes) to read estimated and summed over the shards, and how busy
the busiest server is (``busy_threads``, which adaptive push-up asks before it moves work into the source).
A store's subclass says what its shards are, how to connect to one, estimate it and count its busy
sessions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from wormhole.errors import ReadError
from wormhole.plugins.base import ReadContext, SourceInfo
from wormhole.plugins.sql.dialect import Dialect


class SqlReaderPeriphery:
    """Reachability of every connection (bounded retry) and an estimate of the rows to read."""

    dialect: ClassVar[Dialect]

    def __init__(self, options: Any, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx

    def _shards(self) -> Iterable[Any]:
        raise NotImplementedError

    def _connect(self, shard: Any) -> Any:
        raise NotImplementedError

    def _estimate(self, conn: Any, shard: Any) -> tuple[int | None, int | None]:
        """(rows, bytes) of one shard, each None when it cannot be told."""
        raise NotImplementedError

    def _running(self, conn: Any) -> int:
        """Sessions running statements on the server of ``conn``, this one excluded."""
        raise NotImplementedError

    def prepare(self) -> SourceInfo:
        rows: int | None = 0
        size: int | None = 0
        for shard in self._shards():
            conn = self._connect(shard)
            try:
                r, b = self._estimate(conn, shard)
            finally:
                self.dialect.close_quietly(conn)
            rows = None if rows is None or r is None else rows + r
            size = None if size is None or b is None else size + b
        self.ctx.log.info("reader.estimate", method=self.source.estimate, rows=rows, bytes=size)
        return SourceInfo(estimated_rows=rows, estimated_bytes=size)

    def busy_threads(self) -> int | None:
        """Sessions running statements on the busiest of the source's servers, this one's own excluded. None
        when a server cannot say (the push-up then treats the source as idle)."""
        busiest: int | None = None
        for shard in self._shards():
            try:
                conn = self._connect(shard)
            except ReadError:
                return None
            try:
                running = self._running(conn)
            except self.dialect.db_error:
                return None
            finally:
                self.dialect.close_quietly(conn)
            busiest = running if busiest is None else max(busiest, running)
        return busiest

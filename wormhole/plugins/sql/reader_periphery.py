"""The SQL source's periphery, what every SQL store's does alike: each shard's server answers (the store's
connect retries, bounded), the rows (and bytes) to read estimated and summed over the shards, and how busy
the busiest server is (``busy_threads``, which adaptive push-up asks before it moves work into the source).
The estimate follows the source's ``estimate`` (statistics, an exact ``COUNT(*)`` under ``count_timeout_s``,
or none); a store's subclass says how its statistics are read, how it bounds a count's time, and how it
counts its busy sessions."""

from __future__ import annotations

from typing import Any, ClassVar

from wormhole.errors import ReadError
from wormhole.plugins.base import ReadContext, SourceInfo
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.source_options import QuerySource, Shard, SqlSource


class SqlReaderPeriphery:
    """Reachability of every connection (bounded retry) and an estimate of the rows to read."""

    dialect: ClassVar[Dialect]

    def __init__(self, options: SqlSource, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx

    def _connect(self, shard: Shard) -> Any:
        return self.dialect.connect(self.source, shard.endpoint, ReadError, self.ctx)

    def _estimate(self, conn: Any, shard: Shard) -> tuple[int | None, int | None]:
        """(rows, bytes) of one shard, each None when it cannot be told."""
        source, dialect = self.source, self.dialect
        where = None if isinstance(source, QuerySource) else source.selection.where
        if source.estimate == "none":
            return None, None
        if source.estimate == "stats":
            if isinstance(source, QuerySource) or where is not None:
                return None, None  # a where or a query: the statistics say nothing about the rows selected
            return self._stats(conn, shard)
        selects = [f"SELECT 1 FROM ({source.query}) AS wh_q"] if isinstance(source, QuerySource) else \
            [f"SELECT 1 FROM {dialect.relation(shard, t)}" + (f" WHERE ({where})" if where else "")
             for t in shard.tables]
        try:
            return self._count(conn, [f"SELECT COUNT(*) FROM ({sql}) AS wh_c" for sql in selects]), None
        except dialect.db_error as exc:
            # Too slow, or not countable: the estimate is only a hint.
            self.ctx.log.warning("reader.estimate_skipped", resource=shard.endpoint.mark, reason=dialect.describe(exc))
            return None, None

    def _stats(self, conn: Any, shard: Shard) -> tuple[int | None, int | None]:
        """(rows, bytes) of the shard's tables as the server's statistics say (``estimate: stats``)."""
        raise NotImplementedError

    def _count(self, conn: Any, statements: list[str]) -> int:
        """The sum of what the ``SELECT COUNT(*)`` ``statements`` count, each given up after the source's
        ``count_timeout_s`` (the driver's error: the estimate is skipped)."""
        raise NotImplementedError

    def _running(self, conn: Any) -> int:
        """Sessions running statements on the server of ``conn``, this one excluded."""
        raise NotImplementedError

    def prepare(self) -> SourceInfo:
        rows: int | None = 0
        size: int | None = 0
        for shard in self.source.shards:
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
        for shard in self.source.shards:
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

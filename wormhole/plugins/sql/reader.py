"""What the SQL stores' readers share: the source's schema, described once from its first table (or its
query) on its first connection, and the columns a split reads as batches of that schema."""

from __future__ import annotations

from typing import Any, ClassVar

from wormhole.errors import SplitError
from wormhole.plugins.base import Column, PushedQuery, ReadContext, Schema
from wormhole.plugins.sql.source_dialect import SourceDialect
from wormhole.plugins.sql.source_options import QuerySource, SqlSource


class SchemaOnce:
    """A reader whose schema is described once, when it is first asked for."""

    _schema: Schema | None = None

    def schema(self) -> Schema:
        if self._schema is None:
            self._schema = self._describe()
        return self._schema

    def _describe(self) -> Schema:
        raise NotImplementedError


class SqlReader(SchemaOnce):
    """Streams the rows of each split (one connection per split, closed after it); the store reads them."""

    DIALECT: ClassVar[SourceDialect]

    def __init__(self, options: SqlSource, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx

    def first_columns(self) -> list[Any]:
        """The columns the source reads, as the store's catalog describes them on its first connection:
        its query's, or those of its first table it selects."""
        source, dialect = self.source, self.DIALECT
        shard = source.shards[0]
        conn = dialect.connect(source, shard.endpoint, SplitError, self.ctx)
        try:
            if isinstance(source, QuerySource):
                return dialect.describe_query(conn, shard.endpoint, source.query)
            table = shard.tables[0]
            return dialect.choose_columns(dialect.describe_table(conn, shard, table), source.selection.columns, shard,
                                          table)
        finally:
            dialect.close(conn)

    def split_columns(self, names: tuple[str, ...], kinds: tuple[str, ...],
                      pushed: PushedQuery | None) -> tuple[Column, ...]:
        """The columns a split reads (the pushed projection's): the schema's, unless the split was planned
        before the table changed (a resumed run): then its own names and kinds."""
        columns = self.schema().columns
        if pushed is not None:
            columns = tuple(columns[k] for k in pushed.keep)
        kind_types = self.DIALECT.kind_types
        if len(columns) != len(kinds) or any(c.type != kind_types[k] for c, k in zip(columns, kinds, strict=False)):
            columns = tuple(self.column_of(n, k) for n, k in zip(names, kinds, strict=True))
        return columns

    def column_of(self, name: str, kind: str) -> Column:
        """A column read as ``kind`` that the schema does not describe."""
        return Column(name, self.DIALECT.kind_types[kind])  # type: ignore[arg-type]

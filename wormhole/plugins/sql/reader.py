"""What the SQL stores' readers share: the source's schema, described once from its first table (or its
query) on its first connection, the statement a split runs (the task's pushed-down filters and projection
around its own), and the columns a split reads as batches of that schema."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from wormhole.errors import ReadError, SplitError
from wormhole.plugins.base import Batch, Column, PushedQuery, ReadContext, Rejected, Schema, Split
from wormhole.plugins.sql.catalog import query_columns
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.snapshot import source_session
from wormhole.plugins.sql.source_options import QuerySource, Shard, SqlSource


def table_columns(dialect: Dialect, source: SqlSource, shard: Shard, table: str, ctx: ReadContext,
                  conn: Any = None) -> list[Any]:
    """``table``'s columns as the store's catalog describes them (on ``conn``, else a session of its own); in a
    database task described once for its table run, whose schema, splitter and readers all ask
    (``ctx.shared``)."""
    def described() -> tuple[Any, ...]:
        if conn is not None:
            return tuple(dialect.describe_table(conn, shard, table))
        with source_session(dialect, source, shard.endpoint, SplitError, ctx) as session:
            return tuple(dialect.describe_table(session, shard, table))

    shared = ctx.shared
    return list(described() if shared is None else shared.once(_columns_key(dialect, shard, table), described))


def _columns_key(dialect: Dialect, shard: Shard, table: str) -> tuple[Any, ...]:
    return ("columns", dialect.name, shard.endpoint, shard.schema, table)


DESCRIBED_AT_ONCE = 500
"""Tables described by one catalog statement of :func:`describe_ahead`."""


def describe_ahead(dialect: Dialect, source: SqlSource, ctx: ReadContext) -> int:
    """Describe every table of ``source``'s shards (a database task's tables: ``CatalogFacet.for_tables``) a few
    hundred per statement, kept in ``ctx.shared`` where each table run's :func:`table_columns` finds its own:
    a round trip a table fewer (against a local server no faster, docs/benchmarks.md; across a network, a
    round trip each). A table not found is left to its run, which names it. Returns how many were described."""
    shared = ctx.shared
    if shared is None:
        return 0
    described = 0
    for shard in source.shards:
        with source_session(dialect, source, shard.endpoint, SplitError, ctx) as conn:
            for first in range(0, len(shard.tables), DESCRIBED_AT_ONCE):
                chunk = shard.tables[first:first + DESCRIBED_AT_ONCE]
                found = dialect.describe_tables(conn, shard, chunk)
                for table in chunk:
                    if table in found:
                        shared.put(_columns_key(dialect, shard, table), tuple(found[table]))
                        described += 1
    return described


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

    DIALECT: ClassVar[Dialect]
    ESCAPED: ClassVar[bool] = False
    """Whether a split's statement always has its ``%`` doubled (its driver formats every statement), not only
    when it binds values."""

    def __init__(self, options: SqlSource, ctx: ReadContext) -> None:
        self.source = options
        self.ctx = ctx

    def first_columns(self) -> list[Any]:
        """The columns the source reads, as the store's catalog describes them on its first connection:
        its query's, or those of its first table it selects."""
        source, dialect = self.source, self.DIALECT
        shard = source.shards[0]
        if isinstance(source, QuerySource):
            with source_session(dialect, source, shard.endpoint, SplitError, self.ctx) as conn:
                return query_columns(dialect, conn, shard.endpoint, source.query)
        table = shard.tables[0]
        return dialect.choose_columns(table_columns(dialect, source, shard, table, self.ctx), source.selection.columns,
                                      shard, table)

    def split_query(self, split: Split) -> tuple[str, tuple[Any, ...], tuple[str, ...], tuple[str, ...],
                                                  PushedQuery | None]:
        """What ``split`` reads: its statement and bound values, its columns' kinds and names, and the task's
        pushed-down query (None: none), with which the statement is :meth:`pushed_sql`'s."""
        sql, args = split.params["sql"], tuple(split.params["args"] or ())
        kinds, names = tuple(split.params["kinds"]), tuple(split.params["columns"])
        pushed: PushedQuery | None = split.params.get("pushdown")
        if pushed is not None:
            sql, args, kinds, names = self.pushed_sql(split, pushed)
            self.ctx.log.debug("reader.split_query", split_id=split.id, plan=pushed.plan, sql=sql)
        return sql, args, kinds, names, pushed

    @classmethod
    def pushed_sql(cls, split: Split, pushed: PushedQuery) -> tuple[str, tuple[Any, ...], tuple[str, ...],
                                                                    tuple[str, ...]]:
        """The split's query with the pushed-down filters and projection around it: a derived table, which
        the server merges into the split's own scan (key or block range included)."""
        inner, args = split.params["sql"], tuple(split.params["args"] or ())
        names: tuple[str, ...] = split.params["columns"]
        all_args = (*args, *pushed.args)
        escaped = cls.ESCAPED or bool(all_args)  # a driver formats with % once there are arguments
        if escaped and not cls.ESCAPED and not args:
            inner = inner.replace("%", "%%")
        select = ", ".join(cls.DIALECT.quote(names[k]) for k in pushed.keep) or "NULL"
        if escaped:
            select = select.replace("%", "%%")
        where = pushed.render("%s", escape_percent=escaped)
        sql = f"SELECT {select} FROM ({inner}) AS wh_push" + (f" WHERE {where}" if where else "")
        kinds = tuple(split.params["kinds"][k] for k in pushed.keep)
        return sql, all_args, kinds, tuple(names[k] for k in pushed.keep)

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

    @contextmanager
    def reading(self, split: Split) -> Iterator[None]:
        """A driver error inside fails the split: ``reading <split> failed: <the server's reason>``."""
        try:
            yield
        except self.DIALECT.db_error as exc:
            raise ReadError(f"reading {split.id} failed: {self.DIALECT.describe(exc)}", plugin=self.DIALECT.name,
                            split_id=split.id) from exc

    def batch(self, split: Split, batch: Batch | None, rejected: Sequence[Rejected]) -> Iterator[Batch]:
        """``batch`` (unless empty), its rows that did not convert rejected to the dirty-record file first."""
        if rejected:
            self.ctx.dirty.reject("source", rejected, split.id)
        if batch is not None and len(batch):
            yield batch

    def column_of(self, name: str, kind: str) -> Column:
        """A column read as ``kind`` that the schema does not describe."""
        return Column(name, self.DIALECT.kind_types[kind])  # type: ignore[arg-type]

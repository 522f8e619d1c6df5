"""The postgres source's options: what users write under ``source.params``.

The params are parsed flat (:class:`PostgresReaderOptions`), checked with key paths, and resolved into
one of three shapes the splitter and reader work with: :class:`TableSource` (one table),
:class:`QuerySource` (a query, on one database or on each connection) or :class:`ShardedSource` (tables
on several connections). ``where`` and ``query`` are SQL text from the task author and run as given;
names are always quoted with ``"`` (their case is kept as written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from wormhole.options import Problems, join_path, opt
from wormhole.plugins.postgres.options import (
    DEFAULT_PORT,
    Endpoint,
    ServerOptions,
    check_column_names,
    check_credentials,
    check_identifier,
)
from wormhole.plugins.sql import check_where


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardConnection:
    """One entry of a sharded source's ``connections``."""

    host: str = opt(nonempty=True)
    """This shard's host."""
    port: int = opt(DEFAULT_PORT, min=1, max=65535)
    """This shard's port."""
    database: str = opt(nonempty=True)
    """This shard's database."""
    schema: str | None = opt(None, nonempty=True)
    """The schema of this shard's tables; default the source's ``schema``."""
    tables: tuple[str, ...] | None = opt(None, min_items=1)
    """Tables of this schema to read (every one must have the source's columns); not with ``query``."""
    user: str | None = opt(None, nonempty=True)
    """Credentials of this connection; default the source's ``user`` / ``password`` / ``password_env``."""
    password: str | None = None
    """This shard's password, inline (never logged or printed)."""
    password_env: str | None = opt(None, nonempty=True)
    """Name of an environment variable holding this shard's password."""

    def check(self, path: str, problems: Problems) -> None:
        check_identifier(self.database, join_path(path, "database"), problems)
        if self.schema is not None:
            check_identifier(self.schema, join_path(path, "schema"), problems)
        check_column_names(self.tables, join_path(path, "tables"), problems)
        check_credentials(self.password, self.password_env, path, problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresReaderOptions(ServerOptions):
    database: str | None = opt(None, nonempty=True)
    """The database of ``table`` or ``query``; not with ``connections``."""
    schema: str = opt("public", nonempty=True)
    """The schema of ``table`` (and the default of each connection's)."""
    table: str | None = opt(None, nonempty=True)
    """The table (or view) to read; not with ``query``."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Columns to read, in this order; default every column of the (first) table."""
    where: str | None = opt(None, nonempty=True)
    """An SQL condition on every table read (trusted text from the task author)."""
    split_pk: str | None = opt(None, nonempty=True)
    """An integer, date or timestamp column to cut each table into key ranges, plus a split for NULL keys
    when the column is nullable. Without it a table larger than one split is cut into ranges of
    physical blocks (ctid)."""
    split_factor: int = opt(5, min=1, max=100)
    """A single table is cut into channels x split_factor ranges (DataX: 5)."""
    query: str | None = opt(None, nonempty=True)
    """A SELECT read as it is, without splitting (one split per connection); excludes
    table/columns/where/split_pk. A trailing ``;`` is dropped (the query is read as a subquery)."""
    connections: tuple[ShardConnection, ...] | None = opt(None, min_items=1)
    """A sharded source: several hosts/databases, each with its tables; excludes database/table."""
    estimate: Literal["stats", "count", "none"] = "stats"
    """How the reader periphery estimates the rows: ``pg_class.reltuples`` (cheap, as of the last
    ANALYZE or VACUUM), an exact ``COUNT(*)`` under ``count_timeout_s``, or not at all."""
    count_timeout_s: float = opt(10.0, min=0.1)
    """``estimate: count``: a COUNT(*) slower than this is cancelled (statement_timeout) and the run goes
    on without an estimate."""
    special_dates: Literal["reject", "null"] = "reject"
    """A date or timestamp Python cannot hold (``infinity``, ``-infinity``, a BC date, a year after
    9999): reject the row to the dirty-record file with the value, or read it as NULL. Rows read without
    decoding (every destination a postgres table of the same types) keep such values as they are."""

    def check(self, path: str, problems: Problems) -> None:
        check_credentials(self.password, self.password_env, path, problems)
        check_column_names(self.columns, join_path(path, "columns"), problems)
        check_where(self.where, path, problems, "postgres")
        for key in ("table", "split_pk", "database", "schema"):
            value = getattr(self, key)
            if value is not None:
                check_identifier(value, join_path(path, key), problems)
        if self.connections is not None:
            self._check_connections(self.connections, path, problems)
        else:
            if self.database is None:
                problems.add(join_path(path, "database"), "is required (or give connections)")
            if self.query is None and self.table is None:
                problems.add(join_path(path, "table"), "is required (or give a query)")
        if self.query is not None:
            for key in ("table", "columns", "where", "split_pk"):
                if getattr(self, key) is not None:
                    problems.add(join_path(path, key), "not with query (the query says what to read)")

    def _check_connections(self, connections: tuple[ShardConnection, ...], path: str, problems: Problems) -> None:
        for key in ("database", "table"):
            if getattr(self, key) is not None:
                problems.add(join_path(path, key), "not with connections (each connection names its "
                                                   "database and tables)")
        for i, conn in enumerate(connections):
            where = join_path(join_path(join_path(path, "connections"), i), "tables")
            if self.query is None and conn.tables is None:
                problems.add(where, "is required (or give a query)")
            if self.query is not None and conn.tables is not None:
                problems.add(where, "not with query")

    def resolve(self) -> PostgresSource:
        """The shape these (checked) params describe: what the splitter and reader work with."""
        settings: dict[str, Any] = {
            "connect_timeout_s": self.connect_timeout_s, "connect_retries": self.connect_retries,
            "estimate": self.estimate, "count_timeout_s": self.count_timeout_s, "special_dates": self.special_dates}
        query = None if self.query is None else self.query.rstrip().rstrip(";").rstrip() or self.query
        if self.connections is None:
            assert self.database is not None  # check() requires it
            endpoint = self.endpoint(self.database)
            if query is not None:
                return QuerySource(shards=(Shard(endpoint, self.schema, ()),), query=query, **settings)
            assert self.table is not None  # check() requires a table or a query
            return TableSource(shards=(Shard(endpoint, self.schema, (self.table,)),), selection=self._selection(),
                               **settings)
        shards = tuple(Shard(self._shard_endpoint(c), c.schema or self.schema, c.tables or ())
                       for c in self.connections)
        if query is not None:
            return QuerySource(shards=shards, query=query, **settings)
        return ShardedSource(shards=shards, selection=self._selection(), **settings)

    def _selection(self) -> Selection:
        return Selection(columns=self.columns, where=self.where, split_pk=self.split_pk,
                         split_factor=self.split_factor)

    def _shard_endpoint(self, c: ShardConnection) -> Endpoint:
        # The user and the secret default separately; a connection's password or password_env
        # replaces the source's pair as a whole.
        own_secret = c.password is not None or c.password_env is not None
        return Endpoint(c.host, c.port, c.user or self.user, c.password if own_secret else self.password,
                        c.password_env if own_secret else self.password_env, c.database)


@dataclass(frozen=True, slots=True)
class Shard:
    """One connection of a source, the schema of its tables and the tables read there (none for a query)."""

    endpoint: Endpoint
    schema: str
    tables: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What a table source reads of each table: columns, rows, and how to cut it into splits."""

    columns: tuple[str, ...] | None = None
    where: str | None = None
    split_pk: str | None = None
    split_factor: int = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSettings:
    """What every source shape shares: its connections, connecting and estimating."""

    shards: tuple[Shard, ...]
    connect_timeout_s: float = 10.0
    connect_retries: int = 3
    estimate: Literal["stats", "count", "none"] = "stats"
    count_timeout_s: float = 10.0
    special_dates: Literal["reject", "null"] = "reject"


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSource(SourceSettings):
    """One table of one database (``table``)."""

    kind: Literal["table"] = "table"
    selection: Selection


@dataclass(frozen=True, slots=True, kw_only=True)
class QuerySource(SourceSettings):
    """A SELECT read as it is (``query``): on one database, or on each of ``connections``."""

    kind: Literal["query"] = "query"
    query: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardedSource(SourceSettings):
    """Tables on several hosts or databases (``connections``), read as one source."""

    kind: Literal["sharded"] = "sharded"
    selection: Selection


PostgresSource = TableSource | QuerySource | ShardedSource
"""A postgres source as the splitter and reader see it; ``kind`` tells which."""

"""The postgres source's options: what users write under ``source.params``.

The params are parsed flat (:class:`PostgresReaderOptions`), checked with key paths by the SQL store kit's
``SourceParams`` (with PostgreSQL's naming rules, :data:`.options.NAMING`), and resolved into one of the kit's
three shapes (:mod:`wormhole.plugins.sql.source_options`) the splitter and reader work with. ``where``
and ``query`` are SQL text from the task author and run as given; names are always quoted with ``"``
(their case is kept as written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from wormhole.options import Problems, opt
from wormhole.plugins.postgres.options import DEFAULT_PORT, NAMING, ServerOptions
from wormhole.plugins.sql.source_options import (
    Endpoint,
    Naming,
    QuerySource,
    Shard,
    SourceParams,
    SqlSource,
    check_connection,
)

__all__ = ["QuerySource", "Shard"]  # the shapes, for the periphery and spark


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
        check_connection(NAMING, self.database, self.schema, self.tables, self.password, self.password_env, path,
                         problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresReaderOptions(ServerOptions, SourceParams):
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

    NAMING: ClassVar[Naming] = NAMING
    NAMED_KEYS: ClassVar[tuple[str, ...]] = ("table", "split_pk", "database", "schema")

    def dates(self) -> str:
        return self.special_dates

    def schema_of(self, entry: ShardConnection | None, endpoint: Endpoint) -> str:
        return self.schema if entry is None else entry.schema or self.schema


PostgresSource = SqlSource
"""A postgres source as the splitter and reader see it; ``kind`` tells which."""

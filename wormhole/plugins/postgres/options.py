"""The postgres store's options: what users write under ``source.params`` / ``destinations[i].params`` (the
field docs are the parameter reference, docs/manual/store-parameters.md), checked with PostgreSQL's naming
rules (:data:`NAMING`) by the SQL kit's ``SourceParams`` and ``SinkParams``; what only the target can tell
(an upsert's key, ``distributed_by``'s columns) is checked at prepare."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from wormhole.options import Problems, join_path, opt
from wormhole.plugins.sql import check_column_types
from wormhole.plugins.sql.sink_options import SinkParams
from wormhole.plugins.sql.source_options import (
    ConnectionKeys,
    Endpoint,
    Naming,
    ServerKeys,
    SourceParams,
    check_connection,
)

MAX_IDENTIFIER_BYTES = 63
"""PostgreSQL's limit on a name (NAMEDATALEN - 1, in bytes): a longer one is cut silently by the server,
so it is refused here instead."""

DEFAULT_PORT = 5432


def check_identifier(name: str, path: str, problems: Problems) -> None:
    size = len(name.encode())
    if not name:
        problems.add(path, "must not be empty")
    elif size > MAX_IDENTIFIER_BYTES:
        problems.add(path, f"is {size} bytes long; PostgreSQL names have at most {MAX_IDENTIFIER_BYTES} "
                           "(a longer one is cut by the server)")
    elif "\x00" in name:
        problems.add(path, f"{name!r} is not a valid PostgreSQL name (NUL)")


NAMING = Naming("postgres", DEFAULT_PORT, check_identifier)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerOptions(ServerKeys):
    """The connection keys a postgres source and a postgres destination share."""

    host: str = opt("127.0.0.1", nonempty=True)
    """The server's host name or address (Greenplum: the coordinator's)."""
    port: int = opt(DEFAULT_PORT, min=1, max=65535)
    connect_timeout_s: float = opt(10.0, min=1.0)
    """Seconds to wait for a connection before the attempt fails (libpq counts whole seconds)."""
    connect_retries: int = opt(3, min=1, max=20)
    """Attempts to connect (a refused or dropped connection is retried with backoff; bad credentials are not)."""

    def endpoint(self, database: str) -> Endpoint:
        return Endpoint(self.host, self.port, self.user, self.password, self.password_env, database)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardConnection(ConnectionKeys):
    """One entry of a sharded source's ``connections``."""

    port: int = opt(DEFAULT_PORT, min=1, max=65535)
    schema: str | None = opt(None, nonempty=True)
    """The schema of this shard's tables; default the source's ``schema``."""

    def check(self, path: str, problems: Problems) -> None:
        check_connection(NAMING, self.database, self.schema, self.tables, self.password, self.password_env, path,
                         problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresReaderOptions(ServerOptions, SourceParams):
    database: str | None = opt(None, nonempty=True)
    """The database of ``table`` or ``query``; not with ``connections``."""
    schema: str = opt("public", nonempty=True)
    """The schema of ``table`` (and the default of each connection's, and of the ``tables`` entries without
    a dot)."""
    table: str | None = opt(None, nonempty=True)
    """The table (or view) to read; not with ``query``."""
    tables: tuple[str, ...] | None = opt(None, min_items=1)
    """Many tables of ``database``, each read once as a table of its own (a database task): globs (``*``, ``?``,
    ``[...]``) over ``schema.table``, or without a dot over the tables of ``schema``; an entry starting with
    ``!`` excludes what it matches (``["shop.*", "!shop.tmp_*"]``). Base and partitioned tables only (no views,
    no partitions: a partitioned table reads them all); an entry that matches no table is an error. Not with
    ``table``, ``query``, ``columns``, ``where``, ``split_pk`` or ``connections``."""
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
    SCHEMA_KEY: ClassVar[str] = "schema"
    SCHEMAS_IN_DATABASE: ClassVar[bool] = True

    def dates(self) -> str:
        return self.special_dates

    def schema_of(self, entry: ShardConnection | None, endpoint: Endpoint) -> str:
        return self.schema if entry is None else entry.schema or self.schema


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresWriterOptions(ServerOptions, SinkParams):
    database: str = opt(nonempty=True)
    """The database of the target table."""
    schema: str = opt("public", nonempty=True)
    """The schema of the target table (and of the ``wormhole_splits`` marker table)."""
    table: str = opt(nonempty=True)
    """The target table; it must exist unless ``create_table`` (with ``staging``, its structure is copied)."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Target column names, positionally matching the source schema; default the source's names. A name
    matches the target's column of that exact name, else its only column of that name ignoring case."""
    write_mode: Literal["insert", "upsert"] = "insert"
    """``insert`` (a duplicate key rejects the row) or ``upsert``: each batch is COPY'd into a temporary
    table, then ``INSERT ... ON CONFLICT (upsert_key) DO UPDATE`` of every written column."""
    upsert_key: tuple[str, ...] | None = opt(None, min_items=1)
    """Columns of the upsert's ON CONFLICT (a unique index must cover exactly them); default the target's
    primary key. Only with write_mode 'upsert'."""
    load: Literal["append", "truncate", "staging"] = "append"
    """``append``: each split is committed with its marker row in one transaction; a rollback runs
    ``rollback_sql`` or, without it, leaves the rows and says so. ``truncate``: TRUNCATE at prepare (in the
    transaction that records it, so a resumed run does not truncate again), then as ``append``.
    ``staging``: rows go to a table created ``LIKE`` the target ``INCLUDING ALL``; commit swaps it in
    (DROP the target, RENAME the staging table) in one transaction, rollback drops it."""
    create_table: bool = False
    """Create the target from the source's schema when it does not exist (types: docs/manual/postgres.md)."""
    column_types: dict[str, str] | None = None
    """In a database task (``source.params.tables``): the type a column gets in a table created here, in this
    store's words, overriding the translation of the source's type (docs/manual/types.md, *Whole-database DDL*),
    keyed ``"table.column"`` or ``"schema.table.column"`` by the source's names (the longer key wins). A column
    whose source type has no exact type here must be named so: the plan says which and the choices."""
    distributed_by: tuple[str, ...] | None = opt(None, min_items=1)
    """Greenplum: the distribution key of a table wormhole creates (``DISTRIBUTED BY (...)``). Only with
    create_table; PostgreSQL itself refuses the clause."""
    pre_sql: tuple[str, ...] = ()
    """Statements run before any row is written (each in its own transaction, in order); not again when a
    run resumes one that got through prepare."""
    post_sql: tuple[str, ...] = ()
    """Statements run at commit in the commit's transaction, after the rows are in place (with staging:
    after the swap): if one fails, the commit (and the swap) is undone. No statement that cannot run
    inside a transaction block (VACUUM, CREATE INDEX CONCURRENTLY)."""
    rollback_sql: tuple[str, ...] = ()
    """Statements that undo an ``append`` or ``truncate`` load when the destination rolls back."""
    verify: Literal["count"] | None = None
    """``count``: at commit, the table written must hold exactly the rows written (plus, for append, the
    rows it held before); a difference fails the destination. Needs write_mode insert."""
    staging_table: str | None = opt(None, nonempty=True)
    """Name of the staging table; default ``<table>__wh<task id>_<run id>_<task database id>`` (cut to 63
    bytes). An existing table by that name fails the destination at prepare unless it is a marked leftover
    of this task and destination: wormhole never drops a table it did not create."""
    batch_size: int = opt(65536, min=1, max=1_000_000)
    """Most rows per COPY; a split's COPYs share its transaction."""
    copy_format: Literal["auto", "text"] = "auto"
    """``auto``: COPY in binary when every target column's type has a binary form wormhole makes (chosen at
    prepare from the catalog; the server's COPY costs less), else text; ``text``: always text (a server
    without binary COPY)."""
    retries: int = opt(3, min=0, max=20)
    """Retries of a batch after a transient error (deadlock, serialization failure, lock not available,
    lost connection); a split whose transaction is lost is written again from its start."""
    retry_wait_s: float = opt(0.5, min=0.0)
    """First wait before a retry; it doubles each time (at most 30 s). A stopping task ends the wait at once."""

    NAMING: ClassVar[Naming] = NAMING
    TARGET_KEYS: ClassVar[tuple[str, ...]] = ("database", "schema", "table")
    NAME_LISTS: ClassVar[tuple[str, ...]] = ("columns", "upsert_key", "distributed_by")

    def check_keys(self, path: str, problems: Problems) -> None:
        check_column_types(self.column_types, join_path(path, "column_types"), problems)
        if self.upsert_key is not None and self.write_mode != "upsert":
            problems.add(join_path(path, "upsert_key"), "only with write_mode 'upsert'")
        if self.distributed_by is not None and not self.create_table:
            problems.add(join_path(path, "distributed_by"), "only with create_table (it is part of the CREATE "
                                                            "TABLE wormhole runs)")


"""The mysql store's options: what users write under ``source.params`` / ``destinations[i].params`` (the
field docs are the parameter reference, docs/manual/store-parameters.md), checked with MySQL's naming rules
(:data:`NAMING`) by the SQL kit's ``SourceParams`` and ``SinkParams``."""

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
    check_failover,
    servers,
)

MAX_IDENTIFIER = 64
"""MySQL's limit on database, table and column names."""


def check_identifier(name: str, path: str, problems: Problems) -> None:
    if not name:
        problems.add(path, "must not be empty")
    elif len(name) > MAX_IDENTIFIER:
        problems.add(path, f"is {len(name)} characters long; MySQL names have at most {MAX_IDENTIFIER}")
    elif name != name.rstrip(" ") or "\x00" in name:
        problems.add(path, f"{name!r} is not a valid MySQL name (trailing space or NUL)")


NAMING = Naming("mysql", 3306, check_identifier)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardConnection(ConnectionKeys):
    """One entry of a sharded source's ``connections``."""

    port: int = opt(NAMING.default_port, min=1, max=65535)
    failover_hosts: tuple[str, ...] = ()
    """Servers tried in order when host:port does not answer (``host:port``; without a port, ``port``)."""

    def check(self, path: str, problems: Problems) -> None:
        check_connection(NAMING, self.database, None, self.tables, self.password, self.password_env, path, problems)
        check_failover(self.failover_hosts, NAMING.default_port, path, problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerOptions(ServerKeys):
    """The connection keys a mysql source and a mysql destination share."""

    port: int = opt(NAMING.default_port, min=1, max=65535)
    failover_hosts: tuple[str, ...] = ()
    """Servers tried in order when host:port does not answer (``host:port``; without a port, ``port``):
    the first that answers is used and named in the log; when none does, the error gives each one's reason."""

    def check_servers(self, path: str, problems: Problems) -> None:
        check_failover(self.failover_hosts, NAMING.default_port, path, problems)


@dataclass(frozen=True, slots=True, kw_only=True)
class MysqlReaderOptions(ServerOptions, SourceParams):
    database: str | None = opt(None, nonempty=True)
    """The database of ``table`` or ``query`` (and of the ``tables`` entries without a dot); not with
    ``connections``."""
    table: str | None = opt(None, nonempty=True)
    """The table to read; not with ``query`` or ``connections``."""
    tables: tuple[str, ...] | None = opt(None, min_items=1)
    """Many tables, each read once as a table of its own (a database task): globs (``*``, ``?``, ``[...]``) over
    ``database.table``, or without a dot over the tables of ``database``; an entry starting with ``!`` excludes
    what it matches (``["shop.*", "!shop.tmp_*"]``). Base tables only (no views); an entry that matches no table
    is an error. ``database`` may be left out when every entry names its database. Not with ``table``,
    ``query``, ``columns``, ``where``, ``split_pk`` or ``connections``."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Columns to read, in this order; default every column of the (first) table."""
    where: str | None = opt(None, nonempty=True)
    """An SQL condition on every table read (trusted text from the task author)."""
    split_pk: str | None = opt(None, nonempty=True)
    """An integer or string column to cut each table into key ranges (DataX's splitPk)."""
    split_factor: int = opt(5, min=1, max=100)
    """A single table with ``split_pk`` is cut into channels x split_factor ranges (DataX: 5)."""
    query: str | None = opt(None, nonempty=True)
    """A SELECT read as it is, without splitting (one split per connection); excludes table/columns/where/split_pk.
    A trailing ``;`` is dropped (the query is read as a subquery)."""
    connections: tuple[ShardConnection, ...] | None = opt(None, min_items=1)
    """A sharded source: several hosts/databases, each with its tables; excludes host/port/database/table."""
    estimate: Literal["stats", "count", "none"] = "stats"
    """How the reader periphery estimates the rows: information_schema statistics (cheap, approximate),
    an exact ``COUNT(*)`` under ``count_timeout_s``, or not at all."""
    count_timeout_s: float = opt(10.0, min=0.1)
    """``estimate: count``: a COUNT(*) slower than this is abandoned and the run goes on without an estimate."""
    zero_dates: Literal["keep", "null", "reject"] = "keep"
    """A zero or partial date (``0000-00-00``) has no Python value: keep its text (a MySQL destination
    stores it again as it was), read it as NULL, or reject the row to the dirty-record file."""
    connect_retries: int = opt(3, min=1, max=20)
    """Attempts to connect (a refused or dropped connection is retried with backoff; bad credentials are not)."""

    NAMING: ClassVar[Naming] = NAMING

    def dates(self) -> str:
        return self.zero_dates

    def failover(self, entry: ShardConnection | None) -> tuple[tuple[str, int], ...]:
        keys = self if entry is None else entry
        return servers(keys.failover_hosts, keys.port)


@dataclass(frozen=True, slots=True, kw_only=True)
class MysqlWriterOptions(ServerOptions, SinkParams):
    database: str = opt(nonempty=True)
    """The database of the target table."""
    table: str = opt(nonempty=True)
    """The target table; it must exist (with ``staging``, its structure is copied)."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Target column names, positionally matching the source schema; default the source's names."""
    write_mode: Literal["insert", "replace", "upsert"] = "insert"
    """``insert`` (a duplicate key rejects the row), ``replace`` (REPLACE INTO), ``upsert``
    (INSERT ... ON DUPLICATE KEY UPDATE of every written column)."""
    load: Literal["append", "truncate", "staging"] = "append"
    """``append``: rows are added to the target, each split in one transaction with its marker row; a
    rollback runs ``rollback_sql`` or, without it, leaves the rows and says so. ``truncate``: the target is emptied
    first (TRUNCATE TABLE), then as ``append``. ``staging``: rows go to a staging table created like
    the target; commit swaps it in with one atomic RENAME TABLE, rollback drops it."""
    method: Literal["auto", "load_data", "insert"] = "auto"
    """``load_data``: LOAD DATA LOCAL INFILE from an in-memory buffer (fastest); ``insert``: multi-row
    INSERT statements; ``auto``: load_data when the server allows local_infile and write_mode is not
    upsert, else insert."""
    batch_size: int = opt(16384, min=1, max=1_000_000)
    """Most rows per statement (one LOAD DATA or INSERT); a split's statements share its transaction."""
    pre_sql: tuple[str, ...] = ()
    """Statements run before any row is written (on the target database, in order)."""
    post_sql: tuple[str, ...] = ()
    """Statements run at commit, after the rows are in place (with staging: after the swap)."""
    rollback_sql: tuple[str, ...] = ()
    """Statements that undo an ``append`` or ``truncate`` load when the destination rolls back."""
    verify: Literal["count"] | None = None
    """``count``: at commit, the table written must hold exactly the rows written (plus, for append,
    the rows it held before); a difference fails the destination. Needs write_mode insert."""
    staging_table: str | None = opt(None, nonempty=True)
    """Name of the staging table; default ``<table>__wh<task id>_<run id>_<task database id>`` (cut to 64
    characters). An existing table by that name fails the destination at prepare unless it is a marked
    leftover of this task and destination (see :mod:`.writer`): wormhole never drops a table it did not
    create."""
    create_table: bool = False
    """In a database task (``source.params.tables``), create each missing target table from the source's
    definition (types: docs/manual/types.md, *Whole-database DDL*). In a single-table task it is not done yet:
    a missing table fails the destination at prepare, saying create_table needs a database task."""
    column_types: dict[str, str] | None = None
    """In a database task (``source.params.tables``): the type a column gets in a table created here, in this
    store's words, overriding the translation of the source's type (docs/manual/types.md, *Whole-database DDL*),
    keyed ``"table.column"`` or ``"schema.table.column"`` by the source's names (the longer key wins). A column
    whose source type has no exact type here must be named so: the plan says which and the choices."""
    strict: bool = True
    """Run the session in strict SQL mode, so a value the column cannot hold is an error (a rejected
    row), never silently truncated."""
    retries: int = opt(3, min=0, max=20)
    """Retries of a batch after a transient error (lock wait timeout, deadlock, lost connection)."""
    retry_wait_s: float = opt(0.5, min=0.0)
    """First wait before a retry; it doubles each time (at most 30 s). A stopping task ends the wait at once."""

    NAMING: ClassVar[Naming] = NAMING
    FOLDS_CASE: ClassVar[bool] = True
    VERIFY_WHY: ClassVar[str] = "replace and upsert may rightly change fewer rows than they write"

    def check_keys(self, path: str, problems: Problems) -> None:
        check_column_types(self.column_types, join_path(path, "column_types"), problems)
        if self.method == "load_data" and self.write_mode == "upsert":
            problems.add(join_path(path, "method"), "load_data cannot upsert; use method 'insert' or 'auto'")

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.host, self.port, self.user, self.password, self.password_env, self.database,
                        servers(self.failover_hosts, self.port))

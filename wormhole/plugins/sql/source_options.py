"""What the SQL stores' source params share: where to connect, the checks across keys, and the shapes the
params resolve to.

Each store declares its own options dataclasses (their fields and the docstrings under them are the
store's parameter reference, in the order users read it) and mixes in :class:`SourceParams`, which checks
them and resolves them into one of three shapes, a tagged union the splitter and reader work with:
:class:`TableSource` (one table), :class:`QuerySource` (a query, on one database or on each connection)
or :class:`ShardedSource` (tables on several connections). Identifiers are checked by the store's
naming rules; ``where`` and ``query`` are SQL text from the task author and run as given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from wormhole.database.facet import DatabaseSource, entry_problem
from wormhole.database.model import TablePatterns
from wormhole.options import Problems, join_path, opt
from wormhole.plugins.sql import check_names, check_where, parse_server

Estimate = Literal["stats", "count", "none"]


@dataclass(frozen=True, slots=True)
class Naming:
    """A store's rules for what its params name."""

    name: str
    """The plugin's name: errors carry it, and :func:`wormhole.sql_text.where_problem` reads SQL in it."""
    default_port: int
    check_identifier: Callable[[str, str, Problems], None]
    """A database, schema, table or column name the server can hold, else a problem at the path given."""


def check_credentials(password: str | None, password_env: str | None, path: str, problems: Problems) -> None:
    if password is not None and password_env is not None:
        problems.add(join_path(path, "password_env"), "give either password or password_env, not both")


def check_failover(entries: tuple[str, ...], default_port: int, path: str, problems: Problems) -> None:
    for i, entry in enumerate(entries):
        if parse_server(entry, default_port) is None:
            problems.add(join_path(join_path(path, "failover_hosts"), i),
                         f"{entry!r} is not host, host:port or [ipv6]:port")


def servers(entries: tuple[str, ...], port: int) -> tuple[tuple[str, int], ...]:
    """The (checked) ``failover_hosts`` entries as (host, port); an entry without a port has ``port``."""
    return tuple(s for s in (parse_server(e, port) for e in entries) if s is not None)


TABLES_EXCLUDE: dict[str, str] = {
    "table": "give either table or tables",
    "query": "give either query or tables",
    "columns": "tables reads every column of each table",
    "split_pk": "each table is split by its own primary key",
    "connections": "tables names the tables of one server",
}
"""The keys that say what one table (or query) reads, refused beside ``tables``, and why."""


def check_tables(params: Any, keys: tuple[str, ...], path: str, problems: Problems) -> None:
    """``tables`` (a database task): each entry a pattern, and none of ``keys`` (those of
    :data:`TABLES_EXCLUDE` the store has) beside it."""
    for key in keys:
        if getattr(params, key) is not None:
            problems.add(join_path(path, key), f"not with tables ({TABLES_EXCLUDE[key]})")
    for i, entry in enumerate(params.tables):
        problem = entry_problem(entry)
        if problem is not None:
            problems.add(join_path(join_path(path, "tables"), i), problem)


def check_connection(naming: Naming, database: str, schema: str | None, tables: tuple[str, ...] | None,
                     password: str | None, password_env: str | None, path: str, problems: Problems) -> None:
    """One entry of a sharded source's ``connections``: its names and its credentials."""
    naming.check_identifier(database, join_path(path, "database"), problems)
    if schema is not None:
        naming.check_identifier(schema, join_path(path, "schema"), problems)
    check_names(tables, join_path(path, "tables"), problems, naming.check_identifier)
    check_credentials(password, password_env, path, problems)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where to connect: one server and database, with its credentials (never logged)."""

    host: str
    port: int
    user: str
    password: str | None
    password_env: str | None
    database: str
    failover: tuple[tuple[str, int], ...] = ()
    """Servers tried in order when host:port does not answer (``failover_hosts``)."""

    @property
    def servers(self) -> tuple[tuple[str, int], ...]:
        """Every server of this endpoint, in the order they are tried."""
        return ((self.host, self.port), *self.failover)

    @property
    def mark(self) -> str:
        """The resource mark of splits read from here: ``host:port/database``."""
        return f"{self.host}:{self.port}/{self.database}"

    def __repr__(self) -> str:  # keep the password out of any log line or traceback
        return f"Endpoint({self.user}@{self.mark})"


@dataclass(frozen=True, slots=True)
class Shard:
    """One connection of a source, the schema of its tables and the tables read there (none for a query).
    A MySQL schema is its database."""

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
    estimate: Estimate = "stats"
    count_timeout_s: float = 10.0
    dates: str = ""
    """What the reader does with a date Python cannot hold: the store's own option (mysql ``zero_dates``,
    postgres ``special_dates``)."""


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


SqlSource = TableSource | QuerySource | ShardedSource
"""A SQL store's source as the splitter and reader see it; ``kind`` tells which."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerKeys:
    """The connection keys every SQL store's source and destination declare (the store's ``ServerOptions``
    gives ``port`` its default, adds its own keys, and redeclares a key whose doc or limits are its own:
    a redeclared field keeps its place, so the parameter reference reads in this order)."""

    host: str = opt("127.0.0.1", nonempty=True)
    """The server's host name or address."""
    port: int = opt(min=1, max=65535)
    """The server's TCP port."""
    user: str = opt(nonempty=True)
    """The user to connect as."""
    password: str | None = None
    """The password, inline (never logged or printed; prefer ``password_env``)."""
    password_env: str | None = opt(None, nonempty=True)
    """Name of an environment variable holding the password (keeps secrets out of the task row)."""
    connect_timeout_s: float = opt(10.0, min=0.1)
    """Seconds to wait for a connection before the attempt fails."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionKeys:
    """The keys of one entry of a sharded source's ``connections`` every SQL store declares (its
    ``ShardConnection`` gives ``port`` its default and adds its own keys), what :class:`SourceParams` reads."""

    host: str = opt(nonempty=True)
    """This shard's host."""
    port: int = opt(min=1, max=65535)
    """This shard's port."""
    database: str = opt(nonempty=True)
    """This shard's database."""
    tables: tuple[str, ...] | None = opt(None, min_items=1)
    """Tables to read on this connection (every one must have the source's columns); not with ``query``."""
    user: str | None = opt(None, nonempty=True)
    """Credentials of this connection; default the source's ``user`` / ``password`` / ``password_env``."""
    password: str | None = None
    """This shard's password, inline (never logged or printed)."""
    password_env: str | None = opt(None, nonempty=True)
    """Name of an environment variable holding this shard's password."""


class SourceParams:
    """The checks across keys and the resolution of a SQL store's flat source params, mixed into the store's
    options dataclass (which declares the keys read here)."""

    __slots__ = ()
    NAMING: ClassVar[Naming]
    NAMED_KEYS: ClassVar[tuple[str, ...]] = ("table", "split_pk", "database")
    """The keys holding one identifier, checked in this order."""
    SCHEMA_KEY: ClassVar[str] = "database"
    """The key naming the schema of ``table`` and of the ``tables`` entries without a dot (MySQL: its database)."""
    SCHEMAS_IN_DATABASE: ClassVar[bool] = False
    """The store's schemas live inside the database it connects to (PostgreSQL): ``tables`` needs ``database``."""

    host: str
    port: int
    user: str
    password: str | None
    password_env: str | None
    connect_timeout_s: float
    connect_retries: int
    database: str | None
    table: str | None
    tables: tuple[str, ...] | None
    columns: tuple[str, ...] | None
    where: str | None
    split_pk: str | None
    split_factor: int
    query: str | None
    connections: tuple[Any, ...] | None
    estimate: Estimate
    count_timeout_s: float

    def check(self, path: str, problems: Problems) -> None:
        check_credentials(self.password, self.password_env, path, problems)
        self.check_servers(path, problems)
        check_names(self.columns, join_path(path, "columns"), problems, self.NAMING.check_identifier)
        check_where(self.where, path, problems, self.NAMING.name)
        for key in self.NAMED_KEYS:
            value = getattr(self, key)
            if value is not None:
                self.NAMING.check_identifier(value, join_path(path, key), problems)
        if self.tables is not None:
            check_tables(self, tuple(TABLES_EXCLUDE), path, problems)
            self._check_tables_database(self.tables, path, problems)
            return
        if self.connections is not None:
            self._check_connections(self.connections, path, problems)
        else:
            if self.database is None:
                problems.add(join_path(path, "database"), "is required (or give connections)")
            if self.query is None and self.table is None:
                problems.add(join_path(path, "table"), "is required (or give tables or a query)")
        if self.query is not None:
            for key in ("table", "columns", "where", "split_pk"):
                if getattr(self, key) is not None:
                    problems.add(join_path(path, key), "not with query (the query says what to read)")

    def check_servers(self, path: str, problems: Problems) -> None:
        """The server keys beside host and port (none unless the store has some)."""

    def _check_tables_database(self, tables: tuple[str, ...], path: str, problems: Problems) -> None:
        """``database`` with ``tables``: PostgreSQL's schemas are in one, so it is required; MySQL's databases are
        its schemas, so it may be left out when every entry names its own."""
        if self.database is not None:
            return
        where = join_path(path, "database")
        if self.SCHEMAS_IN_DATABASE:
            problems.add(where, "is required (the database whose tables tables names)")
            return
        bare = [entry for entry in tables if "." not in entry and entry_problem(entry) is None]
        if bare:
            problems.add(where, f"is required by the tables entries that name no database "
                                f"({', '.join(repr(e) for e in bare)}): give database, or write each as "
                                f"'database.table'")

    def _check_connections(self, connections: tuple[ConnectionKeys, ...], path: str, problems: Problems) -> None:
        """Sharded params: each connection names its database and tables, unless a query says what to read."""
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

    def dates(self) -> str:
        """The store's option for dates Python cannot hold (:attr:`SourceSettings.dates`)."""
        return ""

    def failover(self, entry: Any) -> tuple[tuple[str, int], ...]:
        """The failover servers of the source's own server (``entry`` None) or of a connection."""
        return ()

    def schema_of(self, entry: Any, endpoint: Endpoint) -> str:
        """The schema of the tables read on ``endpoint``: its database, unless the store has schemas."""
        return endpoint.database

    def resolve(self) -> SqlSource | DatabaseSource:
        """The shape these (checked) params describe: what the splitter and reader work with, or with ``tables``
        the many tables of a database task (:class:`~wormhole.database.facet.DatabaseSource`)."""
        if self.tables is not None:
            patterns = TablePatterns.parse(self.tables, getattr(self, self.SCHEMA_KEY))
            return DatabaseSource(params=self, patterns=patterns, schema_key=self.SCHEMA_KEY)
        settings: dict[str, Any] = {
            "connect_timeout_s": self.connect_timeout_s, "connect_retries": self.connect_retries,
            "estimate": self.estimate, "count_timeout_s": self.count_timeout_s, "dates": self.dates()}
        query = None if self.query is None else self.query.rstrip().rstrip(";").rstrip() or self.query
        if self.connections is None:
            assert self.database is not None  # check() requires it
            endpoint = self.source_endpoint(self.database)
            schema = self.schema_of(None, endpoint)
            if query is not None:
                return QuerySource(shards=(Shard(endpoint, schema, ()),), query=query, **settings)
            assert self.table is not None  # check() requires a table or a query
            return TableSource(shards=(Shard(endpoint, schema, (self.table,)),), selection=self._selection(),
                               **settings)
        shards = []
        for c in self.connections:
            endpoint = self._shard_endpoint(c)
            shards.append(Shard(endpoint, self.schema_of(c, endpoint), c.tables or ()))
        if query is not None:
            return QuerySource(shards=tuple(shards), query=query, **settings)
        return ShardedSource(shards=tuple(shards), selection=self._selection(), **settings)

    def source_endpoint(self, database: str) -> Endpoint:
        """The source's own server (host, port, credentials, failover servers), in ``database``."""
        return Endpoint(self.host, self.port, self.user, self.password, self.password_env, database,
                        self.failover(None))

    def _selection(self) -> Selection:
        return Selection(columns=self.columns, where=self.where, split_pk=self.split_pk,
                         split_factor=self.split_factor)

    def _shard_endpoint(self, c: ConnectionKeys) -> Endpoint:
        # The user and the secret default separately; a connection's password or password_env
        # replaces the source's pair as a whole.
        own_secret = c.password is not None or c.password_env is not None
        return Endpoint(c.host, c.port, c.user or self.user, c.password if own_secret else self.password,
                        c.password_env if own_secret else self.password_env, c.database, self.failover(c))

"""The contract of a SQL destination's DDL for a database task (:mod:`wormhole.database.ddl` translates and
runs it): a declared type and a default in no store's words, a table's translated plan, the statements a
destination runs (:class:`TableDdl`), and the Protocols each store's DDL dialect and session satisfy
(:class:`~wormhole.plugins.facets.DdlFacet`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from wormhole.database.model import ColumnDef, ForeignKeyDef, IndexDef, TableRef
from wormhole.errors import InvalidTaskConfig

Kind = Literal[
    "int", "bool", "decimal", "float4", "float8", "char", "varchar", "text", "enum", "set", "binary",
    "varbinary", "blob", "bit", "varbit", "date", "datetime", "timestamptz", "time", "timetz", "year", "interval",
    "json", "jsonb", "uuid", "inet", "macaddr", "xml", "array", "other"]
"""The neutral type families a store's declared type is read as (:class:`SqlType`)."""


@dataclass(frozen=True, slots=True)
class SqlType:
    """A declared column type in no store's words.

    ``length``: an int's bytes (1, 2, 3, 4, 8), a char/varchar/binary/bit's declared length, a text or blob's
    most bytes (MySQL's TINYTEXT 255 ... LONGTEXT 2**32 - 1; None: unbounded); ``precision``/``scale``: a
    decimal's digits (None: declared without), a date-time's fractional-second digits in ``precision`` (None:
    the store's default)."""

    kind: Kind
    declared: str
    """The source's own text, for messages."""
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    unsigned: bool = False
    labels: tuple[str, ...] = ()
    """An enum's or set's labels."""
    element: SqlType | None = None
    """An array's element type."""


@dataclass(frozen=True, slots=True)
class Default:
    """A column default every SQL store can spell: a literal or the current date/time."""

    kind: Literal["null", "number", "string", "bool", "now", "today", "clock"]
    """``null``: NULL (no default, as a column without one); ``now``: CURRENT_TIMESTAMP; ``today``: CURRENT_DATE;
    ``clock``: CURRENT_TIME."""
    value: str = ""
    """A number's text, a string's value, ``true`` / ``false``."""


@dataclass(frozen=True, slots=True)
class Mapped:
    """A destination's type for a column, with a note when it is not the same type under another name."""

    type_sql: str
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """No destination type holds the column's values as they are: the user picks one of ``choices``."""

    why: str
    choices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TargetName:
    """Where a table goes in a destination: ``schema`` is a MySQL database or a PostgreSQL schema (None for
    sqlite, whose table is in the destination's file)."""

    schema: str | None
    table: str

    @property
    def label(self) -> str:
        return self.table if self.schema is None else f"{self.schema}.{self.table}"


@dataclass(frozen=True, slots=True)
class PlannedColumn:
    """A column as the destination will declare it."""

    name: str
    type_sql: str
    nullable: bool
    default_sql: str | None = None
    """The default, in the destination's words (None: none)."""
    comment: str | None = None
    auto_increment: bool = False
    source_type: str = ""
    """The source's declared type (``wormhole plan`` shows both)."""


@dataclass(frozen=True, slots=True)
class PlannedForeignKey:
    definition: ForeignKeyDef
    ref_target: TargetName


@dataclass(frozen=True, slots=True)
class TablePlan:
    """Everything a destination's dialect needs to write a table's statements: already translated."""

    source: TableRef
    target: TargetName
    columns: tuple[PlannedColumn, ...]
    primary_key: tuple[str, ...]
    indexes: tuple[IndexDef, ...]
    foreign_keys: tuple[PlannedForeignKey, ...]
    comment: str | None
    source_plugin: str
    key_during_load: bool = True
    """The load needs the primary key (an upsert finds its rows by it); else a store that builds it faster
    after the rows are in (:attr:`~wormhole.plugins.sql.ddl.SqlDdl.key_after_load`) adds it then."""
    indexes_with_table: bool = False
    """A small table: its primary key and indexes are made with it (in CREATE TABLE where the store can, else
    right after it), since building them after a load of a few rows costs a statement each and saves nothing."""


@dataclass(frozen=True, slots=True)
class SequenceStep:
    """Sets a column's auto-increment past the rows loaded. ``max_sql`` (when not None) is a query returning one
    value, the next one to give; ``set_sql`` is then run with ``{next}`` replaced by it (MySQL's ``ALTER TABLE
    ... AUTO_INCREMENT = n`` takes no expression). Without ``max_sql``, ``set_sql`` does it alone (PostgreSQL's
    ``setval``)."""

    column: str
    set_sql: str
    max_sql: str | None = None


@dataclass(frozen=True, slots=True)
class TableDdl:
    """A table's DDL in one destination, in the order a database task runs it (module docstring)."""

    target: TargetName
    columns: tuple[PlannedColumn, ...]
    create: tuple[str, ...]
    """CREATE TABLE and its COMMENT statements."""
    after_load: tuple[str, ...] = ()
    """Secondary indexes and unique constraints, run once the table's rows are in."""
    foreign_keys: tuple[str, ...] = ()
    """Run once every table of the task has loaded."""
    sequences: tuple[SequenceStep, ...] = ()
    lossy: tuple[str, ...] = ()
    """What was changed and why, for ``wormhole plan`` and the log."""
    indexed: bool = False
    """``create`` makes the key and the indexes too (:attr:`TablePlan.indexes_with_table`): ``after_load``'s
    statements are then only for a table found there (a crashed run may have made it otherwise)."""


class TypesRefused(InvalidTaskConfig):
    """Columns whose types no destination type holds as they are (a plan-time error, exit code of an invalid
    task): each problem names ``schema.table.column``, the source type and the choices."""


@dataclass(frozen=True, slots=True)
class TableState:
    """What a destination already holds at a target: ``missing``; ``same`` (the columns exist with the same
    names, in the same order; types are not compared); ``differs``, with what differs."""

    state: Literal["missing", "same", "differs"]
    differences: tuple[str, ...] = ()


class DdlSession(Protocol):
    """A connection to a destination for its DDL (:attr:`DdlFacet.open`)."""

    def state(self, ddl: TableDdl) -> TableState: ...

    def run(self, statements: Sequence[str]) -> None:
        """Each statement in order, each committed (DDL is not transactional in MySQL anyway)."""
        ...

    def set_sequences(self, ddl: TableDdl) -> None:
        """Each auto-increment column of ``ddl`` set past its loaded maximum (run after the load)."""
        ...

    def close(self) -> None: ...


class DdlDialect(Protocol):
    """A store's DDL words (one per store; :attr:`DdlFacet.dialect`)."""

    name: str

    def parse_type(self, type_sql: str) -> SqlType:
        """A column type this store declares (a source's :attr:`ColumnDef.type_sql`)."""
        ...

    def parse_default(self, default_sql: str) -> Default | None:
        """A default expression as this store's catalog shows it; None when it is no portable one."""
        ...

    def column_type(self, source: SqlType, column: ColumnDef) -> Mapped | Refused:
        """This store's type for a column of another store's ``source`` type."""
        ...

    def render_default(self, default: Default, type_sql: str) -> str | None:
        """``default`` in this store's words for a column of ``type_sql`` (None: it has no such default)."""
        ...

    def statements(self, plan: TablePlan, foreign_keys: bool) -> TableDdl:
        """The table's statements; ``lossy`` holds what this store could not keep of it."""
        ...

"""What a database task works with: the tables it selects, what each one is, and where each one goes.

The stores' catalogs (``SourceRole.catalog``) list the tables a task's patterns select and describe each
one as a :class:`TableDef`, in the source store's own words (its declared types, its default expressions);
the destination's dialect translates a TableDef into its DDL. Nothing here connects to anything.
"""

from __future__ import annotations

import fnmatch
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from wormhole.errors import InvalidTaskConfig


@dataclass(frozen=True, slots=True, order=True)
class TableRef:
    """One table of the source: its schema (a MySQL database, a PostgreSQL schema, ``main`` for sqlite) and
    its name, as the catalog spells them."""

    schema: str
    name: str

    @property
    def key(self) -> str:
        """``schema.table``: how logs, results and split ids name the table."""
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class ListedTable:
    """A table a pattern selected, with the catalog's row estimate (used to read the largest first)."""

    ref: TableRef
    estimated_rows: int


@dataclass(frozen=True, slots=True)
class ColumnDef:
    name: str
    type_sql: str
    """The type as the source declares it, in its own dialect (``decimal(12,2)``, ``int unsigned``,
    ``character varying(25)``, ``integer[]``)."""
    nullable: bool
    default_sql: str | None = None
    """The default expression as the source's catalog shows it (None: no default)."""
    comment: str | None = None
    auto_increment: bool = False
    """MySQL ``AUTO_INCREMENT``, a PostgreSQL identity or serial column, sqlite's ``INTEGER PRIMARY KEY``."""


@dataclass(frozen=True, slots=True)
class IndexDef:
    """A secondary index or unique constraint (not the primary key): created after the rows are in."""

    name: str
    columns: tuple[str, ...]
    unique: bool


@dataclass(frozen=True, slots=True)
class ForeignKeyDef:
    """Created after every table has loaded (``settings.foreign_keys``)."""

    name: str
    columns: tuple[str, ...]
    ref: TableRef
    ref_columns: tuple[str, ...]
    on_delete: str | None = None
    """``CASCADE``, ``SET NULL``, ``RESTRICT``, ``NO ACTION`` or ``SET DEFAULT`` (None: the store's default)."""
    on_update: str | None = None


@dataclass(frozen=True, slots=True)
class TableDef:
    ref: TableRef
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    indexes: tuple[IndexDef, ...] = ()
    foreign_keys: tuple[ForeignKeyDef, ...] = ()
    comment: str | None = None


class Catalog(Protocol):
    """A source store's catalog, opened from the source's options (``SourceRole.catalog``)."""

    def list_tables(self, patterns: TablePatterns) -> list[ListedTable]:
        """Every base table (not a view) the patterns select, with its row estimate."""
        ...

    def describe(self, ref: TableRef) -> TableDef:
        ...

    def describe_all(self, refs: Sequence[TableRef]) -> dict[TableRef, TableDef]:
        """Each of ``refs`` as ``describe`` gives it (a store asks its catalog for many tables at once)."""
        ...

    def close(self) -> None:
        ...


# -- table patterns ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TablePattern:
    text: str
    """As the task wrote it (``!`` included): errors name it so."""
    schema: str | None
    """The schema glob (None: the source's own schema or database)."""
    table: str
    exclude: bool

    def matches(self, ref: TableRef, default_schema: str | None) -> bool:
        schema_glob = self.schema if self.schema is not None else default_schema
        if schema_glob is None:
            return False
        return fnmatch.fnmatchcase(ref.schema, schema_glob) and fnmatch.fnmatchcase(ref.name, self.table)


@dataclass(frozen=True, slots=True)
class TablePatterns:
    """``source.params.tables``: globs (``*``, ``?``, ``[...]``) over ``schema.table`` or, without a dot, over
    the tables of the source's own schema (``database`` for MySQL, ``schema`` for PostgreSQL, the file for
    sqlite); an entry starting with ``!`` excludes what it matches. A table is selected when an include
    matches it and no exclude does. The first dot separates the schema: a table whose name has a dot is
    named with its schema (``shop.a.b``)."""

    patterns: tuple[TablePattern, ...]
    default_schema: str | None

    @classmethod
    def parse(cls, entries: Sequence[str], default_schema: str | None) -> TablePatterns:
        patterns = []
        for entry in entries:
            exclude = entry.startswith("!")
            body = entry[1:] if exclude else entry
            schema, dot, table = body.partition(".")
            patterns.append(TablePattern(entry, schema if dot else None, table if dot else body, exclude))
        return cls(tuple(patterns), default_schema)

    @property
    def schemas(self) -> tuple[str, ...]:
        """The schema globs the includes name (a catalog lists the tables of the schemas they match)."""
        found: dict[str, None] = {}
        for p in self.patterns:
            if not p.exclude:
                schema = p.schema if p.schema is not None else self.default_schema
                if schema is not None:
                    found[schema] = None
        return tuple(found)

    def select(self, tables: Iterable[ListedTable]) -> list[ListedTable]:
        """The selected tables, largest first (ties by name); raises InvalidTaskConfig naming every include
        that matched nothing, or when nothing is selected at all."""
        listed = list(tables)
        problems = [f"source.params.tables: {p.text!r} matches no table"
                    for p in self.patterns if not p.exclude
                    and not any(p.matches(t.ref, self.default_schema) for t in listed)]
        chosen = [t for t in listed
                  if any(p.matches(t.ref, self.default_schema) for p in self.patterns if not p.exclude)
                  and not any(p.matches(t.ref, self.default_schema) for p in self.patterns if p.exclude)]
        if not problems and not chosen:
            problems.append("source.params.tables: the excludes leave no table to read")
        if problems:
            raise InvalidTaskConfig(problems)
        return sorted(chosen, key=lambda t: (-t.estimated_rows, t.ref))


# -- target templates ----------------------------------------------------------------------------------

PLACEHOLDERS = ("schema", "table")


def template_problem(template: str) -> str | None:
    """Why ``template`` is not a target template (None: it is one): only ``{schema}`` and ``{table}``."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        return f"{template!r} is not a template ({exc}; write a literal brace as {{{{ or }}}})"
    unknown = sorted({f for f in fields if f not in PLACEHOLDERS})
    if unknown:
        return f"{template!r} names {', '.join(repr('{' + f + '}') for f in unknown)}: only {{schema}} and {{table}}"
    return None


def render(template: str, ref: TableRef) -> str:
    return template.format(schema=ref.schema, table=ref.name)


def clashes(targets: dict[TableRef, str], *, fold_case: bool) -> list[str]:
    """Problems for targets that two source tables map to (case-folded where the store folds names)."""
    seen: dict[str, TableRef] = {}
    out = []
    for ref, target in targets.items():
        key = target.casefold() if fold_case else target
        if key in seen:
            out.append(f"{seen[key].key!r} and {ref.key!r} both map to {target!r}")
        else:
            seen[key] = ref
    return out

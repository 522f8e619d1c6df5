"""The sqlite store's options: what users write under ``source.params`` / ``destinations[i].params``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from wormhole.database.facet import DatabaseSource
from wormhole.database.model import TablePatterns
from wormhole.options import Problems, join_path, opt
from wormhole.plugins.sql import check_column_types, check_names, check_where
from wormhole.plugins.sql.source_options import check_tables

MAIN = "main"
"""The schema of a file's own tables, as SQLite names it (``tables`` entries without a dot are in it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SqliteReaderOptions:
    path: str = opt(nonempty=True)
    """The database file (opened read-only)."""
    table: str | None = opt(None, nonempty=True)
    """The table to read; required unless ``tables`` is given."""
    tables: tuple[str, ...] | None = opt(None, min_items=1)
    """Many tables of the file, each read once as a table of its own (a database task): globs (``*``, ``?``,
    ``[...]``) over the table names (or over ``main.table``); an entry starting with ``!`` excludes what it
    matches (``["*", "!tmp_*"]``). Tables only (no views); an entry that matches no table is an error. Not with
    ``table``, ``columns`` or ``where``."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Columns to read, in this order; default every column of the table."""
    where: str | None = opt(None, nonempty=True)
    """An SQL condition appended as ``WHERE <where>`` (trusted text from the task author)."""

    def check(self, path: str, problems: Problems) -> None:
        check_names(self.columns, join_path(path, "columns"), problems)
        check_where(self.where, path, problems, "sqlite")
        if self.tables is not None:
            check_tables(self, ("table", "columns"), path, problems)
        elif self.table is None:
            problems.add(join_path(path, "table"), "is required (or give tables)")

    def resolve(self) -> SqliteReaderOptions | DatabaseSource:
        """These options, or with ``tables`` the many tables of a database task."""
        if self.tables is None:
            return self
        return DatabaseSource(params=self, patterns=TablePatterns.parse(self.tables, MAIN), schema_key=None)

    @property
    def read_table(self) -> str:
        """The table read (``table``: the options a reader gets always name one)."""
        assert self.table is not None  # check() requires it unless tables, whose options resolve to no reader's
        return self.table


@dataclass(frozen=True, slots=True, kw_only=True)
class SqliteWriterOptions:
    path: str = opt(nonempty=True)
    """The database file; it and its missing parent directories are created when needed."""
    table: str = opt(nonempty=True)
    """The target table."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Target column names, positionally matching the source schema; default the source's names."""
    write_mode: Literal["insert", "replace", "upsert"] = "insert"
    """``insert`` (a duplicate key rejects the row), ``replace`` (INSERT OR REPLACE) or ``upsert``
    (INSERT ... ON CONFLICT(key) DO UPDATE)."""
    key: tuple[str, ...] | None = opt(None, min_items=1)
    """The conflict key for ``upsert`` (a PRIMARY KEY or UNIQUE index); the primary key of a created table."""
    create: bool = True
    """Create the table from the source schema when it does not exist (in a database task: from the source's
    definition, docs/manual/types.md, *Whole-database DDL*)."""
    column_types: dict[str, str] | None = None
    """In a database task (``source.params.tables``): the type a column gets in a table created here, in this
    store's words, overriding the translation of the source's type (docs/manual/types.md, *Whole-database DDL*),
    keyed ``"table.column"`` or ``"schema.table.column"`` by the source's names (the longer key wins). A column
    whose source type has no exact type here must be named so: the plan says which and the choices."""

    def check(self, path: str, problems: Problems) -> None:
        check_names(self.columns, join_path(path, "columns"), problems)
        check_names(self.key, join_path(path, "key"), problems)
        check_column_types(self.column_types, join_path(path, "column_types"), problems)
        if self.write_mode == "upsert" and self.key is None:
            problems.add(join_path(path, "key"), "is required when write_mode is 'upsert'")
        if self.key is not None and self.columns is not None:
            missing = [k for k in self.key if k.lower() not in {c.lower() for c in self.columns}]
            if missing:
                problems.add(join_path(path, "key"), f"names columns not in columns: {', '.join(missing)}")


def single_writer_key(options: SqliteWriterOptions) -> str:
    """A destination holds its file's write lock for the whole run: one writing destination per file."""
    return "sqlite file " + os.path.abspath(options.path)


def owned_path(options: SqliteWriterOptions) -> str:
    """The database file, so no file destination's directory holds it."""
    return options.path

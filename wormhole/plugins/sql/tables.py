"""What the SQL stores' catalogs of a whole database do alike (:class:`~wormhole.database.model.Catalog`):
listing the tables a task's patterns select, and assembling a table's definition from the rows their
catalogs give, each store asking its own catalog in its own SQL (``plugins/<store>/tables.py``).

Listing: the schemas the includes' schema globs match (a system schema only when named exactly), their base
tables with the store's row estimate, less wormhole's own tables (its split markers, its task database, the
staging tables it marks), then :meth:`~wormhole.database.model.TablePatterns.select`. Describing: columns in
order, the primary key, the indexes that a destination can make again (an expression, partial, prefix or
other-method index is skipped, logged as ``catalog.index_skipped``), the foreign keys with their actions.
A task's tables are described together (:meth:`SqlCatalog.describe_all`): a store that can asks its catalog
a few statements per :data:`DESCRIBE_CHUNK` tables of a schema, not four per table (200 tables cost 800
round trips, 2 s, before anything moved).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import structlog

from wormhole.database.model import (
    ColumnDef,
    ForeignKeyDef,
    IndexDef,
    ListedTable,
    TableDef,
    TablePatterns,
    TableRef,
)
from wormhole.errors import SplitError
from wormhole.plugins.sql.staging import parse_marker

OWN_PREFIXES = ("wormhole_", "_wh_")
"""wormhole's own tables: split markers (``wormhole_splits``, sqlite's ``_wh_splits``), the task database
(``wormhole_task``...) and sqlite's staging tables (``_wh_stage_...``). Never part of a database task."""

ACTIONS = frozenset({"CASCADE", "SET NULL", "RESTRICT", "NO ACTION", "SET DEFAULT"})
DESCRIBE_CHUNK = 500
"""Tables of one schema described by one statement of each kind (the names are bound: a statement stays
well under any server's packet and parameter limits)."""


def own_table(name: str, comment: str | None) -> bool:
    """A table of wormhole's own: by its name, or the staging marker in its comment (a crashed run's leftover)."""
    return name.lower().startswith(OWN_PREFIXES) or (bool(comment) and parse_marker(comment or "") is not None)


def action(rule: str | None, defaults: Iterable[str]) -> str | None:
    """A foreign key's ON DELETE / ON UPDATE rule as the model spells it (``SET NULL``), None for the store's
    default (``defaults``: how its catalog shows a key declared without the clause)."""
    if rule is None:
        return None
    spelled = " ".join(rule.replace("_", " ").upper().split())
    return None if spelled in defaults or spelled not in ACTIONS else spelled


class KeyPart(NamedTuple):
    """One column of an index as a store's catalog lists it, in key order."""

    name: str
    """The index's name."""
    column: str | None
    """None: an expression."""
    primary: bool
    unique: bool
    skip: str | None = None
    """Why a destination cannot make the index again (a partial index, a prefix...); None: it can."""


class ForeignKeyPart(NamedTuple):
    """One column of a foreign key as a store's catalog lists it, in key order."""

    name: str
    column: str
    ref: TableRef
    ref_column: str
    on_delete: str | None
    on_update: str | None


class SqlCatalog:
    """A store's catalog on one connection: ``list_tables`` and ``describe`` from the store's parts below."""

    plugin: ClassVar[str]
    db_error: ClassVar[type[Exception]]

    def __init__(self, conn: Any, where: str) -> None:
        self.conn = conn
        self.where = where
        """The server and database (or file) messages name (``host:port/database``)."""

    # -- the store's parts -------------------------------------------------------------------------

    def schemas(self) -> list[str]:
        raise NotImplementedError

    def is_system(self, schema: str) -> bool:
        """A schema of the server's own (listed only when a pattern names it exactly)."""
        return False

    def tables(self, schemas: Sequence[str]) -> list[tuple[str, str, Any, str | None]]:
        """``(schema, table, estimated rows, comment)`` of each base table of ``schemas``."""
        raise NotImplementedError

    def find(self, ref: TableRef) -> tuple[Any, str | None] | None:
        """``(handle, comment)`` of base table ``ref`` (the handle its other parts take), None when there is none."""
        raise NotImplementedError

    def columns(self, ref: TableRef, handle: Any) -> list[ColumnDef]:
        raise NotImplementedError

    def key_parts(self, ref: TableRef, handle: Any) -> list[KeyPart]:
        """Every index's columns, the primary key's included, each index's in key order."""
        raise NotImplementedError

    def foreign_key_parts(self, ref: TableRef, handle: Any) -> list[ForeignKeyPart]:
        raise NotImplementedError

    # The same parts for many tables of one schema at once, keyed by table name: a store whose catalog can
    # answer for many tables in one statement overrides them; these ask table by table.

    def find_all(self, schema: str, names: Sequence[str]) -> dict[str, tuple[Any, str | None]]:
        """``find`` of each of ``names`` that is a base table of ``schema``."""
        found = {name: self.find(TableRef(schema, name)) for name in names}
        return {name: f for name, f in found.items() if f is not None}

    def columns_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[ColumnDef]]:
        return {name: self.columns(TableRef(schema, name), h) for name, h in handles.items()}

    def key_parts_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[KeyPart]]:
        return {name: self.key_parts(TableRef(schema, name), h) for name, h in handles.items()}

    def foreign_key_parts_all(self, schema: str, handles: Mapping[str, Any]) -> dict[str, list[ForeignKeyPart]]:
        return {name: self.foreign_key_parts(TableRef(schema, name), h) for name, h in handles.items()}

    # -- the catalog -------------------------------------------------------------------------------

    def list_tables(self, patterns: TablePatterns) -> list[ListedTable]:
        """The base tables ``patterns`` select, largest first; InvalidTaskConfig naming an include that matches
        none; SplitError when the catalog cannot be read."""
        globs = patterns.schemas
        try:
            schemas = [s for s in self.schemas() if any(fnmatch.fnmatchcase(s, g) for g in globs)
                       and (s in globs or not self.is_system(s))]
            found = self.tables(schemas) if schemas else []
        except self.db_error as exc:
            raise SplitError(f"cannot list the tables of {self.where}: {self.reason(exc)}", plugin=self.plugin) from exc
        listed = [ListedTable(TableRef(schema, name), max(0, int(rows or 0)))
                  for schema, name, rows, comment in found if not own_table(name, comment)]
        return patterns.select(listed)

    def describe(self, ref: TableRef) -> TableDef:
        """Table ``ref`` as its catalog describes it; SplitError naming it when it is not there (any more)."""
        try:
            found = self.find(ref)
            if found is None:
                raise SplitError(f"table {ref.key} does not exist in {self.where}", plugin=self.plugin)
            handle, comment = found
            columns = self.columns(ref, handle)
            parts = self.key_parts(ref, handle)
            foreign = self.foreign_key_parts(ref, handle)
        except self.db_error as exc:
            raise SplitError(f"cannot describe table {ref.key} in {self.where}: {self.reason(exc)}",
                             plugin=self.plugin) from exc
        return self._definition(ref, comment, columns, parts, foreign)

    def describe_all(self, refs: Sequence[TableRef]) -> dict[TableRef, TableDef]:
        """Each of ``refs`` as :meth:`describe` gives it, asked a few statements per chunk of tables of a
        schema (the ``*_all`` parts); SplitError naming the first that is not there (any more)."""
        by_schema: dict[str, list[str]] = {}
        for ref in refs:
            by_schema.setdefault(ref.schema, []).append(ref.name)
        out: dict[TableRef, TableDef] = {}
        for schema, names in by_schema.items():
            for chunk in _chunks(names):
                try:
                    found = self.find_all(schema, chunk)
                    missing = next((n for n in chunk if n not in found), None)
                    if missing is not None:
                        raise SplitError(f"table {TableRef(schema, missing).key} does not exist in {self.where}",
                                         plugin=self.plugin)
                    handles = {name: handle for name, (handle, _) in found.items()}
                    columns = self.columns_all(schema, handles)
                    parts = self.key_parts_all(schema, handles)
                    foreign = self.foreign_key_parts_all(schema, handles)
                except self.db_error as exc:
                    raise SplitError(f"cannot describe the tables of {schema} in {self.where}: {self.reason(exc)}",
                                     plugin=self.plugin) from exc
                for name in chunk:
                    ref = TableRef(schema, name)
                    out[ref] = self._definition(ref, found[name][1], columns.get(name, []), parts.get(name, []),
                                                foreign.get(name, []))
        return {ref: out[ref] for ref in refs}

    def _definition(self, ref: TableRef, comment: str | None, columns: Sequence[ColumnDef],
                    parts: Sequence[KeyPart], foreign: Sequence[ForeignKeyPart]) -> TableDef:
        primary = tuple(p.column for p in parts if p.primary and p.column is not None)
        return TableDef(ref=ref, columns=tuple(columns), primary_key=primary,
                        indexes=self._indexes(ref, [p for p in parts if not p.primary]),
                        foreign_keys=foreign_keys(foreign), comment=comment or None)

    def reason(self, exc: BaseException) -> str:
        return str(exc)

    def close(self) -> None:
        try:
            self.conn.close()
        except (self.db_error, OSError):
            pass  # a connection already dead: nothing left to release

    def __enter__(self) -> SqlCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _indexes(self, ref: TableRef, parts: Sequence[KeyPart]) -> tuple[IndexDef, ...]:
        grouped: dict[str, list[KeyPart]] = {}
        for part in parts:
            grouped.setdefault(part.name, []).append(part)
        out = []
        for name, columns in grouped.items():
            skip = next((p.skip for p in columns if p.skip), None) or \
                ("an expression index" if any(p.column is None for p in columns) else None)
            if skip is not None:
                structlog.get_logger("wormhole").warning("catalog.index_skipped", plugin=self.plugin, table=ref.key,
                                                         index=name, reason=skip)
                continue
            out.append(IndexDef(name, tuple(p.column for p in columns if p.column is not None), columns[0].unique))
        return tuple(out)


def _chunks(names: Sequence[str]) -> Iterable[list[str]]:
    """``names`` in chunks of at most :data:`DESCRIBE_CHUNK`, no two in one chunk alike but for case: MariaDB's
    catalog looks ``TABLE_NAME IN (...)`` up by name, and of ``Case`` and ``case`` finds only one."""
    left = list(dict.fromkeys(names))
    while left:
        chunk: list[str] = []
        seen: set[str] = set()
        rest: list[str] = []
        for name in left:
            if len(chunk) < DESCRIBE_CHUNK and name.casefold() not in seen:
                seen.add(name.casefold())
                chunk.append(name)
            else:
                rest.append(name)
        yield chunk
        left = rest


def foreign_keys(parts: Sequence[ForeignKeyPart]) -> tuple[ForeignKeyDef, ...]:
    grouped: dict[str, list[ForeignKeyPart]] = {}
    for part in parts:
        grouped.setdefault(part.name, []).append(part)
    return tuple(ForeignKeyDef(name, tuple(p.column for p in columns), columns[0].ref,
                               tuple(p.ref_column for p in columns), columns[0].on_delete, columns[0].on_update)
                 for name, columns in grouped.items())

"""A source table's definition (:class:`~wormhole.database.model.TableDef`) as a destination's DDL.

Pure translation: nothing here connects. Each SQL store's sink role has a
:class:`~wormhole.plugins.facets.DdlFacet`
(``registry.get(plugin).sink.ddl``) holding its :class:`DdlDialect`: how it reads its own declared types and
default expressions (as a source) and how it writes a table (as a destination). :func:`translate` goes
through a neutral vocabulary between the two (:class:`SqlType`, :class:`Default`), so each store knows only
its own words; the tables are docs/manual/types.md, *Whole-database DDL*. The contract's types live in
:mod:`wormhole.plugins.ddl` (the stores implement it) and are re-exported here for the orchestrator, which opens a
destination's session with ``facet(plugin).open(options)`` and never imports a store.

A type with no exact mapping is refused at plan time (:class:`TypesRefused`, every refused column of the table
at once, each naming ``schema.table.column``, the source type and the choices); the destination's
``column_types`` param picks one (``{"table.column": "type"}`` or ``{"schema.table.column": "type"}``) and
overrides the translation of that column whatever it would have been. What is kept but changed (a type
that holds the same values under another name, a default expression of the source's own dialect dropped,
a comment sqlite has nowhere to keep, a foreign key to a table the task does not copy) is a ``lossy`` note.

The statements come in the order a database task runs them: :attr:`TableDdl.create` before the rows,
:attr:`TableDdl.after_load` (secondary and unique indexes) once the table's rows are in (a small table's are
in ``create``: :attr:`TablePlan.indexes_with_table`),
:attr:`TableDdl.sequences` then (auto-increment set past the loaded maximum), and
:attr:`TableDdl.foreign_keys` once every table has loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from wormhole.database.model import ColumnDef, TableDef, TableRef
from wormhole.errors import InvalidTaskConfig
from wormhole.plugins import registry
from wormhole.plugins.ddl import DdlDialect as DdlDialect
from wormhole.plugins.ddl import DdlSession as DdlSession
from wormhole.plugins.ddl import Default as Default  # the contract's names, for the orchestrator
from wormhole.plugins.ddl import PlannedColumn as PlannedColumn
from wormhole.plugins.ddl import PlannedForeignKey as PlannedForeignKey
from wormhole.plugins.ddl import Refused as Refused
from wormhole.plugins.ddl import SequenceStep as SequenceStep
from wormhole.plugins.ddl import SqlType as SqlType
from wormhole.plugins.ddl import TableDdl as TableDdl
from wormhole.plugins.ddl import TablePlan as TablePlan
from wormhole.plugins.ddl import TableState as TableState
from wormhole.plugins.ddl import TargetName as TargetName
from wormhole.plugins.ddl import TypesRefused as TypesRefused
from wormhole.plugins.facets import DdlFacet


def facet(plugin: str) -> DdlFacet:
    """The DDL facet of ``plugin``'s sink; InvalidTaskConfig when the store has none."""
    sink = registry.get(plugin).sink
    found = None if sink is None else sink.ddl
    if found is None:
        raise InvalidTaskConfig([f"{plugin} cannot create tables from a database source's definitions"])
    return found


def override(overrides: Mapping[str, str], ref: TableRef, column: str) -> str | None:
    """The ``column_types`` entry of a column: ``schema.table.column`` first, then ``table.column``."""
    return overrides.get(f"{ref.schema}.{ref.name}.{column}", overrides.get(f"{ref.name}.{column}"))


def translate(table: TableDef, source_plugin: str, dest_plugin: str, dest_options: Any, target: TargetName,
              referenced: Callable[[TableRef], TargetName | None], *, foreign_keys: bool = True,
              indexes_with_table: bool = False) -> TableDdl:
    """``table`` (described by a ``source_plugin`` source) as ``dest_plugin``'s DDL at ``target``.

    ``referenced`` names where each referenced table of a foreign key goes in this destination (None: the task
    does not copy it, and the key is skipped with a lossy note); ``foreign_keys=False`` leaves every foreign key
    out, without notes. ``dest_options.column_types`` (when the options have it) overrides the translation of a
    column's type. ``indexes_with_table``: a small table's key and indexes are made with it
    (:attr:`TablePlan.indexes_with_table`). Raises :class:`TypesRefused` naming every column of the table whose
    type has no exact mapping."""
    source, dest = facet(source_plugin).dialect, facet(dest_plugin).dialect
    overrides: Mapping[str, str] = getattr(dest_options, "column_types", None) or {}
    same_store = source_plugin == dest_plugin
    problems: list[str] = []
    notes: list[str] = []
    columns = []
    for column in table.columns:
        where = f"{table.ref.key}.{column.name}"
        chosen = override(overrides, table.ref, column.name)
        if chosen is not None:
            type_sql = chosen
        elif same_store:
            type_sql = column.type_sql
        else:
            mapped = dest.column_type(source.parse_type(column.type_sql), column)
            if isinstance(mapped, Refused):
                problems.append(f"{where}: {source_plugin} type {column.type_sql!r} {mapped.why}; choose one with "
                                f"the destination's column_types {{{f'{table.ref.name}.{column.name}'!r}: ...}}: "
                                f"{' or '.join(mapped.choices)}")
                continue
            type_sql = mapped.type_sql
            if mapped.note:
                notes.append(f"{where}: {column.type_sql} -> {type_sql}: {mapped.note}")
        columns.append(PlannedColumn(column.name, type_sql, column.nullable,
                                     _default(column, source, dest, type_sql, same_store, where, notes),
                                     column.comment, column.auto_increment, column.type_sql))
    if problems:
        raise TypesRefused(problems, where=f"{dest_plugin} DDL of {table.ref.key}")
    planned_keys = []
    for fk in table.foreign_keys if foreign_keys else ():
        ref_target = referenced(fk.ref)
        if ref_target is None:
            notes.append(f"{table.ref.key}: foreign key {fk.name} skipped: {fk.ref.key} is not copied by this task")
        else:
            planned_keys.append(PlannedForeignKey(fk, ref_target))
    plan = TablePlan(table.ref, target, tuple(columns), table.primary_key, table.indexes, tuple(planned_keys),
                     table.comment, source_plugin,
                     key_during_load=getattr(dest_options, "write_mode", "insert") != "insert",
                     indexes_with_table=indexes_with_table)
    ddl = dest.statements(plan, foreign_keys)
    return dataclasses.replace(ddl, lossy=tuple(notes) + ddl.lossy)


def _default(column: ColumnDef, source: DdlDialect, dest: DdlDialect, type_sql: str, same_store: bool,
             where: str, notes: list[str]) -> str | None:
    """The column's default in the destination's words; a default that is no portable expression is kept as it
    is between two tables of one store, else dropped with a note."""
    if column.default_sql is None or column.auto_increment:
        return None  # an auto-increment column's default is its sequence: the destination makes its own
    text = column.default_sql.strip()
    parsed = source.parse_default(text)
    if parsed is not None and parsed.kind == "null":
        return None
    rendered = None if parsed is None else dest.render_default(parsed, type_sql)
    if rendered is None and same_store:
        return text
    if rendered is None:
        notes.append(f"{where}: default {text} dropped (no {dest.name} form of it)")
    return rendered


"""A database task's tables, expanded before anything is touched (:func:`expand`): the tables the patterns
select, each one's table run (its task, its targets, its DDL) and its share of the channels."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wormhole.config import EngineConf
from wormhole.database.ddl_steps import DdlSteps, PairDdl
from wormhole.database.model import ListedTable, TableDef, TablePatterns, TableRef, clashes, render
from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.options import Problems, join_path, parse_options
from wormhole.planning.channels import adjust_channel_number, speed_limits
from wormhole.plugins import registry
from wormhole.task_spec import DestinationSpec, TaskSpec

SLOTS_PER_CHANNEL = 2
SMALL_TABLE_ROWS = 50_000
"""A table estimated under this many rows counts as half a channel while it runs (:attr:`TableJob.slots`)."""

FOLDS_CASE = frozenset({"mysql", "sqlite"})
"""Stores whose table names compare without case (MySQL on case-insensitive file systems, sqlite always):
two targets differing only in case are one target there."""


def pair_id(destination: str, ref: TableRef) -> str:
    """The id of one (destination, table) pair: what its markers, checkpoint rows and result are keyed by."""
    return f"{destination}/{ref.key}"


@dataclass(frozen=True, slots=True)
class TableJob:
    """One table of the task: what it is, the table run's task, and where it goes in each destination."""

    listed: ListedTable
    definition: TableDef
    spec: TaskSpec
    """The table run's task: the source reads this table, each destination is a pair."""
    targets: Mapping[str, str]
    """Destination id -> the target, as the plan and the result show it."""
    ddl: Mapping[str, PairDdl]
    """Destination id -> its DDL, for the destinations that create their tables."""
    channels: int
    exclusive: frozenset[str] = frozenset()
    """Resources one table at a time may write (a sqlite file): a table waits while another holds one."""

    @property
    def ref(self) -> TableRef:
        return self.listed.ref

    @property
    def slots(self) -> int:
        """What the table takes of the task's channels while it runs, in half channels: a small table (one
        channel, under :data:`SMALL_TABLE_ROWS`) waits on round trips more than it moves rows, so two run in
        one channel's place."""
        if self.channels == 1 and self.listed.estimated_rows < SMALL_TABLE_ROWS:
            return 1
        return self.channels * SLOTS_PER_CHANNEL


@dataclass(frozen=True, slots=True)
class DatabasePlan:
    jobs: tuple[TableJob, ...]
    """Largest first."""
    channels: int
    """The task's channel count, shared by the tables that run at once."""
    skipped: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Tables the patterns selected that the task leaves out -> why (an incremental task's tables without
    its column, ``without_column: skip``)."""

    def to_dict(self) -> dict[str, Any]:
        return {"tables": len(self.jobs), "channels": self.channels,
                **({"skipped": dict(self.skipped)} if self.skipped else {}),
                "estimated_rows": sum(j.listed.estimated_rows for j in self.jobs),
                "order": [{"table": j.ref.key, "estimated_rows": j.listed.estimated_rows, "channels": j.channels,
                           "targets": dict(j.targets),
                           "ddl": {d: p.describe() for d, p in j.ddl.items()}} for j in self.jobs]}


def is_database_task(spec: TaskSpec) -> bool:
    return spec.source.tables is not None


def expand(spec: TaskSpec, conf: EngineConf, log: Logger, task_id: int = 0) -> DatabasePlan:
    """The tables the task reads and, for each, its table run's task and DDL; raises InvalidTaskConfig
    listing every problem (nothing is touched before this returns). ``task_id``: an unnamed incremental task's
    watermarks are kept under ``task-<id>``."""
    role = registry.source(spec.source.plugin)
    facet = role.catalog
    if facet is None:
        raise InvalidTaskConfig([f"source.params.tables: the {spec.source.plugin} store cannot list tables"])
    patterns = facet.patterns(spec.source.options)
    assert patterns is not None  # is_database_task
    listed, definitions = _catalog(facet, spec, patterns)
    log.info("database.tables_selected", tables=len(listed), patterns=list(spec.source.tables or ()),
             estimated_rows=sum(t.estimated_rows for t in listed))
    problems = Problems()
    listed, columns, skipped = _incremental_tables(spec, listed, definitions, problems)
    if problems:
        raise InvalidTaskConfig(problems.items)
    for key, why in skipped.items():
        log.warning("database.table_skipped", table=key, reason=why)
    options = {d.id: _targets(d, i, [t.ref for t in listed], problems) for i, d in enumerate(spec.destinations)}
    if problems:
        raise InvalidTaskConfig(problems.items)
    steps = DdlSteps(spec, definitions, options, {t.ref: t.estimated_rows for t in listed})
    ddl = steps.translate(problems)
    if problems:
        raise InvalidTaskConfig(problems.items)
    channels = adjust_channel_number(speed_limits(spec.settings.speed, conf)).channels
    total = sum(max(t.estimated_rows, 1) for t in listed)
    jobs = []
    for table in listed:
        ref = table.ref
        # In proportion to its rows, and no more than one per SMALL_TABLE_ROWS: more readers than a small
        # table has splits would only wait.
        share = max(1, min(channels, math.ceil(channels * max(table.estimated_rows, 1) / total),
                           math.ceil(table.estimated_rows / SMALL_TABLE_ROWS)))
        jobs.append(TableJob(
            listed=table, definition=definitions[ref],
            spec=_table_spec(spec, facet.for_table(spec.source.options, ref), ref, options, share, channels,
                             _table_incremental(spec, columns.get(ref), task_id)),
            targets={d.id: _show_target(d, options[d.id][ref]) for d in spec.destinations},
            ddl={d: by_table[ref] for d, by_table in ddl.items() if ref in by_table}, channels=share,
            exclusive=_exclusive(spec, options, ref)))
    return DatabasePlan(tuple(jobs), channels, skipped)


def _catalog(facet: Any, spec: TaskSpec, patterns: TablePatterns) -> tuple[list[ListedTable], dict[TableRef, TableDef]]:
    catalog = facet.open(spec.source.options)
    try:
        listed = patterns.select(catalog.list_tables(patterns))
        return listed, catalog.describe_all([t.ref for t in listed])
    finally:
        catalog.close()


INCREMENTAL_KINDS = frozenset({"int", "decimal", "date", "datetime", "timestamptz"})
"""The declared type families (:class:`~wormhole.plugins.ddl.SqlType`) an incremental column may have."""


def _incremental_tables(spec: TaskSpec, listed: list[ListedTable], definitions: Mapping[TableRef, TableDef],
                        problems: Problems) -> tuple[list[ListedTable], dict[TableRef, str], dict[str, str]]:
    """An incremental task's tables: the ones that have its column (each with the column as the table spells
    it), and the ones left out with why. A table without the column refuses the task unless
    ``without_column: skip``; a column of a type no watermark can follow refuses it always."""
    inc = spec.source.incremental
    if inc is None:
        return listed, {}, {}
    from wormhole.database.ddl import facet

    dialect = facet(spec.source.plugin).dialect
    fold = spec.source.plugin in FOLDS_CASE
    kept: list[ListedTable] = []
    columns: dict[TableRef, str] = {}
    missing: list[str] = []
    for table in listed:
        wanted = inc.column.lower() if fold else inc.column
        found = next((c for c in definitions[table.ref].columns if (c.name.lower() if fold else c.name) == wanted),
                     None)
        if found is None:
            missing.append(table.ref.key)
            continue
        kind = dialect.parse_type(found.type_sql).kind
        if kind not in INCREMENTAL_KINDS:
            problems.add("source.incremental.column", f"{table.ref.key}.{found.name} is {found.type_sql}; an "
                                                      "incremental column must be an integer, a decimal, a date or "
                                                      "a timestamp")
        kept.append(table)
        columns[table.ref] = found.name
    if missing and inc.without_column == "fail":
        problems.add("source.incremental.column", f"{inc.column} is not a column of {', '.join(missing)} "
                                                  "(without_column: skip leaves such tables out of the task)")
    elif missing and not kept:
        problems.add("source.incremental.column", f"{inc.column} is a column of none of the tables selected "
                                                  f"({', '.join(missing)})")
    return kept, columns, {key: f"no column {inc.column} (source.incremental.without_column: skip)"
                           for key in missing}


def _table_incremental(spec: TaskSpec, column: str | None, task_id: int) -> Any:
    """A table's incremental read: the task's, on the table's own spelling of the column, its watermarks kept
    under the task's state key (each table's apart by its pairs' ids, ``dest/schema.table``)."""
    inc = spec.source.incremental
    if inc is None or column is None:
        return None
    from wormhole.incremental import state_key

    return dataclasses.replace(inc, column=column, state_key=state_key(inc.state_key, spec.name, task_id))


def rendered(dest: DestinationSpec, ref: TableRef) -> dict[str, Any]:
    """The destination's params for table ``ref``: its target params' templates rendered."""
    sink = registry.get(dest.plugin).sink
    assert sink is not None
    return {k: render(v, ref) if k in sink.targets and isinstance(v, str) else v for k, v in dest.params.items()}


def _targets(dest: DestinationSpec, index: int, tables: Sequence[TableRef], problems: Problems) -> dict[TableRef, Any]:
    """The destination's options for each table, its target params rendered (and checked as the task's were)."""
    sink = registry.get(dest.plugin).sink
    assert sink is not None
    path = join_path(join_path("destinations", index), "params")
    out: dict[TableRef, Any] = {}
    for ref in tables:
        parsed = parse_options(sink.options, rendered(dest, ref), f"{path} (table {ref.key})", problems)
        if parsed is not None:
            out[ref] = parsed
    shown = {ref: _show_target(dest, o) for ref, o in out.items()}
    for clash in clashes(shown, fold_case=dest.plugin in FOLDS_CASE):
        problems.add(path, f"two tables on one target: {clash}")
    return out


def _exclusive(spec: TaskSpec, options: Mapping[str, Mapping[TableRef, Any]], ref: TableRef) -> frozenset[str]:
    keys = set()
    for d in spec.destinations:
        sink = registry.get(d.plugin).sink
        key = sink.single_writer_key(options[d.id][ref]) if sink is not None and sink.single_writer_key else None
        if key is not None:
            keys.add(key)
    return frozenset(keys)


def _show_target(dest: DestinationSpec, options: Any) -> str:
    sink = registry.get(dest.plugin).sink
    assert sink is not None
    return ".".join(str(getattr(options, k)) for k in sink.targets
                    if k != "staging_table" and getattr(options, k, None) is not None)


def _table_spec(spec: TaskSpec, source_options: Any, ref: TableRef, options: Mapping[str, Mapping[TableRef, Any]],
                channels: int, task_channels: int, incremental: Any) -> TaskSpec:
    speed = spec.settings.speed

    def share(limit: int | None) -> int | None:
        return None if limit is None else max(1, limit * channels // task_channels)

    settings = dataclasses.replace(spec.settings, engine="local", speed=dataclasses.replace(
        speed, channel=channels, record=share(speed.record), byte=share(speed.byte)))
    # More writers than the table has channels only wait (and each opens its connection): a small table's
    # pair writes with one.
    destinations = tuple(dataclasses.replace(d, id=pair_id(d.id, ref), options=options[d.id][ref],
                                             concurrency=min(d.concurrency, channels), params=rendered(d, ref))
                         for d in spec.destinations)
    return dataclasses.replace(spec, name=f"{spec.name}:{ref.key}" if spec.name else ref.key,
                               source=dataclasses.replace(spec.source, options=source_options,
                                                          incremental=incremental),
                               destinations=destinations, settings=settings)

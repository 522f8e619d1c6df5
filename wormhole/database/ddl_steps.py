"""The DDL of a database task, step by step: translated for every (table, destination) before anything is
touched (:class:`DdlSteps`), then, per pair (:class:`PairDdl`), the table created before its run, its indexes
and sequences after its rows are in (a small table's indexes with the table: :data:`INDEXES_WITH_TABLE_ROWS`),
and the foreign keys after every table (:mod:`wormhole.database.run`
calls each step). A destination takes part when it creates its tables (mysql and postgres ``create_table``,
sqlite ``create``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wormhole.database.ddl import DdlSession, TableDdl, TargetName, facet, translate
from wormhole.database.model import TableDef, TableRef
from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.options import Problems
from wormhole.plugins import registry
from wormhole.plugins.shared import RunShared
from wormhole.task_spec import TaskSpec

ALREADY_THERE = re.compile(r"already exists|duplicate key name|duplicate foreign key|\b1061\b|\b1826\b|errno: 121\b"
                           r"|multiple primary keys", re.I)
"""How MySQL, MariaDB, PostgreSQL and sqlite say an index or constraint is there already (a resumed run creates
what its crashed run may have created)."""


def target_name(options: Any) -> TargetName:
    """Where a destination's (rendered) options put a table: its schema (postgres), else its database (mysql),
    else none (sqlite: the file)."""
    schema = getattr(options, "schema", None) or getattr(options, "database", None)
    return TargetName(schema, options.table)


def creates(options: Any) -> bool:
    return bool(getattr(options, "create_table", False) or getattr(options, "create", False))


@dataclass(frozen=True, slots=True)
class PairDdl:
    """One table's DDL in one destination, and the steps that apply it."""

    destination: str
    plugin: str
    options: Any
    """The destination's options for this table (its target rendered)."""
    ddl: TableDdl

    def describe(self) -> dict[str, Any]:
        return {"columns": [f"{c.name} {c.type_sql}" for c in self.ddl.columns], "create": list(self.ddl.create),
                "after_load": list(self.ddl.after_load), "foreign_keys": list(self.ddl.foreign_keys),
                "lossy": list(self.ddl.lossy), "indexed": self.ddl.indexed}

    def _with_session(self, step: Callable[[DdlSession], str | None], shared: RunShared | None = None) -> str | None:
        """``step`` on a DDL session: with ``shared``, one a step before left idle on the same server and
        database (a table's DDL and the next table's reuse it), given back when the step succeeded."""
        session_key = facet(self.plugin).session_key
        pool = shared if session_key is not None else None
        key = ("ddl", self.plugin, session_key(self.options)) if pool is not None and session_key is not None else None
        session = pool.lend(key) if pool is not None else None
        if session is None:
            session = facet(self.plugin).open(self.options)
        try:
            done = step(session)
        except BaseException:
            session.close()
            raise
        if pool is not None:
            pool.keep(key, session, lambda s: s.close())
        else:
            session.close()
        return done

    def state(self) -> str:
        """``missing``, ``same`` or ``differs: what differs`` (``wormhole plan``)."""
        def step(session: DdlSession) -> str:
            found = session.state(self.ddl)
            return found.state if found.state != "differs" else f"differs: {'; '.join(found.differences)}"
        return str(self._with_session(step))

    def create(self, log: Logger, shared: RunShared | None = None) -> str:
        """``created`` or ``exists``; raises when the target exists and differs."""
        def step(session: DdlSession) -> str:
            found = session.state(self.ddl)
            if found.state == "differs":
                raise InvalidTaskConfig([f"{self.ddl.target.label} exists and differs from the source's table: "
                                         f"{'; '.join(found.differences)}"])
            if found.state == "same":
                return "exists"
            session.run(self.ddl.create)
            log.info("database.table_created", destination=self.destination, target=self.ddl.target.label,
                     lossy=list(self.ddl.lossy))
            return "created"
        return str(self._with_session(step, shared))

    def after_load(self, log: Logger, shared: RunShared | None = None, *, created: bool = False) -> str | None:
        """The indexes and the sequences, once the rows are in (an index a crashed run made is kept). ``created``:
        this run created the table, so a small table's indexes are there already (:attr:`TableDdl.indexed`)."""
        statements = () if created and self.ddl.indexed else self.ddl.after_load

        def step(session: DdlSession) -> str | None:
            made = _run_each(session, statements)
            session.set_sequences(self.ddl)
            log.info("database.indexes_created", destination=self.destination, target=self.ddl.target.label,
                     statements=made, sequences=len(self.ddl.sequences))
            return f"{made} index statement(s)" if made else None
        if not statements and not self.ddl.sequences:
            return None  # nothing to do: no connection
        return self._with_session(step, shared)

    def foreign_keys(self, log: Logger, shared: RunShared | None = None) -> str | None:
        def step(session: DdlSession) -> str | None:
            made = _run_each(session, self.ddl.foreign_keys)
            log.info("database.foreign_keys_created", destination=self.destination, target=self.ddl.target.label,
                     statements=made)
            return f"{made} foreign key(s)" if made else None
        return self._with_session(step, shared) if self.ddl.foreign_keys else None


def _run_each(session: DdlSession, statements: tuple[str, ...]) -> int:
    made = 0
    for statement in statements:
        try:
            session.run([statement])
            made += 1
        except Exception as exc:
            if not ALREADY_THERE.search(str(exc)):
                raise
    return made


INDEXES_WITH_TABLE_ROWS = 10_000
"""A table estimated under this many rows gets its key and indexes with CREATE TABLE: after a load that small,
building them costs a DDL statement (and a session) for nothing."""


class DdlSteps:
    def __init__(self, spec: TaskSpec, definitions: Mapping[TableRef, TableDef],
                 options: Mapping[str, Mapping[TableRef, Any]],
                 estimates: Mapping[TableRef, int] | None = None) -> None:
        """``estimates``: each table's estimated rows (a table missing from it counts as large)."""
        self._spec, self._definitions, self._options = spec, definitions, options
        self._estimates = estimates or {}

    def translate(self, problems: Problems) -> dict[str, dict[TableRef, PairDdl]]:
        """Destination id -> table -> its DDL, for the destinations that create their tables; every type with
        no exact mapping, of every table, is a problem."""
        out: dict[str, dict[TableRef, PairDdl]] = {}
        for dest in self._spec.destinations:
            by_table: dict[TableRef, PairDdl] = {}
            options = self._options[dest.id]
            for ref, definition in self._definitions.items():
                if ref not in options or not creates(options[ref]) or not _has_ddl(dest.plugin):
                    continue
                try:
                    ddl = translate(definition, self._spec.source.plugin, dest.plugin, options[ref],
                                    target_name(options[ref]), self._referenced(options),
                                    foreign_keys=self._spec.settings.foreign_keys,
                                    indexes_with_table=self._estimates.get(ref, INDEXES_WITH_TABLE_ROWS)
                                    < INDEXES_WITH_TABLE_ROWS)
                except InvalidTaskConfig as exc:
                    for problem in exc.problems:
                        problems.add(f"destinations[{self._spec.destinations.index(dest)}] ({dest.id})", problem)
                    continue
                by_table[ref] = PairDdl(dest.id, dest.plugin, options[ref], ddl)
            if by_table:
                out[dest.id] = by_table
        return out

    def _referenced(self, options: Mapping[TableRef, Any]) -> Callable[[TableRef], TargetName | None]:
        return lambda ref: target_name(options[ref]) if ref in options else None


def _has_ddl(plugin: str) -> bool:
    sink = registry.get(plugin).sink
    return sink is not None and sink.ddl is not None

"""The DDL of a database task, step by step: translated for every (table, destination) before anything is
touched (:class:`DdlSteps`), then, per pair (:class:`PairDdl`), the table created before its run, its indexes
and sequences after its rows are in (a small table's indexes with the table: :data:`INDEXES_WITH_TABLE_ROWS`),
and the foreign keys after every table (:mod:`wormhole.database.run`
calls each step). A destination takes part when it creates its tables (mysql and postgres ``create_table``,
sqlite ``create``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from wormhole.database.ddl import DdlSession, TableDdl, TargetName, facet, translate
from wormhole.database.model import TableDef, TableRef
from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.options import Problems
from wormhole.plugins import registry
from wormhole.plugins.shared import RunShared
from wormhole.task_spec import TaskSpec

T = TypeVar("T")

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

    def _with_session(self, step: Callable[[DdlSession], T], shared: RunShared | None = None) -> T:
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

    def create(self, log: Logger, shared: RunShared | None = None, *, absent: bool = False) -> str:
        """``created`` or ``exists``; raises when the target exists and differs. ``absent``: the target was not
        there when the task's tables were looked up (:func:`absent_targets`), so it is created without asking
        first; should its ``CREATE TABLE`` fail, the target is asked as it would have been (another session may
        have made it since), and what is there decides as before."""
        def step(session: DdlSession) -> str:
            statements = self.ddl.create
            if absent and statements:
                try:
                    session.run(statements[:1])
                except Exception:
                    if self._exists(session) is None:
                        raise
                    return "exists"
                statements = statements[1:]
            elif self._exists(session) is not None:
                return "exists"
            session.run(statements)
            log.info("database.table_created", destination=self.destination, target=self.ddl.target.label,
                     lossy=list(self.ddl.lossy))
            return "created"
        return str(self._with_session(step, shared))

    def _exists(self, session: DdlSession) -> str | None:
        """``same`` when the target is there as the source's table is, None when it is missing; raises when it
        differs."""
        found = session.state(self.ddl)
        if found.state == "differs":
            raise InvalidTaskConfig([f"{self.ddl.target.label} exists and differs from the source's table: "
                                     f"{'; '.join(found.differences)}"])
        return None if found.state == "missing" else found.state

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


def absent_targets(pairs: Sequence[PairDdl], shared: RunShared | None = None) -> set[tuple[str, TargetName]]:
    """(destination, target) of each of ``pairs`` whose target is not there, asked in one statement per server and
    database (a DDL session's :meth:`existing`) instead of one per table. Empty where a store cannot say so, or the
    asking fails: each pair then asks for its own target (:meth:`PairDdl.create`)."""
    groups: dict[Any, list[PairDdl]] = {}
    for pair in pairs:
        session_key = facet(pair.plugin).session_key
        groups.setdefault((pair.plugin, session_key(pair.options) if session_key is not None else id(pair)),
                          []).append(pair)
    out: set[tuple[str, TargetName]] = set()
    for group in groups.values():
        targets = [p.ddl.target for p in group]

        def ask(session: DdlSession, targets: list[TargetName] = targets) -> Any:
            existing = getattr(session, "existing", None)
            return existing(targets) if existing is not None else None
        try:
            there = group[0]._with_session(ask, shared)
        except Exception:  # the tables' own steps ask again, and say what fails
            continue
        if there is not None:
            out.update((p.destination, p.ddl.target) for p in group if p.ddl.target not in there)
    return out


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

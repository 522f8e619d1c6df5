"""The DDL of a database task, step by step: translated for every (table, destination) before anything is
touched, then the table created before its run, its indexes and sequences after its rows are in, and the
foreign keys after every table (:mod:`wormhole.database.run` calls each step)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wormhole.database.model import TableDef, TableRef
from wormhole.log import Logger
from wormhole.options import Problems
from wormhole.plugins import registry
from wormhole.task_spec import TaskSpec


@dataclass(frozen=True, slots=True)
class PairDdl:
    """One table's DDL in one destination, and the steps that apply it."""

    destination: str
    plugin: str
    options: Any
    """The destination's options for this table (its target rendered)."""
    ddl: Any
    """The store's translation (:class:`wormhole.database.ddl.TableDdl`)."""

    def describe(self) -> dict[str, Any]:
        return {"create": list(self.ddl.create), "after_load": list(self.ddl.after_load),
                "foreign_keys": list(self.ddl.foreign_keys), "lossy": list(self.ddl.lossy)}

    def _session(self) -> Any:
        sink = registry.get(self.plugin).sink
        assert sink is not None and sink.ddl is not None
        return sink.ddl.open(self.options)

    def create(self, log: Logger) -> str:
        """``created`` or ``exists``; raises when the target exists and differs."""
        session = self._session()
        try:
            return str(session.create(self.ddl, log))
        finally:
            session.close()

    def after_load(self, log: Logger) -> str | None:
        session = self._session()
        try:
            return session.after_load(self.ddl, log)  # type: ignore[no-any-return]
        finally:
            session.close()

    def foreign_keys(self, log: Logger) -> str | None:
        session = self._session()
        try:
            return session.foreign_keys(self.ddl, log)  # type: ignore[no-any-return]
        finally:
            session.close()


class DdlSteps:
    def __init__(self, spec: TaskSpec, definitions: Mapping[TableRef, TableDef],
                 options: Mapping[str, Mapping[TableRef, Any]]) -> None:
        self._spec, self._definitions, self._options = spec, definitions, options

    def translate(self, problems: Problems) -> dict[str, dict[TableRef, PairDdl]]:
        """Destination id -> table -> its DDL, for the destinations that create their tables."""
        out: dict[str, dict[TableRef, PairDdl]] = {}
        for dest in self._spec.destinations:
            sink = registry.get(dest.plugin).sink
            facet = sink.ddl if sink is not None else None
            if facet is None:
                continue
            by_table: dict[TableRef, PairDdl] = {}
            for ref, definition in self._definitions.items():
                options = self._options[dest.id][ref]
                if not facet.creates(options):
                    continue
                ddl = facet.translate(definition, self._spec.source.plugin, options, self._referenced(dest.id),
                                      problems, f"destinations[{self._spec.destinations.index(dest)}]")
                if ddl is not None:
                    by_table[ref] = PairDdl(dest.id, dest.plugin, options, ddl)
            if by_table:
                out[dest.id] = by_table
        return out

    def _referenced(self, dest_id: str) -> Any:
        options = self._options[dest_id]
        return lambda ref: options.get(ref)

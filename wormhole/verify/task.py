"""A task's copies checked after the fact (``wormhole verify --task-id N``; issue 39, item 3): the task's
source as it is now against each destination read back, one :func:`~wormhole.verify.diff.compare` per
destination (per (table, destination) pair for a database task).

A destination is read back through the source role of its own store, with the params the two roles share
(:func:`readback`: a mysql destination's server, database and table; a file destination's path and format),
so what is compared is what a reader of the destination sees. The task must copy rows as they are: a task
with transforms or an incremental read is refused (its destinations hold other rows than the source's, or
a part of them), naming why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wormhole.config import EngineConf
from wormhole.database.expand import expand, is_database_task, pair_id, rendered
from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.options import join_path
from wormhole.plugins import registry
from wormhole.plugins.base import Split
from wormhole.task_spec import DestinationSpec, TaskSpec
from wormhole.verify.diff import Comparison, Side, compare, parse_side


@dataclass(frozen=True, slots=True)
class Pair:
    """What one comparison checks: the source (a table of it, for a database task) and one destination."""

    name: str
    """The destination's id, or the pair's (``dest/schema.table``)."""
    source: Side
    destination: Side
    dest: DestinationSpec
    """The destination (a database task's: the pair's, its target rendered for the table)."""
    source_spec: Mapping[str, Any]
    """The source spec the pair's rows come from (a database task's: the table's)."""
    whole: bool = True
    """The destination can be written again alone by its task (not a table of a database task)."""


def readback(dest: DestinationSpec, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The source spec that reads what ``dest`` holds: its store's source role, with the destination's
    params that role takes too. InvalidTaskConfig when the store cannot be read."""
    plugin = registry.get(dest.plugin)
    if plugin.source is None:
        raise InvalidTaskConfig([f"destination {dest.id}: the {dest.plugin} store cannot be read back"])
    taken = {f.name for f in dataclasses.fields(plugin.source.options)}
    given = params if params is not None else dest.params
    return {"plugin": dest.plugin, "params": {k: v for k, v in given.items() if k in taken}}


def refusal(spec: TaskSpec) -> list[str]:
    """Why the task's copies cannot be compared with its source (none: they can)."""
    problems = []
    if spec.transforms or any(d.transforms for d in spec.destinations):
        problems.append("transforms: the task's transforms change its rows; verify compares copies of rows as "
                        "they are (compare a transformed copy with wormhole diff and a query)")
    if spec.source.incremental is not None:
        problems.append("source.incremental: each destination holds the windows it was sent, not the source as "
                        "it is now; verify of an incremental task is not supported yet")
    return problems


def pairs(spec: TaskSpec, raw_source: Mapping[str, Any], conf: EngineConf, log: Logger,
          only: str | None = None) -> Iterator[Pair]:
    """The comparisons ``spec`` asks for: its source against each destination (``only``: that one), and for a
    database task each table against its target in each destination."""
    problems = refusal(spec)
    known = {d.id for d in spec.destinations}
    if only is not None and only not in known:
        problems.append(f"--destination: {only} is none of the task's ({', '.join(sorted(known))})")
    if problems:
        raise InvalidTaskConfig(problems)
    wanted = [d for d in spec.destinations if only is None or d.id == only]
    if not is_database_task(spec):
        source = parse_side(raw_source, "source")
        for dest in wanted:
            yield Pair(dest.id, source, parse_side(readback(dest), f"destination {dest.id}"), dest, raw_source)
        return
    for job in expand(spec, conf, log).jobs:
        params = {k: v for k, v in raw_source.get("params", {}).items() if k != "tables"}
        schema_key = {"mysql": "database", "postgres": "schema"}.get(spec.source.plugin)
        params.update({"table": job.ref.name, **({schema_key: job.ref.schema} if schema_key else {})})
        raw = {"plugin": spec.source.plugin, "params": params}
        source = parse_side(raw, f"source {job.ref.key}")
        for dest in wanted:
            name = f"{dest.id}/{job.ref.key}"
            mine = next(d for d in job.spec.destinations if d.id == pair_id(dest.id, job.ref))
            yield Pair(name, source, parse_side(readback(dest, rendered(dest, job.ref)),
                                                join_path("destination", name)), mine, raw, whole=False)


def verify(spec: TaskSpec, raw_source: Mapping[str, Any], conf: EngineConf, log: Logger, *,
           only: str | None = None, key: tuple[str, ...] | None = None, samples: int = 20,
           readers: int = 4, plan: Sequence[Split] | None = None) -> dict[str, Comparison]:
    """Each comparison :func:`pairs` lists, by name (a side that cannot be read raises). ``plan``: the splits of
    the task's last run, by which the source is read (each comparison then says which splits differ); a
    database task's tables are split afresh."""
    return {pair.name: found for pair, found in compared(spec, raw_source, conf, log, only=only, key=key,
                                                         samples=samples, readers=readers, plan=plan)}


def compared(spec: TaskSpec, raw_source: Mapping[str, Any], conf: EngineConf, log: Logger, *,
             only: str | None = None, key: tuple[str, ...] | None = None, samples: int = 20,
             readers: int = 4, plan: Sequence[Split] | None = None) -> list[tuple[Pair, Comparison]]:
    """Each pair :func:`pairs` lists with its comparison (:func:`verify`'s arguments)."""
    found: list[tuple[Pair, Comparison]] = []
    splits = plan if plan and not is_database_task(spec) else None
    for pair in pairs(spec, raw_source, conf, log, only):
        one = compare(pair.source, pair.destination, key=key, samples=samples, readers=readers,
                      batch_rows=conf.exchange.batch_rows, left_splits=splits)
        found.append((pair, one))
        log.info("verify.compared", destination=pair.name, equal=one.equal, rows=one.left_rows,
                 differences=dict(one.counts))
    return found

"""A task's copies checked after the fact (``wormhole verify --task-id N``; issue 39, item 3): the task's
source as it is now against each destination read back, one :func:`~wormhole.verify.diff.compare` per
destination (per (table, destination) pair for a database task).

A destination is read back through the source role of its own store, with the params the two roles share
(:func:`readback`: a mysql destination's server, database and table; a file destination's path and format),
so what is compared is what a reader of the destination sees. The task must copy rows as they are: a task
with transforms is refused (its destinations hold other rows than the source's), naming why.

An incremental task's destination holds the windows it was sent, not the whole source: each destination is
compared, on both sides, only within the range of the cursor column the task's runs delivered to it
(:mod:`wormhole.verify.window`), its own range when it missed a window another destination took. A key the
destination holds whose source row has moved past that range since (an update-time cursor: the row was
changed after its window was copied) is not a difference: the next run takes it; the comparison counts it as
``moved_later``. A destination the task delivered nothing to is not compared, and says why (never a pass).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wormhole.config import EngineConf
from wormhole.database.expand import expand, is_database_task, pair_id, rendered
from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.options import join_path
from wormhole.plugins import registry
from wormhole.plugins.base import Split
from wormhole.task_spec import DestinationSpec, TaskSpec
from wormhole.verify.diff import Comparison, Side, compare, json_null_of, parse_side
from wormhole.verify.sides import key_hashes
from wormhole.verify.window import Delivered, narrowing

Deliveries = Callable[[str, str, str | None], Delivered]
"""``deliveries(destination as its commit rows name it, as the user knows it, scope)``: what an incremental
task's runs delivered to it (:func:`wormhole.verify.window.delivered` over the task's runs)."""


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
    window: Delivered | None = None
    """An incremental task's: what its runs delivered to the destination (both sides are kept to that range)."""


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
    return problems


def _windowed(pair: Pair, window: Delivered | None) -> Pair:
    """``pair`` kept to what an incremental task delivered to its destination (``window``; None: not one)."""
    if window is None:
        return pair
    return dataclasses.replace(pair, source=dataclasses.replace(pair.source, rows=window.rows, narrow=True),
                               destination=dataclasses.replace(pair.destination, rows=window.rows), window=window)


def pairs(spec: TaskSpec, raw_source: Mapping[str, Any], conf: EngineConf, log: Logger,
          only: str | None = None, deliveries: Deliveries | None = None) -> Iterator[Pair]:
    """The comparisons ``spec`` asks for: its source against each destination (``only``: that one), and for a
    database task each table against its target in each destination; an incremental task's kept to what
    ``deliveries`` says its runs delivered to each."""
    problems = refusal(spec)
    known = {d.id for d in spec.destinations}
    if only is not None and only not in known:
        problems.append(f"--destination: {only} is none of the task's ({', '.join(sorted(known))})")
    if spec.source.incremental is not None and deliveries is None:
        problems.append("source.incremental: the task's runs are needed to know which windows each destination "
                        "holds")
    if problems:
        raise InvalidTaskConfig(problems)
    incremental = spec.source.incremental is not None and deliveries is not None

    def window(recorded: str, name: str, scope: str | None) -> Delivered | None:
        return deliveries(recorded, name, scope) if incremental and deliveries is not None else None

    wanted = [d for d in spec.destinations if only is None or d.id == only]
    if not is_database_task(spec):
        # The side reads the source's rows; the windows are the pair's (``incremental`` is no side's key).
        source = parse_side({k: v for k, v in raw_source.items() if k != "incremental"}, "source")
        for dest in wanted:
            yield _windowed(Pair(dest.id, source, parse_side(readback(dest), f"destination {dest.id}"), dest,
                                 raw_source), window(dest.id, dest.id, None))
        return
    yield from _table_pairs(spec, raw_source, conf, log, wanted, window)


def _table_pairs(spec: TaskSpec, raw_source: Mapping[str, Any], conf: EngineConf, log: Logger,
                 wanted: Sequence[DestinationSpec],
                 window: Callable[[str, str, str | None], Delivered | None]) -> Iterator[Pair]:
    """A database task's pairs: each table against its target in each destination."""
    for job in expand(spec, conf, log).jobs:
        params = {k: v for k, v in raw_source.get("params", {}).items() if k != "tables"}
        schema_key = {"mysql": "database", "postgres": "schema"}.get(spec.source.plugin)
        params.update({"table": job.ref.name, **({schema_key: job.ref.schema} if schema_key else {})})
        raw = {"plugin": spec.source.plugin, "params": params}
        source = parse_side(raw, f"source {job.ref.key}")
        for dest in wanted:
            name = f"{dest.id}/{job.ref.key}"
            mine = next(d for d in job.spec.destinations if d.id == pair_id(dest.id, job.ref))
            yield _windowed(Pair(name, source, parse_side(readback(dest, rendered(dest, job.ref)),
                                                          join_path("destination", name)), mine, raw, whole=False),
                            window(mine.id, name, job.ref.key))


def verify(spec: TaskSpec, raw_source: Mapping[str, Any], conf: EngineConf, log: Logger, *,
           only: str | None = None, key: tuple[str, ...] | None = None, samples: int = 20,
           readers: int = 4, plan: Sequence[Split] | None = None,
           deliveries: Deliveries | None = None, stop: threading.Event | None = None) -> dict[str, Comparison | None]:
    """Each comparison :func:`pairs` lists, by name (None: a destination not compared, an incremental task's
    that was delivered nothing; a side that cannot be read raises). ``plan``: the splits of the task's last run,
    by which the source is read (each comparison then says which splits differ); a database task's tables, and
    an incremental task's source, are split afresh."""
    return {pair.name: found for pair, found in compared(spec, raw_source, conf, log, only=only, key=key,
                                                         samples=samples, readers=readers, plan=plan,
                                                         deliveries=deliveries, stop=stop)}


def compared(spec: TaskSpec, raw_source: Mapping[str, Any], conf: EngineConf, log: Logger, *,
             only: str | None = None, key: tuple[str, ...] | None = None, samples: int = 20,
             readers: int = 4, plan: Sequence[Split] | None = None, deliveries: Deliveries | None = None,
             stop: threading.Event | None = None) -> list[tuple[Pair, Comparison | None]]:
    """Each pair :func:`pairs` lists with its comparison (:func:`verify`'s arguments; ``stop`` set: the reads
    stop, :class:`~wormhole.verify.diff.Stopped`)."""
    found: list[tuple[Pair, Comparison | None]] = []
    # An incremental task's last plan covers its last window only: its source is split afresh.
    splits = plan if plan and not is_database_task(spec) and spec.source.incremental is None else None
    for pair in pairs(spec, raw_source, conf, log, only, deliveries):
        if pair.window is not None and pair.window.rows is None:
            found.append((pair, None))
            log.warning("verify.not_compared", destination=pair.name, reason=pair.window.reason)
            continue
        one = compare_pair(pair, key=key, samples=samples, readers=readers, batch_rows=conf.exchange.batch_rows,
                           splits=splits, stop=stop)
        found.append((pair, one))
        log.info("verify.compared", destination=pair.name, equal=one.equal, rows=one.left_rows,
                 differences=dict(one.counts), **({"window": dict(one.window)} if one.window else {}))
    return found


def compare_pair(pair: Pair, *, key: Sequence[str] | None = None, samples: int = 20, readers: int = 4,
                 batch_rows: int = 10_000, splits: Sequence[Split] | None = None,
                 stop: threading.Event | None = None) -> Comparison:
    """The source against the destination of ``pair`` (:func:`~wormhole.verify.diff.compare`); for an
    incremental task's, within its window, the keys that moved past it since not counted as extra."""
    found = compare(pair.source, pair.destination, key=key, samples=samples, readers=readers,
                    batch_rows=batch_rows, left_splits=splits, stop=stop)
    if pair.window is None or pair.window.rows is None:
        return found
    rows = pair.window.rows
    extra = found.found.get("extra", np.empty(0, np.uint64))
    moved = np.empty(0, np.uint64)
    if found.columns.key_left and extra.size and rows.upper is not None:
        past = dataclasses.replace(pair.source, rows=rows.past())
        held = key_hashes(past, found.columns.key_left, found.columns.logical_left,
                          json_null_of(found.left, found.right), readers=readers, batch_rows=batch_rows,
                          stop=stop)
        moved = np.intersect1d(extra, held)
    narrowed_by = narrowing(pair.source.source, pair.source.rows) if pair.source.narrow else None  # asked of it
    window = {**pair.window.describe(), "moved_later": int(moved.size), "source_where": narrowed_by}
    if not moved.size:
        return dataclasses.replace(found, window=window)
    left = np.setdiff1d(extra, moved)
    gone = set(moved.tolist())
    return dataclasses.replace(
        found, window=window, counts={**found.counts, "extra": int(left.size)}, found={**found.found, "extra": left},
        samples=tuple(d for d in found.samples if not (d.kind == "extra" and d.key_hash in gone)))

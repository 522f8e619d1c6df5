"""Repairing a copy that differs from its source (``wormhole verify --task-id N --repair``; issue 39, item 4).

What a comparison found (:class:`~wormhole.verify.diff.Comparison`) is repaired in the destination that
differs, by one of three routes, then compared again:

- **By upsert**, where the comparison's key is the destination table's primary key and its store can write
  by that key (``SinkRole.upsert_params``: mysql's ``ON DUPLICATE KEY UPDATE``, postgres's and sqlite's ``ON
  CONFLICT``): the rows the destination holds under an extra key are deleted (in one transaction), then a repair
  task writes the source's rows of every missing and different key with the store's upsert: each split's rows
  replace the old ones in the split's own transaction, with its marker. No key the destination held is ever
  absent: a repair that fails half-way leaves every key either as it was or mended.
- **By key**, for a destination whose store can delete rows by key (``SinkRole.delete_keys``: mysql,
  postgres, sqlite) when the comparison had a key that is not such a primary key (a copy without one may hold
  a row twice): first, in one transaction, every row the destination holds
  under a key that differs, is extra or is duplicated is deleted (the key values as its own reader gives them
  back, bound as parameters); then the source's rows of every key that was missing, different or duplicated
  are written by a *repair task*, a task recorded in the task database like any other and run now through the
  destination's normal write path (its split transactions and markers), its source filtered to those keys
  (the filter is pushed into the source's query). The user's ``pre_sql``, ``post_sql``, ``rollback_sql``, a
  truncate or staging load and ``create_table`` are left out of the repair task: it appends. Two steps, not
  one transaction: should the write fail, those keys are missing (they were wrong before) and a second
  ``--repair`` writes them.
- **Whole**, for a file destination written with ``mode: overwrite``: the task is run again for that
  destination alone (a repair task too), which replaces its directory at commit.

Anything else (a file destination that appends, a store that cannot delete by key, a comparison without a key,
a key of a type the transforms' language cannot spell, more than :data:`MAX_KEYS` keys to fix) is not repaired,
and the report says why.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import numpy as np

from wormhole.log import Logger
from wormhole.plugins import registry
from wormhole.plugins.base import WriteContext
from wormhole.plugins.schema import Schema
from wormhole.task_spec import DestinationSpec
from wormhole.verify.diff import Comparison, json_null_of
from wormhole.verify.sides import key_values

MAX_KEYS = 5_000
"""Keys repaired by key at most: past that a copy is better made again (``task retry``, a truncate run)."""
FILTER_CHARS = 9_000
"""The longest filter a repair task gets (the transforms' language takes 10,000 characters): more keys make
more repair tasks."""
LEFT_OUT = ("pre_sql", "post_sql", "rollback_sql", "staging_table", "verify", "create_table", "create",
            "upsert_key")
"""Destination params a repair task does not take: it only appends the source's rows of the repaired keys."""


@dataclass(slots=True)
class Repair:
    """What ``--repair`` did to one destination (``repair`` in verify's JSON)."""

    method: str | None
    """``upsert`` (the differing keys written again by the store's upsert, the extra ones deleted), ``keys``
    (deleted and written again by key), ``whole`` (the destination written again), None (not)."""
    reason: str | None = None
    """Why it was not repaired, or what failed."""
    deleted: int = 0
    written: int = 0
    tasks: list[int] = field(default_factory=list)
    """The repair tasks run (their ids in the task database)."""
    equal: bool | None = None
    """Whether the destination equals the source afterwards (None: not compared again)."""

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "reason": self.reason, "deleted": self.deleted, "written": self.written,
                "tasks": list(self.tasks), "equal": self.equal}


RunTask = Callable[[dict[str, Any], str], tuple[int, int, Mapping[str, Any] | None]]
"""``run(task mapping, name)``: record the repair task, run it now: (its id, exit code, result)."""


def repair(found: Comparison, dest: DestinationSpec, params: Mapping[str, Any], source: Mapping[str, Any],
           task: Mapping[str, Any], run: RunTask, log: Logger, *, readers: int = 4,
           whole: bool = True) -> Repair:
    """Repair one destination that differs (``found``: the comparison of the source with it; ``params``: the
    destination's params, rendered; ``source``: the source spec its rows come from; ``task``: the task's
    mapping, for a whole rewrite; ``whole``: a rewrite of the destination alone is possible, not a database
    task's table)."""
    sink = registry.get(dest.plugin).sink
    assert sink is not None
    incremental = source.get("incremental") is not None
    if sink.target_rows is not None and sink.target_rows(dest.options).meet == "replaced" and sink.delete_keys is None:
        if not whole:
            return Repair(None, "a database task's file destination is written again by running the task")
        if incremental:  # a run of the task writes its next window, not the windows the destination holds
            return Repair(None, "an incremental task's file destination holds its windows: it is not written "
                                "again whole (copy it again without source.incremental)")
        return _rewrite(dest, task, run, log)
    if incremental:
        # The repair task reads the differing keys by its filter; as an incremental task it would read a
        # window of its own and keep a watermark.
        source = {k: v for k, v in source.items() if k != "incremental"}
    if sink.delete_keys is None:
        return Repair(None, f"the {dest.plugin} store cannot delete rows by key, and this destination is not "
                            "replaced by a run (an append): copy it again")
    return _by_keys(found, dest, params, source, run, log, readers)


def _by_keys(found: Comparison, dest: DestinationSpec, params: Mapping[str, Any], source: Mapping[str, Any],
             run: RunTask, log: Logger, readers: int) -> Repair:
    """Delete every differing key the destination holds, then write the source's rows of those keys again."""
    sink = registry.get(dest.plugin).sink
    assert sink is not None and sink.delete_keys is not None
    cols = found.columns
    if not cols.key_left:
        return Repair(None, "the comparison has no key (--key, or a primary key on a side): rows cannot be told "
                            "apart to repair them")
    upsert = _upsert_params(found, sink)
    if upsert is not None:  # the different keys are replaced in place: only the extra ones are deleted
        fix, drop = _union(found.found, ("missing", "different")), _union(found.found, ("extra",))
    else:
        fix = _union(found.found, ("missing", "different", "duplicate"))
        drop = _union(found.found, ("different", "duplicate", "extra"))
    if max(len(fix), len(drop)) > MAX_KEYS:
        return Repair(None, f"{max(len(fix), len(drop))} keys differ, more than the {MAX_KEYS} repaired by key: "
                            "copy the destination again (task retry, or a truncate or staging load)")
    nulls = json_null_of(found.left, found.right)
    written = key_values(found.left, cols.key_left, cols.logical_left, nulls, fix, readers=readers)
    filters = _filters(cols.key_left, written)
    if isinstance(filters, str):
        return Repair(None, filters)
    held = key_values(found.right, cols.key_right, cols.logical_right, nulls, drop, readers=readers)
    out = Repair("keys" if upsert is None else "upsert")
    if held:
        periphery = sink.periphery(dest.options, _context(dest))
        out.deleted = sink.delete_keys(periphery, cols.key_right, held)
        log.info("verify.repair_deleted", destination=dest.id, keys=len(held), rows=out.deleted)
    appended = {k: v for k, v in params.items() if k not in LEFT_OUT}
    if "load" in {f.name for f in dataclasses.fields(sink.options)}:
        appended["load"] = "append"
    if "write_mode" in appended:
        appended["write_mode"] = "insert"
    appended.update(upsert or {})
    for index, expression in enumerate(filters):  # one repair task per filter (a filter holds ~9,000 chars)
        spec = {"source": dict(source), "transforms": [{"filter": expression}],
                "destinations": [{"id": re.sub(r"[^A-Za-z0-9_.-]", "_", dest.id)[:64], "plugin": dest.plugin,
                                  "params": appended}]}
        task_id, code, result = run(spec, f"repair {index + 1}/{len(filters)} of {dest.id}")
        out.tasks.append(task_id)
        if result is not None:
            out.written += sum(int(d.get("rows_written", 0)) for d in result.get("destinations", {}).values())
        if code not in (0, 201):
            out.reason = f"repair task {task_id} ended with exit code {code}: {result.get('error') if result else ''}"
            break
    return out


def _upsert_params(found: Comparison, sink: Any) -> Mapping[str, Any] | None:
    """The repair task's params that make it upsert by the comparison's key, when that key is the destination
    table's primary key (so the destination holds each key once) and its store can upsert; else None."""
    key = found.columns.key_right
    if sink.upsert_params is None or not key or found.found.get("duplicate", np.empty(0)).size:
        return None
    try:
        primary = found.right.primary_key()
    except Exception:  # the catalog could not be asked: the route that needs no key
        return None
    if [k.lower() for k in primary] != [k.lower() for k in key]:
        return None
    return dict(sink.upsert_params(primary))


def _rewrite(dest: DestinationSpec, task: Mapping[str, Any], run: RunTask, log: Logger) -> Repair:
    spec = json.loads(json.dumps(task, default=str))
    spec["destinations"] = [d for d in spec["destinations"] if d.get("id") == dest.id]
    spec.get("settings", {}).pop("schedule", None)
    task_id, code, result = run(spec, f"repair of {dest.id} (written whole)")
    out = Repair("whole", tasks=[task_id])
    if result is not None:
        out.written = sum(int(d.get("rows_written", 0)) for d in result.get("destinations", {}).values())
    if code not in (0, 201):
        out.reason = f"repair task {task_id} ended with exit code {code}: {result.get('error') if result else ''}"
    log.info("verify.repair_rewritten", destination=dest.id, task=task_id, exit_code=code)
    return out


def _union(found: Mapping[str, np.ndarray], kinds: Sequence[str]) -> np.ndarray:
    parts = [found[k] for k in kinds if k in found and found[k].size]
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.uint64)


def _context(dest: DestinationSpec) -> WriteContext:
    """A context for a periphery that is never prepared: it only deletes rows by key."""
    return WriteContext(task_id=0, run_id=0, destination=dest.id, schema=Schema(()), batch_rows=1, concurrency=1,
                        plugin=dest.plugin)


def literal(value: Any) -> str | None:
    """``value`` in the transforms' language, or None when it has no literal there."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    if isinstance(value, Decimal):
        text = format(value, "f")
        return text if not text.startswith("-") else f"({text})"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    return None


def _name(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _filters(key: Sequence[str], keys: Sequence[tuple[Any, ...]]) -> list[str] | str:
    """Filters that together select ``keys`` (each under :data:`FILTER_CHARS`), or why they cannot be spelt."""
    terms = []
    for values in keys:
        spelt = [literal(v) for v in values]
        if any(s is None for s in spelt):
            bad = next(v for v, s in zip(values, spelt, strict=True) if s is None)
            return f"a key value of type {type(bad).__name__} cannot be selected by a filter"
        if len(key) == 1:
            terms.append(str(spelt[0]))
        else:
            terms.append("(" + " AND ".join(f"{_name(k)} = {s}" for k, s in zip(key, spelt, strict=True)) + ")")
    filters: list[str] = []
    chunk: list[str] = []
    size = 0
    for term in terms:
        if chunk and size + len(term) + 2 > FILTER_CHARS - 64:
            filters.append(_joined(key, chunk))
            chunk, size = [], 0
        chunk.append(term)
        size += len(term) + 2
    if chunk:
        filters.append(_joined(key, chunk))
    return filters


def _joined(key: Sequence[str], terms: Sequence[str]) -> str:
    return f"{_name(key[0])} IN ({', '.join(terms)})" if len(key) == 1 else " OR ".join(terms)

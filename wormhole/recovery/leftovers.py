"""What runs of a task left behind in its destinations (a crashed run's staging table, temporary
directory, split markers), found or removed through each destination's periphery.

A crashed run's state is kept while the task may still resume it: when the task's latest run is
running or crashed, the state of its chain (the runs it resumed, back to the first, whose id names the
state: ``keep_run``) is kept; everything else wormhole created for the task (recognised by name and
marker) is a leftover.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wormhole.errors import InvalidTaskConfig
from wormhole.plugins import registry
from wormhole.plugins.base import Schema, WriteContext
from wormhole.recovery.checkpoint import CRASHED, RunHistory, RunView, TaskView
from wormhole.spec_json import load_spec_json
from wormhole.task_spec import TaskSpec


def resumable_chain(store: RunHistory, task_id: int, *, retried: bool = False) -> list[int]:
    """The runs a later run of the task would resume (the latest, when it is running or crashed, and the
    runs it resumed, newest first), else []; the last names the destinations' state (``state_run``).
    ``retried``: a partial latest run counts too (a retry resumes it: its commit rows say what is done)."""
    runs = store.runs(task_id)
    if not runs or runs[-1].status not in ("running", CRASHED, *(("partial",) if retried else ())):
        return []
    chain: list[int] = []
    run: int | None = runs[-1].id
    while run is not None and run not in chain:
        chain.append(run)
        run = store.resumed_from(run)
    return chain


def next_run_resumes(record: TaskView, runs: Sequence[RunView]) -> int | None:
    """The run the task's next run resumes (None: it starts afresh): its latest run, when that crashed or
    ended partial (a retry finishes what it did not). Not a partial run of a recurring incremental task:
    its next run is for a new tick, and each destination's watermark says exactly what it holds (a
    destination that failed rolled back), so it plans a new window from them: the healthy destinations
    get the new rows while the one that failed catches up from its own watermark."""
    if not runs or runs[-1].status not in (CRASHED, "partial"):
        return None
    if runs[-1].status == "partial" and record.schedule is not None and _incremental(record.spec):
        return None
    return runs[-1].id


def _incremental(text: str) -> bool:
    try:
        raw: Any = load_spec_json(text)
    except InvalidTaskConfig:
        return False  # the run says why (exit 204)
    source = raw.get("source") if isinstance(raw, dict) else None
    return isinstance(source, dict) and source.get("incremental") is not None


def resumable_run(store: RunHistory, task_id: int) -> int | None:
    """The run whose id names the destination state a later run of the task would resume, else None."""
    chain = resumable_chain(store, task_id)
    return chain[-1] if chain else None


def leftovers(spec: TaskSpec, task_id: int, keep_run: int | None, *, remove: bool,
              taskdb_id: str = "") -> dict[str, list[str]]:
    """Per destination, what is left (or what was removed); a destination that cannot be asked says why."""
    found: dict[str, list[str]] = {}
    for dest in spec.destinations:
        sink = registry.sink(dest.plugin)
        facet = sink.leftovers
        if facet is None:
            continue
        ctx = WriteContext(task_id=task_id, run_id=keep_run or 0, destination=dest.id, schema=Schema(()),
                           batch_rows=1, concurrency=1, plugin=dest.plugin, taskdb_id=taskdb_id)
        try:
            periphery = sink.periphery(dest.options, ctx)
            found[dest.id] = (facet.clean if remove else facet.find)(periphery, keep_run)
        except Exception as exc:  # one unreachable destination does not hide the others' leftovers
            found[dest.id] = [f"error: cannot {'clean' if remove else 'inspect'} it: {exc}"]
    return found

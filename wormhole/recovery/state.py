"""RecoveryState: what the chain of runs this run continues already holds, known before anything is built.

BitSail's restore, in one object: the run whose destination state this run continues (``origin``), the
splits the chain planned (read instead of splitting the source again), the destinations a run of the
chain committed, the ones a run whose outcome was recorded committed (``settled``), the transform
placement each split was read under, the run's checkpointer, lease and task database id. The Engine
builds it first and hands it to the managers' constructors; whether a destination makes splits durable,
and whether it is skipped as committed before, is decided here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wormhole.incremental import Window
from wormhole.log import Logger
from wormhole.plugins.base import SinkRole, Split, SplitWriter
from wormhole.plugins.facets import DurableFacet
from wormhole.recovery.chain import Chain
from wormhole.recovery.checkpoint import Checkpointer, CheckpointStore, SplitDigest, split_from_json
from wormhole.recovery.lease import Lease
from wormhole.verify.checksum import Digest
from wormhole.verify.sent import recorded_digest


@dataclass(frozen=True, slots=True)
class RecoveryState:
    run_id: int
    origin: int
    """The run whose destination state this run continues (its own id unless it resumes)."""
    resumed_from: int | None = None
    splits: tuple[Split, ...] | None = None
    """The splits the chain planned (None: split the source)."""
    committed: Mapping[str, int] = field(default_factory=dict)
    """Destinations a run of the chain committed (per the checkpoint): destination -> rows."""
    committed_by: Mapping[str, int] = field(default_factory=dict)
    """Destination -> the run of the chain that committed it."""
    settled: frozenset[str] = frozenset()
    """Destinations a run whose outcome was recorded committed (a retried partial task): skipped, durable or
    not (their own records went when that run's outcome was recorded)."""
    placements: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """Split -> the transform placement a run of the chain read it under (its durable rows record it)."""
    checkpointer: Checkpointer | None = None
    """Writes this run's checkpoint rows (None: no task database, nothing resumes the run)."""
    lease: Lease | None = None
    """The run's claim on its task (None: nobody else can hold it)."""
    taskdb_id: str = ""
    """The task database's id, which destinations name their kept state by."""
    window: Window | None = None
    """An incremental chain's window, as its plan recorded it (the resumed run reads the same rows)."""
    digests: Mapping[tuple[str, str], Digest] = field(default_factory=dict)
    """(destination, split) -> the digest of what it accepted of the split, as the chain recorded it before the
    destination committed the split (``settings.verify``: a resumed run verifies the splits it holds from earlier
    runs by them); from a durable row's payload where an older version recorded it there."""

    # -- the decisions -------------------------------------------------------------------------

    @staticmethod
    def durable(sink: SinkRole[Any], *, written_whole: bool = False) -> DurableFacet[Any, SplitWriter] | None:
        """How a destination makes each split durable, so it resumes and a lost split is written again (None:
        it does not): its store's facet (SplitWriters, a periphery that keeps the record), unless it is
        written whole (Spark's native write that replaces its output)."""
        return None if written_whole else sink.durable

    def committed_before(self, destination: str, durable: bool) -> int | None:
        """Rows a run of the chain committed into ``destination`` when it is to be left as it is (nothing of
        its own to ask, or a recorded run committed it: loading it again would write its rows twice)."""
        if destination in self.committed and (destination in self.settled or not durable):
            return self.committed[destination]
        return None

    def origin_for(self, fresh: bool) -> int | None:
        """The ``origin_run_id`` a destination is prepared with (None: it starts afresh)."""
        return None if fresh else self.origin

    # -- building it ---------------------------------------------------------------------------

    @classmethod
    def restore(cls, checkpoints: CheckpointStore | None, *, task_id: int, run_id: int, resume_from: int | None,
                finished_runs: frozenset[int], log: Logger, stop: threading.Event, lease: Lease | None = None,
                taskdb_id: str = "", scope: str | None = None) -> RecoveryState:
        """Walk the chain of runs ``resume_from`` continues; start the run's checkpointer. ``scope``: the run is
        one table of a database task, and continues that table's plan and window alone."""
        state = cls(run_id, run_id, lease=lease, taskdb_id=taskdb_id)
        if checkpoints is not None and resume_from is not None:
            state = _walk(checkpoints, state, resume_from, finished_runs, log, scope, task_id=task_id)
        if checkpoints is None:
            return state
        checkpointer = Checkpointer(checkpoints, task_id, run_id, state.origin, log, stop, scope=scope)
        return dataclasses.replace(state, checkpointer=checkpointer)


def chain_state(checkpoints: CheckpointStore, resume_from: int, finished_runs: frozenset[int],
                log: Logger) -> RecoveryState:
    """What a run resuming ``resume_from`` would continue (its window, its splits), without starting a
    run: what ``wormhole plan --task-id`` shows."""
    return _walk(checkpoints, RecoveryState(0, 0), resume_from, finished_runs, log)


def _walk(checkpoints: CheckpointStore, state: RecoveryState, resume_from: int, finished_runs: frozenset[int],
          log: Logger, scope: str | None = None, *, task_id: int | None = None) -> RecoveryState:
    """``task_id``: the task whose split digests are read (None: none are, ``wormhole plan`` needs none)."""
    chain = Chain.read(checkpoints, resume_from)
    plan, committed = chain.plan(scope), chain.committed()
    placements = chain.placements()
    origin = plan.rows[0].origin_run_id if plan.rows else chain.root
    splits = tuple(split_from_json(r.payload) for r in plan.rows if r.payload is not None) or None
    log.info("task.resuming", resumed_from_run=resume_from, origin_run=origin, plan_of_run=plan.run,
             planned_splits=len(plan.rows), durable_in_checkpoint=plan.kept, committed=sorted(committed),
             placements_recorded=len(placements))
    return RecoveryState(state.run_id, origin, resume_from, splits, {d: rows for d, (rows, _) in committed.items()},
                         {d: by for d, (_, by) in committed.items()},
                         frozenset(d for d, (_, by) in committed.items() if by in finished_runs),
                         placements, lease=state.lease, taskdb_id=state.taskdb_id, window=plan.window,
                         digests=_digests(chain, checkpoints.split_digests(task_id, origin) if task_id is not None
                                          else {}))


def _digests(chain: Chain, recorded: Mapping[tuple[str, str], SplitDigest]) -> dict[tuple[str, str], Digest]:
    """The chain's split digests: ``recorded`` (each written before its split's commit), and where a split has
    none there, the one an older version wrote into its durable row's payload (after the commit)."""
    out: dict[tuple[str, str], Digest] = {}
    for key, payload in chain.digests().items():
        try:
            found = recorded_digest(json.loads(payload))
        except (ValueError, TypeError, AttributeError):
            continue
        if found is not None:
            out[key] = found
    for key, row in recorded.items():
        try:
            found = recorded_digest({"digest": row.digest, "checksum_version": row.checksum_version})
        except ValueError:
            continue
        if found is not None:
            out[key] = found
    return out

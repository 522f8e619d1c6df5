"""An incremental task's state key, held while its run runs: two runs of one incremental job never overlap,
or both would read the same window."""

from __future__ import annotations

from typing import Any, Protocol

from wormhole import incremental
from wormhole.errors import TaskDbError
from wormhole.runner.claim import Claim
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import TaskStore


class Waiting(Protocol):
    def stopped(self, wait_s: float = 0.0) -> bool:
        """Whether the run was asked to stop (waiting up to ``wait_s`` for it)."""


def state_key(spec: TaskSpec, task_id: int) -> str | None:
    """The state key an incremental task's runs hold while they run (None: not incremental)."""
    inc = spec.source.incremental
    return None if inc is None else incremental.state_key(inc.state_key, spec.name, task_id)


def hold_state_key(store: TaskStore, key: str, claim: Claim, run_id: int, engine: Waiting, logger: Any) -> None:
    """Wait until this run holds ``key``: two runs of one incremental job (one state key) never overlap,
    or both would read the same window. A holder whose heartbeat is older than ``claim.stale_s`` (its
    process died) holds it no longer. The heartbeat goes on meanwhile; a stop ends the wait."""
    stale_s = claim.conf.claim.stale_s
    told = False
    while not engine.stopped():
        holder = claim.patience("lock the state key", lambda: store.lock_state(key, claim.task_id, run_id,
                                                                                claim.claimed_by, stale_s))
        if holder is None:
            if told:
                logger.info("incremental.state_key_locked", state_key=key)
            return
        if not told:
            logger.warning("incremental.waiting", state_key=key, held_by_task=holder.task_id,
                           held_by_run=holder.run_id, claimed_by=holder.claimed_by,
                           reason=f"run {holder.run_id} of task {holder.task_id} is running the state key {key!r}: "
                                  "this run starts once it ends")
            told = True
        engine.stopped(min(1.0, claim.conf.claim.heartbeat_s))


def release_state_key(store: TaskStore, key: str, claim: Claim, logger: Any) -> None:
    try:
        store.unlock_state(key, claim.task_id, claim.claimed_by)
    except TaskDbError as exc:
        logger.warning("incremental.unlock_failed", state_key=key, error=str(exc))

"""The claim a run holds on its task: taken (or adopted from a daemon, or taken over from a dead process),
kept alive by a heartbeat thread, seen by the engine's writers as a lease, and released with the outcome.

A running task whose heartbeat is older than ``claim.stale_s`` lost its process (SIGKILL, a dead machine):
``wormhole --task-id N`` takes it over and resumes the crashed run. A fresher claim is never taken, and a
process that finds its claim taken over stops its engine, so two never write at once.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from wormhole.config import EngineConf
from wormhole.recovery.lease import Lease
from wormhole.result import EXIT_BAD_TASK, EXIT_CLAIMED
from wormhole.runner.observers import LatestProgress
from wormhole.runner.patience import Patience
from wormhole.schedule import next_wait
from wormhole.taskdb import SqlTaskStore, TaskRecord, TaskStore, open_store
from wormhole.taskdb.sql import utcnow


def process_token() -> str:
    """The claim token of this process: its host and pid (a daemon adds which of its claims it is)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Claim:
    """Who runs the task, and the heartbeat thread that keeps the claim alive while it runs."""

    def __init__(self, task_db: str | None, task_id: int, claimed_by: str, conf: EngineConf, *,
                 adopted: bool, patience: Patience) -> None:
        self.task_db = task_db
        self.patience = patience
        self.task_id = task_id
        self.claimed_by = claimed_by
        self.adopted = adopted  # the daemon claimed under claimed_by: its child adopts, never claims
        self.conf = conf
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lease: Lease | None = None
        self.claimed_at = time.monotonic()
        """Taken before the claim is made: the lease runs from here until the first heartbeat."""
        self.tick: datetime | None = None
        """The schedule's tick the run was claimed for (a recurring task's), from the task row."""
        self.schedule: str | None = None
        """A recurring task's cron expression (``settings.schedule``), once its spec is valid."""

    def finish(self, store: TaskStore, run_id: int, **outcome: Any) -> bool:
        """Record the run's outcome under this claim: False when the claim was taken over. A task
        database that refuses is waited for up to ``claim.stale_s``: the run's work is done and the
        update is conditional on the claim, so writing it late is safe, and losing it would leave
        the task crashed (a daemon) or running (a process run by hand) when it had finished."""
        tries = 0
        if self.schedule is not None:  # the task waits for its next tick, whatever the run's outcome
            redo = outcome["run_status"] == "interrupted"
            outcome["schedule"] = (self.schedule, next_wait(self.schedule, self.tick, redo=redo, now=utcnow()))

        def write() -> bool:
            nonlocal tries
            tries += 1
            if store.finish(self.task_id, run_id, claimed_by=self.claimed_by, **outcome):
                return True
            # A retry after a commit whose answer was lost finds the outcome already written.
            return tries > 1 and any(r.id == run_id and r.status == outcome["run_status"]
                                     for r in store.runs(self.task_id))

        return self.patience("record the outcome", write, for_s=self.conf.claim.stale_s)

    def lease(self, logger: Any) -> Lease:
        """The claim as the engine's writers see it: live for stale_s - heartbeat_s after a heartbeat."""
        claim = self.conf.claim
        lease = Lease(claim.stale_s - claim.heartbeat_s, logger, renewed_at=self.claimed_at)
        self._lease = lease
        return lease

    def start_heartbeat(self, engine: Stoppable, logger: Any, progress: LatestProgress | None = None) -> None:
        """Beat every ``claim.heartbeat_s`` (writing ``progress``'s latest snapshot with it), and stop the
        engine when the claim is lost or the console asked the run to stop (a cancel row for this claim)."""
        self._thread = threading.Thread(target=self._beat, args=(engine, logger, progress), daemon=True,
                                        name="task-heartbeat")
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self, engine: Stoppable, logger: Any, progress: LatestProgress | None) -> None:
        # A connection of its own: a store connection is not shared between threads.
        store: SqlTaskStore | None = None
        cancelled = False
        try:
            while not self._stop.wait(self.conf.claim.heartbeat_s):
                sent_at = time.monotonic()
                try:
                    store = store or open_store(self.task_db)
                    if store.beat(self.task_id, self.claimed_by, progress.take() if progress else None):
                        if self._lease is not None:
                            self._lease.renewed(sent_at)
                        cancelled = cancelled or self._cancelled(store, engine, logger)
                        continue
                except Exception as exc:  # this thread must not die: the writers wait on its lease
                    # Not fatal: the claim stays ours until stale_s passes without a beat (meanwhile the
                    # lease holds back commits); a fresh connection tries again next period.
                    logger.warning("task.heartbeat_failed", error=str(exc), error_code=getattr(exc, "code", None))
                    if store is not None:
                        store.close()
                        store = None
                    continue
                logger.error("task.claim_lost", claimed_by=self.claimed_by, error_code="TASK_CLAIMED",
                             error=f"task {self.task_id} is no longer running under the claim {self.claimed_by} "
                                   "(another process took it over): stopping, so two never write at once")
                engine.abandon("claim lost: another process took the task over")
                return
        finally:
            if store is not None:
                store.close()


    def _cancelled(self, store: SqlTaskStore, engine: Stoppable, logger: Any) -> bool:
        """Stop the engine as SIGTERM does (it rolls back, the run ends ``interrupted``) when the console
        asked this claim's run to stop; whether it did."""
        actor = store.cancel_requested(self.task_id, self.claimed_by)
        if actor is None:
            return False
        logger.warning("task.cancel_requested", actor=actor, claimed_by=self.claimed_by)
        engine.stop(f"cancelled by {actor}")
        return True


class Stoppable(Protocol):
    def abandon(self, reason: str) -> None: ...

    def stop(self, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Claimed:
    """The claim is ours: the task's row, and the run it resumes (None: it starts afresh)."""

    record: TaskRecord
    resume_from: int | None


def take(store: TaskStore, claim: Claim, logger: Any) -> Claimed | int:
    """Claim the task (adopt a daemon's claim, or take over a dead process's); the exit code when refused."""
    task_id, claimed_by, conf, patience = claim.task_id, claim.claimed_by, claim.conf, claim.patience
    record = patience("read the task", lambda: store.get(task_id))
    if record is None:
        logger.error("task.not_found", error=f"no task with id {task_id} in {store.url}", error_code="TASK_NOT_FOUND")
        return EXIT_BAD_TASK
    resume_from: int | None = None
    claim.tick = record.tick_at
    if claim.adopted:
        if not patience("adopt the claim", lambda: store.adopt(task_id, claimed_by)):
            return refused(store, task_id, logger, f"running under the claim {claimed_by}")
    elif not store.claim(task_id, claimed_by):
        current = store.get(task_id)
        if current is None or current.status != "running":
            return refused(store, task_id, logger, "pending")
        age = store.heartbeat_age(task_id)
        taken = store.take_over(task_id, claimed_by, conf.claim.stale_s)
        if taken is None:
            return refused(store, task_id, logger, "pending", stale_s=conf.claim.stale_s)
        resume_from = taken or None  # 0: the crashed claim never started a run, so nothing to resume
        logger.warning("task.taken_over", claimed_by=claimed_by, previous_claimed_by=current.claimed_by,
                       heartbeat_age_s=None if age is None else round(age, 3), stale_s=conf.claim.stale_s,
                       resumed_from=resume_from)
    patience.holding(claim.claimed_at)
    return Claimed(record, resume_from)


def refused(store: TaskStore, task_id: int, logger: Any, wanted: str, stale_s: float | None = None) -> int:
    current = store.get(task_id)
    status = current.status if current else "gone"
    owner = current.claimed_by if current else None
    if stale_s is not None and status == "running":
        age = store.heartbeat_age(task_id)
        seen = "never" if age is None else f"{age:.1f} s ago"
        logger.error("task.claim_refused", status=status, claimed_by=owner, heartbeat_age_s=age, stale_s=stale_s,
                     error_code="TASK_CLAIMED",
                     error=f"task {task_id} is running, claimed by {owner}, whose last heartbeat was {seen} "
                           f"(claim.stale_s = {stale_s:g}): its process is alive, so the task is not taken over. "
                           f"Once its heartbeat is older than claim.stale_s, `wormhole --task-id {task_id}` "
                           "takes it over and resumes it")
        return EXIT_CLAIMED
    logger.error("task.claim_refused", status=status, claimed_by=owner, error_code="TASK_CLAIMED",
                 error=f"task {task_id} is {status} (claimed by {owner}); only a task {wanted} can be run"
                       + next_step(task_id, status))
    return EXIT_CLAIMED


def next_step(task_id: int, status: str) -> str:
    """What makes a task of ``status`` runnable again: the command that works for that status."""
    if status in ("failed", "partial"):
        return f". `wormhole task retry {task_id}` makes it pending again (its next run resumes it)"
    if status == "success":
        return (f". `wormhole task retry {task_id} --force` makes it pending again, to load its destinations "
                "again (or submit the task anew)")
    if status == "scheduled":
        return ". A recurring task: `wormhole daemon` runs it at its schedule's ticks"
    return ""


def claim_lost(claim: Claim, logger: Any) -> int:
    """The task row belongs to the process that took the claim over: this run's outcome is not recorded."""
    logger.error("task.outcome_not_recorded", claimed_by=claim.claimed_by, error_code="TASK_CLAIMED",
                 error=f"task {claim.task_id} was taken over by another process: this run's outcome is not recorded")
    return EXIT_CLAIMED

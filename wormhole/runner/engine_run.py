"""The engine's run under a claim: its heartbeat, the signals that stop it, an incremental task's state
key, and the outcome recorded on the task row."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from wormhole.database.expand import is_database_task
from wormhole.database.run import DatabaseRun
from wormhole.engine import Engine
from wormhole.result import EXIT_FAILED, verify_summary
from wormhole.runner.claim import Claim, claim_lost
from wormhole.runner.observers import LatestProgress, RunObservers
from wormhole.runner.signals import install_signal_handlers, restore_signal_handlers
from wormhole.runner.state_key import hold_state_key, release_state_key, state_key
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import SqlTaskStore, TaskStore


@dataclass(frozen=True, slots=True)
class EngineRun:
    """A recorded run of a claimed task, its spec valid: what the engine runs."""

    checkpoints: SqlTaskStore
    """A task-database connection of the engine's own (its checkpoints)."""
    spec: TaskSpec
    claim: Claim
    run_id: int
    resume_from: int | None
    """The run this one resumes (None: it starts afresh)."""
    finished: frozenset[int]
    """The task's runs that ended partial: what they committed is skipped."""


def lost(claim: Claim, logger: Any, observers: RunObservers) -> int:
    """Another process took the claim over: this run's outcome is not recorded."""
    observers.set_state("interrupted")
    return claim_lost(claim, logger)


def run_engine(store: TaskStore, run: EngineRun, logger: Any, observers: RunObservers) -> int:
    """Run the engine under the claim (its heartbeat beating, SIGTERM/SIGINT stopping it, an incremental
    task's state key held) and record its outcome; the exit code."""
    claim, spec, run_id, task_id = run.claim, run.spec, run.run_id, run.claim.task_id
    with observers.watching() as listeners:
        progress = LatestProgress(run_id)  # what the heartbeat writes for the console
        make = DatabaseRun if is_database_task(spec) else Engine
        engine = make(claim.conf, spec, task_id=task_id, run_id=run_id, log=logger, listeners=[*listeners, progress],
                        checkpoints=run.checkpoints, resume_from=run.resume_from, lease=claim.lease(logger),
                        taskdb_id=run.checkpoints.taskdb_id(), finished_runs=run.finished)
        previous = install_signal_handlers(engine, logger)
        claim.start_heartbeat(engine, logger, progress)
        key = state_key(spec, task_id)
        try:
            if key is not None:
                hold_state_key(store, key, claim, run_id, engine, logger)
            outcome = engine.run()
        except Exception as exc:  # a bug of ours: still record it, never leave the task 'running'
            logger.exception("task.crashed", error=str(exc))
            claim.stop_heartbeat()
            if not claim.finish(store, run_id, status="failed", run_status="failed", exit_code=EXIT_FAILED,
                                result=None, error=f"internal error: {type(exc).__name__}: {exc}"):
                return lost(claim, logger, observers)
            observers.set_state("failed")
            return EXIT_FAILED
        finally:
            claim.stop_heartbeat()  # before finish(): no beat may follow the final update
            restore_signal_handlers(previous)
            # A lock left behind (a refusing database) is no one's once the task no longer runs under the claim.
            if key is not None:
                release_state_key(store, key, claim, logger)
    if not claim.finish(store, run_id, status=outcome.status, run_status=outcome.run_status,
                        exit_code=outcome.exit_code, result=json.dumps(outcome.result, default=str),
                        error=outcome.error):
        return lost(claim, logger, observers)
    engine.release()  # the outcome is recorded: no run resumes this one, so the destinations' records go
    observers.set_state(outcome.run_status)
    observers.show_outcome(outcome.status, outcome.exit_code, outcome.result, spec)
    logger.info("task.finished", status=outcome.status, exit_code=outcome.exit_code,
                duration_s=outcome.result["duration_s"], rows_read=outcome.result["source"]["rows_read"],
                destinations={k: {"status": v["status"], "written": v["rows_written"], "rejected": v["rows_rejected"],
                                  "error": v["error"]}
                              for k, v in outcome.result["destinations"].items()},
                dirty_file=outcome.result["dirty_file"], error=outcome.error,
                **({"verify": summary} if (summary := verify_summary(outcome.result)) else {}))
    return outcome.exit_code


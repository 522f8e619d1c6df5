"""Running one task of the task database (:func:`run_task`), for ``wormhole --task-id N``, ``wormhole run FILE``
and each child of ``wormhole daemon``.

A task is claimed before it is validated, so a bad spec ends ``failed`` with the reason, never ``pending``
forever; every outcome is written to the task row; SIGTERM/SIGINT stop the Engine, which rolls back and
records ``interrupted``. While it runs, the process beats the claim's heartbeat (:mod:`wormhole.runner.claim`).
"""

from __future__ import annotations

import json
from typing import Any

from wormhole.config import EngineConf
from wormhole.errors import InvalidTaskConfig, WormholeError
from wormhole.planning.channels import speed_limits
from wormhole.recovery.leftovers import next_run_resumes
from wormhole.result import EXIT_BAD_TASK, EXIT_FAILED
from wormhole.runner.claim import Claim, Claimed, process_token, take
from wormhole.runner.engine_run import EngineRun, lost, run_engine
from wormhole.runner.observers import RunObservers
from wormhole.runner.patience import Patience
from wormhole.runner.request import RunRequest
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import RunRecord, SqlTaskStore, TaskRecord, TaskStore, open_store
from wormhole.variables import Resolved, resolve_text, unset_environment, values_for_run


def run_task(request: RunRequest, observers: RunObservers, logger: Any) -> int:
    """Claim (or, with ``request.adopt``, take over the claim made under that token) and run one task; the
    exit code. Every outcome is written to the task row; ``observers`` are closed at the end."""
    try:
        conf = EngineConf.load(request.conf_dir)
        patience = Patience(conf, request.adopt is not None, logger)
        store = patience("open", lambda: open_store(request.task_db))
    except WormholeError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        observers.close(hold=False)  # nothing ran: nothing for a scraper to read
        return exc.exit_code
    checkpoints: SqlTaskStore | None = None
    try:
        if not observers.start():
            return EXIT_FAILED
        # Opened before the claim: a database that cannot give the engine its own connection leaves
        # the task unclaimed, not running without checkpoints.
        checkpoints = patience("open", lambda: open_store(request.task_db))
        patience("read the task database id", checkpoints.taskdb_id)
        claim = Claim(request.task_db, request.task_id, request.adopt or process_token(), conf,
                      adopted=request.adopt is not None, patience=patience)
        claimed = take(store, claim, logger)
        if not isinstance(claimed, Claimed):
            return claimed
        return _run_claimed(store, checkpoints, claim, claimed, logger, observers)
    except WormholeError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        return exc.exit_code
    finally:
        store.close()
        if checkpoints is not None:
            checkpoints.close()
        observers.close()


def _run_claimed(store: TaskStore, checkpoints: SqlTaskStore, claim: Claim, claimed: Claimed, logger: Any,
                 observers: RunObservers) -> int:
    """The task is ours: record the run, check the spec, run the engine and record the outcome."""
    task_id, record, patience = claim.task_id, claimed.record, claim.patience
    runs = patience("read the runs", lambda: store.runs(task_id))
    resume_from = claimed.resume_from
    if resume_from is None:
        # A run that crashed before (taken over later by `task retry --force`, or settled by the
        # daemon) left durable state: the next run resumes it instead of writing it all again. A
        # partial run (the task retried) is resumed too: what its chain committed is not loaded twice.
        resume_from = next_run_resumes(record, runs)
    # Runs whose outcome was recorded: their destinations released their own records, so what they
    # committed is known from the checkpoint alone (also after a crash of the retry that resumed them).
    finished = frozenset(r.id for r in runs if r.status == "partial")
    resolved = _variables(record, runs, resume_from)
    run_id = patience("start the run", lambda: _start_run(store, claim, resume_from, {r.id for r in runs}, resolved))
    observers.for_run(run_id)
    logger = logger.bind(run_id=run_id)
    logger.info("task.claimed", claimed_by=claim.claimed_by, name=record.name, resumed_from=resume_from,
                **({"variables": resolved.shown()} if resolved.used else {}))
    observers.set_state("running")
    spec = _checked(store, claim, run_id, resolved, logger, observers)
    if isinstance(spec, int):
        return spec
    unset = unset_environment(resolved.document)
    if unset:  # the first store to connect fails naming its own: the log names every one at once
        logger.warning("task.environment_unset", problems=unset)
    return run_engine(store, EngineRun(checkpoints, spec, claim, run_id, resume_from, finished), logger, observers)


def _checked(store: TaskStore, claim: Claim, run_id: int, resolved: Resolved, logger: Any,
             observers: RunObservers) -> TaskSpec | int:
    """The task's spec, valid; else the task ends 'failed' with the reason, whatever the row holds (never
    left 'running'): the exit code."""
    try:
        spec = TaskSpec.from_mapping(resolved.check())
        speed_limits(spec.settings.speed, claim.conf)  # a job limit needs its per-channel limit (exit 204)
        claim.schedule = spec.settings.schedule
        return spec
    except InvalidTaskConfig as exc:
        logger.error("task.invalid", problems=exc.problems, error_code=exc.code)
        result = {"task_id": claim.task_id, "run_id": run_id, "status": "failed", "exit_code": EXIT_BAD_TASK,
                  "error": str(exc), "problems": exc.problems}
        if not claim.finish(store, run_id, status="failed", run_status="failed", exit_code=EXIT_BAD_TASK,
                            result=json.dumps(result), error=str(exc)):
            return lost(claim, logger, observers)
        observers.set_state("failed")
        return EXIT_BAD_TASK


def _variables(record: TaskRecord, runs: list[RunRecord], resume_from: int | None) -> Resolved:
    """The spec with its job variables resolved, once, as the run starts: a resumed run takes the values
    the run it resumes recorded (its window must be the same), the others the row's params and the
    built-ins of now. Problems (exit 204) are raised by ``check()`` once the run is recorded."""
    recorded = next((r.variables for r in runs if r.id == resume_from), None)
    try:
        values = values_for_run(record.params, recorded, tick=record.tick_at)
    except InvalidTaskConfig as exc:
        return Resolved(None, problems=tuple(exc.problems))
    return resolve_text(record.spec, values)


def _start_run(store: TaskStore, claim: Claim, resume_from: int | None, known: set[int], resolved: Resolved) -> int:
    # Tried again after a failure, the insert may have committed with its answer lost: a run of ours that
    # appeared since is that one, not a reason for a second.
    new = [r for r in store.runs(claim.task_id) if r.id not in known]
    if new and new[-1].claimed_by == claim.claimed_by and new[-1].status == "running":
        return new[-1].id
    variables = json.dumps(resolved.used, ensure_ascii=False) if resolved.used else None
    return store.start_run(claim.task_id, claim.claimed_by, resumed_from=resume_from, variables=variables)

"""Running one task: ``wormhole --task-id N`` (:func:`run_task`) and ``wormhole run FILE``.

A task is claimed before it is validated, so a bad spec ends ``failed`` with the reason, never
``pending`` forever; every outcome is written to the task row; SIGTERM/SIGINT stop the Engine,
which rolls back and records ``interrupted``.

While it runs, the process writes the task's heartbeat every ``claim.heartbeat_s``. A running task
whose heartbeat is older than ``claim.stale_s`` lost its process (SIGKILL, a dead machine):
``wormhole --task-id N`` takes it over and resumes the crashed run. A fresher claim is never taken,
and a process that finds its claim taken over stops its engine, so two never write at once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

import click

from wormhole import incremental, log
from wormhole.cli.common import (
    NAME_OPTION,
    PARAMS_OPTION,
    check_environment,
    fail,
    global_options,
    read_spec,
    submit,
    task_store,
    unset_environment,
)
from wormhole.cli.observe import ObserveOptions, Observers, run_options
from wormhole.cli.spark import SPARK_MASTER_OPTION
from wormhole.config import EngineConf, TaskSpec
from wormhole.engine import EXIT_BAD_TASK, EXIT_CLAIMED, EXIT_FAILED, Engine
from wormhole.errors import InvalidTaskConfig, TaskDbError, WormholeError
from wormhole.planning.channels import speed_limits
from wormhole.recovery.lease import Lease
from wormhole.recovery.leftovers import next_run_resumes
from wormhole.schedule import next_wait
from wormhole.taskdb import RunRecord, SqlTaskStore, TaskRecord, TaskStore, open_store
from wormhole.taskdb.sql import utcnow
from wormhole.variables import Resolved, resolve_text, values_for_run


def run_task(task_id: int, task_db: str | None, conf_dir: str | None, *, adopt: str | None = None,
             observe: ObserveOptions | None = None, observers: Observers | None = None) -> int:
    """Claim (or, with ``adopt``, take over the claim made under that token) and run one task; return
    the exit code. Every outcome is written to the task row. ``observers`` already started (``run
    FILE``'s) are used, and closed, instead of ones made from ``observe``."""
    logger = log.get_logger(task_id=task_id)
    if observers is None:
        observers = Observers(observe or ObserveOptions(), task_id, logger)
    else:
        observers.for_task(task_id, logger)
    try:
        conf = EngineConf.load(conf_dir)
        patience = _Patience(conf, adopt is not None, logger)
        store = patience("open", lambda: open_store(task_db))
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
        checkpoints = patience("open", lambda: open_store(task_db))
        patience("read the task database id", checkpoints.taskdb_id)
        claim = _Claim(task_db, task_id, adopt or f"{socket.gethostname()}:{os.getpid()}", conf,
                       adopted=adopt is not None, patience=patience)
        return _claim_and_run(store, checkpoints, conf, claim, logger, observers, patience)
    except WormholeError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        return exc.exit_code
    finally:
        store.close()
        if checkpoints is not None:
            checkpoints.close()
        observers.close()


_T = TypeVar("_T")


class _Patience:
    """A daemon's child (``adopted``) waits out a task database that refuses it before its run starts,
    while the daemon's claim is still good (``claim.stale_s - heartbeat_s`` from the child's start): the
    daemon reached the database a moment ago, so a failure now is the database going away for a while,
    which the daemon waits out too, not a reason to fail the task. Anyone else fails at once."""

    def __init__(self, conf: EngineConf, adopted: bool, logger: log.Logger) -> None:
        self._good_for = conf.claim.stale_s - conf.claim.heartbeat_s
        self._deadline = time.monotonic() + self._good_for if adopted else 0.0
        self._logger = logger

    def holding(self, since: float) -> None:
        """The claim is ours, taken at ``since``: until it could go stale, no one else may take the task,
        so a refusing database is waited for by anyone (a failure now would leave the task claimed)."""
        self._deadline = max(self._deadline, since + self._good_for)

    def __call__(self, what: str, call: Callable[[], _T], *, for_s: float | None = None) -> _T:
        """``call()``, retried on a task database error until the deadline, or for ``for_s`` from now."""
        deadline = self._deadline if for_s is None else time.monotonic() + for_s
        wait = 0.5
        while True:
            try:
                return call()
            except TaskDbError as exc:
                if time.monotonic() + wait > deadline:
                    raise
                self._logger.warning("task.taskdb_unreachable", step=what, error=str(exc), retry_in_s=wait)
            time.sleep(wait)
            wait = min(wait * 2, 5.0)


class _Claim:
    """Who runs the task, and the heartbeat thread that keeps the claim alive while it runs."""

    def __init__(self, task_db: str | None, task_id: int, claimed_by: str, conf: EngineConf, *,
                 adopted: bool, patience: _Patience) -> None:
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

    def start_heartbeat(self, engine: _Stoppable, logger: Any) -> None:
        self._thread = threading.Thread(target=self._beat, args=(engine, logger), daemon=True, name="task-heartbeat")
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self, engine: _Stoppable, logger: Any) -> None:
        # A connection of its own: a store connection is not shared between threads.
        store: SqlTaskStore | None = None
        try:
            while not self._stop.wait(self.conf.claim.heartbeat_s):
                sent_at = time.monotonic()
                try:
                    store = store or open_store(self.task_db)
                    if store.beat(self.task_id, self.claimed_by):
                        if self._lease is not None:
                            self._lease.renewed(sent_at)
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


class _Stoppable(Protocol):
    def abandon(self, reason: str) -> None: ...


def _claim_and_run(store: TaskStore, checkpoints: SqlTaskStore, conf: EngineConf, claim: _Claim, logger: Any,
                   observers: Observers, patience: _Patience) -> int:
    task_id, claimed_by = claim.task_id, claim.claimed_by
    record = patience("read the task", lambda: store.get(task_id))
    if record is None:
        logger.error("task.not_found", error=f"no task with id {task_id} in {store.url}", error_code="TASK_NOT_FOUND")
        return EXIT_BAD_TASK
    resume_from: int | None = None
    claim.tick = record.tick_at
    if claim.adopted:
        if not patience("adopt the claim", lambda: store.adopt(task_id, claimed_by)):
            return _refused(store, task_id, logger, f"running under the claim {claimed_by}")
    elif not store.claim(task_id, claimed_by):
        current = store.get(task_id)
        if current is None or current.status != "running":
            return _refused(store, task_id, logger, "pending")
        age = store.heartbeat_age(task_id)
        taken = store.take_over(task_id, claimed_by, conf.claim.stale_s)
        if taken is None:
            return _refused(store, task_id, logger, "pending", stale_s=conf.claim.stale_s)
        resume_from = taken or None  # 0: the crashed claim never started a run, so nothing to resume
        logger.warning("task.taken_over", claimed_by=claimed_by, previous_claimed_by=current.claimed_by,
                       heartbeat_age_s=None if age is None else round(age, 3), stale_s=conf.claim.stale_s,
                       resumed_from=resume_from)
    patience.holding(claim.claimed_at)
    runs = patience("read the runs", lambda: store.runs(task_id))
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
    logger.info("task.claimed", claimed_by=claimed_by, name=record.name, resumed_from=resume_from,
                **({"variables": resolved.shown()} if resolved.used else {}))
    observers.set_state("running")
    try:
        spec = TaskSpec.from_mapping(resolved.check())
        speed_limits(spec.settings.speed, conf)  # a job limit needs its per-channel limit (exit 204)
        claim.schedule = spec.settings.schedule
    except InvalidTaskConfig as exc:
        # Whatever the row holds, the task ends 'failed' with the reason: never left 'running'.
        logger.error("task.invalid", problems=exc.problems, error_code=exc.code)
        result = {"task_id": task_id, "run_id": run_id, "status": "failed", "exit_code": EXIT_BAD_TASK,
                  "error": str(exc), "problems": exc.problems}
        if not claim.finish(store, run_id, status="failed", run_status="failed", exit_code=EXIT_BAD_TASK,
                            result=json.dumps(result), error=str(exc)):
            return _claim_lost(claim, logger, observers)
        observers.set_state("failed")
        return EXIT_BAD_TASK
    unset = unset_environment(resolved.document)
    if unset:  # the first store to connect fails naming its own: the log names every one at once
        logger.warning("task.environment_unset", problems=unset)
    return _run_engine(store, checkpoints, conf, spec, claim, run_id, (resume_from, finished), logger, observers)


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


def _start_run(store: TaskStore, claim: _Claim, resume_from: int | None, known: set[int], resolved: Resolved) -> int:
    # Tried again after a failure, the insert may have committed with its answer lost: a run of ours that
    # appeared since is that one, not a reason for a second.
    new = [r for r in store.runs(claim.task_id) if r.id not in known]
    if new and new[-1].claimed_by == claim.claimed_by and new[-1].status == "running":
        return new[-1].id
    variables = json.dumps(resolved.used, ensure_ascii=False) if resolved.used else None
    return store.start_run(claim.task_id, claim.claimed_by, resumed_from=resume_from, variables=variables)


def _refused(store: TaskStore, task_id: int, logger: Any, wanted: str, stale_s: float | None = None) -> int:
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
                       + _next_step(task_id, status))
    return EXIT_CLAIMED


def _next_step(task_id: int, status: str) -> str:
    """What makes a task of ``status`` runnable again: the command that works for that status."""
    if status in ("failed", "partial"):
        return f". `wormhole task retry {task_id}` makes it pending again (its next run resumes it)"
    if status == "success":
        return (f". `wormhole task retry {task_id} --force` makes it pending again, to load its destinations "
                "again (or submit the task anew)")
    if status == "scheduled":
        return ". A recurring task: `wormhole daemon` runs it at its schedule's ticks"
    return ""


def _claim_lost(claim: _Claim, logger: Any, observers: Observers) -> int:
    # The task row belongs to the process that took the claim over: this run's outcome is not recorded.
    logger.error("task.outcome_not_recorded", claimed_by=claim.claimed_by, error_code="TASK_CLAIMED",
                 error=f"task {claim.task_id} was taken over by another process: this run's outcome is not recorded")
    observers.set_state("interrupted")
    return EXIT_CLAIMED


def _run_engine(store: TaskStore, checkpoints: SqlTaskStore, conf: EngineConf, spec: TaskSpec, claim: _Claim,
                run_id: int, resume: tuple[int | None, frozenset[int]], logger: Any, observers: Observers) -> int:
    """``resume``: the run this one resumes (or None), and the task's runs that ended partial."""
    task_id = claim.task_id
    resume_from, finished = resume
    with observers.watching() as listeners:
        engine = Engine(conf, spec, task_id=task_id, run_id=run_id, log=logger, listeners=listeners,
                        checkpoints=checkpoints, resume_from=resume_from, lease=claim.lease(logger),
                        taskdb_id=checkpoints.taskdb_id(), finished_runs=finished)
        previous = _install_signal_handlers(engine, logger)
        claim.start_heartbeat(engine, logger)
        key = _state_key(spec, task_id)
        try:
            if key is not None:
                _hold_state_key(store, key, claim, run_id, engine, logger)
            outcome = engine.run()
        except Exception as exc:  # a bug of ours: still record it, never leave the task 'running'
            logger.exception("task.crashed", error=str(exc))
            claim.stop_heartbeat()
            if not claim.finish(store, run_id, status="failed", run_status="failed", exit_code=EXIT_FAILED,
                                result=None, error=f"internal error: {type(exc).__name__}: {exc}"):
                return _claim_lost(claim, logger, observers)
            observers.set_state("failed")
            return EXIT_FAILED
        finally:
            claim.stop_heartbeat()  # before finish(): no beat may follow the final update
            _restore_signal_handlers(previous)
            # A lock left behind (a refusing database) is no one's once the task no longer runs under the claim.
            if key is not None:
                _release_state_key(store, key, claim, logger)
    if not claim.finish(store, run_id, status=outcome.status, run_status=outcome.run_status,
                        exit_code=outcome.exit_code, result=json.dumps(outcome.result, default=str),
                        error=outcome.error):
        return _claim_lost(claim, logger, observers)
    engine.release()  # the outcome is recorded: no run resumes this one, so the destinations' records go
    observers.set_state(outcome.run_status)
    observers.show_outcome(outcome.status, outcome.exit_code, outcome.result, spec)
    logger.info("task.finished", status=outcome.status, exit_code=outcome.exit_code,
                duration_s=outcome.result["duration_s"], rows_read=outcome.result["source"]["rows_read"],
                destinations={k: {"status": v["status"], "written": v["rows_written"], "rejected": v["rows_rejected"],
                                  "error": v["error"]}
                              for k, v in outcome.result["destinations"].items()},
                dirty_file=outcome.result["dirty_file"], error=outcome.error)
    return outcome.exit_code


def _state_key(spec: TaskSpec, task_id: int) -> str | None:
    """The state key an incremental task's runs hold while they run (None: not incremental)."""
    inc = spec.source.incremental
    return None if inc is None else incremental.state_key(inc.state_key, spec.name, task_id)


def _hold_state_key(store: TaskStore, key: str, claim: _Claim, run_id: int, engine: Engine, logger: Any) -> None:
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


def _release_state_key(store: TaskStore, key: str, claim: _Claim, logger: Any) -> None:
    try:
        store.unlock_state(key, claim.task_id, claim.claimed_by)
    except TaskDbError as exc:
        logger.warning("incremental.unlock_failed", state_key=key, error=str(exc))


def _install_signal_handlers(engine: Engine, logger: Any) -> dict[int, Any]:
    previous: dict[int, Any] = {}

    def stop(name: str) -> None:
        logger.warning("task.signal_received", signal=name)
        engine.stop(f"interrupted by {name}")

    def handler(signum: int, _frame: Any) -> None:
        # The handler runs on the main thread between two bytecodes, maybe while that thread holds the
        # log stream's lock or an Event's: logging or stopping from here could deadlock on it. A thread
        # of its own waits for those locks instead.
        threading.Thread(target=stop, args=(signal.Signals(signum).name,), daemon=True,
                         name="signal-stop").start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    return previous


def _restore_signal_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@click.command("run")
@click.argument("file", type=click.Path(dir_okay=False))
@NAME_OPTION
@PARAMS_OPTION
@run_options
@SPARK_MASTER_OPTION
@global_options
@click.pass_context
def run_file(ctx: click.Context, file: str, name: str | None, params: dict[str, str]) -> None:
    """Validate FILE, record it as a task, run it now and exit with its code (like `datax.py job.json`).

    An embedded SQLite task database is created and initialised when missing; a MySQL one must
    exist (`wormhole db init`). An invalid file (or a ${NAME} with no value) exits 204 and records
    nothing. -p values are recorded as the task row's params, so a retry or takeover uses them too.
    """
    # Loads engine.toml too: a broken one leaves no recorded task behind.
    text, spec, resolved = read_spec(file, params)
    check_environment(resolved)
    # The metrics port is bound before the task is recorded: a busy one exits 203 leaving no task
    # behind (a pending one would be run later by a daemon, once per attempt).
    observers = Observers(ObserveOptions.of(ctx.obj), None, log.get_logger())
    if not observers.start():
        ctx.exit(EXIT_FAILED)
    try:
        task_id, task_db = _record(ctx, file, name, text, spec, params)
    except BaseException:  # fail() exits: nothing ran, so the endpoint is closed, not held
        observers.close(hold=False)
        raise
    log.get_logger(task_id=task_id).info("task.submitted", file=file, task_db=task_db)
    ctx.exit(run_task(task_id, ctx.obj.task_db, ctx.obj.conf_dir, observers=observers))


def _record(ctx: click.Context, file: str, name: str | None, text: str, spec: TaskSpec,
            params: dict[str, str]) -> tuple[int, str]:
    """Record the file as a pending task: its id, and the task database as messages show it."""
    store = task_store(ctx, create=True)
    try:
        if store.url.lower().startswith("sqlite:"):
            store.init_schema()  # idempotent: the one-step run needs no `db init` on the embedded store
        return submit(store, file, name, text, spec, params=params, now=True), store.url
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()

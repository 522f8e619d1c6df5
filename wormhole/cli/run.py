"""Running one task: ``wormhole --task-id N`` (:func:`run_task`) and ``wormhole run FILE``.

A task is claimed before it is validated, so a bad spec ends ``failed`` with the reason, never
``pending`` forever; every outcome is written to the task row; SIGTERM/SIGINT stop the Engine,
which rolls back and records ``interrupted``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from typing import Any

import click

from wormhole import log
from wormhole.cli.common import NAME_OPTION, fail, global_options, read_spec, submit, task_store
from wormhole.cli.observe import ObserveOptions, Observers, run_options
from wormhole.config import EngineConf, TaskSpec
from wormhole.engine import EXIT_BAD_TASK, EXIT_CLAIMED, EXIT_FAILED, Engine
from wormhole.errors import InvalidTaskConfig, WormholeError
from wormhole.planning.channels import speed_limits
from wormhole.taskdb import TaskStore, open_store


def run_task(task_id: int, task_db: str | None, conf_dir: str | None, *, adopt: str | None = None,
             observe: ObserveOptions | None = None) -> int:
    """Claim (or, with ``adopt``, take over the claim made under that token) and run one task; return
    the exit code. Every outcome is written to the task row."""
    logger = log.get_logger(task_id=task_id)
    try:
        conf = EngineConf.load(conf_dir)
        store = open_store(task_db)
    except WormholeError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        return exc.exit_code
    observers = Observers(observe or ObserveOptions(), task_id, logger)
    try:
        if not observers.start():
            return EXIT_FAILED
        return _claim_and_run(store, conf, task_id, logger, adopt, observers)
    except WormholeError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        return exc.exit_code
    finally:
        store.close()
        observers.close()


def _claim_and_run(store: TaskStore, conf: EngineConf, task_id: int, logger: Any, adopt: str | None,
                   observers: Observers) -> int:
    record = store.get(task_id)
    if record is None:
        logger.error("task.not_found", error=f"no task with id {task_id} in {store.url}", error_code="TASK_NOT_FOUND")
        return EXIT_BAD_TASK
    claimed_by = adopt or f"{socket.gethostname()}:{os.getpid()}"
    if not (store.adopt(task_id, adopt) if adopt else store.claim(task_id, claimed_by)):
        current = store.get(task_id)
        status = current.status if current else "gone"
        owner = current.claimed_by if current else None
        wanted = f"running under the claim {adopt}" if adopt else "pending"
        logger.error("task.claim_refused", status=status, claimed_by=owner, error_code="TASK_CLAIMED",
                     error=f"task {task_id} is {status} (claimed by {owner}); only a task {wanted} can be run. "
                           f"`wormhole task retry {task_id}` makes a failed or partial task pending again")
        return EXIT_CLAIMED
    run_id = store.start_run(task_id, claimed_by)
    logger = logger.bind(run_id=run_id)
    logger.info("task.claimed", claimed_by=claimed_by, name=record.name)
    observers.set_state("running")
    try:
        spec = TaskSpec.from_json(record.spec)
        speed_limits(spec.settings.speed, conf)  # a job limit needs its per-channel limit (exit 204)
    except InvalidTaskConfig as exc:
        # Whatever the row holds, the task ends 'failed' with the reason: never left 'running'.
        logger.error("task.invalid", problems=exc.problems, error_code=exc.code)
        result = {"task_id": task_id, "run_id": run_id, "status": "failed", "exit_code": EXIT_BAD_TASK,
                  "error": str(exc), "problems": exc.problems}
        store.finish(task_id, run_id, status="failed", run_status="failed", exit_code=EXIT_BAD_TASK,
                     result=json.dumps(result), error=str(exc))
        observers.set_state("failed")
        return EXIT_BAD_TASK
    return _run_engine(store, conf, spec, task_id, run_id, logger, observers)


def _run_engine(store: TaskStore, conf: EngineConf, spec: TaskSpec, task_id: int, run_id: int, logger: Any,
                observers: Observers) -> int:
    with observers.watching() as listeners:
        engine = Engine(conf, spec, task_id=task_id, run_id=run_id, log=logger, listeners=listeners)
        previous = _install_signal_handlers(engine, logger)
        try:
            outcome = engine.run()
        except Exception as exc:  # a bug of ours: still record it, never leave the task 'running'
            logger.exception("task.crashed", error=str(exc))
            store.finish(task_id, run_id, status="failed", run_status="failed", exit_code=EXIT_FAILED,
                         result=None, error=f"internal error: {type(exc).__name__}: {exc}")
            observers.set_state("failed")
            return EXIT_FAILED
        finally:
            _restore_signal_handlers(previous)
    store.finish(task_id, run_id, status=outcome.status, run_status=outcome.run_status,
                 exit_code=outcome.exit_code, result=json.dumps(outcome.result, default=str), error=outcome.error)
    observers.set_state(outcome.run_status)
    logger.info("task.finished", status=outcome.status, exit_code=outcome.exit_code,
                duration_s=outcome.result["duration_s"], rows_read=outcome.result["source"]["rows_read"],
                destinations={k: {"status": v["status"], "written": v["rows_written"], "rejected": v["rows_rejected"],
                                  "error": v["error"]}
                              for k, v in outcome.result["destinations"].items()},
                dirty_file=outcome.result["dirty_file"], error=outcome.error)
    return outcome.exit_code


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
@run_options
@global_options
@click.pass_context
def run_file(ctx: click.Context, file: str, name: str | None) -> None:
    """Validate FILE, record it as a task, run it now and exit with its code (like `datax.py job.json`).

    An embedded SQLite task database is created and initialised when missing; a MySQL one must
    exist (`wormhole db init`). An invalid file exits 204 and records nothing.
    """
    text, spec = read_spec(file)  # loads engine.toml too: a broken one leaves no recorded task behind
    store = task_store(ctx, create=True)
    try:
        if store.url.lower().startswith("sqlite:"):
            store.init_schema()  # idempotent: the one-step run needs no `db init` on the embedded store
        task_id = submit(store, file, name, text, spec)
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    log.get_logger(task_id=task_id).info("task.submitted", file=file, task_db=store.url)
    ctx.exit(run_task(task_id, ctx.obj.task_db, ctx.obj.conf_dir, observe=ObserveOptions.of(ctx.obj)))

"""``wormhole --task-id N`` (:func:`run_task`) and ``wormhole run FILE``: the arguments, made into a run request
for the runner (:mod:`wormhole.runner`), which claims the task, runs it and records its outcome."""

from __future__ import annotations

import click

from wormhole import log
from wormhole.cli.common import (
    NAME_OPTION,
    PARAMS_OPTION,
    check_environment,
    fail,
    global_options,
    read_spec,
    submit,
    task_store,
)
from wormhole.cli.observe import ObserveOptions, Observers, run_options
from wormhole.cli.spark import SPARK_MASTER_OPTION
from wormhole.errors import WormholeError
from wormhole.result import EXIT_FAILED
from wormhole.runner import RunRequest
from wormhole.runner.run import run_task as run_request
from wormhole.task_spec import TaskSpec


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
    return run_request(RunRequest(task_id, task_db, conf_dir, adopt=adopt), observers, logger)


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

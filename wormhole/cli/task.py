"""``wormhole db init``, ``wormhole task submit/show/list/retry/pause/resume`` and ``wormhole validate``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from wormhole import incremental
from wormhole.cli.common import (
    CHECK_PARAMS_OPTION,
    NAME_OPTION,
    PARAMS_OPTION,
    TASK_ID,
    check_environment,
    fail,
    global_options,
    read_spec,
    submit,
    task_store,
)
from wormhole.cli.plan import check_incremental
from wormhole.config import EngineConf
from wormhole.engine import EXIT_BAD_TASK, EXIT_CLAIMED
from wormhole.errors import InvalidTaskConfig, WormholeError
from wormhole.recovery.leftovers import leftovers, resumable_chain, resumable_run
from wormhole.redaction import redact, redact_json_text
from wormhole.result import verify_summary
from wormhole.schedule import next_tick
from wormhole.spec_json import load_spec_json
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import TASK_STATUSES, RunRecord, SqlTaskStore, TaskRecord, TaskStore
from wormhole.taskdb.sql import utcnow
from wormhole.variables import MASK, load_params, resolve_text, values_for_run


@click.group()
def db() -> None:
    """Manage the task database."""


@db.command("init")
@global_options
@click.pass_context
def db_init(ctx: click.Context) -> None:
    """Create the task tables if they do not exist (idempotent)."""
    store = task_store(ctx, create=True)
    try:
        store.init_schema()
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    click.echo(f"task database ready: {store.url}")


@click.group()
def task() -> None:
    """Submit, inspect and retry tasks."""


def _task_id_command(name: str) -> Callable[[Callable[..., None]], click.Command]:
    """``task NAME TASK_ID`` with the global options, its function called with the context and the task id."""
    def make(f: Callable[..., None]) -> click.Command:
        return task.command(name)(click.argument("task_id", type=TASK_ID)(global_options(click.pass_context(f))))
    return make


@task.command("submit")
@click.argument("file", type=click.Path(dir_okay=False))
@NAME_OPTION
@click.option("--priority", type=click.IntRange(-(2**31), 2**31 - 1), default=0, show_default=True,
              help="Higher runs first under `wormhole daemon`.")
@PARAMS_OPTION
@global_options
@click.pass_context
def task_submit(ctx: click.Context, file: str, name: str | None, priority: int, params: dict[str, str]) -> None:
    """Validate a task JSON file and insert it as a pending task; prints the new task id.

    The file's text is stored as it is, ${NAME} placeholders included; each run resolves them."""
    text, spec, _ = read_spec(file, params)
    try:
        check_incremental(spec, EngineConf.load(ctx.obj.conf_dir))  # where the source answers now
    except InvalidTaskConfig as exc:
        fail(exc)
    store = task_store(ctx)
    try:
        task_id = submit(store, file, name, text, spec, priority, params)
    finally:
        store.close()
    click.echo(task_id)


def loads_redacted(text: str | bytes | None) -> Any:
    """A stored JSON document for display, every secret key's value replaced by ``***``."""
    if text is None:
        return None
    try:
        return redact(load_spec_json(text))
    except InvalidTaskConfig:
        if isinstance(text, bytes):  # an upstream system stored bytes that are not UTF-8: show them escaped
            text = text.decode("utf-8", "backslashreplace")
        return redact_json_text(text)  # not JSON, so not redacted key by key: as text


@_task_id_command("show")
def task_show(ctx: click.Context, task_id: int) -> None:
    """Print a task, its result and its runs as JSON."""
    store = task_store(ctx)
    try:
        record = _existing(store, task_id)
        runs = store.runs(task_id)
        left = _leftovers(store, record, remove=False)
        watermarks = watermarks_of(store, record)
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    result = loads_redacted(record.result)
    doc = {
        "id": record.id, "name": record.name, "status": record.status, "priority": record.priority,
        "attempts": record.attempts,
        "created_at": record.created_at, "started_at": record.started_at, "finished_at": record.finished_at,
        "claimed_by": record.claimed_by, "error": record.error, "spec": loads_redacted(record.spec),
        "params": shown_values(record, record.params),
        "result": result,
        "verify": verify_summary(result) if isinstance(result, dict) else None,
        "heartbeat_at": record.heartbeat_at,
        "schedule": None if record.schedule is None else {
            "cron": record.schedule, "next_tick": record.next_run_at, "last_tick": record.tick_at,
            "paused": record.paused},
        "watermarks": watermarks,
        "runs": [{"id": r.id, "status": r.status, "exit_code": r.exit_code, "claimed_by": r.claimed_by,
                  "started_at": r.started_at, "finished_at": r.finished_at, "resumed_from": r.resumed_from,
                  "variables": shown_values(record, r.variables), "error": r.error} for r in runs],
        "leftovers": left,
    }
    text = json.dumps(doc, indent=2, default=str, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a stored value no terminal can print as is: escape it instead
        text = json.dumps(doc, indent=2, default=str)
    click.echo(text)


def watermarks_of(store: TaskStore, record: TaskRecord) -> dict[str, Any] | None:
    """An incremental task's state key and each destination's watermark (value, the run that set it)."""
    try:
        doc = load_spec_json(record.spec)  # any text an upstream system stored (too deep, not UTF-8...)
    except InvalidTaskConfig:
        return None
    source = doc.get("source") if isinstance(doc, dict) else None
    inc = source.get("incremental") if isinstance(source, dict) else None
    if not isinstance(inc, dict):
        return None
    given, name = inc.get("state_key"), doc.get("name")
    key = incremental.state_key(given if isinstance(given, str) else None, name if isinstance(name, str) else "",
                                record.id)
    kept = store.watermarks(key)
    return {"state_key": key, "destinations": {
        dest: {"value": None if text is None else incremental.show(incremental.decode(json.loads(text))), "run": run}
        for dest, (text, run) in sorted(kept.items())}}


def shown_values(record: TaskRecord, text: str | None) -> Any:
    """Stored job variables for display: one the spec uses under a secret key (a password) as ``***``."""
    if text is None:
        return None
    try:
        values = load_params(text)
    except InvalidTaskConfig:
        return loads_redacted(text)
    secret = resolve_text(record.spec, values).secret
    return {k: MASK if k in secret else v for k, v in values.items()}


def _existing(store: SqlTaskStore, task_id: int) -> TaskRecord:
    record = store.get(task_id)
    if record is None:
        click.echo(f"error: no task with id {task_id} in {store.url}", err=True)
        sys.exit(EXIT_BAD_TASK)
    return record


def _leftovers(store: SqlTaskStore, record: TaskRecord, *, remove: bool) -> dict[str, list[str]]:
    """What earlier runs of the task left in its destinations (nothing a resumable run still needs)."""
    runs: list[RunRecord] = store.runs(record.id)
    try:
        # The destinations as the last run resolved them (a table may be named by a variable).
        values = values_for_run(record.params, runs[-1].variables if runs else None, runs[-1].started_at
                                if runs and runs[-1].started_at else None, tick=record.tick_at)
        spec = TaskSpec.from_mapping(resolve_text(record.spec, values).check())
    except InvalidTaskConfig:
        return {}  # a task that never validated never wrote anything
    return leftovers(spec, record.id, resumable_run(store, record.id), remove=remove, taskdb_id=store.taskdb_id())


@_task_id_command("clean")
def task_clean(ctx: click.Context, task_id: int) -> None:
    """Remove what earlier runs of a task left in its destinations: staging tables, temporary directories
    and split markers wormhole created for it (never a running task's; a crashed run's state is kept
    while the task can still resume it). Prints what was removed as JSON."""
    store = task_store(ctx)
    try:
        record = _existing(store, task_id)
        stale_s = EngineConf.load(ctx.obj.conf_dir).claim.stale_s
        age = store.heartbeat_age(task_id) if record.status == "running" else None
        if record.status == "running" and (age is None or age < stale_s):
            click.echo(f"error: task {task_id} is running (claimed by {record.claimed_by}); its destinations are "
                       f"in use, nothing is removed", err=True)
            sys.exit(EXIT_CLAIMED)
        removed = _leftovers(store, record, remove=True)
        # The checkpoints a resumed run reads (its chain's plan and commit rows) stay while it can be resumed,
        # a partial task's too (a retry resumes it).
        store.delete_checkpoints(task_id, keep_runs=resumable_chain(store, task_id, retried=True))
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    click.echo(json.dumps({"task_id": task_id, "removed": removed}, indent=2))


@task.command("list")
@click.option("--status", type=click.Choice(list(TASK_STATUSES)))
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@global_options
@click.pass_context
def task_list(ctx: click.Context, status: str | None, limit: int) -> None:
    """List tasks, newest first."""
    store = task_store(ctx)
    try:
        records = store.list(status=status, limit=limit)
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    click.echo(f"{'ID':>6}  {'STATUS':<8}  {'ATTEMPTS':>8}  {'FINISHED':<19}  NAME")
    for r in records:
        finished = r.finished_at.strftime("%Y-%m-%d %H:%M:%S") if r.finished_at else "-"
        click.echo(f"{r.id:>6}  {r.status:<8}  {r.attempts:>8}  {finished:<19}  {r.name}")


@task.command("retry")
@click.argument("task_id", type=TASK_ID)
@click.option("--force", is_flag=True,
              help="Also reset a successful task (the one way to load its destinations again), or a running one "
                   "whose process is gone (its heartbeat is older than claim.stale_s: it resumes).")
@global_options
@click.pass_context
def task_retry(ctx: click.Context, task_id: int, force: bool) -> None:
    """Make a failed or partial task pending again, so `wormhole --task-id N` can run it.

    The next run resumes the task: destinations an earlier run of it committed are not written again
    (the result names them as skipped); the others are written. To load every destination again, submit
    the task anew, or use --force on a successful task.
    """
    store = task_store(ctx)
    try:
        stale_s = EngineConf.load(ctx.obj.conf_dir).claim.stale_s
        ok = store.retry(task_id, force=force, stale_s=stale_s)
        current = None if ok else store.get(task_id)
        age = store.heartbeat_age(task_id) if current is not None and current.status == "running" else None
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    if not ok and force and current is not None and current.status == "running":
        seen = "never" if age is None else f"{age:.1f} s ago"
        click.echo(f"error: task {task_id} is running, claimed by {current.claimed_by}, whose last heartbeat was "
                   f"{seen} (claim.stale_s = {stale_s:g}): its process is alive, so the task is not reset. Stop "
                   f"that process; once its heartbeat is older than claim.stale_s, `wormhole --task-id {task_id}` "
                   "takes the task over and resumes it", err=True)
        sys.exit(EXIT_CLAIMED)
    if not ok:
        click.echo(f"error: task {task_id} does not exist or is not failed/partial (use --force)", err=True)
        sys.exit(EXIT_BAD_TASK)
    click.echo(f"task {task_id} is pending")


@_task_id_command("pause")
def task_pause(ctx: click.Context, task_id: int) -> None:
    """Stop a recurring task's schedule: no daemon starts a run of it until `task resume` (a run in
    progress finishes)."""
    _pause(ctx, task_id, paused=True)


@_task_id_command("resume")
def task_resume(ctx: click.Context, task_id: int) -> None:
    """Restart a paused recurring task's schedule from its next tick (ticks passed while it was paused are
    not run)."""
    _pause(ctx, task_id, paused=False)


def _pause(ctx: click.Context, task_id: int, *, paused: bool) -> None:
    store = task_store(ctx)
    try:
        record = _existing(store, task_id)
        after = None if paused or record.schedule is None else next_tick(record.schedule, utcnow())
        ok = record.schedule is not None and store.set_paused(task_id, paused, after)
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    if not ok:
        click.echo(f"error: task {task_id} has no schedule (settings.schedule; a task inserted pending gets it once "
                   "its first run ends)", err=True)
        sys.exit(EXIT_BAD_TASK)
    click.echo(f"task {task_id} is {'paused' if paused else 'resumed'}")


@click.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@CHECK_PARAMS_OPTION
@global_options
def validate(file: str, params: dict[str, str]) -> None:
    """Validate a task JSON file without running it; exit 204 listing every problem (a ${NAME} without
    a value among them)."""
    _text, spec, resolved = read_spec(file, params)
    check_environment(resolved)
    dests = ", ".join(f"{d.id} ({d.plugin})" for d in spec.destinations)
    click.echo(f"valid: {spec.source.plugin} -> {dests}")

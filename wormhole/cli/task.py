"""``wormhole db init``, ``wormhole task submit/show/list/retry`` and ``wormhole validate``."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import click

from wormhole import log
from wormhole.cli.common import NAME_OPTION, fail, global_options, read_spec, submit, task_store
from wormhole.config import load_spec_json
from wormhole.engine import EXIT_BAD_TASK
from wormhole.errors import InvalidTaskConfig, WormholeError


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


@task.command("submit")
@click.argument("file", type=click.Path(dir_okay=False))
@NAME_OPTION
@click.option("--priority", type=click.IntRange(-(2**31), 2**31 - 1), default=0, show_default=True,
              help="Higher runs first under `wormhole daemon`.")
@global_options
@click.pass_context
def task_submit(ctx: click.Context, file: str, name: str | None, priority: int) -> None:
    """Validate a task JSON file and insert it as a pending task; prints the new task id."""
    text, spec = read_spec(file)
    store = task_store(ctx)
    try:
        task_id = submit(store, file, name, text, spec, priority)
    finally:
        store.close()
    click.echo(task_id)


# A secret inside a stored spec that is not valid JSON (so cannot be redacted key by key).
_SECRET_IN_TEXT = re.compile(r'("[^"\\]*(?:pass(?:word|wd)?|secret|token|credential|api_?key|private_?key)'
                             r'[^"\\]*"\s*:\s*)"(?:[^"\\]|\\.)*"', re.IGNORECASE)


def _loads_redacted(text: str | bytes | None) -> Any:
    """A stored JSON document for display, every secret-looking key's value replaced by ``***``."""
    if text is None:
        return None
    try:
        return log.redact(load_spec_json(text))
    except InvalidTaskConfig:
        if isinstance(text, bytes):  # an upstream system stored bytes that are not UTF-8: show them escaped
            text = text.decode("utf-8", "backslashreplace")
        return _SECRET_IN_TEXT.sub(r'\1"***"', text)


@task.command("show")
@click.argument("task_id", type=int)
@global_options
@click.pass_context
def task_show(ctx: click.Context, task_id: int) -> None:
    """Print a task, its result and its runs as JSON."""
    store = task_store(ctx)
    try:
        record = store.get(task_id)
        if record is None:
            click.echo(f"error: no task with id {task_id} in {store.url}", err=True)
            sys.exit(EXIT_BAD_TASK)
        runs = store.runs(task_id)
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    doc = {
        "id": record.id, "name": record.name, "status": record.status, "priority": record.priority,
        "attempts": record.attempts,
        "created_at": record.created_at, "started_at": record.started_at, "finished_at": record.finished_at,
        "claimed_by": record.claimed_by, "error": record.error, "spec": _loads_redacted(record.spec),
        "result": _loads_redacted(record.result),
        "runs": [{"id": r.id, "status": r.status, "exit_code": r.exit_code, "claimed_by": r.claimed_by,
                  "started_at": r.started_at, "finished_at": r.finished_at, "error": r.error} for r in runs],
    }
    text = json.dumps(doc, indent=2, default=str, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a stored value no terminal can print as is: escape it instead
        text = json.dumps(doc, indent=2, default=str)
    click.echo(text)


@task.command("list")
@click.option("--status", type=click.Choice(["pending", "running", "success", "partial", "failed"]))
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
@click.argument("task_id", type=int)
@click.option("--force", is_flag=True, help="Also reset a running or successful task (it will be read again).")
@global_options
@click.pass_context
def task_retry(ctx: click.Context, task_id: int, force: bool) -> None:
    """Make a failed or partial task pending again, so `wormhole --task-id N` can run it."""
    store = task_store(ctx)
    try:
        ok = store.retry(task_id, force=force)
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    if not ok:
        click.echo(f"error: task {task_id} does not exist or is not failed/partial (use --force)", err=True)
        sys.exit(EXIT_BAD_TASK)
    click.echo(f"task {task_id} is pending")


@click.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@global_options
def validate(file: str) -> None:
    """Validate a task JSON file without running it; exit 204 listing every problem."""
    _text, spec = read_spec(file)
    dests = ", ".join(f"{d.id} ({d.plugin})" for d in spec.destinations)
    click.echo(f"valid: {spec.source.plugin} -> {dests}")

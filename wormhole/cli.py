"""The ``wormhole`` command: run one task by id, and manage the task database and task files.

Exit codes (DESIGN §11, the original Wormhole's job statuses): 0 success, 201 success with
rejected rows within the limits, 202 partial, 203 failed, 204 bad task or no such task,
205 task claimed by another process; 2 is click's bad usage. Every subcommand maps its errors to
this table too: an unreadable or invalid spec file exits 204, an unreachable or missing task
database 203. This module is the one place where errors are caught and logged.

The global options (``--task-db``, ``--conf``, ``--log-format``, ``--log-level``) are accepted both
before and after the subcommand (``wormhole db init --task-db URL``), as users coming from other
tools type them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

import click

from wormhole import __version__, log
from wormhole.config import EngineConf, TaskSpec, load_spec_json
from wormhole.engine import EXIT_BAD_TASK, EXIT_CLAIMED, EXIT_FAILED, Engine
from wormhole.errors import ConfigError, InvalidTaskConfig, WormholeError
from wormhole.importers import datax
from wormhole.plugins import describe, registry
from wormhole.taskdb import SqlTaskStore, TaskStore, open_store


@dataclass(frozen=True, slots=True)
class CliState:
    task_db: str | None
    conf_dir: str | None
    log_format: str = "auto"
    log_level: str = "info"


def _set_global(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """Callback of a global option given after the subcommand: it overrides the one given before."""

    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None:
            return
        ctx.obj = replace(ctx.obj, **{field: value})
        if field in ("log_format", "log_level"):
            log.configure(ctx.obj.log_format, ctx.obj.log_level)

    return callback


def global_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Accept the group's options after a subcommand too; no env vars here (the group reads them)."""
    options = (
        click.option("--task-db", metavar="URL", expose_value=False, callback=_set_global("task_db"),
                     help="Task database URL (as before the subcommand)."),
        click.option("--conf", metavar="DIR", expose_value=False, callback=_set_global("conf_dir"),
                     help="Directory holding engine.toml (as before the subcommand)."),
        click.option("--log-format", type=click.Choice(["auto", "json", "console"]), expose_value=False,
                     callback=_set_global("log_format"), help="As before the subcommand."),
        click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), expose_value=False,
                     callback=_set_global("log_level"), help="As before the subcommand."),
    )
    for option in reversed(options):
        command = option(command)
    return command


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--task-id", type=int, help="Run this task from the task database, then exit with its status.")
@click.option("--claimed-by", metavar="TOKEN", hidden=True,
              help="Run a task already claimed under TOKEN (how `wormhole daemon` hands a task to its child).")
@click.option("--task-db", envvar="WORMHOLE_TASK_DB", metavar="URL",
              help="sqlite:///path or mysql://user:pass@host:port/db (default sqlite:///var/wormhole.db; "
                   "env WORMHOLE_TASK_DB).")
@click.option("--conf", "conf_dir", envvar="WORMHOLE_CONF", metavar="DIR",
              help="Directory holding engine.toml (default ./conf if present, else built-in defaults).")
@click.option("--log-format", type=click.Choice(["auto", "json", "console"]), default="auto",
              envvar="WORMHOLE_LOG_FORMAT", show_default=True, help="auto: console on a TTY, JSON lines otherwise.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              envvar="WORMHOLE_LOG_LEVEL", show_default=True)
@click.version_option(__version__, prog_name="wormhole")
@click.pass_context
def cli(ctx: click.Context, task_id: int | None, claimed_by: str | None, task_db: str | None, conf_dir: str | None,
        log_format: str, log_level: str) -> None:
    """wormhole: read a source once and write it to many destinations, each committed or rolled back on its own.

    Run a task from the task database: wormhole --task-id N; from a file in one step: wormhole run FILE
    """
    log.configure(log_format, log_level)
    ctx.obj = CliState(task_db=task_db, conf_dir=conf_dir, log_format=log_format, log_level=log_level)
    if ctx.invoked_subcommand is not None:
        if task_id is not None:
            raise click.UsageError("--task-id runs a task; it does not go with a subcommand")
        return
    if claimed_by is not None and task_id is None:
        raise click.UsageError("--claimed-by goes with --task-id")
    if task_id is None:
        click.echo(ctx.get_help())
        ctx.exit(2)
    ctx.exit(run_task(task_id, task_db, conf_dir, adopt=claimed_by))


def run_task(task_id: int, task_db: str | None, conf_dir: str | None, *, adopt: str | None = None) -> int:
    """Claim (or, with ``adopt``, take over the claim made under that token) and run one task; return
    the exit code. Every outcome is written to the task row."""
    logger = log.get_logger(task_id=task_id)
    try:
        conf = EngineConf.load(conf_dir)
        store = open_store(task_db)
    except ConfigError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        return exc.exit_code
    except WormholeError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        return exc.exit_code
    try:
        return _claim_and_run(store, conf, task_id, logger, adopt)
    except WormholeError as exc:
        logger.error("task.not_run", error=str(exc), error_code=exc.code)
        return exc.exit_code
    finally:
        store.close()


def _claim_and_run(store: TaskStore, conf: EngineConf, task_id: int, logger: Any, adopt: str | None) -> int:
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
    try:
        spec = TaskSpec.from_json(record.spec)
    except InvalidTaskConfig as exc:
        # Whatever the row holds, the task ends 'failed' with the reason: never left 'running'.
        logger.error("task.invalid", problems=exc.problems, error_code=exc.code)
        result = {"task_id": task_id, "run_id": run_id, "status": "failed", "exit_code": EXIT_BAD_TASK,
                  "error": str(exc), "problems": exc.problems}
        store.finish(task_id, run_id, status="failed", run_status="failed", exit_code=EXIT_BAD_TASK,
                     result=json.dumps(result), error=str(exc))
        return EXIT_BAD_TASK
    engine = Engine(conf, spec, task_id=task_id, run_id=run_id, log=logger)
    previous = _install_signal_handlers(engine, logger)
    try:
        outcome = engine.run()
    except Exception as exc:  # a bug of ours: still record it, never leave the task 'running'
        logger.exception("task.crashed", error=str(exc))
        store.finish(task_id, run_id, status="failed", run_status="failed", exit_code=EXIT_FAILED,
                     result=None, error=f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_FAILED
    finally:
        _restore_signal_handlers(previous)
    store.finish(task_id, run_id, status=outcome.status, run_status=outcome.run_status,
                 exit_code=outcome.exit_code, result=json.dumps(outcome.result, default=str), error=outcome.error)
    logger.info("task.finished", status=outcome.status, exit_code=outcome.exit_code,
                duration_s=outcome.result["duration_s"], rows_read=outcome.result["source"]["rows_read"],
                destinations={k: {"status": v["status"], "written": v["rows_written"], "rejected": v["rows_rejected"],
                                  "error": v["error"]}
                              for k, v in outcome.result["destinations"].items()},
                dirty_file=outcome.result["dirty_file"], error=outcome.error)
    return outcome.exit_code


def _install_signal_handlers(engine: Engine, logger: Any) -> dict[int, Any]:
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        logger.warning("task.signal_received", signal=name)
        engine.stop(f"interrupted by {name}")

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    return previous


def _restore_signal_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _store(ctx: click.Context, *, create: bool = False) -> SqlTaskStore:
    """The task store; an unreachable (or missing) one exits 203 with the reason."""
    try:
        return open_store(ctx.obj.task_db, create=create)
    except WormholeError as exc:
        _fail(exc)


def _fail(exc: WormholeError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


@cli.group()
def db() -> None:
    """Manage the task database."""


@db.command("init")
@global_options
@click.pass_context
def db_init(ctx: click.Context) -> None:
    """Create the task tables if they do not exist (idempotent)."""
    store = _store(ctx, create=True)
    try:
        store.init_schema()
    except WormholeError as exc:
        _fail(exc)
    finally:
        store.close()
    click.echo(f"task database ready: {store.url}")


@cli.group()
def task() -> None:
    """Submit, inspect and retry tasks."""


def _read_spec(path: str) -> tuple[str, TaskSpec]:
    """The text of a spec file and the validated spec; exits 204 when it cannot be read or is invalid."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        _fail(ConfigError(f"cannot read the task file {path}: {exc.strerror}", path=path))
    try:
        spec = TaskSpec.from_json(data)
    except InvalidTaskConfig as exc:
        _fail(exc)
    # Valid JSON is valid UTF-8 here (from_json refused anything else), so the text round-trips.
    return data.decode("utf-8").removeprefix("\ufeff"), spec


def _submit(store: TaskStore, file: str, name: str | None, text: str, spec: TaskSpec, priority: int = 0) -> int:
    try:
        return store.submit(name or spec.name or Path(file).stem, text, priority)
    except WormholeError as exc:
        _fail(exc)


NAME_OPTION = click.option("--name", help="Task name (default: the spec's name, else the file name).")


@task.command("submit")
@click.argument("file", type=click.Path(dir_okay=False))
@NAME_OPTION
@click.option("--priority", type=click.IntRange(-(2**31), 2**31 - 1), default=0, show_default=True,
              help="Higher runs first under `wormhole daemon`.")
@global_options
@click.pass_context
def task_submit(ctx: click.Context, file: str, name: str | None, priority: int) -> None:
    """Validate a task JSON file and insert it as a pending task; prints the new task id."""
    text, spec = _read_spec(file)
    store = _store(ctx)
    try:
        task_id = _submit(store, file, name, text, spec, priority)
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
    store = _store(ctx)
    try:
        record = store.get(task_id)
        if record is None:
            click.echo(f"error: no task with id {task_id} in {store.url}", err=True)
            sys.exit(EXIT_BAD_TASK)
        runs = store.runs(task_id)
    except WormholeError as exc:
        _fail(exc)
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
    store = _store(ctx)
    try:
        records = store.list(status=status, limit=limit)
    except WormholeError as exc:
        _fail(exc)
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
    store = _store(ctx)
    try:
        ok = store.retry(task_id, force=force)
    except WormholeError as exc:
        _fail(exc)
    finally:
        store.close()
    if not ok:
        click.echo(f"error: task {task_id} does not exist or is not failed/partial (use --force)", err=True)
        sys.exit(EXIT_BAD_TASK)
    click.echo(f"task {task_id} is pending")


@cli.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@global_options
def validate(file: str) -> None:
    """Validate a task JSON file without running it; exit 204 listing every problem."""
    _text, spec = _read_spec(file)
    dests = ", ".join(f"{d.id} ({d.plugin})" for d in spec.destinations)
    click.echo(f"valid: {spec.source.plugin} -> {dests}")


@cli.command("run")
@click.argument("file", type=click.Path(dir_okay=False))
@NAME_OPTION
@global_options
@click.pass_context
def run_file(ctx: click.Context, file: str, name: str | None) -> None:
    """Validate FILE, record it as a task, run it now and exit with its code (like `datax.py job.json`).

    An embedded SQLite task database is created and initialised when missing; a MySQL one must
    exist (`wormhole db init`). An invalid file exits 204 and records nothing.
    """
    text, spec = _read_spec(file)
    try:
        EngineConf.load(ctx.obj.conf_dir)  # a broken engine.toml must not leave a recorded task behind
    except ConfigError as exc:
        _fail(exc)
    store = _store(ctx, create=True)
    try:
        if store.url.lower().startswith("sqlite:"):
            store.init_schema()  # idempotent: the one-step run needs no `db init` on the embedded store
        task_id = _submit(store, file, name, text, spec)
    except WormholeError as exc:
        _fail(exc)
    finally:
        store.close()
    log.get_logger(task_id=task_id).info("task.submitted", file=file, task_db=store.url)
    ctx.exit(run_task(task_id, ctx.obj.task_db, ctx.obj.conf_dir))


@cli.group("import")
def import_group() -> None:
    """Turn another tool's job into a wormhole task file."""


@import_group.command("datax")
@click.argument("job", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the task here (default: stdout).")
@click.option("--merge", "merged", multiple=True, type=click.Path(dir_okay=False),
              help="Another DataX job reading the same source: one fan-out task, a destination per job.")
@global_options
def import_datax(job: str, output: str | None, merged: tuple[str, ...]) -> None:
    """Translate a DataX job JSON into a task; untranslated settings are logged; invalid ones exit 204."""
    logger = log.get_logger()
    files = (job, *merged)
    try:
        translation = datax.translate([(Path(f).name, _read_json(f)) for f in files],
                                      name="+".join(Path(f).stem for f in files))
        _validate_translated(translation.task)
    except ConfigError as exc:
        logger.error("datax.import_failed", error=str(exc), error_code=exc.code)
        _fail(exc)
    datax.log_report(translation, logger)
    text = json.dumps(translation.task, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(ConfigError(f"cannot write {output}: {exc.strerror}"))
    click.echo(f"task written to {output}")


def _validate_translated(task: dict[str, Any]) -> None:
    """The task must validate, or nothing is written."""
    try:
        TaskSpec.from_mapping(task)
    except InvalidTaskConfig as exc:
        raise InvalidTaskConfig(exc.problems, where="task translated from the DataX job") from None


def _read_json(path: str) -> Any:
    try:
        return load_spec_json(Path(path).read_bytes())
    except OSError as exc:
        _fail(ConfigError(f"cannot read the DataX job {path}: {exc.strerror}"))
    except InvalidTaskConfig as exc:
        _fail(ConfigError(f"{path} is not a JSON document: {'; '.join(exc.problems)}"))


@cli.command("daemon")
@click.option("--max-tasks", type=click.IntRange(1, 1000), default=4, show_default=True,
              help="Tasks run at once, each in its own `wormhole --task-id N` process.")
@click.option("--poll-s", type=click.FloatRange(0.05, 3600), default=2.0, show_default=True,
              help="Seconds between looks for pending tasks.")
@click.option("--grace-s", type=click.FloatRange(0, 86_400), default=60.0, show_default=True,
              help="On SIGTERM/SIGINT, how long running tasks may go on before they are sent SIGTERM.")
@click.option("--heartbeat-s", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="Seconds between updates of this daemon's row in wormhole_daemon.")
@global_options
@click.pass_context
def daemon(ctx: click.Context, max_tasks: int, poll_s: float, grace_s: float, heartbeat_s: float) -> None:
    """Claim pending tasks (highest priority, then oldest) and run them until SIGTERM or SIGINT."""
    from wormhole.daemon import Daemon, DaemonOptions

    st = ctx.obj
    ctx.exit(Daemon(DaemonOptions(task_db=st.task_db, conf_dir=st.conf_dir, log_format=st.log_format,
                                  log_level=st.log_level, max_tasks=max_tasks, poll_s=poll_s, grace_s=grace_s,
                                  heartbeat_s=heartbeat_s)).run())


@cli.command("plugins")
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True, help="Print the parameter tables as markdown (the README's reference).")
@global_options
def plugins(name: str | None, markdown: bool) -> None:
    """List the available stores; with NAME, that store's parameters (name, type, default, description)."""
    if name is None and not markdown:
        for plugin_name in registry.names():
            plugin = registry.get(plugin_name)
            roles = "/".join(r for r, v in (("source", plugin.source), ("destination", plugin.sink)) if v)
            click.echo(f"{plugin_name:<10} {roles:<20} {plugin.description}")
        return
    try:
        chosen = [registry.get(name)] if name is not None else [registry.get(n) for n in registry.names()]
    except WormholeError as exc:
        _fail(exc)
    if markdown:
        click.echo("\n\n".join(describe.render_markdown(p) for p in chosen))
    else:
        click.echo("\n\n".join(describe.render_text(p) for p in chosen))


def main() -> None:
    cli(prog_name="wormhole")

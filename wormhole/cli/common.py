"""What every subcommand shares: the global options, the task store, spec files, and the error exit.

The global options (``--task-db``, ``--conf``, ``--log-format``, ``--log-level``) are accepted both
before and after the subcommand (``wormhole db init --task-db URL``), as users coming from other
tools type them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, Protocol

import click

from wormhole import log
from wormhole.config import EngineConf
from wormhole.errors import ConfigError, InvalidTaskConfig, TaskNotFound, WormholeError
from wormhole.planning.channels import speed_limits
from wormhole.schedule import next_tick
from wormhole.spec_json import load_spec_json
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import RunRecord, SqlTaskStore, TaskRecord, TaskStore, open_store
from wormhole.taskdb.sql import utcnow
from wormhole.variables import Resolved, builtin_values, parse_params, resolve, unset_environment


@dataclass(frozen=True, slots=True)
class CliState:
    task_db: str | None
    conf_dir: str | None
    log_format: str = "auto"
    log_level: str = "info"
    progress: str = "auto"
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    metrics_hold_s: float = 0.0


class _Writable(Protocol):
    def write(self, text: str) -> int: ...

    def flush(self) -> None: ...


class LogStream:
    """Where log lines go: stderr, or a live display while one runs (which prints them above itself).

    Looked up on every write, so a test's swapped ``sys.stderr`` and a display started after the
    loggers were bound both get the lines.
    """

    def __init__(self) -> None:
        self.target: _Writable | None = None

    def write(self, text: str) -> int:
        return (self.target or sys.stderr).write(text)

    def flush(self) -> None:
        (self.target or sys.stderr).flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


LOG_STREAM = LogStream()


def configure_log(fmt: str, level: str) -> None:
    log.configure(fmt, level, stream=LOG_STREAM)  # type: ignore[arg-type]


def quiet_on_a_terminal(ctx: click.Context) -> None:
    """A command whose output is for a person (``plan``) logs warnings and errors only on a terminal,
    unless a log level was asked for (``--log-level``, before or after the subcommand, or
    WORMHOLE_LOG_LEVEL): its info events would come before what it prints."""
    if not LOG_STREAM.isatty():
        return
    current: click.Context | None = ctx
    while current is not None:
        if current.get_parameter_source("log_level") not in (None, click.core.ParameterSource.DEFAULT):
            return
        current = current.parent
    configure_log(ctx.obj.log_format, "warning")


def set_state(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """Callback of a global option given after the subcommand: it overrides the one given before."""

    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None:
            return
        ctx.obj = replace(ctx.obj, **{field: value})
        if field in ("log_format", "log_level"):
            configure_log(ctx.obj.log_format, ctx.obj.log_level)

    return callback


def global_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Accept the group's options after a subcommand too; no env vars here (the group reads them)."""
    options = (
        click.option("--task-db", metavar="URL", expose_value=False, callback=set_state("task_db"),
                     help="Task database URL (as before the subcommand)."),
        click.option("--conf", metavar="DIR", expose_value=False, callback=set_state("conf_dir"),
                     help="Directory holding engine.toml (as before the subcommand)."),
        click.option("--log-format", type=click.Choice(["auto", "json", "console"]), expose_value=False,
                     callback=set_state("log_format"), help="As before the subcommand."),
        click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), expose_value=False,
                     callback=set_state("log_level"), help="As before the subcommand."),
    )
    for option in reversed(options):
        command = option(command)
    return command


def task_store(ctx: click.Context, *, create: bool = False) -> SqlTaskStore:
    """The task store; an unreachable (or missing) one exits 203 with the reason."""
    try:
        return open_store(ctx.obj.task_db, create=create)
    except WormholeError as exc:
        fail(exc)


def task_and_runs(ctx: click.Context, task_id: int) -> tuple[TaskRecord, list[RunRecord]]:
    """The task record and its runs, oldest first; exits 203 when the task database cannot be read, 204 when it
    holds no such task."""
    store = task_store(ctx)
    try:
        record = store.get(task_id)
        runs = store.runs(task_id) if record is not None else []
    except WormholeError as exc:
        fail(exc)
    finally:
        store.close()
    if record is None:
        fail(TaskNotFound(f"no task with id {task_id} in {store.url}"))
    return record, runs


def fail(exc: WormholeError) -> NoReturn:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


def read_spec(path: str, params: Mapping[str, str] | None = None) -> tuple[str, TaskSpec, Resolved]:
    """The text of a spec file, the validated spec and its job variables (``params``, then the built-ins
    of now), checked against the engine configuration too (a speed limit needs engine.toml's per-channel
    limits); exits 204 when either is unreadable or invalid, or a variable has no value."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        fail(ConfigError(f"cannot read the task file {path}: {exc.strerror}", path=path))
    try:
        return check_spec(data, params, click.get_current_context().obj.conf_dir)
    except (InvalidTaskConfig, ConfigError) as exc:
        fail(exc)


def check_spec(data: bytes | str, params: Mapping[str, str] | None, conf_dir: str | None) \
        -> tuple[str, TaskSpec, Resolved]:
    """What ``validate`` and ``task submit`` check of a spec's text (the console's submit too, so its
    messages are the same): the text, the validated spec and its job variables; InvalidTaskConfig or
    ConfigError listing the problems."""
    resolved = resolve(load_spec_json(data), {**builtin_values(datetime.now(UTC)), **(params or {})})
    spec = TaskSpec.from_mapping(resolved.check())
    speed_limits(spec.settings.speed, EngineConf.load(conf_dir))  # the speed needs engine.toml's
    # Valid JSON is valid UTF-8 here (load_spec_json refused anything else), so the text round-trips.
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return text.removeprefix("\ufeff"), spec, resolved


def check_environment(resolved: Resolved) -> None:
    """Exit 204 naming every environment variable the spec names and this process lacks."""
    problems = unset_environment(resolved.document)
    if problems:
        fail(InvalidTaskConfig(problems, where="environment"))


def submit(store: TaskStore, file: str, name: str | None, text: str, spec: TaskSpec, priority: int = 0,
           params: Mapping[str, str] | None = None, *, now: bool = False) -> int:
    """Insert the file's text (placeholders kept) as a pending task; ``params`` go to the row's params. A
    recurring one (``settings.schedule``) waits for its first tick, unless it is to run ``now``."""
    try:
        return submit_record(store, name or spec.name or Path(file).stem, text, spec, priority, params, now=now)
    except WormholeError as exc:
        fail(exc)


def submit_record(store: TaskStore, name: str, text: str, spec: TaskSpec, priority: int = 0,
                  params: Mapping[str, str] | None = None, *, now: bool = False) -> int:
    """Insert a checked spec's text as a task (``submit``'s work, for the console too): the new task's id."""
    expr = spec.settings.schedule
    return store.submit(name, text, priority, params=json.dumps(dict(params), ensure_ascii=False) if params else None,
                        schedule=None if expr is None or now else (expr, next_tick(expr, utcnow())))


def _params(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> dict[str, str]:
    try:
        return parse_params(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def params_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``-p NAME=VALUE``; ``what`` says what the command does with the values."""
    return click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE", callback=_params,
                        help=f"A job variable's value for ${{NAME}} in the spec (repeatable); {what}.")


PARAMS_OPTION = params_option("recorded as the task row's params")
CHECK_PARAMS_OPTION = params_option("used for this look only, nothing is recorded")


NAME_OPTION = click.option("--name", help="Task name (default: the spec's name, else the file name).")

TASK_ID_RANGE = (-(2**63), 2**63 - 1)
"""What a task id can be: both task databases keep ids in a signed 64-bit column (an upstream INSERT may
choose 0 or a negative one)."""


class BadTaskId(click.BadParameter):
    """A number no task can have: "no such task id", exit 204 like one that is missing, not click's 2."""

    exit_code = 204


class TaskIdType(click.ParamType):
    """A task id argument or option: text that is no integer is bad usage (2); an integer out of the
    id column's range names the parameter and exits 204, never reaching a driver (sqlite's OverflowError)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            number = value
        else:
            text = str(value).strip()
            if not re.fullmatch(r"[+-]?[0-9]+", text):
                self.fail(f"{value!r} is not a valid integer", param, ctx)
            digits = len(text.lstrip("+-").lstrip("0"))
            # Past 20 digits it is out of range anyway: never converted (Python refuses over 4300 digits).
            number = int(text) if digits <= 20 else TASK_ID_RANGE[1] + 1
        if not TASK_ID_RANGE[0] <= number <= TASK_ID_RANGE[1]:
            shown = str(value) if len(str(value)) <= 30 else f"a {len(str(value))}-character number"
            raise BadTaskId(f"{shown} is out of range: a task id is a 64-bit integer, from {TASK_ID_RANGE[0]} "
                            f"to {TASK_ID_RANGE[1]}", ctx=ctx, param=param)
        return number


TASK_ID = TaskIdType()

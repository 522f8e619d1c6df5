"""The ``wormhole`` command: run one task by id, and manage the task database and task files.

Exit codes (DESIGN §11, the original Wormhole's job statuses): 0 success, 201 success with
rejected rows within the limits, 202 partial, 203 failed, 204 bad task or no such task,
205 task claimed by another process; 2 is click's bad usage. Every subcommand maps its errors to
this table too: an unreadable or invalid spec file exits 204, an unreachable or missing task
database 203. This package is the one place where errors are caught and logged: the root group
and its global options here, one module per command family beside it.
"""

from __future__ import annotations

import gc

import click

from wormhole import __version__
from wormhole.cli.common import TASK_ID, CliState, configure_log
from wormhole.cli.console import console
from wormhole.cli.daemon import daemon
from wormhole.cli.diff import diff, verify
from wormhole.cli.importing import import_group
from wormhole.cli.observe import ObserveOptions, root_options
from wormhole.cli.plan import plan
from wormhole.cli.plugins import plugins
from wormhole.cli.run import run_file, run_task
from wormhole.cli.spark import ROOT_SPARK_MASTER_OPTION, spark_group
from wormhole.cli.task import db, task, validate
from wormhole.plugins.batch import arrow_for_this_process

__all__ = ["cli", "main", "run_task"]


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--task-id", type=TASK_ID, help="Run this task from the task database, then exit with its status.")
@click.option("--claimed-by", metavar="TOKEN", hidden=True,
              help="Run a task already claimed under TOKEN (how `wormhole daemon` hands a task to its child).")
@click.option("--task-db", envvar="WORMHOLE_TASK_DB", metavar="URL",
              help="sqlite:///path or mysql://user:pass@host:port/db (default sqlite:///var/wormhole.db; "
                   "env WORMHOLE_TASK_DB).")
@click.option("--conf", "conf_dir", envvar="WORMHOLE_CONF", metavar="DIR",
              help="Directory holding engine.toml (else ./conf, else the checkout's conf/, else built-in defaults).")
@click.option("--log-format", type=click.Choice(["auto", "json", "console"]), default="auto",
              envvar="WORMHOLE_LOG_FORMAT", show_default=True, help="auto: console on a TTY, JSON lines otherwise.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              envvar="WORMHOLE_LOG_LEVEL", show_default=True)
@root_options
@ROOT_SPARK_MASTER_OPTION
@click.version_option(__version__, prog_name="wormhole")
@click.pass_context
def cli(ctx: click.Context, task_id: int | None, claimed_by: str | None, task_db: str | None, conf_dir: str | None,
        log_format: str, log_level: str, progress: str, metrics_port: int | None, metrics_host: str,
        metrics_hold_s: float) -> None:
    """wormhole: read a source once and write it to many destinations, each committed or rolled back on its own.

    Run a task from the task database: wormhole --task-id N; from a file in one step: wormhole run FILE
    """
    configure_log(log_format, log_level)
    ctx.obj = CliState(task_db=task_db, conf_dir=conf_dir, log_format=log_format, log_level=log_level,
                       progress=progress, metrics_port=metrics_port, metrics_host=metrics_host,
                       metrics_hold_s=metrics_hold_s)
    if ctx.invoked_subcommand is not None:
        if task_id is not None:
            raise click.UsageError("--task-id runs a task; it does not go with a subcommand")
        return
    if claimed_by is not None and task_id is None:
        raise click.UsageError("--claimed-by goes with --task-id")
    if task_id is None:
        click.echo(ctx.get_help())
        ctx.exit(2)
    ctx.exit(run_task(task_id, task_db, conf_dir, adopt=claimed_by, observe=ObserveOptions.of(ctx.obj)))


for _command in (db, task, validate, plan, diff, verify, run_file, import_group, daemon, console, plugins, spark_group):
    cli.add_command(_command)


def main() -> None:
    """The ``wormhole`` command (:mod:`wormhole.entry` makes the process's choices before importing this)."""
    gc.freeze()  # the modules and what importing them made: never garbage, no more walked by the collector
    arrow_for_this_process()
    try:
        cli(prog_name="wormhole")
    finally:
        # Exiting: without this the collector walks everything made since while modules are torn down,
        # 50 ms of every run (measured). Objects are still finalized: files close, atexit runs.
        gc.freeze()

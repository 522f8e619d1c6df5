"""Spark mode's command-line parts: ``--spark-master`` (``wormhole run``, ``wormhole --task-id``,
``wormhole plan``) and ``wormhole spark pack``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from wormhole.cli.common import global_options
from wormhole.spark.config import ENV_MASTER, set_cli_master


def _root_master(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    set_cli_master(value)  # every invocation starts from its own command line (tests invoke several)


def _command_master(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:  # given after the subcommand: over the one before it
        set_cli_master(value)


_HELP = (f"Spark master of a run in Spark mode (local[N], spark://host:7077, yarn, k8s://...); over the task's "
         f"settings.spark.master, {ENV_MASTER} and engine.toml's [spark] master.")
ROOT_SPARK_MASTER_OPTION: Callable[[Any], Any] = click.option(
    "--spark-master", metavar="URL", expose_value=False, is_eager=True, callback=_root_master, help=_HELP)
SPARK_MASTER_OPTION: Callable[[Any], Any] = click.option(
    "--spark-master", metavar="URL", expose_value=False, callback=_command_master, help=_HELP)


@click.group("spark")
def spark_group() -> None:
    """Spark mode's tools."""


@spark_group.command("pack")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="The archive to write (default var/spark/wormhole-env-<version>.tar.gz).")
@global_options
def pack_command(output: str | None) -> None:
    """Build a relocatable archive of this Python, wormhole and its dependencies for a Spark cluster
    whose workers have only Java; set [spark] archive to it (docs/spark-cluster.md)."""
    from pathlib import Path

    from wormhole.spark.pack import default_output, pack

    path, files = pack(Path(output) if output else default_output())
    size = path.stat().st_size / 2**20
    click.echo(f"{path} ({files} files, {size:.0f} MiB): set [spark] archive = \"{path.resolve()}\" in engine.toml")

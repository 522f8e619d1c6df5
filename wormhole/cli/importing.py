"""``wormhole import datax JOB.json``: turn another tool's job into a wormhole task file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from wormhole import log
from wormhole.cli.common import fail, global_options
from wormhole.errors import ConfigError, InvalidTaskConfig
from wormhole.importers import datax
from wormhole.spec_json import load_spec_json
from wormhole.task_spec import TaskSpec


@click.group("import")
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
        fail(exc)
    datax.log_report(translation, logger)
    text = json.dumps(translation.task, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(ConfigError(f"cannot write {output}: {exc.strerror}"))
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
        fail(ConfigError(f"cannot read the DataX job {path}: {exc.strerror}"))
    except InvalidTaskConfig as exc:
        fail(ConfigError(f"{path} is not a JSON document: {'; '.join(exc.problems)}"))

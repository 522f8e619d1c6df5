"""``wormhole plan FILE`` / ``wormhole plan --task-id N``: what a run would do, without moving a row.

The plan touches the source only to check it is reachable, estimate its rows and cut its splits
(what a run does before it prepares any destination); no destination is written (a mysql destination's
column types are read, to say how it would load: ``load``). ``--json`` prints
the documented, stable keys (docs/manual/planning.md).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import click

from wormhole import incremental, log
from wormhole.cli.common import (
    CHECK_PARAMS_OPTION,
    TASK_ID,
    fail,
    global_options,
    quiet_on_a_terminal,
    read_spec,
    task_and_runs,
    task_store,
)
from wormhole.cli.spark import SPARK_MASTER_OPTION
from wormhole.config import EngineConf
from wormhole.database.expand import expand, is_database_task
from wormhole.errors import ConfigError, InvalidTaskConfig, TaskDbError, WormholeError
from wormhole.planning.plan import Plan, make_plan
from wormhole.plugins.base import ReadContext, Rejected
from wormhole.pool import run_with_timeout
from wormhole.recovery.leftovers import next_run_resumes
from wormhole.recovery.state import RecoveryState, chain_state
from wormhole.source_facts import prepare_source, source_window
from wormhole.spark import RunSpark
from wormhole.task_spec import TaskSpec
from wormhole.taskdb import open_store
from wormhole.variables import Resolved, resolve_text, values_for_run


class _NoRows:
    """Planning reads no row, so it rejects none: a dirty sink that is never written to."""

    def reject(self, origin: str, rows: Sequence[Rejected], split_id: str | None = None) -> None:
        raise AssertionError("planning rejected a row")


@click.command("plan")
@click.argument("file", type=click.Path(dir_okay=False), required=False)
@click.option("--task-id", type=TASK_ID, help="Plan this task of the task database (it stays as it is).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the plan as JSON (the keys docs/manual/planning.md documents).")
@CHECK_PARAMS_OPTION
@SPARK_MASTER_OPTION
@global_options
@click.pass_context
def plan(ctx: click.Context, file: str | None, task_id: int | None, as_json: bool, params: dict[str, str]) -> None:
    """Show how a task would run: engine, channels, splits, task groups, destinations, and where each
    transform runs (the source query, the reader threads, a destination); moves no row. The job
    variables it would use are shown too (-p overrides a task's params here, for a look only)."""
    if (file is None) == (task_id is None):
        raise click.UsageError("give a task FILE or --task-id N (one of them)")
    quiet_on_a_terminal(ctx)
    resumes: int | None = None
    missing: list[str] = []  # why no watermark could be read (plan FILE without a task database)
    if file is not None:
        _text, spec, resolved = read_spec(file, params)
    else:
        spec, resolved, resumes, finished = _stored_spec(ctx, task_id or 0, params)
    if is_database_task(spec):
        _plan_database(ctx, spec, task_id or 0, as_json)
        return
    try:
        conf = _with_spark(EngineConf.load(ctx.obj.conf_dir), spec)
        recovery = None if resumes is None else _chain(ctx, resumes, finished, task_id or 0)
        made = _make(spec, conf, task_id or 0, _watermarks(ctx, missing), recovery)
    except WormholeError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps({**made.to_dict(), **({"resumes_run": resumes} if task_id is not None else {}),
                               "variables": resolved.shown(), "conf_file": _conf_file()}, indent=2))
        return
    shown = ", ".join(f"{k}={v}" for k, v in resolved.shown().items())
    resumed = f"\nresumes:        run {resumes} (the window and splits it recorded)" if resumes is not None else ""
    if missing:
        resumed += f"\n  no watermark read (every destination from initial): {missing[0]}"
    click.echo(describe(made) + resumed + (f"\nvariables:      {shown}" if shown else "")
               + f"\nconf:           {_conf_file()}")


def _plan_database(ctx: click.Context, spec: TaskSpec, task_id: int, as_json: bool) -> None:
    """A database task's plan: its tables, largest first, each table's channels and targets in every
    destination, and the DDL each destination would run (docs/manual/databases.md)."""
    try:
        made = expand(spec, EngineConf.load(ctx.obj.conf_dir), log.get_logger(task_id=task_id), task_id)
    except WormholeError as exc:
        fail(exc)
    except Exception as exc:  # a store's own error while listing: still a clear message, exit 204
        fail(ConfigError(f"planning failed: {type(exc).__name__}: {exc}"))
    shown = made.to_dict()
    for job, table in zip(made.jobs, shown["order"], strict=True):
        for dest, ddl in job.ddl.items():  # what each target holds now: created by the run, used, or refused
            try:
                table["ddl"][dest]["state"] = ddl.state()
            except Exception as exc:  # the destination cannot be asked now: the run will say more
                table["ddl"][dest]["state"] = f"unknown: {type(exc).__name__}: {exc}"
    if as_json:
        click.echo(json.dumps({"database": shown, "conf_file": _conf_file()}, indent=2))
        return
    lines = [f"tables:         {shown['tables']} ({shown['estimated_rows']} rows estimated), largest first",
             f"channels:       {shown['channels']} (shared by the tables that run at once)"]
    lines += [f"skipped:        {table}: {why}" for table, why in shown.get("skipped", {}).items()]
    for table in shown["order"]:
        lines.append(f"  {table['table']}: ~{table['estimated_rows']} rows, {table['channels']} channel(s)")
        for dest, target in table["targets"].items():
            ddl = table["ddl"].get(dest)
            lines.append(f"    {dest}: {target}" + ("" if ddl is None else f" ({_ddl_state(ddl)})"))
            lines += [f"      lossy: {note}" for note in (ddl or {}).get("lossy", [])]
    click.echo("\n".join(lines) + f"\nconf:           {_conf_file()}")


def _ddl_state(ddl: Mapping[str, Any]) -> str:
    state = str(ddl.get("state", ""))
    if state == "missing":
        indexes = ("its key and indexes with the table (a small table)" if ddl.get("indexed") else
                   f"{len(ddl['after_load'])} index statement(s) after the load")
        return (f"created from the source's definition: {len(ddl['columns'])} column(s), {indexes}, "
                f"{len(ddl['foreign_keys'])} foreign key(s) after every table")
    if state == "same":
        return "already there with the same columns: used as it is"
    return f"{state}: this table fails in this destination" if state.startswith("differs") else state


def _with_spark(conf: EngineConf, spec: TaskSpec) -> EngineConf:
    """The engine configuration with the Spark master and settings a run of ``spec`` would use."""
    from wormhole.spark.config import choose

    choice = choose(conf.spark, spec.settings.spark)
    return replace(conf, spark=choice.conf)


def _conf_file() -> str:
    from wormhole import config

    return str(config.loaded_from) if config.loaded_from is not None else "built-in defaults"


def _stored_spec(ctx: click.Context, task_id: int, params: dict[str, str]
                 ) -> tuple[TaskSpec, Resolved, int | None, frozenset[int]]:
    """The task's spec and variables as its next run would have them, the run that run resumes (None: it
    starts afresh) and the task's runs that ended partial."""
    record, runs = task_and_runs(ctx, task_id)
    # The run the next run resumes, as `--task-id` decides it; a running one is resumed by a takeover.
    resumes = runs[-1].id if runs and runs[-1].status == "running" else next_run_resumes(record, runs)
    # The values the next run would use: a run resuming the last one takes its recorded values.
    resumed = next((r.variables for r in runs if r.id == resumes), None)
    try:
        # A recurring task's next run is for the tick it waits for (or a later one, should ticks be missed).
        tick = record.next_run_at if record.status == "scheduled" else record.tick_at
        resolved = resolve_text(record.spec, {**values_for_run(record.params, resumed, tick=tick), **params})
        spec = TaskSpec.from_mapping(resolved.check())
    except InvalidTaskConfig as exc:
        fail(exc)
    return spec, resolved, resumes, frozenset(r.id for r in runs if r.status == "partial")


def _chain(ctx: click.Context, resumes: int, finished: frozenset[int], task_id: int) -> RecoveryState:
    """What the run resuming ``resumes`` continues: the window and splits its chain recorded."""
    store = task_store(ctx)
    try:
        return chain_state(store, resumes, finished, log.get_logger(task_id=task_id))
    finally:
        store.close()


def _watermarks(ctx: click.Context, missing: list[str]) -> Callable[[str], Mapping[str, tuple[str | None, int]]]:
    """The watermarks the task database keeps under a state key (read only when the task is incremental).
    ``plan FILE`` needs no task database: without one (``missing`` gets why) no watermark is kept, so the
    plan shows every destination starting from ``initial``, as a run on a new task database would."""
    def read(key: str) -> Mapping[str, tuple[str | None, int]]:
        try:
            store = open_store(ctx.obj.task_db)
        except TaskDbError as exc:
            if ctx.params.get("task_id") is not None:
                fail(exc)
            missing.append(str(exc))
            log.get_logger().warning("plan.no_watermarks", state_key=key, error=str(exc))
            return {}
        try:
            return store.watermarks(key)
        finally:
            store.close()
    return read


def _make(spec: TaskSpec, conf: EngineConf, task_id: int,
          kept: Callable[[str], Mapping[str, tuple[str | None, int]]], recovery: RecoveryState | None = None) -> Plan:
    """The plan; ``recovery``: the chain a resumed run continues (its splits and window are the run's)."""
    logger = log.get_logger(task_id=task_id)
    ctx = _context(spec, conf, task_id)
    try:
        window = source_window(spec, ctx, logger, recorded=recovery.window if recovery is not None else None,
                               kept=kept)
        facts = prepare_source(spec, ctx, conf, logger, window=window,
                               resumed=recovery.splits if recovery is not None else None)
        made = make_plan(spec, facts, conf)
    except WormholeError:
        raise
    except Exception as exc:  # a store's own error while splitting: still a clear message, exit 204
        raise ConfigError(f"planning failed: {type(exc).__name__}: {exc}") from exc
    logger.info("plan.made", **made.to_dict())
    return made


def _context(spec: TaskSpec, conf: EngineConf, task_id: int) -> ReadContext:
    """What planning asks the source with (it reads no row)."""
    return ReadContext(task_id=task_id, run_id=0, batch_rows=conf.exchange.batch_rows, dirty=_NoRows(),
                       plugin=spec.source.plugin, stop=threading.Event(), spark=RunSpark(conf.spark))


SUBMIT_CHECK_S = 5.0
"""How long ``task submit`` waits for a source to say whether the incremental column can be one."""


def check_incremental(spec: TaskSpec, conf: EngineConf, wait_s: float = SUBMIT_CHECK_S) -> None:
    """``task submit``: ask the source, when it answers within ``wait_s``, whether the incremental column
    can be one: InvalidTaskConfig (exit 204) naming ``source.incremental.column``, as ``plan`` and a run
    would say. A source that does not answer (down, or its password not in this environment) is checked
    when a run plans."""
    if spec.source.incremental is None or spec.source.tables is not None:
        return  # a database task's column is checked table by table when it is planned (database/expand.py)
    stop = threading.Event()
    ctx = replace(_context(spec, conf, 0), stop=stop)
    try:
        run_with_timeout(lambda: incremental.fresh_window(spec, ctx, 0, lambda _key: {}), wait_s,
                         "incremental-check")
    except InvalidTaskConfig:
        raise
    except Exception as exc:  # not reachable now: the run says it
        log.get_logger().info("task.incremental_unchecked", reason=f"the source did not answer: {exc!r}"[:300])
    finally:
        stop.set()  # ends a connection's retry waits


def describe(made: Plan) -> str:
    """The plan for a reader at a terminal."""
    lines: list[str] = [
        f"engine:         {made.engine} ({made.engine_reason})",
        f"channels:       {made.channels} ({made.channel_reason})",
        f"estimated rows: {made.estimated_rows if made.estimated_rows is not None else 'unknown'}",
        f"splits:         {len(made.splits)}"]
    lines += [f"  {s.id}  [{s.resource_mark}]" + (f"  {s.range}" if s.range else "") for s in made.splits]
    if made.spark is not None:
        lines.append(f"spark master:   {made.spark['master']}"
                     + (f" (from {made.spark['master_from']})" if "master_from" in made.spark else ""))
    lines.append(f"task groups:    {len(made.task_groups)}")
    lines += [f"  group {g.id}: {g.channels} channel(s), splits {', '.join(g.splits) or '(none)'}"
              for g in made.task_groups]
    lines.append("destinations:")
    for d in made.destinations:
        lines.append(f"  {d.id} ({d.plugin}): {d.writers} writer(s), {d.method}")
        if d.load is not None:
            lines.append(f"    load: {d.load}")
    if made.incremental is not None:
        lines += _describe_window(made.incremental)
    if made.transforms is not None:
        lines += _describe_transforms(made.to_dict()["transforms"])
    return "\n".join(lines)


def _describe_window(w: Mapping[str, Any]) -> list[str]:
    low = "the first row" if w["from"] is None else \
        f"{w['from']} ({'inclusive' if w['from_inclusive'] else 'exclusive'})"
    high = "nothing to read (no value)" if w["to"] is None else \
        f"{w['to']} ({'inclusive' if w['to_inclusive'] else 'exclusive'})"
    lines = [f"incremental:    {w['column']} ({w['mode']}, state key {w['state_key']}) from {low} to {high}"]
    lines += [f"  {d}: from {v['from'] if v['from'] is not None else 'the first row'}"
              f" (watermark {v['watermark'] if v['watermark'] is not None else 'none'})"
              for d, v in w["destinations"].items()]
    return lines


def _describe_transforms(t: dict[str, Any]) -> list[str]:
    lines = [f"transforms:     pushup {t['pushup']}, source dialect {t['dialect'] or 'none'}"]
    pushed = t["source_chain"]["operators"]
    lines.append("  in the source query: " + (", ".join(f"{o['kind']} {o['id']} ({o['path']})" for o in pushed)
                                               or "nothing"))
    if "source_query" in t:
        q = t["source_query"]
        lines.append(f"    columns {', '.join(q['columns'])}" + (f"; WHERE {q['where']}" if q["where"] else ""))
    for chain in t["chains"]:
        ops = ", ".join(f"{o['kind']} {o['id']} ({o['path']}, on {o['runs_on']})" for o in chain["operators"]) \
            or "nothing"
        lines.append(f"  chain {chain['chain']} in {chain['placement']}: {ops}")
    lines += [f"  not pushed: {op} ({why})" for op, why in t["not_pushable"].items()]
    return lines


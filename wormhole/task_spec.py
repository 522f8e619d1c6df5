"""The task specification: what a task reads, where it writes and how, parsed and validated once.

Parsing follows :mod:`wormhole.options` (the same rules for the engine, the task and every plugin):
unknown keys are rejected, types are checked, and each problem carries its key path. The engine's own
configuration (conf/engine.toml) is :mod:`wormhole.config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from wormhole.config import MAX_CHANNELS, EngineConf, ErrorLimit
from wormhole.destination_checks import check_owned_paths as _check_owned_paths
from wormhole.destination_checks import check_single_writers as _check_single_writers
from wormhole.errors import InvalidTaskConfig, PluginError
from wormhole.incremental import IncrementalSpec
from wormhole.options import Problems, join_path, opt, parse_options, show_value
from wormhole.plugins import registry
from wormhole.plugins.base import Plugin
from wormhole.schedule import schedule_problem
from wormhole.spec_json import load_spec_json
from wormhole.transform.operators import OpSpec, bind_task, parse_transforms


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedSpec:
    channel: int | None = opt(None, min=1, max=MAX_CHANNELS)
    """Reader threads when no byte or record limit is set; the engine default applies when unset.
    Bounded because SQL splitters cut ``channel x split_factor`` ranges: a typo of 10**9 must be an
    error, not a hung planner."""
    byte: int | None = opt(None, min=1)
    """The whole task's read rate limit in (estimated) bytes per second; sets the channel count."""
    record: int | None = opt(None, min=1)
    """The whole task's read rate limit in rows per second; sets the channel count."""
    channel_byte: int | None = opt(None, min=1)
    """Overrides engine.toml ``[speed] channel_byte`` for this task."""
    channel_record: int | None = opt(None, min=1)
    """Overrides engine.toml ``[speed] channel_record`` for this task."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSparkSpec:
    master: str | None = opt(None, nonempty=True)
    """The Spark master URL for this task (over engine.toml's and ``WORMHOLE_SPARK_MASTER``)."""
    conf: dict[str, Any] = field(default_factory=dict)
    """``spark.*`` settings for this task, over engine.toml's ``[spark.conf]``."""

    def check(self, path: str, problems: Problems) -> None:
        for key in self.conf:
            if not key.startswith("spark."):
                problems.add(join_path(join_path(path, "conf"), key), "Spark settings start with 'spark.'")


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingsSpec:
    engine: Literal["local", "spark", "auto"] = "local"
    """Where the read and write partitions run: threads in this process, Spark, or chosen from the
    source's estimate (``spark.auto_rows``) and the stores (a Spark-only store needs Spark)."""
    consistency: Literal["isolated", "all_or_nothing"] = "isolated"
    """``isolated``: a failed destination rolls back alone; ``all_or_nothing``: any failure rolls
    back every destination (the original Wormhole's writer consistency)."""
    speed: SpeedSpec = field(default_factory=SpeedSpec)
    error_limit: ErrorLimit | None = None
    pushup: Literal["off", "static", "adaptive"] = "static"
    """Leading filters/projections run in wormhole (off), in the source query (static), or move there
    split by split when measured selectivity and cost say it pays (adaptive): wormhole.transform."""
    schedule: str | None = None
    """A cron expression (5 fields, or 6 with seconds last): the task recurs, a daemon runs it at each tick
    (:mod:`wormhole.schedule`)."""
    spark: TaskSparkSpec | None = None
    """Spark mode's master and settings for this task, over engine.toml's ``[spark]`` (precedence:
    :mod:`wormhole.spark.config`)."""
    foreign_keys: bool = False
    """A database task (``source.params.tables``): create the source's foreign keys in each destination that
    creates its tables, after every table has loaded (only between tables the task copies)."""
    snapshot: Literal["none", "consistent"] = "none"
    """``consistent``: every reader of the run (every split, every table) sees the source at one instant, and
    the result records where that instant stands in the source's change history (``snapshot.position``).
    MySQL/MariaDB: a brief global read lock while each reader connection starts a consistent-snapshot
    transaction; PostgreSQL: an exported snapshot each reader imports; sqlite: one read transaction. Local
    engine only. ``none``: each split reads the source as it is when that split runs."""
    snapshot_lock_timeout_s: float = opt(30.0, min=0.001, max=31_536_000)
    """With ``snapshot: consistent`` on MySQL/MariaDB: the longest the global read lock is waited for
    (``lock_wait_timeout``); past it the run fails and nothing stays locked."""

    verify: Literal["off", "count", "checksum"] = "off"
    """After each destination's commit, read its target back and compare it with what it was sent: ``count``
    its rows, ``checksum`` an order-independent checksum of their values (:mod:`wormhole.verify.inrun`). A
    mismatch fails that destination's verification alone (exit 202); its rows stay committed. Local engine."""

    def check(self, path: str, problems: Problems) -> None:
        if self.verify != "off" and self.engine == "spark":
            problems.add(join_path(path, "verify"), f"{self.verify!r} needs engine 'local' (or 'auto', which verifies "
                                                    "when it chooses local): Spark's executors do not sum what "
                                                    "they write yet")
        if self.schedule is not None:
            problem = schedule_problem(self.schedule)
            if problem is not None:
                problems.add(join_path(path, "schedule"), problem)
        if self.snapshot == "consistent" and self.engine == "spark":
            problems.add(join_path(path, "snapshot"), "'consistent' needs engine 'local' (or 'auto', which then "
                                                      "chooses local): Spark executors read on connections of "
                                                      "their own, outside the snapshot")


@dataclass(frozen=True, slots=True, kw_only=True)
class _PluginRef:
    plugin: str = opt(nonempty=True)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class _SourceRef(_PluginRef):
    incremental: IncrementalSpec | None = None
    """Read only the rows past each destination's watermark (see :mod:`wormhole.incremental`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _DestinationRef:
    id: str = opt(pattern=r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
    plugin: str = opt(nonempty=True)
    params: dict[str, Any] = field(default_factory=dict)
    concurrency: int | None = opt(None, min=1, max=64)
    """Writer threads; default the plugin's own (1 for most stores)."""
    error_limit: ErrorLimit | None = None
    transforms: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _TaskRef:
    name: str = ""
    source: _SourceRef
    transforms: Any = None
    destinations: tuple[_DestinationRef, ...] = opt(min_items=1)
    settings: SettingsSpec = field(default_factory=SettingsSpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSpec:
    plugin: str
    options: Any
    """The plugin's own frozen options dataclass, parsed from ``source.params``."""
    incremental: IncrementalSpec | None = None

    @property
    def tables(self) -> tuple[str, ...] | None:
        """The table patterns of a database task (``params.tables``), else None."""
        if getattr(self.options, "kind", None) != "database":  # wormhole.database.facet.DatabaseSource
            return None
        return tuple(self.options.params.tables)


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationSpec:
    id: str
    plugin: str
    options: Any
    concurrency: int
    error_limit: ErrorLimit | None
    """Overrides the task's limit as a whole (DataX's rule): unset keys mean no limit."""
    transforms: tuple[OpSpec, ...] = ()  # this destination's own, run in its writer path
    params: Mapping[str, Any] = field(default_factory=dict)
    """``params`` as the task gave them: a database task renders its target templates from them per table."""


def _is_datax_job(raw: Any) -> bool:
    """A DataX job document (``{"job": {"content": [...]}}``) given where a task goes."""
    job = raw.get("job") if isinstance(raw, dict) and "source" not in raw else None
    return isinstance(job, dict) and isinstance(job.get("content"), list)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    name: str
    source: SourceSpec
    destinations: tuple[DestinationSpec, ...]
    settings: SettingsSpec
    transforms: tuple[OpSpec, ...] = ()  # the task's, run once per row before the fan-out

    def error_limit_for(self, dest: DestinationSpec, engine: EngineConf) -> ErrorLimit:
        return dest.error_limit or self.settings.error_limit or engine.error_limit

    @classmethod
    def from_json(cls, text: str | bytes | None) -> TaskSpec:
        """Parse and validate a spec from JSON text (UTF-8 when bytes); every failure is InvalidTaskConfig."""
        return cls.from_mapping(load_spec_json(text))

    @classmethod
    def from_mapping(cls, raw: Any) -> TaskSpec:
        """Validate the whole task, plugins' params included; raise one error listing every problem."""
        try:
            return cls._from_mapping(raw)
        except InvalidTaskConfig:
            raise
        except (RecursionError, MemoryError) as exc:
            raise InvalidTaskConfig([f"<root>: too large or too deeply nested to validate ({type(exc).__name__})"]) \
                from None
        except Exception as exc:
            # A validator that trips over an input it did not foresee is our bug, but for the user it
            # is still a spec that cannot be run: say so as a problem (exit 204), never a traceback.
            raise InvalidTaskConfig([f"<root>: cannot be validated ({type(exc).__name__}: {exc}); "
                                     f"please report this as a wormhole bug"]) from exc

    @classmethod
    def _from_mapping(cls, raw: Any) -> TaskSpec:
        problems = Problems()
        if _is_datax_job(raw):
            raise InvalidTaskConfig(["<root>: this is a DataX job (job.content), not a wormhole task: convert it "
                                     "with `wormhole import datax FILE -o task.json`, then use task.json"])
        ref = parse_options(_TaskRef, raw, "", problems)
        if ref is None:
            # The shape is wrong; still check what can be checked so the user sees everything.
            _check_partial(raw, problems)
            raise InvalidTaskConfig(problems.items)
        source = _parse_source(ref.source, problems)
        transforms = parse_transforms(ref.transforms, "transforms", "task", problems)
        refs = ref.destinations
        if source is not None and source.tables is not None:
            refs = tuple(_database_destination(d, i, ref.settings, problems) for i, d in enumerate(refs))
            _check_database_task(source, ref.settings, problems)
        destinations = tuple(_parse_destination(d, i, problems) for i, d in enumerate(refs))
        _check_destination_ids([d.id for d in ref.destinations], problems)
        _check_single_writers(destinations, problems)
        _check_owned_paths(destinations, problems)
        if source is not None and ref.settings.snapshot == "consistent" \
                and registry.source(source.plugin).snapshot is None:
            problems.add("settings.snapshot", f"the {source.plugin} store cannot hold a consistent snapshot (stores "
                                              f"that can: mysql, postgres, sqlite)")
        if source is not None and ref.settings.engine == "local":
            if registry.source(source.plugin).spark_only:
                problems.add("settings.engine", f"source plugin {source.plugin!r} is read by Spark only: "
                                                f"use engine 'spark' or 'auto'")
        parsed = tuple(d for d in destinations if d is not None)
        if problems or source is None or len(parsed) < len(destinations):
            raise InvalidTaskConfig(problems.items)
        _check_transform_types(source, transforms, parsed, problems)
        if problems:
            raise InvalidTaskConfig(problems.items)
        return cls(name=ref.name, source=source, destinations=parsed, settings=ref.settings, transforms=transforms)


def _parse_source(ref: _SourceRef, problems: Problems) -> SourceSpec | None:
    plugin = _plugin(ref.plugin, "source.plugin", problems)
    if plugin is None:
        return None
    if plugin.source is None:
        problems.add("source.plugin", f"plugin {ref.plugin!r} cannot be a source")
        return None
    if ref.incremental is not None and plugin.source.bounds is None:
        problems.add("source.incremental", f"the {ref.plugin} store cannot read incrementally "
                                           f"(stores that can: mysql, sqlite)")
    options = parse_options(plugin.source.options, ref.params, "source.params", problems)
    return None if options is None else SourceSpec(plugin=ref.plugin, options=options, incremental=ref.incremental)


def _parse_destination(ref: _DestinationRef, index: int, problems: Problems) -> DestinationSpec | None:
    path = join_path("destinations", index)
    plugin = _plugin(ref.plugin, f"{path}.plugin", problems)
    if plugin is None:
        return None
    if plugin.sink is None:
        problems.add(f"{path}.plugin", f"plugin {ref.plugin!r} cannot be a destination")
        return None
    options = parse_options(plugin.sink.options, ref.params, f"{path}.params", problems)
    if options is None:
        return None
    concurrency = ref.concurrency if ref.concurrency is not None else plugin.sink.default_concurrency
    transforms = parse_transforms(ref.transforms, f"{path}.transforms", f"destination:{ref.id}", problems)
    return DestinationSpec(id=ref.id, plugin=ref.plugin, options=options, concurrency=concurrency,
                           error_limit=ref.error_limit, transforms=transforms, params=dict(ref.params))


def _check_database_task(source: SourceSpec, settings: SettingsSpec, problems: Problems) -> None:
    """What a database task cannot do yet, refused before anything runs (docs/manual/databases.md)."""
    if settings.engine == "spark":
        problems.add("settings.engine", "a database task (source.params.tables) runs in local mode: use 'local' "
                                        "or 'auto'")
    if settings.consistency == "all_or_nothing":
        problems.add("settings.consistency", "a database task commits each table on its own; all_or_nothing "
                                             "across tables is not supported (use isolated)")


def _database_destination(ref: _DestinationRef, index: int, settings: SettingsSpec,
                          problems: Problems) -> _DestinationRef:
    """A database task's destination: its target params are templates (``{schema}``, ``{table}``), a SQL
    table defaulting to ``{table}``; each table must reach a target of its own."""
    from wormhole.database.model import template_problem

    path = join_path(join_path("destinations", index), "params")
    try:
        sink = registry.get(ref.plugin).sink
    except PluginError:
        return ref  # _parse_destination names the unknown plugin
    if sink is None:
        return ref
    if not sink.targets:
        problems.add(join_path(join_path("destinations", index), "plugin"),
                     f"plugin {ref.plugin!r} cannot take a database task's tables (stores that can: file, mysql, "
                     f"postgres, sqlite)")
        return ref
    params = dict(ref.params)
    if "table" in sink.targets and "table" not in params:
        params["table"] = "{table}"
    templated = False
    for key in sink.targets:
        value = params.get(key)
        if not isinstance(value, str):
            continue
        problem = template_problem(value)
        if problem is not None:
            problems.add(join_path(path, key), problem)
        elif "{table}" in value:
            templated = True
        elif key == "staging_table":
            problems.add(join_path(path, key), "in a database task name each table's staging table with {table}")
    if not templated:
        keys = " or ".join(k for k in sink.targets if k != "staging_table")
        problems.add(path, f"every table needs a target of its own: put {{table}} in {keys}")
    return dataclasses.replace(ref, params=params)


def _check_transform_types(source: SourceSpec, transforms: tuple[OpSpec, ...],
                           destinations: tuple[DestinationSpec, ...], problems: Problems) -> None:
    """Where the source's options declare its schema (a stream, csv or jsonl files with columns), bind the
    transforms now, as the run would: an unknown column or a type error is refused before anything is
    recorded. Other sources are checked when the run reads their schema (still before any write)."""
    role = registry.get(source.plugin).source
    schema = role.declared_schema(source.options) if role is not None and role.declared_schema else None
    if schema is not None:
        bind_task(transforms, {d.id: d.transforms for d in destinations}, schema, problems)


def _plugin(name: str, path: str, problems: Problems) -> Plugin | None:
    try:
        return registry.get(name)
    except PluginError as exc:
        problems.add(path, str(exc))
        return None


def _check_destination_ids(ids: list[Any], problems: Problems) -> None:
    # Ids name files (dirty records, staging) and metrics, some on case-insensitive systems:
    # "Lake" and "lake" are the same destination there, so they are one id here too.
    seen: dict[str, int] = {}
    for i, dest_id in enumerate(ids):
        if not isinstance(dest_id, str):
            continue
        key = dest_id.casefold()
        if key in seen:
            problems.add(f"destinations[{i}].id",
                         f"duplicate id {show_value(dest_id)} (also destinations[{seen[key]}]; "
                         f"ids differing only in case are the same id)")
        else:
            seen[key] = i


def _check_partial(raw: Any, problems: Problems) -> None:
    """Validate plugin params even when the task's outer shape is wrong."""
    if not isinstance(raw, dict):
        return
    src = raw.get("source")
    if isinstance(src, dict) and isinstance(src.get("plugin"), str) and isinstance(src.get("params", {}), dict):
        _parse_source(_SourceRef(plugin=src["plugin"], params=src.get("params", {})), problems)
    parse_transforms(raw.get("transforms"), "transforms", "task", problems)
    dests = raw.get("destinations")
    if isinstance(dests, list):
        _check_destination_ids([d.get("id") if isinstance(d, dict) else None for d in dests], problems)
        for i, d in enumerate(dests):
            if isinstance(d, dict) and isinstance(d.get("plugin"), str) and isinstance(d.get("params", {}), dict):
                ref = _DestinationRef(id=str(d.get("id", "")), plugin=d["plugin"], params=d.get("params", {}))
                _parse_destination(ref, i, problems)

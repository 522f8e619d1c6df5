"""The plan of a run: everything decided before a row moves.

:func:`make_plan` decides from what the source said (:class:`~wormhole.source_facts.SourceFacts`: its
row estimate, schema, splits, an incremental window): it chooses the engine, sets the channel count,
assigns the splits to task groups and binds the transforms. It asks no store anything, moves no row and
prepares no destination. The Engine follows the plan; ``wormhole plan`` prints it. The JSON keys
(:meth:`Plan.to_dict`) are documented in docs/manual/planning.md and stable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from wormhole import incremental
from wormhole.config import EngineConf
from wormhole.planning.assign import TaskGroup, assign_fairly, dispatch_order
from wormhole.planning.channels import ChannelCount, SpeedLimits, adjust_channel_number, cap_at_splits, speed_limits
from wormhole.planning.choice import EngineName, choose_engine
from wormhole.planning.methods import describe_method, read_columns, reads_directly, write_method
from wormhole.plugins import registry
from wormhole.plugins.base import Schema, SinkRole, Split
from wormhole.task_spec import TaskSpec
from wormhole.transform.plan import TransformPlan, build_plan

if TYPE_CHECKING:
    from wormhole.source_facts import SourceFacts

@dataclass(frozen=True, slots=True)
class PlannedSplit:
    id: str
    resource_mark: str
    range: str | None
    """The split's key range or predicate; None when it reads its whole relation or file."""


@dataclass(frozen=True, slots=True)
class PlannedDestination:
    id: str
    plugin: str
    writers: int
    method: str
    load: str | None = None
    """How it encodes what it loads (``LOAD DATA from wire text``, ``LOAD DATA from Arrow``, ``INSERT``),
    for stores that say (:attr:`~wormhole.plugins.base.SinkRole.plan_load`); None for the others."""


@dataclass(frozen=True, slots=True)
class Plan:
    engine: EngineName
    engine_reason: str
    channels: int
    channel_reason: str
    splits: tuple[PlannedSplit, ...]
    """In the order the splitter produced them."""
    task_groups: tuple[TaskGroup, ...]
    destinations: tuple[PlannedDestination, ...]
    estimated_rows: int | None
    limits: SpeedLimits
    transforms: TransformPlan | None = None
    """The operators bound to the source schema, and what the source evaluates (None: no transforms)."""
    incremental: Mapping[str, Any] | None = None
    """An incremental task's window (:meth:`wormhole.incremental.Window.describe`)."""
    spark: Mapping[str, str] | None = None
    """Spark mode's master, where it came from and the engine.toml read (:mod:`wormhole.spark.config`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine, "engine_reason": self.engine_reason,
            "channels": self.channels, "channel_reason": self.channel_reason,
            "splits": [{"id": s.id, "resource_mark": s.resource_mark, "range": s.range} for s in self.splits],
            "task_groups": [{"id": g.id, "channels": g.channels, "splits": list(g.splits)} for g in self.task_groups],
            "destinations": [{"id": d.id, "plugin": d.plugin, "writers": d.writers, "method": d.method,
                              "load": d.load} for d in self.destinations],
            "estimated_rows": self.estimated_rows,
            "speed": {"byte": self.limits.byte, "record": self.limits.record},
            **({"transforms": self.transforms.describe(self.transforms.initial())}
               if self.transforms is not None else {}),
            **({"incremental": dict(self.incremental)} if self.incremental is not None else {}),
            **({"spark": dict(self.spark)} if self.spark is not None else {}),
        }


def make_plan(spec: TaskSpec, facts: SourceFacts, conf: EngineConf, *, loads: bool = True) -> Plan:
    """Everything the run decides from what the source said (``facts``), asking nothing of any store:
    the engine, the channels, the task groups, the transforms (an incremental task's window among them)
    and how each destination writes. ``loads=False``: the destinations' ``load`` lines are left out (a
    database task's table run: each pair's prepare logs its own, ``writer.load_method``, and asking its
    store once more for the plan costs a connection per table)."""
    limits = speed_limits(spec.settings.speed, conf)
    engine, engine_reason = choose_engine(spec, conf, facts.info, facts.spark.installed)
    splits = list(facts.splits)
    count = cap_at_splits(adjust_channel_number(limits), len(splits))
    if facts.window is not None:
        spec = cast(TaskSpec, incremental.windowed(spec, facts.window))
    transforms = _transforms(spec, facts.schema, engine)
    exact = _exact_text(facts, engine, transforms)
    direct = engine == "spark" and exact is not None and reads_directly(
        spec.source.plugin, [write_method(d.plugin, d.options, exact) for d in spec.destinations], transforms,
        limits_paced(spec), conf.spark.direct_read)
    return Plan(engine=engine, engine_reason=engine_reason, channels=count.channels, channel_reason=count.reason,
                splits=tuple(PlannedSplit(s.id, s.resource_mark, split_range(s)) for s in splits),
                task_groups=tuple(task_groups(splits, spec, count, conf.speed.channels_per_task_group)),
                destinations=tuple(replace(_destination(d.id, d.plugin, d.options, d.concurrency, engine, len(splits),
                                                        exact),
                                           load=_load(d.id, d.plugin, d.options, engine, facts.schema, transforms,
                                                      direct)
                                           if loads else None)
                                   for d in spec.destinations),
                estimated_rows=facts.estimated_rows, limits=limits, transforms=transforms,
                incremental=facts.window.describe() if facts.window is not None else None,
                spark=facts.spark.origin if engine == "spark" else None)


def _transforms(spec: TaskSpec, schema: Schema, engine: EngineName) -> TransformPlan | None:
    """The task's transforms bound to the source schema (InvalidTaskConfig lists every problem). A
    source with a SQL dialect takes the leading filters and projections into its query, in both
    engines (Spark: always the widest placement, no adaptive moves); the rest run in the reader
    threads, or as Spark Columns on the source's DataFrame."""
    if not spec.transforms and not any(d.transforms for d in spec.destinations):
        return None
    dialect = registry.source(spec.source.plugin).pushdown
    plan = build_plan(spec, schema, dialect)
    return replace(plan, mode="static") if engine == "spark" and plan.mode == "adaptive" else plan


def _load(dest_id: str, plugin: str, options: Any, engine: EngineName, schema: Schema,
          transforms: TransformPlan | None, direct: bool = False) -> str | None:
    """The destination's ``load`` line, from the store (decided as its writers decide), or None. ``direct``:
    Spark's tasks read the source themselves and hand the reader's own batches to the writers."""
    describe = _sink(plugin).plan_load
    if describe is None:
        return None
    if transforms is None:
        return describe(options, schema, engine != "local" and not direct)
    # Rows a chain made (the reader threads' or the destination's) are not the reader's own batches;
    # in Spark mode batches cross processes without what only local writers use.
    changed = engine != "local" or bool(transforms.destinations.get(dest_id)) or \
        bool(transforms.residual(transforms.initial()).ops)
    return describe(options, transforms.destination_schema(dest_id), changed)


def ordered_splits(splits: Sequence[Split], groups: Sequence[TaskGroup]) -> list[Split]:
    """``splits`` in the order engines that start them from one list should (Spark's partitions)."""
    by_id = {s.id: s for s in splits}
    return [by_id[i] for i in dispatch_order(groups)]


def task_groups(splits: list[Split], spec: TaskSpec, count: ChannelCount, per_group: int) -> list[TaskGroup]:
    # Every split goes to every destination, so the writer side has one mark (the destinations'):
    # the reader's marks decide, unless there is a single one, as in DataX.
    writer_mark = ",".join(d.id for d in spec.destinations)
    return assign_fairly([s.id for s in splits], [s.resource_mark for s in splits], [writer_mark] * len(splits),
                         count.channels, per_group)


def split_range(split: Split) -> str | None:
    params = split.params
    if params.get("predicate"):
        return str(params["predicate"])
    if "lo" in params and "hi" in params:
        return f"[{params['lo']}, {params['hi']})"
    if "path" in params:
        return str(params["path"])
    return None


def _sink(plugin: str) -> SinkRole[Any]:
    role = registry.get(plugin).sink
    assert role is not None  # validated with the task
    return role


def _destination(dest_id: str, plugin: str, options: Any, concurrency: int, engine: EngineName,
                 partitions: int, exact: frozenset[str] | None = None) -> PlannedDestination:
    sink = _sink(plugin)
    how = ", ".join(f"{k}={getattr(options, k)}" for k in sink.method_keys)  # fields the store names
    if engine == "local":
        writers, where = concurrency, "writer threads"
    else:  # as SparkExecution will write it
        method = write_method(plugin, options, exact)
        writers, where = (1 if method == "driver" else partitions), describe_method(method)
    return PlannedDestination(dest_id, plugin, writers, f"{where}; {how}" if how else where)


def limits_paced(spec: TaskSpec) -> bool:
    """The task sets a speed limit: Spark mode paces its source's read (``Throttle.of``)."""
    return spec.settings.speed.record is not None or spec.settings.speed.byte is not None


def _exact_text(facts: SourceFacts, engine: EngineName, transforms: TransformPlan | None) -> frozenset[str] | None:
    """Spark mode: the columns the source's Spark read carries as exact text (native writes decline them),
    of those its pushed-down projection keeps; None when the source's read does not say."""
    exact = facts.spark.exact_text
    if engine != "spark" or exact is None:
        return None
    return exact & read_columns(transforms, facts.schema)

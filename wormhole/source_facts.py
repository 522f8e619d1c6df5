"""The first stage of a run: what the source says before a row moves (:func:`prepare_source`).

An incremental task's window (its bounds, :func:`source_window`), the reader periphery's answer
(reachability, size estimate), the schema and the splits: every question the run asks the source before
it plans, asked once, in this order, each under its timeout. What comes back is a finished
:class:`SourceFacts`; planning (:func:`wormhole.planning.plan.make_plan`) decides from it without asking
the source anything more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from wormhole import incremental
from wormhole.config import EngineConf
from wormhole.errors import SplitError
from wormhole.log import Logger
from wormhole.planning.channels import adjust_channel_number, speed_limits
from wormhole.planning.choice import choose_engine
from wormhole.plugins import registry
from wormhole.plugins.base import Encoding, ReadContext, ReaderPeriphery, Schema, SourceInfo, Split
from wormhole.pool import run_with_timeout
from wormhole.task_spec import SourceSpec, TaskSpec

Watermarks = Callable[[str], Mapping[str, tuple[str | None, int]]]
"""The watermarks the task database keeps under a state key (JSON text per destination)."""


@dataclass(frozen=True, slots=True)
class SparkFacts:
    """What Spark mode's plan needs from outside the task, asked here so that planning asks nothing."""

    installed: bool
    """Whether pyspark can be imported (``settings.engine = auto`` chooses Spark only then)."""
    origin: Mapping[str, str] | None = None
    """Spark mode: the master, where it came from and the engine.toml read (:mod:`wormhole.spark.config`)."""
    exact_text: frozenset[str] | None = None
    """Spark mode: the columns the source's Spark read carries as exact text (it may ask the source: the
    file and hive stores' native writes decline them); None when its read does not say, or not Spark mode."""


@dataclass(frozen=True, slots=True)
class SourceFacts:
    """What the source said before the run planned."""

    periphery: ReaderPeriphery
    """The source's prepared periphery (asked again while the run reads: how busy its server is)."""
    info: SourceInfo | None
    """Its answer to ``prepare``; None when it did not answer within ``timeouts.reader_prepare_s``."""
    schema: Schema
    splits: tuple[Split, ...]
    """In the order the splitter produced them (or the ones the resumed run planned)."""
    advice: int
    """The channel count the splitter was advised (the speed settings')."""
    spark: SparkFacts
    """What a Spark-mode plan needs besides (:func:`spark_facts`)."""
    window: incremental.Window | None = None
    """An incremental task's window: the one the resumed chain recorded, else new from the source's bounds."""

    @property
    def estimated_rows(self) -> int | None:
        return self.info.estimated_rows if self.info is not None else None


def prepare_source(spec: TaskSpec, ctx: ReadContext, conf: EngineConf, log: Logger, *,
                   window: incremental.Window | None = None, resumed: Sequence[Split] | None = None,
                   known: SourceInfo | None = None) -> SourceFacts:
    """Ask the source everything the plan needs besides its window (:func:`source_window`, asked first):
    its periphery's answer, its schema and its splits (``resumed``: the splits the chain of runs planned,
    read again instead of splitting the source anew; ``known``: the periphery's answer as the caller has it
    already, a database task's catalog estimate)."""
    role = registry.source(spec.source.plugin)
    log = log.bind(plugin=spec.source.plugin)
    periphery = role.periphery(spec.source.options, ctx)
    info = _prepared(periphery, conf, log) if known is None else known
    if known is not None:
        log.info("reader.prepared", estimated_rows=known.estimated_rows, estimated_bytes=known.estimated_bytes,
                 known=True)
    advice = adjust_channel_number(speed_limits(spec.settings.speed, conf)).channels
    schema, splits = _split(spec.source, ctx, conf, advice, resumed)
    log.info("reader.split_planned", splits=len(splits), advice=advice, columns=list(schema.names))
    return SourceFacts(periphery=periphery, info=info, schema=schema, splits=splits, advice=advice, window=window,
                       spark=spark_facts(spec, conf, info, schema))


def spark_facts(spec: TaskSpec, conf: EngineConf, info: SourceInfo | None, schema: Schema) -> SparkFacts:
    """Whether pyspark is installed; when the plan will choose Spark mode (:func:`choose_engine`, asked
    again by the plan with the same answers), the master's origin and what the source's Spark read
    carries as exact text (the MySQL and PostgreSQL reads ask their databases)."""
    from wormhole import spark

    installed = spark.available()
    if choose_engine(spec, conf, info, installed)[0] != "spark":
        return SparkFacts(installed)
    from wormhole.spark.config import choose
    from wormhole.spark.methods import source_exact_text

    origin = choose(conf.spark, spec.settings.spark).describe()  # idempotent: a conf the run chose is kept
    return SparkFacts(installed, origin, source_exact_text(spec.source.plugin, spec.source.options, schema))


def source_window(spec: TaskSpec, ctx: ReadContext, log: Logger, *, recorded: incremental.Window | None = None,
                  kept: Watermarks = lambda _key: {}) -> incremental.Window | None:
    """An incremental task's window: the one a resumed chain ``recorded``, else a new one from the source's
    bounds and the ``kept`` watermarks; None for a task that is not incremental."""
    if spec.source.incremental is None:
        return None
    window = recorded if recorded is not None else incremental.fresh_window(spec, ctx, ctx.task_id, kept)
    log.info("incremental.window", resumed=recorded is not None, **window.describe())
    return window


def _prepared(periphery: ReaderPeriphery, conf: EngineConf, log: Logger) -> SourceInfo | None:
    """The periphery's answer, or None when it takes too long (skipped, not fatal; a failure to reach
    the source is)."""
    timeout = conf.timeouts.reader_prepare_s
    try:
        info = run_with_timeout(periphery.prepare, timeout, "reader-prepare")
    except TimeoutError:
        log.warning("reader.prepare_skipped", timeout_s=timeout)
        return None
    log.info("reader.prepared", estimated_rows=info.estimated_rows, estimated_bytes=info.estimated_bytes)
    return info


def _split(source: SourceSpec, ctx: ReadContext, conf: EngineConf, advice: int,
           resumed: Sequence[Split] | None) -> tuple[Schema, tuple[Split, ...]]:
    """The schema and the splits, within ``timeouts.split_s``; splits named twice are refused."""
    role = registry.source(source.plugin)

    def ask() -> tuple[Schema, list[Split]]:
        schema = role.reader(source.options, ctx).schema()
        if resumed is not None:  # the ranges the crashed run planned (the source may have changed)
            return schema, list(resumed)
        return schema, role.splitter(source.options, ctx).split(advice)

    timeout = conf.timeouts.split_s
    try:
        schema, splits = run_with_timeout(ask, timeout, "reader-split")
    except TimeoutError:
        raise SplitError(f"splitting the source did not finish within {timeout:g} s") from None
    seen: set[str] = set()
    for split in splits:
        if split.id in seen:  # task groups, the board and the plan name splits by id: never merge two
            raise SplitError(f"the source has two splits named {split.id!r} (is a table listed twice?)",
                             plugin=source.plugin, split_id=split.id)
        seen.add(split.id)
    return schema, tuple(splits)


@dataclass(frozen=True, slots=True)
class SourceStore:
    """The source's store as the run asks it beside the reads (:class:`~wormhole.planning.encoded.EncodingSource`)."""

    spec: SourceSpec
    ctx: ReadContext

    def encoding(self) -> Encoding | None:
        """The source's own encoding of its rows, when its store can send them undecoded (and can for
        these options)."""
        encoded = registry.source(self.spec.plugin).encoded
        return None if encoded is None else encoded.reader(self.spec.options, self.ctx).encoding()

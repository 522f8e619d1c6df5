"""The plugin contracts: rows and schemas, splits, and the Protocols every store implements.

A store is a :class:`Plugin` bundle with an optional source role (Splitter, Reader, ReaderPeriphery) and
an optional sink role (WriterPeriphery, Writer: the writer contract is :mod:`wormhole.plugins.writing`,
re-exported here); what else a role can do is a facet of it
(:mod:`wormhole.plugins.facets`) the engine calls through instead of probing the roles' objects. Spark
mode reaches a store only through this contract: the roles' ``spark_read``/``spark_write`` name its
Spark adapter (``plugins/<store>/spark.py``), which imports nothing of the engine's runtime. Plugins
inherit nothing (bar the optional ShippedWithoutLock helper): they satisfy these Protocols structurally.
Options are frozen dataclasses parsed from the task's ``params`` by :func:`wormhole.options.parse_options`,
so unknown keys and wrong types are rejected with key paths.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, Protocol

import structlog

from wormhole.database.facet import CatalogFacet
from wormhole.errors import InvalidTaskConfig
from wormhole.log import Logger
from wormhole.plugins.batch import Batch as Batch  # the batch type: plugins import it from here
from wormhole.plugins.batch import Encoding as Encoding
from wormhole.plugins.batch import batch_memo as batch_memo
from wormhole.plugins.batch import rows_of as rows_of
from wormhole.plugins.context_kit import SparkAccess as SparkAccess  # plugins import them from here
from wormhole.plugins.context_kit import StopSignal as StopSignal
from wormhole.plugins.context_kit import context_reduce
from wormhole.plugins.facets import (
    DdlFacet,
    DurableFacet,
    EncodedReadFacet,
    EncodedWriteFacet,
    LeftoverFacet,
    P,
    SnapshotFacet,
)
from wormhole.plugins.schema import LOGICAL_TYPES as LOGICAL_TYPES  # the schema types: plugins import them from here
from wormhole.plugins.schema import Column as Column
from wormhole.plugins.schema import LogicalType as LogicalType
from wormhole.plugins.schema import Row as Row
from wormhole.plugins.schema import Schema as Schema
from wormhole.plugins.shared import RunShared
from wormhole.plugins.writing import DurablePeriphery as DurablePeriphery  # the writer contract, re-exported
from wormhole.plugins.writing import EncodedWriter as EncodedWriter
from wormhole.plugins.writing import LeftoverPeriphery as LeftoverPeriphery
from wormhole.plugins.writing import Rejected as Rejected
from wormhole.plugins.writing import ShippedWithoutLock as ShippedWithoutLock
from wormhole.plugins.writing import SplitWriter as SplitWriter
from wormhole.plugins.writing import TargetRows as TargetRows
from wormhole.plugins.writing import Writer as Writer
from wormhole.plugins.writing import WriteResult as WriteResult
from wormhole.plugins.writing import WriterPeriphery as WriterPeriphery

WILL_FAIL = "none: the run will fail"  # starts a plan_load line whose prepare will fail


@dataclass(frozen=True, slots=True)
class Split:
    """One unit of reading: small, picklable, with a stable id.

    ``resource_mark`` names the database or host it loads, so planning can spread concurrent
    readers over different resources (DataX's loadBalanceResourceMark).
    """

    id: str
    resource_mark: str
    params: Mapping[str, Any] = field(default_factory=dict)


PARAM_MARK = "\x00"
"""Where a bound parameter goes in pushed-down SQL, before the driver's placeholder replaces it (no
identifier holds NUL)."""


def render_marks(text: str, placeholder: str, escape_percent: bool = False) -> str:
    """``text`` with each :data:`PARAM_MARK` replaced by ``placeholder``; ``escape_percent`` doubles every
    other ``%`` (a driver that formats with ``%`` once there are arguments, as pymysql)."""
    if escape_percent:
        text = text.replace("%", "%%")
    return text.replace(PARAM_MARK, placeholder)


@dataclass(frozen=True, slots=True)
class PushedQuery:
    """The leading filters and projections of the task's transforms, for the source to evaluate
    (push-down). A reader whose ``SourceRole.pushdown`` names a dialect finds it in
    ``split.params["pushdown"]`` and must return only the rows ``where`` holds for, with only the
    ``keep`` columns of its schema, in that order."""

    keep: tuple[int, ...]
    """Columns of the reader's schema, by position."""
    where: str | None
    """A condition in the source's dialect over the schema's column names; ``\\x00`` marks each
    bound parameter (the reader puts its driver's placeholder there)."""
    args: tuple[Any, ...]
    plan: str
    """The placement's id, for logs."""

    def render(self, placeholder: str, escape_percent: bool = False) -> str | None:
        return None if self.where is None else render_marks(self.where, placeholder, escape_percent)


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What the reader periphery learned before reading: reachability and size estimates."""

    estimated_rows: int | None = None
    estimated_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotRequest:
    """What a source's snapshot is opened for (``SourceRole.snapshot``)."""

    readers: int
    """Reader connections that may read through it at once (the run's reader channels; the sum of every
    table run's when several share it). A store whose readers must be opened under its lock opens this many."""
    lock_timeout_s: float = 30.0
    """The longest a store waits for the lock it takes the snapshot under (``settings.snapshot_lock_timeout_s``)."""


class SourceSnapshot(Protocol):
    """One consistent snapshot of a source, open for a whole run (or for every table run of a database task):
    the store's reader, splitter and incremental bounds find it in their context (``ctx.snapshot``) and read
    through it. The engine only asks its position and closes it."""

    @property
    def position(self) -> Mapping[str, str]:
        """Where the snapshot stands in the source's change history (binlog file and position, GTID set,
        PostgreSQL LSN), for a change stream to start from; empty when the store has none."""
        ...

    def close(self) -> None:
        """Release everything it holds (its connections and their transactions); idempotent."""
        ...


class DirtySink(Protocol):
    """Where rejected rows go, with their reason (the run's dirty-record file)."""

    def reject(self, origin: str, rows: Sequence[Rejected], split_id: str | None = None) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadContext:
    """What a source's splitter, reader and periphery get from the engine."""

    task_id: int
    run_id: int
    batch_rows: int
    dirty: DirtySink
    batch_bytes: int = 4 * 1024 * 1024
    """Readers that can see row sizes as they read cut batches by bytes too (``exchange.batch_bytes``)."""
    """Readers report rows they cannot convert here (origin ``source``) and skip them."""
    plugin: str = ""
    keep_wire: bool = False
    """Some destination may load the source's own text of a value (:attr:`SinkRole.uses_wire_text`): a
    reader that has it keeps it beside the typed batch (``Batch.wire``); else it is dropped at once."""
    stop: StopSignal = field(default_factory=threading.Event, compare=False, repr=False)
    """Set when the task stops: retry waits (:mod:`wormhole.retry`) end at once."""
    spark: SparkAccess | None = field(default=None, compare=False, repr=False)
    """The run's Spark (None on an executor, whose context was pickled)."""
    wire_text: bool = True
    """Its batches may carry the source's wire text (Spark mode's cross processes without it)."""
    snapshot: SourceSnapshot | None = field(default=None, compare=False, repr=False)
    """The run's consistent snapshot (``settings.snapshot: consistent``), opened by the store's
    ``SourceRole.snapshot``: its readers, splitter and bounds read through it. None: each opens its own."""
    shared: RunShared | None = field(default=None, compare=False, repr=False)
    """What the table runs of a database task share (:mod:`wormhole.plugins.shared`); None: a task of one table."""
    log: Logger = field(init=False, compare=False, repr=False)
    """A logger bound to task_id, run_id and plugin; bind ``split_id`` per split (a table run of a database task's
    logs its routine info events at debug: :meth:`RunShared.quiet`)."""

    def __post_init__(self) -> None:
        log = structlog.get_logger("wormhole").bind(task_id=self.task_id, run_id=self.run_id, plugin=self.plugin)
        object.__setattr__(self, "log", log if self.shared is None else self.shared.quiet(log))

    def __reduce__(self) -> tuple[Any, ...]:
        return context_reduce(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteContext:
    """What a destination's periphery and writers get from the engine."""

    task_id: int
    run_id: int
    destination: str
    schema: Schema
    batch_rows: int
    concurrency: int
    plugin: str = ""
    origin_run_id: int | None = None
    """The run whose durable state this run continues (see :attr:`state_run`): set when resuming."""
    taskdb_id: str = ""
    """The id of the task database the task lives in (``db init`` made it; '' when there is none):
    task and run ids are only unique within one task database, so the state a destination keeps
    (split markers, staging tables, temporary directories) is named by this id too."""
    record_limit: int | None = None
    """``error_limit.record`` (None: none). A writer may stop a batch whose rejections go over it
    (:attr:`WriteResult.stopped`): the destination fails whatever the rest holds."""
    stop: StopSignal = field(default_factory=threading.Event, compare=False, repr=False)
    """Set when the task stops or this destination fails: retry waits end at once."""
    spark: SparkAccess | None = field(default=None, compare=False, repr=False)
    """The run's Spark (None on an executor, whose context was pickled)."""
    wire_text: bool = True
    """Its batches may carry the source's wire text (Spark mode's cross processes without it)."""
    shared: RunShared | None = field(default=None, compare=False, repr=False)
    """What the table runs of a database task share (:mod:`wormhole.plugins.shared`); None: a task of one table."""
    log: Logger = field(init=False, compare=False, repr=False)
    """A logger bound to task_id, run_id, plugin and destination (a table run of a database task's logs its routine
    info events at debug: :meth:`RunShared.quiet`)."""

    @property
    def resuming(self) -> bool:
        """This run continues an earlier run's durable state (it took over a crashed run)."""
        return self.origin_run_id is not None and self.origin_run_id != self.run_id

    @property
    def state_run(self) -> int:
        """The run id that names this destination's kept state (staging table, temporary directory,
        split markers): the first run of a chain of resumed runs, so a resumed run finds what the
        crashed one left and a fresh run never sees another run's markers."""
        return self.origin_run_id if self.origin_run_id is not None else self.run_id

    def __post_init__(self) -> None:
        log = structlog.get_logger("wormhole").bind(task_id=self.task_id, run_id=self.run_id, plugin=self.plugin,
                                                    destination=self.destination)
        object.__setattr__(self, "log", log if self.shared is None else self.shared.quiet(log))

    def __reduce__(self) -> tuple[Any, ...]:
        return context_reduce(self)


class Splitter(Protocol):
    """Cuts the source into splits; ``advice`` is the planned reader concurrency (a hint).

    A splitter whose splits are ranges bounded by the source as it was when they were cut (a SQL store's key
    ranges) may also have ``outside(plan) -> list[Split]``: splits reading the rows no split of ``plan`` (cut
    earlier) reads, which ``wormhole verify`` reads beside a task's last plan. Without it, those are the splits
    it cuts now whose ids no split of the plan has (a file added since)."""

    def split(self, advice: int) -> list[Split]: ...


class Reader(Protocol):
    """Reads splits. One instance per reader thread; ``read`` opens and closes its own resources.

    Lifecycle:
    1. ``schema()`` on the engine's thread, before any writer is prepared;
    2. ``read(split)`` per split, yielding batches of about ``batch_rows`` rows each: a :class:`Batch`
       (Arrow columns, :meth:`Batch.of_arrow`), or rows as tuples, which the exchange makes one.
    """

    def schema(self) -> Schema: ...

    def read(self, split: Split) -> Iterator[Batch | Collection[Row]]: ...


class EncodedReader(Protocol):
    """The reader of a store with ``SourceRole.encoded``: rows in its server's own bytes."""

    def encoding(self) -> Encoding | None:
        """What :meth:`read_encoded` sends for these options (the columns' declared types), None when it
        cannot send them undecoded (a column read through an expression, a query)."""
        ...

    def read_encoded(self, split: Split, encoding: Encoding) -> Iterator[Batch]:
        """The split's rows as ``Batch.of_encoded`` batches; the same rows :meth:`Reader.read` gives."""
        ...


class ReaderPeriphery(Protocol):
    """Pre-processing of the source: reachability and size; bounded by a timeout and skippable."""

    def prepare(self) -> SourceInfo: ...


SPLIT_ORDER = "wh_split_order"
"""The attribute a native Spark read sets on its DataFrame: the split id of each partition, in order."""


def with_split_order(frame: Any, split_ids: Sequence[str]) -> Any:
    """``frame`` (a DataFrame of a native Spark read), marked as holding one partition per split, in
    the order of ``split_ids``: Spark mode then writes it split by split to destinations that resume."""
    frame.__dict__[SPLIT_ORDER] = list(split_ids)
    return frame


def split_order(frame: Any) -> list[str] | None:
    """The split of each partition of a native read's DataFrame, when the read said (:func:`with_split_order`)."""
    order = frame.__dict__.get(SPLIT_ORDER)
    return list(order) if order is not None else None


@dataclass(frozen=True, slots=True)
class SourceBounds:
    """What a source says of an incremental column when a run is planned (``SourceRole.bounds``)."""

    kind: str
    """The column's logical type."""
    maximum: Any
    """``MAX(column)`` over what the source reads (None: no row has a value)."""
    now: datetime
    """The source's clock, to the whole second (a database's: its session's time zone)."""


def not_a_column(column: str, where: str) -> InvalidTaskConfig:
    """What ``SourceRole.bounds`` raises when the incremental column is not one of ``where``'s: the task is
    invalid (exit 204, like a column whose type cannot be one), not a read that failed."""
    return InvalidTaskConfig([f"source.incremental.column: {column} is not a column of {where}"])


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRole(Generic[P]):
    options: type
    """Frozen dataclass the ``source.params`` are parsed into."""
    splitter: Callable[[Any, ReadContext], Splitter]
    reader: Callable[[Any, ReadContext], Reader]
    periphery: Callable[[Any, ReadContext], P]
    """A :class:`ReaderPeriphery`."""
    spark_read: str | None = None
    """Optional ``module:function`` of a native Spark read, loaded only in Spark mode:
    ``read(spark, options, splits, schema) -> DataFrame`` (one partition per split where it can; when
    the partitions are the splits in another order, it says so with :func:`with_split_order`).
    Without it, Spark runs ``reader.read(split)`` per split inside the executors."""
    declared_schema: Callable[[Any], Schema | None] | None = None
    """Optional: the schema these options declare, known without connecting or opening a file (the
    reader's ``schema()`` returns exactly it); None when only the store can say. Validation type-checks
    the transforms against it, so a typo in a column name is refused before anything is recorded."""
    bounds: Callable[[Any, ReadContext, str], SourceBounds] | None = None
    """Optional: ``bounds(options, context, column)``, the incremental column's type, its maximum over what
    the options read and the source's clock (:mod:`wormhole.incremental`); a store without it cannot be
    read incrementally. Raises a SplitError naming the column when it is not one of the source's."""
    pushdown: Literal["mysql", "sqlite", "postgres"] | None = None
    """The SQL dialect in which the reader takes a ``PushedQuery`` (``split.params["pushdown"]``);
    None: the store evaluates no transform, they all run in wormhole."""
    busy_threads: Callable[[P], int | None] | None = None
    """Optional: ``busy_threads(prepared_periphery)``, statements the source's busiest server is running
    (not this one's own), None when it cannot say: adaptive push-up asks it before it moves work into the
    source."""
    spark_only: bool = False
    """The store can only be read through Spark (its reader's ``read`` is never called)."""
    encoded: EncodedReadFacet[EncodedReader] | None = None
    """Optional: the reader can send rows undecoded, in its server's byte format."""
    catalog: CatalogFacet | None = None
    """Optional: the source can read a whole database, many tables named by ``tables`` patterns, each read once
    as its own table (:mod:`wormhole.database`): it lists and describes them, and gives each one's options."""
    snapshot: SnapshotFacet[SourceSnapshot] | None = None
    """Optional: it can hold one consistent snapshot that every reader reads through (``settings.snapshot``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkRole(Generic[P]):
    options: type
    """Frozen dataclass the ``destinations[i].params`` are parsed into."""
    periphery: Callable[[Any, WriteContext], P]
    """A :class:`WriterPeriphery`."""
    writer: Callable[[Any, WriteContext, Any, int], Writer]
    """``writer(options, context, prepared_periphery, worker_index)``: writers share the
    periphery's state (temporary directory, open transaction)."""
    default_concurrency: int = 1
    """Writer threads of a destination that does not set ``concurrency``."""
    single_writer_key: Callable[[Any], str | None] | None = None
    """Optional: a key naming a resource that admits one writing destination per run (a SQLite
    file); two destinations with the same key are a configuration error."""
    owned_path: Callable[[Any], str | None] | None = None
    """Optional: the filesystem path the destination's ``params.path`` names (a directory with all
    it holds, or a file). Two destinations whose paths are the same or one inside the other are a
    configuration error, whichever stores they belong to (paths are compared resolved)."""
    method_keys: tuple[str, ...] = ()
    """Fields of the options that say how the store writes (``mode``, ``load``), shown in the plan."""
    spark_write: str | None = None
    """Optional ``module:function`` of a native Spark write, loaded only in Spark mode:
    ``write(df, options, context, prepared_periphery) -> bool``; False when these options need the
    row writer instead. A failed write must leave nothing the periphery's rollback cannot undo."""
    uses_wire_text: bool = False
    """Its writers may load a batch's wire text (``Batch.wire``, the mysql reader's): a local run with
    such a destination asks the reader to keep it (``ReadContext.keep_wire``), and its writers are
    :class:`~wormhole.plugins.writing.EncodedWriter` s."""
    plan_load: Callable[[Any, Schema, bool], str] | None = None
    """Optional: ``plan_load(options, schema, rows_changed)`` says how the destination encodes what it
    loads, for ``wormhole plan`` (``load``); it may read (never write) the target to decide as its writers
    will. ``rows_changed``: transforms make the rows it gets (not the reader's own);
    :data:`WILL_FAIL` starts a line saying the run's prepare will fail, and why."""
    spark_replaces: Callable[[Any], bool] | None = None
    """Optional: for these options the native Spark write replaces the destination's whole output
    at commit (a temporary directory swapped in), so in Spark mode it writes every row each run and
    needs no split records: the destination is prepared afresh, never resumed."""
    durable: DurableFacet[P, SplitWriter] | None = None
    """Optional: each split is made durable with the destination's own record, so it resumes."""
    leftovers: LeftoverFacet[P] | None = None
    """Optional: it finds and removes what crashed runs of its task left behind."""
    add_written: Callable[[P, int], None] | None = None
    """Optional: ``add_written(periphery, rows)``, for a periphery that keeps its own count of rows written
    (for ``verify`` or rollback messages): in Spark mode the rows are written by executors, on copies of
    the periphery, so the engine reports the destination's total to it once its job has succeeded."""
    encoded: EncodedWriteFacet[P] | None = None
    """Optional: its writers load a source's bytes as they are, when the target takes them."""
    needs_spark: bool = False
    """The store needs a SparkSession even when the rows move in local mode (a Hive catalog), so
    ``settings.engine = auto`` chooses Spark."""
    ddl: DdlFacet | None = None
    """Optional: it creates a database source's tables from their definitions (:mod:`wormhole.database.ddl`)."""
    targets: tuple[str, ...] = ()
    """The params that say where the rows go (``database``, ``schema``, ``table``, ``path``): in a database
    task (``source.params.tables``) they are templates with ``{schema}`` and ``{table}``, rendered per table
    (:mod:`wormhole.database.model`); empty: the store cannot be a database task's destination."""
    delete_keys: Callable[[P, Sequence[str], Sequence[tuple[Any, ...]]], int] | None = None
    """Optional: ``delete_keys(unprepared periphery, columns, keys)``: in one transaction, delete every row of the
    target whose ``columns`` hold one of ``keys`` (values as the store's reader gives them back); the rows
    deleted. What ``wormhole verify --repair`` removes before it writes the source's rows of those keys again."""
    upsert_params: Callable[[Sequence[str]], Mapping[str, Any]] | None = None
    """Optional: ``upsert_params(key)``: the params that make the store's writer insert each row or replace the
    target's row of the same ``key`` (its primary key), in the split's own transaction. What ``wormhole verify
    --repair`` writes a keyed copy's missing and different rows with: no key of the copy is ever absent."""
    count_rows: Callable[[P], int] | None = None
    """Optional: ``count_rows(unprepared periphery)``: the rows its target holds now, counted by the store
    (``settings.verify: count`` asks it instead of reading every row back)."""
    target_rows: Callable[[Any], TargetRows] | None = None
    """Optional: ``target_rows(options)``, how the run's rows meet what the target held (``settings.verify``
    reads the target back to compare it with what was sent; None: the store's copies are not verified in a run)."""
    spark_partitions: bool = False
    """In Spark mode the row writer may run inside the executors, one writer per partition with
    ``worker_index`` = partition id: a partition written twice (a task retry) leaves its rows once.
    Otherwise the destination's rows are written from the driver (``toLocalIterator``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plugin:
    """The :class:`Store` every store module exports as ``PLUGIN``."""

    name: str
    description: str
    source: SourceRole[Any] | None = None
    sink: SinkRole[Any] | None = None


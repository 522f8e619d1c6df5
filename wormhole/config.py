"""Engine configuration (conf/engine.toml): frozen dataclasses, validated once, every problem at once.
The task specification is :mod:`wormhole.task_spec`.

Parsing follows :mod:`wormhole.options` (the same rules for the engine, the task and every plugin):
unknown keys are rejected, types are checked, and each problem carries its key path.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wormhole.errors import ConfigError, InvalidTaskConfig
from wormhole.options import Problems, join_path, opt, parse_options
from wormhole.transform.conf import PushUpConf

MAX_CHANNELS = 1024
"""Most channels a task may have, however they are set: SQL splitters cut ``channels x split_factor``
ranges, so a typo of 10**9 must be an error (or a cap), not a hung planner."""

# ---------------------------------------------------------------------------------------------
# Engine configuration (conf/engine.toml)


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorConf:
    interval_s: float = opt(0.2, min=0.01)
    """How often the monitor polls the reader and writer pools."""
    report_every: int = opt(25, min=1)
    """Log a progress line every N checks (every 5 s with the defaults)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeConf:
    batch_rows: int = opt(8192, min=1)
    """Rows per batch crossing from reader threads to writer threads (under a speed limit, at most one
    second of it). Each batch costs the same fixed steps whatever its rows (a reader's cut, a writer's encode,
    a LOAD DATA or COPY statement): 4096 cost a MySQL copy about a fifth more CPU; 16384 left a writer's lane
    of the default queue room for one batch, and the reader waited on it (docs/benchmarks.md)."""
    batch_bytes: int = opt(4 * 1024 * 1024, min=1)
    """At most this many (estimated) bytes per batch as well: wide rows make smaller batches, so memory
    follows ``queue_bytes`` whatever the rows' size (one row is always a batch of its own)."""
    queue_rows: int = opt(65536, min=1)
    """Capacity of the write side of each destination's DoubleQueue, in rows."""
    queue_bytes: int = opt(64 * 1024 * 1024, min=1)
    """Capacity of the write side of each destination's DoubleQueue, in (estimated) bytes."""
    spill_rows: int = opt(4096, min=1)
    """A consumer swaps the queue's arrays once the write side holds this many rows."""
    push_timeout_s: float = opt(600.0, min=0.01)
    """A destination that accepts no batch for this long is failed (its writers are stalled)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorLimit:
    record: int | None = opt(None, min=0)
    """Most rejected rows a destination may have; checked while the task runs."""
    percentage: float | None = opt(None, min=0.0, max=1.0)
    """Most rejected rows as a fraction (0..1) of the rows delivered; checked at the end."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeoutsConf:
    reader_prepare_s: float = opt(30.0, min=0.0)
    """The reader periphery (reachability, row estimate) is skipped after this long."""
    split_s: float = opt(300.0, min=0.01)
    """Splitting must finish within this long, or the task fails."""
    writer_prepare_s: float = opt(300.0, min=0.01)
    """A destination whose preparation takes longer fails."""
    shutdown_s: float = opt(5.0, min=0.0)
    """After a stop or failure, how long threads get to notice before the engine moves on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaderConf:
    channels: int = opt(4, min=1, max=MAX_CHANNELS)
    """Reader threads when the task sets no speed.channel (DataX fails here; a default is kinder)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedConf:
    channel_byte: int | None = opt(None, min=1)
    """Per-channel byte rate (DataX's core.transport.channel.speed.byte): a task's ``speed.byte``
    divided by it gives the channel count. Unset: a task with a byte limit must set its own."""
    channel_record: int | None = opt(None, min=1)
    """Per-channel record rate (core.transport.channel.speed.record), as ``channel_byte`` for records."""
    channels_per_task_group: int = opt(5, min=1, max=MAX_CHANNELS)
    """Channels per task group (DataX's core.container.taskGroup.channel): groups = ceil(channels / this)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimConf:
    heartbeat_s: float = opt(3.0, min=0.05)
    """How often a running task's process writes its heartbeat into the task row."""
    stale_s: float = opt(30.0, min=0.1)
    """A running task whose heartbeat is older than this is stale: its process is gone, and
    ``wormhole --task-id N`` takes it over and resumes it. A fresher claim is never taken. The
    running process itself makes splits durable only within ``stale_s - heartbeat_s`` of its last
    heartbeat (:mod:`wormhole.recovery.lease`)."""

    def check(self, path: str, problems: Problems) -> None:
        if self.stale_s < 2 * self.heartbeat_s:
            problems.add(join_path(path, "stale_s"), f"must be at least twice heartbeat_s ({self.heartbeat_s:g}): a "
                                                     "claim must survive a late heartbeat")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryConf:
    split_retries: int = opt(3, min=0, max=100)
    """How often one split is read again after it failed (a lost source connection, a destination's
    transaction lost mid-split) before the failure is final."""
    retry_wait_s: float = opt(1.0, min=0.0)
    """The first wait before a split is read again; it doubles per retry, up to 30 s."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PathsConf:
    dirty_dir: str = "var/dirty"
    """Each run writes its rejected rows to ``<dirty_dir>/task-<id>/run-<id>.jsonl``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SparkConf:
    master: str = opt("local[*]", nonempty=True)
    """Any Spark master URL: ``local[N]``, ``spark://host:7077``, ``yarn``, ``k8s://...``."""
    app_name: str = opt("wormhole", nonempty=True)
    auto_rows: int = opt(20_000_000, min=0)
    """``settings.engine = auto`` runs a task on Spark when the source's estimate exceeds this."""
    warehouse_dir: str = "var/spark/warehouse"
    """Hive tables' data (``spark.sql.warehouse.dir``) when no external metastore is configured."""
    metastore_dir: str = "var/spark/metastore"
    """The embedded (Derby) Hive metastore; one process at a time can open it."""
    hive: bool = True
    """Build the session with Hive support (the ``hive`` store needs it)."""
    jars: tuple[str, ...] | None = None
    """Extra jars; by default Debian's MariaDB Connector/J and PostgreSQL JDBC driver, those installed."""
    python: str | None = None
    """The executors' Python on the workers (``spark.pyspark.python``): for workers that already have a
    Python with wormhole's dependencies. Default: the driver's own interpreter on a local master, the
    shipped archive's with ``archive``."""
    archive: str | None = None
    """An archive of wormhole and its dependencies (``wormhole spark pack``), shipped to the executors
    (``spark.archives``), whose Python they run: the workers need only Java."""
    preflight: bool = True
    """Before any destination is prepared, a small job checks the executors (start, import wormhole,
    reach the file destinations' paths, load the JDBC drivers)."""
    direct_read: bool = True
    """When one job writes every destination (all by row writers in the executors, no transforms, no speed
    limit), each of its tasks reads its split with the source store's own reader, as local mode reads, in
    place of the store's JDBC read (:func:`wormhole.planning.methods.reads_directly`); false: the JDBC read."""
    conf: dict[str, Any] = field(default_factory=dict)
    """Any ``spark.*`` setting, passed to the session builder as is (``[spark.conf]`` in TOML)."""

    def check(self, path: str, problems: Problems) -> None:
        for key in self.conf:
            if not (key.startswith("spark.") or key.startswith("javax.jdo.")):
                problems.add(join_path(join_path(path, "conf"), key), "Spark settings start with 'spark.'")


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConf:
    monitor: MonitorConf = field(default_factory=MonitorConf)
    exchange: ExchangeConf = field(default_factory=ExchangeConf)
    error_limit: ErrorLimit = field(default_factory=lambda: ErrorLimit(record=0))
    timeouts: TimeoutsConf = field(default_factory=TimeoutsConf)
    reader: ReaderConf = field(default_factory=ReaderConf)
    speed: SpeedConf = field(default_factory=SpeedConf)
    claim: ClaimConf = field(default_factory=ClaimConf)
    recovery: RecoveryConf = field(default_factory=RecoveryConf)
    paths: PathsConf = field(default_factory=PathsConf)
    spark: SparkConf = field(default_factory=SparkConf)
    pushup: PushUpConf = field(default_factory=PushUpConf)

    @classmethod
    def load(cls, conf_dir: str | Path | None) -> EngineConf:
        """Read the engine.toml :func:`engine_conf_path` finds; built-in defaults when it finds none."""
        global loaded_from
        path = engine_conf_path(conf_dir)
        loaded_from = path
        if path is None:
            return cls()
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"engine configuration {path} does not exist") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"engine configuration {path} is not valid TOML: {exc}") from exc
        problems = Problems()
        conf: EngineConf | None = parse_options(cls, raw, "", problems)
        if problems or conf is None:
            raise InvalidTaskConfig(problems.items, where=f"engine configuration {path}")
        return conf


CHECKOUT_CONF = Path(__file__).resolve().parent.parent / "conf"
"""The ``conf/`` of the checkout the package runs from (absent for an installed wheel)."""

loaded_from: Path | None = None
"""The engine.toml the process's last :meth:`EngineConf.load` read (None: built-in defaults), for the log
and ``wormhole plan`` to say which configuration a run uses."""


def engine_conf_path(conf_dir: str | Path | None) -> Path | None:
    """Which engine.toml a process uses, the first of: ``<conf_dir>/engine.toml`` (``--conf DIR`` or
    ``WORMHOLE_CONF``; it must exist), ``./conf/engine.toml`` in the working directory, the checkout's
    ``conf/engine.toml`` next to the package; None (built-in defaults) when none of them exists."""
    if conf_dir is not None:
        return Path(conf_dir) / "engine.toml"
    for candidate in (Path("conf") / "engine.toml", CHECKOUT_CONF / "engine.toml"):
        if candidate.is_file():
            return candidate.resolve()
    return None

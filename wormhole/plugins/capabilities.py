"""What a store can do, declared once: the :class:`Capabilities` every store gives its :class:`Plugin`.

dlt's ``capabilities()`` is the model: the engine, the planner and Spark mode read this frozen object
and never probe a store's classes or objects (``getattr``, ``isinstance``) to find out what it
supports. Each store declares its own in its package's ``capabilities.py``; a store that declares
nothing gets the defaults (a source that evaluates no transform, a destination written by one thread
that neither resumes nor leaves state behind). The contract test suite checks that each built-in
store's declaration is true of its classes (a declared ``durable_splits`` has SplitWriters and a
DurablePeriphery, and so on), so a declaration cannot promise what the store does not do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    # -- as a source ---------------------------------------------------------------------------
    pushdown: Literal["mysql", "sqlite", "postgres"] | None = None
    """The SQL dialect in which the reader takes a ``PushedQuery`` (``split.params["pushdown"]``);
    None: the store evaluates no transform, they all run in wormhole."""
    busy_threads: bool = False
    """The reader periphery has ``busy_threads() -> int | None``: how busy the source's servers are,
    which adaptive push-up asks before it moves work into the source."""
    spark_only: bool = False
    """The store can only be read through Spark (its reader's ``read`` is never called)."""
    encoded_read: str | None = None
    """The reader is an ``EncodedReader`` too: it can send rows in this byte format of its server's
    (:class:`~wormhole.plugins.batch.Encoding`), undecoded, when every destination of a local run takes it."""

    # -- as a destination ----------------------------------------------------------------------
    default_concurrency: int = 1
    """Writer threads of a destination that does not set ``concurrency``."""
    durable_splits: bool = False
    """Its writers are ``SplitWriter``s and its periphery a ``DurablePeriphery``: each split is made
    durable with the destination's own record of it, so a crashed run resumes and a lost split is
    written again."""
    leftovers: bool = False
    """Its periphery is a ``LeftoverPeriphery``: it finds and removes what earlier runs of the task
    left behind (``task show``, ``task clean``)."""
    counts_written: bool = False
    """Its periphery keeps its own count of rows written (``add_written(rows)``, for ``verify`` or
    rollback messages): in Spark mode the engine reports a job's total to it."""
    needs_spark: bool = False
    """The store needs a SparkSession even when the rows move in local mode (a Hive catalog), so
    ``settings.engine = auto`` chooses Spark."""
    encoded_write: str | None = None
    """Its periphery is an ``EncodedPeriphery`` and its writers load batches in this byte format as they
    are (``Rows.encoded``), when the periphery says, once prepared, that its target takes the encoding."""
    spark_partitions: bool = False
    """In Spark mode the row writer may run inside the executors, one writer per partition with
    ``worker_index`` = partition id: a partition written twice (a task retry) leaves its rows once.
    Otherwise the destination's rows are written from the driver (``toLocalIterator``)."""

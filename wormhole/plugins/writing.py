"""The writer contract: what a destination's periphery and writers implement, and what a write returns.

A writer gets every batch as a :class:`~wormhole.plugins.batch.Batch` (the one batch type): a store that
encodes columns asks it for its Arrow form, a row-at-a-time store takes its tuples from
:func:`~wormhole.plugins.batch.rows_of`. Whether a destination loads a source's own encoding (or wire
text) as it is is chosen once, for the destination, by its facets (``SinkRole.encoded``, ``uses_wire_text``:
:func:`wormhole.planning.encoded.loads_source_form`): its writers are then :class:`EncodedWriter` s and get
every batch through ``write_encoded``, the one method that reads that form (``Batch.encoded``, ``Batch.wire``);
``write`` never does (the engine drives such a writer through ``wormhole.writer_manager.EncodedTarget``).
:mod:`wormhole.plugins.base` re-exports every name here: plugins import them from there.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from wormhole.plugins.batch import Batch
from wormhole.plugins.schema import Row


@dataclass(frozen=True, slots=True)
class Rejected:
    """A row a store refused, with the store's reason (its error text)."""

    row: Row
    reason: str


@dataclass(frozen=True, slots=True)
class TargetRows:
    """How a destination's rows meet what its target held before the run, for verifying the copy in the run
    (``settings.verify``): what its target holds afterwards is compared with what it was sent."""

    meet: Literal["replaced", "added", "merged"]
    """``replaced``: the target holds only the task's rows afterwards (a truncate or staging load, a directory
    overwritten); ``added``: its rows before stay and the run's are added (an append of inserts); ``merged``:
    rows before may be replaced or updated by the run's (a replace or upsert write mode)."""
    columns: tuple[str, ...] | None = None
    """The target's names of the rows' columns, in the rows' order (a ``columns`` param), else the rows' own."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    """Outcome of one ``Writer.write``: every row of the batch is either written or rejected."""

    written: int
    rejected: tuple[Rejected, ...] = ()
    filtered: int = 0
    """Rows the destination's own transforms dropped before the store saw them (filters)."""
    stopped: int = 0
    """Rows not tried: the batch's rejections went over :attr:`WriteContext.record_limit` first (not delivered)."""


class WriterPeriphery(Protocol):
    """Pre- and post-processing of one destination. Every method is idempotent.

    Lifecycle:
    1. ``prepare()`` before any row is written (create a temporary directory, open a transaction,
       create or clear the target); the writers of the destination receive this object;
    2. exactly one of ``commit()`` (make the write visible, atomically where the store can) or
       ``rollback()`` (leave the target as it was before ``prepare``). ``rollback`` may follow a
       partial ``prepare`` or a failed ``commit``.

    A periphery that keeps its own count of rows written names its ``add_written`` in
    ``SinkRole.add_written``.
    """

    def prepare(self) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class Writer(Protocol):
    """Writes batches for one destination; one instance per writer thread.

    Lifecycle: ``open()``, ``write(batch)`` per batch, ``flush()`` at end of stream, ``close()``
    always (also after a failure). ``write`` returns which rows it wrote and which it rejected;
    it raises only when the destination itself is broken (then the destination fails).
    """

    def open(self) -> None: ...

    def write(self, batch: Batch) -> WriteResult: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class EncodedWriter(Protocol):
    """A writer that can load its source's own form of a batch as it is (a PostgreSQL source's binary COPY
    rows, a MySQL reader's wire text). The destination chooses that form once (its facets, for the run): then
    every batch goes to ``write_encoded``, never to ``write``/``write_split``, and only ``write_encoded`` reads
    the batch's ``encoded`` or ``wire`` (``tests/unit/test_architecture.py``); a batch without it (a
    transform's) is written from its values."""

    def write_encoded(self, batch: Batch, split_id: str | None = None) -> WriteResult:
        """``write`` (``split_id`` None) or ``write_split``, loading the batch's source form where it has one."""
        ...


@runtime_checkable
class SplitWriter(Protocol):
    """A Writer whose destination makes each split durable on its own, so a crashed run resumes.

    The engine sends every batch of one split (for one destination) to one writer thread, so a
    writer holds all of a split's rows for its destination; it may hold several splits open at
    once (their batches interleave). Per split: ``write_split`` per batch, then exactly one of
    ``end_split`` or ``abort_split``. Plain ``write``/``flush`` are not called on a SplitWriter.
    """

    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        """Write a batch of split ``split_id``; not durable until ``end_split``."""
        ...

    def end_split(self, split_id: str, rows: int) -> None:
        """Make every row of the split this writer wrote durable *together with* the destination's
        own record that the split is done (``rows`` written): one transaction, or one rename. When
        it returns, a crash can no longer lose the split; when it raises, the split is not durable."""
        ...

    def abort_split(self, split_id: str) -> None:
        """Discard whatever this writer holds of the split (it will be written again). Never raises
        for a split it does not know."""
        ...


@runtime_checkable
class DurablePeriphery(Protocol):
    """The periphery of a destination whose writers are SplitWriters."""

    def durable_splits(self) -> Mapping[str, int]:
        """After ``prepare``: split id -> rows of every split this destination already holds
        durably for ``ctx.state_run`` (its own record: marker rows, renamed parts). Empty unless
        resuming. This, not the task database's checkpoint, is the truth on resume.

        ``commit`` keeps that record, and says in it that the load is committed, so a run resuming
        after a crash between this destination's commit and the task's recorded outcome finds every
        split durable and the commit done (``commit`` is then a no-op, ``rollback`` an error)."""
        ...

    def release(self) -> None:
        """After ``commit``, once the task's outcome is recorded (no run resumes this state any more):
        drop the destination's own record of the run (markers, its run marker). Works on a fresh
        periphery object too. A crash before it leaves that record as a leftover of a finished run."""
        ...


@runtime_checkable
class LeftoverPeriphery(Protocol):
    """A periphery that can find and remove what earlier runs of its task left behind (a crashed
    run's staging table, temporary directory, split markers). Both work without ``prepare``
    (``wormhole task clean`` / ``task show``), on objects wormhole created for ``ctx.task_id``
    (recognised by name and marker), and never on the state of run ``keep_run`` (a run that may
    still be resumed), nor on anything of another task."""

    def leftovers(self, keep_run: int | None) -> list[str]:
        """Human-readable descriptions of the leftovers (``table db.t__wh7_3 (staging of run 3)``)."""
        ...

    def clean_leftovers(self, keep_run: int | None) -> list[str]:
        """Remove the leftovers; returns what was removed (same wording as ``leftovers``)."""
        ...


class ShippedWithoutLock:
    """For a writer periphery that Spark ships to its executors (``SinkRole.spark_partitions``): its
    ``lock`` attribute stays behind and each copy makes its own (a lock cannot be pickled)."""

    lock: threading.Lock

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()

"""Checkpoints: which splits a run planned, and which destinations hold each split durably.

The task database's ``wormhole_checkpoint`` table is the coordinator's snapshot (BitSail's
snapshotState). Each row says what it is (its :class:`RowKind`): one *plan row* per split of a run
(``payload`` is the split as JSON, so a resumed run reads exactly the splits the crashed run planned,
even when the source has changed since), an incremental run's *window row*, one *durable row* per
split and destination once that destination has made the split durable, and one *commit row* per
destination the run committed. ``origin_run_id`` names the run whose destination state the run
continues (its own id unless it resumed an earlier one). With ``settings.verify`` each split's digest, of what
a destination accepted of it, is kept apart (``wormhole_split_digest``, :meth:`Checkpointer.digest`): written
and waited for before the destination commits the split, so it claims nothing about durability.

The snapshot is advisory: on resume each destination's own record (marker rows, renamed parts)
decides what it holds (:class:`wormhole.plugins.base.DurablePeriphery`), so a crash between a
destination's commit and the checkpoint write neither loses nor duplicates a split.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, Protocol

from wormhole.errors import TaskDbError
from wormhole.incremental import Window, encode, show
from wormhole.log import Logger
from wormhole.plugins.base import Split
from wormhole.pool import joined, spawn
from wormhole.retry import policy

CRASHED = "crashed"
"""The status of a run whose process died (or stopped heartbeating): the task's next run resumes it."""

WAIT_ATTEMPTS = 8
"""Attempts at a checkpoint write the run waits for (the plan, a commit row): waits of 0.5 s doubling to
5 s between them, about 20 s in all."""

class RowKind(StrEnum):
    """What a checkpoint row records (the task database keeps it in the row's ``kind``)."""

    PLAN = "plan"
    """A split the run planned: ``split_id``, and the split as JSON in ``payload``."""
    WINDOW = "window"
    """An incremental run's window: its JSON in ``payload`` (:class:`wormhole.incremental.Window`)."""
    DURABLE = "durable"
    """``destination`` holds ``split_id`` durably (``rows`` of it)."""
    COMMITTED = "committed"
    """The run committed ``destination`` (written right after its commit). For a destination that keeps no
    record of its own (hive, say) it is what a resumed run goes by: such a destination is not written again."""


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    kind: RowKind
    split_id: str | None
    """The split (plan and durable rows; None in the others)."""
    destination: str | None
    """The destination that holds the split or was committed (durable and commit rows; None in the others)."""
    origin_run_id: int
    rows: int | None = None
    payload: str | None = None
    """A plan row's split as JSON (:func:`split_to_json`), a window row's window; a durable row's transform
    placement, the one the split was read under, as JSON (:meth:`Checkpointer.sealed`), or None (older versions
    also put the split's digest there)."""


@dataclass(frozen=True, slots=True)
class SplitDigest:
    """A split's digest as the task database keeps it (``settings.verify``): its text and its checksum version."""

    digest: str
    """``rows:total`` (:class:`wormhole.verify.checksum.Digest`)."""
    checksum_version: int


@dataclass(frozen=True, slots=True)
class WatermarkWrite:
    """A destination's new watermark, written with its commit row."""

    state_key: str
    value: str
    """The value as JSON (:func:`wormhole.incremental.encode`)."""


class CheckpointStore(Protocol):
    """What the engine needs of the task database for checkpoints (the SQL stores implement it)."""

    def save_plan(self, task_id: int, run_id: int, origin_run_id: int,
                  splits: Sequence[tuple[str, str]], window: str | None = None, scope: str = "") -> None:
        """Record the plan rows ``(split_id, payload)`` of run ``run_id`` and the window, in one transaction
        (``scope``: a database task's table, whose window it is; its window row's split id)."""
        ...

    def mark_committed(self, task_id: int, run_id: int, origin_run_id: int, destination: str, rows: int,
                       watermark: WatermarkWrite | None = None) -> None:
        """Record the destination's commit row and its new watermark, in one transaction."""
        ...

    def watermarks(self, state_key: str) -> dict[str, tuple[str | None, int]]:
        """Destination -> (watermark JSON, the run that set it) under ``state_key``."""
        ...

    def mark_durable(self, task_id: int, run_id: int, origin_run_id: int, split_id: str, destination: str,
                     rows: int, payload: str | None = None) -> None:
        """Record that ``destination`` holds ``split_id`` durably (idempotent: a second call is a no-op);
        ``payload``: the transform placement the split was read under, as JSON."""
        ...

    def record_digest(self, task_id: int, run_id: int, origin_run_id: int, split_id: str, destination: str,
                      digest: SplitDigest) -> None:
        """Record the digest of what ``destination`` accepted of ``split_id`` (``settings.verify``), written before
        the destination commits the split: a row that claims nothing about durability, replacing the one of an
        earlier attempt at the split (one row per task, origin run, split and destination)."""
        ...

    def split_digests(self, task_id: int, origin_run_id: int) -> dict[tuple[str, str], SplitDigest]:
        """(destination, split) -> the digest :meth:`record_digest` recorded for the runs of origin
        ``origin_run_id`` (none on a database that never recorded one)."""
        ...

    def checkpoint(self, run_id: int) -> list[CheckpointRow]:
        """Every checkpoint row of run ``run_id`` (plan rows first, in the order saved)."""
        ...

    def resumed_from(self, run_id: int) -> int | None:
        """The run that run ``run_id`` resumed, else None."""
        ...


class RunView(Protocol):
    """What the chain is decided by of a run of the task (the task database's run record)."""

    @property
    def id(self) -> int: ...

    @property
    def status(self) -> str: ...


class TaskView(Protocol):
    """What the next run's resuming is decided by of a task (the task database's task record)."""

    @property
    def spec(self) -> str: ...

    @property
    def schedule(self) -> str | None: ...


class RunHistory(CheckpointStore, Protocol):
    """The checkpoints and the runs of a task, as the task database keeps them
    (:class:`~wormhole.taskdb.base.SqlTaskStore`): what decides which runs a run resumes."""

    def runs(self, task_id: int) -> Sequence[RunView]:
        """The task's runs, oldest first."""
        ...


def recorded_placements(rows: Sequence[CheckpointRow]) -> dict[str, dict[str, Any]]:
    """Split id -> the transform placement its durable rows record (the first row that names one wins:
    every destination of a split records the same one, and a resumed run re-reads it under that)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.kind == RowKind.DURABLE and row.payload and row.split_id is not None and row.split_id not in out:
            recorded = json.loads(row.payload)
            if isinstance(recorded, dict) and isinstance(recorded.get("plan"), str):
                out[row.split_id] = recorded
    return out


def split_to_json(split: Split) -> str:
    """The split as JSON; tuples come back as lists, and key values of other types are tagged."""
    return json.dumps({"id": split.id, "resource_mark": split.resource_mark, "params": dict(split.params)},
                      default=_encode, sort_keys=True)


def split_from_json(text: str) -> Split:
    raw: dict[str, Any] = json.loads(text, object_hook=_decode)
    return Split(id=str(raw["id"]), resource_mark=str(raw["resource_mark"]), params=raw.get("params") or {})


_TAG = "__wh_type__"


def _encode(value: Any) -> Any:
    # A split's bounds are key values: ints and strings in JSON, the rest tagged so they come back
    # as the same Python value (a resumed run must read exactly the crashed run's ranges).
    if isinstance(value, (bytes, bytearray)):
        return {_TAG: "bytes", "v": bytes(value).hex()}
    if isinstance(value, Decimal):
        return {_TAG: "decimal", "v": str(value)}
    if isinstance(value, datetime):
        return {_TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, date):
        return {_TAG: "date", "v": value.isoformat()}
    raise TypeError(f"split parameter {value!r} ({type(value).__name__}) cannot be checkpointed")


def _decode(obj: dict[str, Any]) -> Any:
    kind = obj.get(_TAG)
    if kind is None:
        return obj
    value = obj["v"]
    if kind == "bytes":
        return bytes.fromhex(value)
    if kind == "decimal":
        return Decimal(value)
    if kind == "datetime":
        return datetime.fromisoformat(value)
    return date.fromisoformat(value)


class Checkpointer:
    """Writes a run's checkpoint rows from a thread of its own, in order (the store's connection is
    used by this thread only). A failed write is logged, never fatal: each destination's own record
    is the truth on resume, the checkpoint only saves the next run from asking for what it knows."""

    def __init__(self, store: CheckpointStore, task_id: int, run_id: int, origin_run_id: int, log: Logger,
                 stop: threading.Event | None = None, scope: str | None = None) -> None:
        """``stop``: the run's stop signal (ends the waits between attempts of a write the run waits for);
        ``scope``: a database task's table (its window is recorded under it)."""
        self._stop = stop
        self._scope = scope
        self._store = store
        self._task_id = task_id
        self._run_id = run_id
        self._origin = origin_run_id
        self._log = log
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._window: Window | None = None
        """An incremental run's window: each commit row advances its destination's watermark."""
        self._looping = spawn(self._loop, name="checkpoint")  # a pooled thread: a database task has one a table
        self.failed = 0

    def save_plan(self, splits: Sequence[Split], window: Window | None = None) -> None:
        """Record the run's plan (and an incremental run's window), and wait for it: it must be in the task
        database before any destination holds a split of it, or a resumed run could split the source
        differently. Raises when it cannot be recorded."""
        rows = [(s.id, split_to_json(s)) for s in splits]
        text = window.to_json() if window is not None else None
        self._wait(lambda: self._store.save_plan(self._task_id, self._run_id, self._origin, rows, text,
                                                 self._scope or ""))
        self._window = window

    def sealed(self, split_id: str, destination: str, rows: int, plan: dict[str, Any] | None = None) -> None:
        """``plan``: the transform placement the split was read under (recorded with it)."""
        payload = json.dumps(plan, sort_keys=True) if plan is not None else None
        self._queue.put(lambda: self._store.mark_durable(self._task_id, self._run_id, self._origin, split_id,
                                                         destination, rows, payload))

    def digest(self, split_id: str, destination: str, digest: SplitDigest) -> None:
        """Record the digest of what ``destination`` accepted of ``split_id`` and wait for it (``settings.verify``):
        called before the destination commits the split, so no split a destination holds lacks its digest in
        the task database (the durable row, written after the commit on this thread, may be lost to a kill).
        Not a durable row: a resumed run still asks the destination whether it holds the split. A failed write
        is logged, never fatal: a resumed run then says the destination is not verified, naming the split."""
        try:
            self._wait(lambda: self._store.record_digest(self._task_id, self._run_id, self._origin, split_id,
                                                         destination, digest))
        except Exception as exc:
            self.failed += 1
            self._log.warning("checkpoint.digest_failed", error=str(exc), split_id=split_id, destination=destination)

    def committed(self, destination: str, rows: int) -> None:
        """Record that ``destination`` was committed, and wait for it (the sooner it is there, the smaller
        the window in which a crash leaves a destination without a record of its own to be loaded twice)."""
        window, watermark = self._window, None
        if window is not None:
            watermark = WatermarkWrite(window.state_key, json.dumps(encode(window.advanced(destination))))
        try:
            self._wait(lambda: self._store.mark_committed(self._task_id, self._run_id, self._origin, destination,
                                                          rows, watermark))
        except Exception as exc:
            if watermark is None:
                self._log.warning("checkpoint.write_failed", error=str(exc), destination=destination)
                return
            # The destination holds the window but its watermark did not move: the next run would send
            # the window again. Said loudly; a run that resumes this one writes it (see incremental.py).
            self._log.error("watermark.write_failed", error=str(exc), destination=destination,
                            state_key=window.state_key if window else None)
            return
        if watermark is not None:
            self._log.info("watermark.advanced", destination=destination, state_key=watermark.state_key,
                           value=show(window.advanced(destination)) if window else None)

    def _wait(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the checkpoint thread (after what is queued) and wait; its exception is raised.
        A task database that fails it is tried again for about 20 s (a blip, a failover) before that."""
        done: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        retrying = policy(attempts=WAIT_ATTEMPTS, wait_s=0.5, max_wait_s=5.0, stop=self._stop, log=self._log,
                          event="checkpoint.write_retry", retry_on=lambda exc: isinstance(exc, TaskDbError))

        def run() -> None:
            try:
                retrying(job)
            except BaseException as exc:
                done.put(exc)
                return
            done.put(None)

        self._queue.put(run)
        while True:
            try:
                error = done.get(timeout=1.0)
                break
            except queue.Empty:
                if self._looping.done() and done.empty():  # closed (a writer thread outlived the run): never run
                    raise TaskDbError("the run's checkpoint writer has ended") from None
        if error is not None:
            raise error

    def close(self, timeout: float = 30.0) -> None:
        self._queue.put(None)
        joined([self._looping], time.monotonic() + timeout)

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job()
            except Exception as exc:  # the destinations' records stay the truth
                self.failed += 1
                self._log.warning("checkpoint.write_failed", error=str(exc))


TASKDB_WRITES = threading.RLock()
"""Held by each statement and transaction of an embedded (SQLite) task database in this process (reads
too: they are short, and one rule is simpler). A process paused mid-write would keep the file's write
lock, so no other process could claim or take over anything (a real pause has that risk too; the test
hook's pause takes this lock first, so it never does)."""

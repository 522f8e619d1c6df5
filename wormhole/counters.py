"""Counters, totals and verdicts: what was read, written and rejected, and whether that is acceptable.

Each reader and writer thread (or Spark job) owns one counters object and is its only writer, so
counting takes no lock; :class:`Counters` sums them (the original Wormhole's IPluginMonitor per
thread). The rules that turn counts into a failure live here once, as pure functions returning a
typed :class:`Verdict` whose code comes from the error tree:

- :func:`record_limit`: the one record-limit check (destinations while they run and at the end,
  the source, Spark partitions);
- :func:`judge`: a destination whose writers finished cleanly still fails when a row is unaccounted
  for or its rejects exceed a limit;
- :func:`write_counted`: the one "write a batch, check the writer's accounting, count it" step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from wormhole.config import ErrorLimit
from wormhole.errors import DirtyLimitExceeded, RowsUnaccounted, WormholeError, WriteError
from wormhole.plugins.base import Batch, Rejected, WriteResult


@dataclass(slots=True)
class ReaderCounters:
    rows: int = 0
    splits: int = 0


@dataclass(slots=True)
class WriterCounters:
    delivered: int = 0
    written: int = 0
    rejected: int = 0
    bytes: int = 0
    filtered: int = 0


@dataclass(frozen=True, slots=True)
class DestinationTotals:
    delivered: int
    written: int
    rejected: int
    bytes: int
    filtered: int = 0


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a destination (or the source) must fail: a message and its error code."""

    code: str
    message: str

    def __str__(self) -> str:
        return self.message


class Counters:
    """Every thread's counters of one run, and their sums."""

    def __init__(self) -> None:
        self.readers: list[ReaderCounters] = []
        self.writers: dict[str, list[WriterCounters]] = {}
        self.estimated_rows: int | None = None

    def new_reader(self) -> ReaderCounters:
        counters = ReaderCounters()
        self.readers.append(counters)
        return counters

    def new_writer(self, destination: str) -> WriterCounters:
        counters = WriterCounters()
        self.writers.setdefault(destination, []).append(counters)
        return counters

    @property
    def rows_read(self) -> int:
        return sum(c.rows for c in self.readers)

    def totals(self, destination: str) -> DestinationTotals:
        counters = self.writers.get(destination, [])
        return DestinationTotals(
            delivered=sum(c.delivered for c in counters),
            written=sum(c.written for c in counters),
            rejected=sum(c.rejected for c in counters),
            bytes=sum(c.bytes for c in counters),
            filtered=sum(c.filtered for c in counters),
        )


def record_limit(rejected: int, limit: int | None, *, source: bool = False) -> Verdict | None:
    """The record-limit rule (DataX's errorLimit.record): more than ``limit`` rejected rows fail."""
    if limit is None or rejected <= limit:
        return None
    if source:
        message = f"the source rejected {rejected} rows, over the record limit of {limit}"
    else:
        message = f"{rejected} rejected rows exceed the record limit of {limit}"
    return Verdict(DirtyLimitExceeded.code, message)


_REASON_CHARS = 500
"""How much of the first rejection's reason a failure message quotes (the dirty file has it whole)."""


def naming_first(verdict: Verdict, reason: str | None) -> Verdict:
    """A rejected-rows verdict naming the first rejection's reason, so the error says why, not only how
    many (every reason is in the dirty file)."""
    if reason is None or verdict.code != DirtyLimitExceeded.code:
        return verdict
    shown = reason if len(reason) <= _REASON_CHARS else reason[:_REASON_CHARS] + "..."
    return Verdict(verdict.code, f"{verdict.message}; the first: {shown}")


def percentage_limit(rejected: int, total: int, limit: float | None, *, source: bool = False) -> Verdict | None:
    """The percentage rule, judged at the end: a rejected share above ``limit`` fails."""
    if limit is None or not total or rejected / total <= limit:
        return None
    if source:
        message = (f"the source rejected {rejected} of {total} rows ({rejected / total:.4%}), over the "
                   f"percentage limit of {limit:.4%}")
    else:
        message = (f"{rejected} rejected rows are {rejected / total:.4%} of {total}, over the "
                   f"percentage limit of {limit:.4%}")
    return Verdict(DirtyLimitExceeded.code, message)


def judge(*, rows_sent: int, rows_queued: int, totals: DestinationTotals, limit: ErrorLimit) -> Verdict | None:
    """Why a destination whose writers all finished cleanly must still fail, or None if it succeeded.

    ``rows_sent`` is what the readers sent to every destination, ``rows_queued`` what this
    destination's storage accepted. Every row must be accounted for: queued = delivered =
    written + rejected, and rejected within the record and percentage limits.
    """
    unaccounted = RowsUnaccounted.code
    if rows_queued != rows_sent:
        return Verdict(unaccounted, f"{rows_sent - rows_queued} of {rows_sent} rows sent never reached the "
                                    "destination's queue")
    if totals.delivered != rows_queued:
        return Verdict(unaccounted, f"{rows_queued - totals.delivered} of {rows_queued} queued rows were never "
                                    "delivered to a writer")
    if totals.written + totals.rejected + totals.filtered != totals.delivered:
        return Verdict(unaccounted, f"row accounting mismatch: delivered {totals.delivered}, written "
                                    f"{totals.written}, rejected {totals.rejected}, filtered {totals.filtered}")
    return (record_limit(totals.rejected, limit.record)
            or percentage_limit(totals.rejected, totals.delivered, limit.percentage))


class BatchWriter(Protocol):
    def write(self, batch: Batch) -> WriteResult: ...


def write_counted(writer: BatchWriter, batch: Batch, counters: WriterCounters,
                  reject: Callable[[tuple[Rejected, ...]], None], *, destination: str, plugin: str,
                  nbytes: int = 0) -> int:
    """Write one batch and count it; return how many rows the writer rejected.

    The writer must account for every row (written + rejected == batch). Rejected rows go to
    ``reject`` before the counter moves, so a count never runs ahead of the dirty file. A writer
    that commits in pieces may fail after writing part of the batch: that part is counted, so the
    result shows what a rollback had to undo.
    """
    try:
        result = writer.write(batch)
    except WormholeError as exc:
        counters.written += int(exc.details.get("written_before_failure", 0))
        raise
    rejected = len(result.rejected)
    if result.written + rejected + result.filtered + result.stopped != len(batch):
        raise WriteError(f"writer accounted for {result.written + rejected + result.filtered + result.stopped} of "
                         f"{len(batch)} rows", destination=destination, plugin=plugin)
    counters.delivered += len(batch) - result.stopped  # rows not tried (over the record limit) were not delivered
    counters.written += result.written
    counters.filtered += result.filtered
    counters.bytes += nbytes
    if rejected:
        reject(result.rejected)
        counters.rejected += rejected
    return rejected

"""Helpers for testing stores directly through their contracts: a list dirty sink, contexts, a typed schema."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from wormhole.options import Problems, parse_options
from wormhole.plugins.base import (
    Column,
    ReadContext,
    Rejected,
    Row,
    Schema,
    SinkRole,
    SourceRole,
    SparkAccess,
    WriteContext,
    WriteResult,
)
from wormhole.plugins.batch import Batch, as_batch, rows_of

DIRTY = "\udcff"  # a lone surrogate: not encodable as UTF-8, the test generator's dirty value

SCHEMA = Schema(tuple(Column(name, t) for name, t in [
    ("id", "int"), ("f", "float"), ("dec", "decimal"), ("s", "string"), ("raw", "bytes"),
    ("flag", "bool"), ("day", "date"), ("ts", "datetime"), ("doc", "json"),
]))
"""One column of every logical type."""

WIDE_ROW: Row = (1, 0.1, Decimal("1.10"), "héllo 😀 wörld", bytes(range(256)), True, dt.date(2024, 2, 29),
                 dt.datetime(2024, 2, 29, 23, 59, 58, 123456), {"k": ["😀", 1, 2.5, None, True]})
"""A SCHEMA row of awkward values: a decimal's own scale, emoji, every byte value, a leap day, microseconds."""
NULL_ROW: Row = (2, None, None, None, None, None, None, None, None)
"""A SCHEMA row of NULLs but its id."""


class ListDirtySink:
    """A DirtySink that keeps every rejected row in memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Rejected], str | None]] = []

    def reject(self, origin: str, rows: Sequence[Rejected], split_id: str | None = None) -> None:
        self.calls.append((origin, list(rows), split_id))

    @property
    def rows(self) -> list[Rejected]:
        return [r for _, rows, _ in self.calls for r in rows]


SPARK: list[SparkAccess] = []
"""The Spark the contexts below give stores (``ctx.spark``): the Spark tests' session's, once
tests/spark/conftest.py built it (a run's engine gives its own; these helpers stand in for it)."""


def read_ctx(sink: ListDirtySink | None = None, batch_rows: int = 1000) -> ReadContext:
    return ReadContext(task_id=7, run_id=1, batch_rows=batch_rows, dirty=sink or ListDirtySink(),
                       spark=SPARK[-1] if SPARK else None)


def write_ctx(schema: Schema, *, run_id: int = 1, concurrency: int = 2, destination: str = "out") -> WriteContext:
    return WriteContext(task_id=7, run_id=run_id, destination=destination, schema=schema, batch_rows=1000,
                        concurrency=concurrency, spark=SPARK[-1] if SPARK else None)


def parse(cls: type, raw: dict[str, Any]) -> tuple[Any, Problems]:
    problems = Problems()
    return parse_options(cls, raw, "destinations[0].params", problems), problems


def run_destination(sink: SinkRole, options: Any, parts: Sequence[Sequence[Row]], *, run_id: int = 1,
                    commit: bool = True, schema: Schema = SCHEMA) -> list[WriteResult]:
    """A destination's whole lifecycle: prepare -> one writer per part -> flush/close -> commit (then release,
    as once the task's outcome is recorded) or rollback."""
    ctx = write_ctx(schema, run_id=run_id, concurrency=len(parts))
    periphery = sink.periphery(options, ctx)
    periphery.prepare()
    results = []
    for worker, rows in enumerate(parts):
        writer = sink.writer(options, ctx, periphery, worker)
        writer.open()
        try:
            results.append(writer.write(as_batch(rows)))
            writer.flush()
        finally:
            writer.close()
    if commit:
        periphery.commit()
        if hasattr(periphery, "release"):
            periphery.release()
    else:
        periphery.rollback()
    return results


def call_phases(periphery: Any, *phases: str) -> None:
    """Call the destination periphery's phases (``prepare``, ``commit``, ``rollback``, ``release``) in this
    order, repeats included: a test of what a phase called again or out of turn does."""
    for phase in phases:
        getattr(periphery, phase)()


def tuples_of(batch: Any) -> Sequence[Row]:
    """What a reader yielded as rows: a batch's (:func:`rows_of`), or the tuples it gave."""
    return rows_of(batch) if isinstance(batch, Batch) else batch


def read_all(source: SourceRole, options: Any, sink: ListDirtySink | None = None,
             batch_rows: int = 1000) -> list[Row]:
    """Every row of a source: schema, split, then each split read in turn."""
    ctx = read_ctx(sink, batch_rows)
    reader = source.reader(options, ctx)
    reader.schema()
    splits = source.splitter(options, ctx).split(4)
    return [row for split in splits for batch in reader.read(split) for row in tuples_of(batch)]


@contextmanager
def tiny_tmpfs(path: Path, size: str = "512k") -> Iterator[Path]:
    """A small real filesystem at ``path`` that fills up: a store's disk-full failure, for real.

    Mounting needs root. Without it the test skips, except in CI (``CI=true``), where a skipped
    failure test would hide a regression, so it fails instead.
    """
    path.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, text=True, check=False)
        problem = done.stderr.strip() if done.returncode != 0 else None
    except OSError as exc:
        problem = str(exc)
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs for the disk-full test: {problem}")
        pytest.skip(f"cannot mount a tmpfs: {problem}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)

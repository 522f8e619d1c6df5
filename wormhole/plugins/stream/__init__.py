"""The stream store: a deterministic row generator (reader) and a null sink (writer), for tests and benchmarks.

Generated values come from small per-column pools indexed by row number, so any row's contents
depend only on the spec (``seed``, ``columns``) and the row number, never on how the rows were
split. Batches are assembled with ``zip`` over list slices, so the generator runs at C speed and
benchmarks measure the engine, not the generator.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from wormhole.errors import WriteError
from wormhole.options import Problems, join_path, opt
from wormhole.plugins.base import (
    Column,
    Plugin,
    ReadContext,
    Row,
    Schema,
    ShippedWithoutLock,
    SinkRole,
    SourceInfo,
    SourceRole,
    Split,
    WriteContext,
    WriteResult,
)

DIRTY_MARK = "\udcff"
"""A lone surrogate: it cannot be encoded as UTF-8, so no store accepts a string holding it."""

_POOL_SIZES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061)


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnOption:
    name: str = opt(nonempty=True)
    """Column name."""
    type: Literal["int", "float", "decimal", "string", "bytes", "bool", "date", "datetime", "json"] = "string"
    """Logical type of the generated values."""


DEFAULT_COLUMNS = (
    ColumnOption(name="id", type="int"),
    ColumnOption(name="name", type="string"),
    ColumnOption(name="amount", type="float"),
    ColumnOption(name="day", type="date"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamReaderOptions:
    rows: int = opt(min=0)
    """How many rows to generate."""
    splits: int = opt(1, min=1, max=100_000)
    """Ranges of ``id`` the rows are cut into (each a split readers take in turn)."""
    seed: int = 0
    """Seed of the generated values: the same seed gives the same rows."""
    columns: tuple[ColumnOption, ...] = DEFAULT_COLUMNS
    """``id`` (type int) is the row number; every other column cycles through generated values."""
    dirty_every: int | None = opt(None, min=1)
    """Every Nth row (rows N-1, 2N-1, ...) carries a string no store can encode."""

    def check(self, path: str, problems: Problems) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            problems.add(join_path(path, "columns"), "column names must be unique")
        for i, c in enumerate(self.columns):
            if c.name == "id" and c.type != "int":
                problems.add(join_path(join_path(path, "columns"), i), "column 'id' must have type int")
        if self.dirty_every is not None and not any(c.type == "string" for c in self.columns):
            problems.add(join_path(path, "dirty_every"), "needs a string column to make dirty")


def _pool(column: ColumnOption, index: int, seed: int) -> list[Any]:
    rng = random.Random(f"{seed}:{index}:{column.name}")
    size = _POOL_SIZES[index % len(_POOL_SIZES)]
    base = dt.datetime(2020, 1, 1)
    make = {
        "int": lambda: rng.randint(-(2**31), 2**31),
        "float": lambda: round(rng.uniform(-1e6, 1e6), 2),
        "decimal": lambda: Decimal(rng.randint(-10**9, 10**9)).scaleb(-2),
        "string": lambda: f"{column.name}-{rng.randint(0, 10**6)}-é✓",
        "bytes": lambda: rng.randbytes(rng.randint(0, 16)),
        "bool": lambda: rng.random() < 0.5,
        "date": lambda: (base + dt.timedelta(days=rng.randint(0, 3650))).date(),
        "datetime": lambda: base + dt.timedelta(seconds=rng.randint(0, 10**8), microseconds=rng.randint(0, 999999)),
        "json": lambda: {"k": rng.randint(0, 100), "tags": [column.name]},
    }[column.type]
    values = [make() for _ in range(size)]
    if column.type != "int":
        values[0] = None  # every nullable column sees NULLs
    return values


class StreamSource:
    """Splitter, Reader and ReaderPeriphery of the generator in one object."""

    def __init__(self, options: StreamReaderOptions, ctx: ReadContext) -> None:
        self._o = options
        self._batch_rows = ctx.batch_rows
        # (pool size, pool repeated so any window of batch_rows values is one C-level slice)
        self._pools: list[tuple[int, list[Any]] | None] = []
        for i, c in enumerate(options.columns):
            if c.name == "id":
                self._pools.append(None)
            else:
                pool = _pool(c, i, options.seed)
                self._pools.append((len(pool), pool * (ctx.batch_rows // len(pool) + 2)))
        self._dirty_col = next((i for i, c in enumerate(options.columns) if c.type == "string"), None)

    def prepare(self) -> SourceInfo:
        return SourceInfo(estimated_rows=self._o.rows)

    def schema(self) -> Schema:
        return Schema(tuple(Column(c.name, c.type, c.name != "id") for c in self._o.columns))

    def split(self, advice: int) -> list[Split]:
        n, rows = self._o.splits, self._o.rows
        bounds = [rows * i // n for i in range(n + 1)]
        return [Split(id=f"stream-{i}", resource_mark="stream", params={"lo": bounds[i], "hi": bounds[i + 1]})
                for i in range(n)]

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        lo, hi = split.params["lo"], split.params["hi"]
        step = self._batch_rows
        for start in range(lo, hi, step):
            yield self._batch(start, min(start + step, hi))

    def _batch(self, lo: int, hi: int) -> list[Row]:
        n = hi - lo
        cols = []
        for pool in self._pools:
            if pool is None:
                cols.append(range(lo, hi))
            else:
                size, ext = pool
                offset = lo % size
                cols.append(ext[offset: offset + n])
        rows = list(zip(*cols))
        every = self._o.dirty_every
        if every:
            first = lo + (-(lo + 1)) % every  # first row number r >= lo with (r + 1) % every == 0
            for r in range(first, hi, every):
                row = list(rows[r - lo])
                row[self._dirty_col] = f"dirty-{r}-{DIRTY_MARK}"
                rows[r - lo] = tuple(row)
        return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class NullWriterOptions:
    fail_after: int | None = opt(None, min=0)
    """Raise once the destination has taken this many rows (a broken destination, for tests)."""
    delay_ms: float = opt(0.0, min=0.0, max=3_600_000.0)
    """Sleep this long per batch (a slow destination, for tests of back-pressure)."""


class NullPeriphery(ShippedWithoutLock):
    def __init__(self, options: NullWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        self.rows = 0
        self.committed = False
        self.rolled_back = False
        self.lock = threading.Lock()

    def prepare(self) -> None:
        pass

    def commit(self) -> None:
        self.committed = True

    def rollback(self) -> None:
        self.rolled_back = True


class NullWriter:
    def __init__(self, options: NullWriterOptions, ctx: WriteContext, periphery: NullPeriphery, worker: int) -> None:
        self._o = options
        self._ctx = ctx
        self._p = periphery

    def open(self) -> None:
        pass

    def write(self, rows: Sequence[Row]) -> WriteResult:
        if self._o.delay_ms:
            time.sleep(self._o.delay_ms / 1000)
        if self._o.fail_after is not None:
            with self._p.lock:
                self._p.rows += len(rows)
                if self._p.rows > self._o.fail_after:
                    raise WriteError(f"null sink configured to fail after {self._o.fail_after} rows",
                                     destination=self._ctx.destination, plugin="stream")
        return WriteResult(written=len(rows))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


PLUGIN = Plugin(
    name="stream",
    description="deterministic row generator (reader) and null sink (writer), for tests and benchmarks",
    source=SourceRole(options=StreamReaderOptions, splitter=StreamSource, reader=StreamSource,
                      periphery=StreamSource),
    sink=SinkRole(options=NullWriterOptions, periphery=NullPeriphery, writer=NullWriter, spark_partitions=True),
)

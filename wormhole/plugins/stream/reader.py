"""The stream store's source role: a deterministic row generator.

Generated values come from small per-column pools indexed by row number, so any row's contents
depend only on the spec (``seed``, ``columns``) and the row number, never on how the rows were
split. Batches are assembled with ``zip`` over list slices, so the generator runs at C speed and
benchmarks measure the engine, not the generator.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from wormhole.plugins.base import Column, ReadContext, Row, Schema, Split
from wormhole.plugins.stream.options import ColumnOption, StreamReaderOptions

DIRTY_MARK = "\udcff"
"""A lone surrogate: it cannot be encoded as UTF-8, so no store accepts a string holding it."""

_POOL_SIZES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061)


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


def declared_schema(options: StreamReaderOptions) -> Schema:
    """The generated columns, as the options declare them: known at validation."""
    return Schema(tuple(Column(c.name, c.type, c.name != "id") for c in options.columns))


class StreamReader:
    """The generator: rows ``lo`` to ``hi`` of a split, in batches of ``batch_rows``."""

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

    def schema(self) -> Schema:
        return declared_schema(self._o)

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        lo, hi = split.params["lo"], split.params["hi"]
        step = self._batch_rows
        for start in range(lo, hi, step):
            yield self._batch(start, min(start + step, hi))

    def _batch(self, lo: int, hi: int) -> list[Row]:
        n = hi - lo
        cols: list[Sequence[Any]] = []
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
            assert self._dirty_col is not None  # dirty_every needs a string column (checked)
            first = lo + (-(lo + 1)) % every  # first row number r >= lo with (r + 1) % every == 0
            for r in range(first, hi, every):
                row = list(rows[r - lo])
                row[self._dirty_col] = f"dirty-{r}-{DIRTY_MARK}"
                rows[r - lo] = tuple(row)
        return rows

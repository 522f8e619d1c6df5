"""The stream store's source role: a deterministic row generator.

Generated values come from small per-column pools indexed by row number, so any row's contents
depend only on the spec (``seed``, ``columns``) and the row number, never on how the rows were
split. Each pool is kept as an Arrow array repeated enough times that any window of ``batch_rows``
values is one zero-copy slice, so a batch is a record batch made without per-value Python
(``Batch.of_arrow``) and benchmarks measure the engine, not the generator. A batch holding a dirty row
(``dirty_every``: a lone surrogate, which has no Arrow form) is made of tuples, as the row path did.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.base import Batch, Column, ReadContext, Row, Schema, Split
from wormhole.plugins.batch import arrow_schema, arrow_type
from wormhole.plugins.stream.options import ColumnOption, StreamReaderOptions
from wormhole.plugins.values import JSON_NULL, json_dumps

DIRTY_MARK = "\udcff"
"""A lone surrogate: it cannot be encoded as UTF-8, so no store accepts a string holding it."""

DECIMAL_SHAPE = (12, 2)
"""The generator's decimals are integers below 10**9 in magnitude scaled by -2: DECIMAL(12, 2) holds them exactly."""

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
    return Schema(tuple(Column(c.name, c.type, c.name != "id", precision=DECIMAL_SHAPE[0], scale=DECIMAL_SHAPE[1])
                        if c.type == "decimal" else Column(c.name, c.type, c.name != "id")
                        for c in options.columns))


def _arrow_pool(column: Column, values: list[Any], repeat: int) -> pa.Array:
    """The pool as one contiguous Arrow array, repeated ``repeat`` times."""
    if column.type == "json":
        values = [None if v is None else ("null" if v is JSON_NULL else json_dumps(v)) for v in values]
    one = pa.array(values, arrow_type(column))
    return pa.concat_arrays([one] * repeat)


class StreamReader:
    """The generator: rows ``lo`` to ``hi`` of a split, in batches of ``batch_rows``."""

    def __init__(self, options: StreamReaderOptions, ctx: ReadContext) -> None:
        self._o = options
        self._batch_rows = ctx.batch_rows
        schema = declared_schema(options)
        self._arrow_schema = arrow_schema(schema)
        self._row_numbers = pa.array(range(ctx.batch_rows), pa.int64())
        # Per column (None for id): the pool's size, the pool repeated so any window of batch_rows values
        # is one slice (as Arrow; as a list only for the tuple batches of dirty rows).
        self._pools: list[tuple[int, pa.Array, list[Any]] | None] = []
        for i, (c, column) in enumerate(zip(options.columns, schema.columns, strict=True)):
            if c.name == "id":
                self._pools.append(None)
                continue
            pool = _pool(c, i, options.seed)
            repeat = ctx.batch_rows // len(pool) + 2
            listed = pool * repeat if options.dirty_every else []
            self._pools.append((len(pool), _arrow_pool(column, pool, repeat), listed))
        self._dirty_col = next((i for i, c in enumerate(options.columns) if c.type == "string"), None)

    def schema(self) -> Schema:
        return declared_schema(self._o)

    def read(self, split: Split) -> Iterator[Batch | Sequence[Row]]:
        lo, hi = split.params["lo"], split.params["hi"]
        step = self._batch_rows
        for start in range(lo, hi, step):
            end = min(start + step, hi)
            yield self._tuples(start, end) if self._dirty_rows(start, end) else self._arrow(start, end)

    def _dirty_rows(self, lo: int, hi: int) -> range:
        """Row numbers in [lo, hi) that carry the dirty string: (r + 1) % dirty_every == 0."""
        every = self._o.dirty_every
        if not every:
            return range(0)
        return range(lo + (-(lo + 1)) % every, hi, every)

    def _arrow(self, lo: int, hi: int) -> Batch:
        n = hi - lo
        arrays: list[pa.Array] = []
        for pool in self._pools:
            if pool is None:
                arrays.append(pc.add(self._row_numbers.slice(0, n), pa.scalar(lo, pa.int64())))
            else:
                size, repeated, _ = pool
                arrays.append(repeated.slice(lo % size, n))
        return Batch.of_arrow(pa.RecordBatch.from_arrays(arrays, schema=self._arrow_schema))

    def _tuples(self, lo: int, hi: int) -> list[Row]:
        n = hi - lo
        cols: list[Sequence[Any]] = []
        for pool in self._pools:
            if pool is None:
                cols.append(range(lo, hi))
            else:
                size, _, listed = pool
                offset = lo % size
                cols.append(listed[offset: offset + n])
        rows = list(zip(*cols))
        assert self._dirty_col is not None  # dirty_every needs a string column (checked)
        for r in self._dirty_rows(lo, hi):
            row = list(rows[r - lo])
            row[self._dirty_col] = f"dirty-{r}-{DIRTY_MARK}"
            rows[r - lo] = tuple(row)
        return rows

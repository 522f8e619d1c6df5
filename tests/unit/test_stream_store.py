"""The stream store's generator yields Arrow batches (no per-value Python) of the same values as ever.

The digests pin the rows the generator made before its batches became Arrow (commit 3124193): every
value, its type and a decimal's exponent, for every logical type, with and without dirty rows.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal

from tests.plugin_helpers import read_ctx, tuples_of, write_ctx
from wormhole.plugins.base import Batch, Row
from wormhole.plugins.batch import arrow_schema
from wormhole.plugins.stream import (
    DIRTY_MARK,
    ColumnOption,
    NullPeriphery,
    NullWriter,
    NullWriterOptions,
    StreamReader,
    StreamReaderOptions,
    StreamSplitter,
)

TYPES = ("int", "float", "decimal", "string", "bytes", "bool", "date", "datetime", "json")
COLUMNS = (ColumnOption(name="id", type="int"), *(ColumnOption(name=f"c_{t}", type=t) for t in TYPES))


Batches = list[Batch | list[Row]]


def read(rows: int, splits: int, batch_rows: int, *, seed: int = 7, dirty_every: int | None = None) -> Batches:
    options = StreamReaderOptions(rows=rows, splits=splits, seed=seed, columns=COLUMNS, dirty_every=dirty_every)
    ctx = read_ctx(batch_rows=batch_rows)
    reader = StreamReader(options, ctx)
    return [batch for split in StreamSplitter(options, ctx).split(splits) for batch in reader.read(split)]  # type: ignore[misc]


def digest(batches: Batches) -> tuple[int, str]:
    rows = sorted((row for batch in batches for row in tuples_of(batch)), key=lambda r: r[0])
    h = hashlib.sha256()
    for row in rows:
        h.update(repr(tuple((type(v).__name__, v) for v in row)).encode("utf-8", "surrogatepass"))
    return len(rows), h.hexdigest()


def test_batches_are_arrow_of_the_declared_schema_with_the_same_values_as_before() -> None:
    batches = read(5000, 3, 1000)
    assert all(isinstance(b, Batch) and b.native_arrow is not None for b in batches)
    reader = StreamReader(StreamReaderOptions(rows=1, columns=COLUMNS), read_ctx())
    assert all(b.arrow_form.schema == arrow_schema(reader.schema()) for b in batches)  # type: ignore[union-attr]
    assert digest(batches) == (5000, "c1835c1bb244119eacddf2ecb02926fc10d247b7e0c46a4d7f1e2ad9b5208c90")
    assert digest(read(3000, 2, 4096, seed=3)) == (
        3000, "f5c879728420a25ff07d66008987776ace81e52db2e093627d8eee23c94948bd")


def test_decimals_are_declared_twelve_two_and_keep_their_text() -> None:
    reader = StreamReader(StreamReaderOptions(rows=1, columns=COLUMNS), read_ctx())
    dec = reader.schema().columns[3]
    assert (dec.type, dec.precision, dec.scale) == ("decimal", 12, 2)
    values = [row[3] for batch in read(3000, 1, 1000) for row in tuples_of(batch) if row[3] is not None]
    assert all(isinstance(v, Decimal) and v.as_tuple().exponent == -2 for v in values)
    assert any(str(v).startswith("-") for v in values)


def test_batches_with_dirty_rows_are_tuples_and_the_others_arrow() -> None:
    batches = read(20000, 3, 333, dirty_every=2000)
    dirty = [b for b in batches if any(DIRTY_MARK in str(r[4]) for r in tuples_of(b))]
    assert dirty and all(not isinstance(b, Batch) for b in dirty)
    assert sum(1 for b in batches if isinstance(b, Batch) and b.native_arrow is not None) == len(batches) - len(dirty)
    assert digest(batches) == (20000, "919469b287f4d08e776de692ade19d5dd0558df1f15092ec80dce9474d53ad19")
    assert digest(read(5000, 1, 333, dirty_every=7)) == (
        5000, "9f75052f2d336c1aff3f552f86a1ab57c32d6b4ec6a3a0a311f4af1aa032173d")


def test_the_slow_null_sink_takes_arrow_batches_without_making_tuples() -> None:
    batch = read(1000, 1, 1000)[0]
    assert isinstance(batch, Batch)
    options = NullWriterOptions(delay_ms=1.0)
    ctx = write_ctx(StreamReader(StreamReaderOptions(rows=1, columns=COLUMNS), read_ctx()).schema())
    writer = NullWriter(options, ctx, NullPeriphery(options, ctx), 0)
    assert writer.write(batch).written == 1000
    assert batch._rows is None  # the Arrow form only

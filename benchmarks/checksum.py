"""CPU of the checksum of rows (wormhole.verify, issue 39) on 1M rows of mixed types, in batches of the
exchange's 4,096 rows: :func:`~wormhole.verify.row_hashes` of every batch against simply iterating the
batches (touching each column: the floor) and against a naive checksum (each row as Python values, hashed
by ``hashlib.blake2b`` of its ``repr``, the 64-bit hashes summed), then each column alone.

Columns: id int64, bu uint64 (a BIGINT UNSIGNED), d2 decimal(12,2), db double, fl a FLOAT's double, s a
varchar (unicode, ``''``), dt timestamp[us], day date32, js json (small documents, all distinct), bl blob
(0 to 64 bytes); about 5% NULLs in each but id.

Run: ``.venv/bin/python -m benchmarks.checksum [--rows 1000000] [--repeat 3] [--naive-rows 100000]``. The
rows are made first (not timed); each side is timed by ``time.process_time()`` (CPU, not wall: the machine is
shared), the best of ``--repeat`` rounds in which the sides take turns. The naive side runs on the first
``--naive-rows`` rows (it is slow) and is given as rows/s like the others.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pyarrow as pa

from wormhole.plugins.arrow_form import LOGICAL_KEY, rows_from_arrow
from wormhole.verify import Digest, row_hashes

BATCH_ROWS = 4096
"""The exchange's default batch (wormhole.config's ``batch_rows``)."""


def make_batches(rows: int, seed: int = 1) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)

    def nulls() -> np.ndarray:
        return rng.random(rows) < 0.05

    words = np.array(["", "a", "ünïcödé", "😀 emoji", "tab\there", "name", "x" * 40, "Zürich 𝄞"], dtype=object)
    strings = [f"{w} {i}" if i % 7 else w for i, w in enumerate(words[rng.integers(0, len(words), rows)])]
    docs = [f'{{"k": {i}, "tags": ["a", "b"], "price": {i % 1000}.50}}' for i in range(rows)]  # all distinct
    blobs = [bytes(rng.integers(0, 256, int(n), dtype=np.uint8)) for n in rng.integers(0, 65, rows)]
    cents = rng.integers(-10**11, 10**11, rows)
    columns: dict[str, tuple[pa.Array, str]] = {
        "id": (pa.array(np.arange(rows, dtype=np.int64)), "int"),
        "bu": (pa.array(rng.integers(0, 2**63, rows, dtype=np.uint64), pa.uint64(), mask=nulls()), "int"),
        "d2": (pa.array([Decimal(int(c)).scaleb(-2) for c in cents], pa.decimal128(12, 2), mask=nulls()), "decimal"),
        "db": (pa.array(rng.standard_normal(rows) * 1e6, mask=nulls()), "float"),
        "fl": (pa.array(rng.standard_normal(rows).astype(np.float32).astype(np.float64), mask=nulls()), "float"),
        "s": (pa.array(strings, pa.string(), mask=nulls()), "string"),
        "dt": (pa.array(rng.integers(0, 2**48, rows), pa.int64(), mask=nulls()).cast(pa.timestamp("us")), "datetime"),
        "day": (pa.array(rng.integers(-200_000, 2_900_000, rows).astype(np.int32) // 100, pa.int32(),
                         mask=nulls()).cast(pa.date32()), "date"),
        "js": (pa.array(docs, pa.string(), mask=nulls()), "json"),
        "bl": (pa.array(blobs, pa.binary(), mask=nulls()), "bytes"),
    }
    schema = pa.schema([pa.field(n, a.type, metadata={LOGICAL_KEY: k.encode()}) for n, (a, k) in columns.items()])
    whole = pa.RecordBatch.from_arrays([a for a, _ in columns.values()], schema=schema)
    return [whole.slice(start, BATCH_ROWS) for start in range(0, rows, BATCH_ROWS)]


def iterate(batches: list[pa.RecordBatch]) -> int:
    """The floor: every batch and column visited, nothing computed."""
    seen = 0
    for batch in batches:
        for column in batch.columns:
            seen += len(column)
    return seen


def checksum(batches: list[pa.RecordBatch], columns: list[str] | None = None) -> Digest:
    total = Digest.empty()
    for batch in batches:
        total += Digest.of(row_hashes(batch, columns))
    return total


def naive(batches: list[pa.RecordBatch]) -> int:
    """A per-row Python checksum: each row's values (wormhole's own decoding), blake2b of their repr."""
    total = 0
    for batch in batches:
        for row in rows_from_arrow(batch):
            total += int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "little")
    return total % 2**64


def best(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """The least CPU seconds of each function over ``repeat`` rounds, the functions taking turns within a round."""
    found = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.process_time()
            fn()
            found[i] = min(found[i], time.process_time() - start)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--naive-rows", type=int, default=100_000)
    args = parser.parse_args()
    batches = make_batches(args.rows)
    few = make_batches(min(args.naive_rows, args.rows))
    names = batches[0].schema.names
    seconds = best([lambda: iterate(batches), lambda: checksum(batches), lambda: naive(few)], args.repeat)
    rows = [args.rows, args.rows, len(few) and sum(b.num_rows for b in few)]
    print(f"checksum of {args.rows:,} rows in batches of {BATCH_ROWS:,} ({len(names)} columns), CPU seconds, "
          f"best of {args.repeat}: {checksum(batches)}")
    for label, s, n in zip(("iterate (baseline)", "row_hashes", "naive hashlib per row"), seconds, rows, strict=True):
        print(f"  {label:<24} {s:8.3f} s  {n / s:>14,.0f} rows/s")
    without_json = [n for n in names if n != "js"]
    (s,) = best([lambda: checksum(batches, without_json)], args.repeat)
    print(f"  {'row_hashes but json':<24} {s:8.3f} s  {args.rows / s:>14,.0f} rows/s")
    print("each column alone (row_hashes of that column):")
    for name in names:
        (s,) = best([lambda name=name: checksum(batches, [name])], args.repeat)  # type: ignore[misc]
        print(f"  {name:<24} {s:8.3f} s  {args.rows / s:>14,.0f} rows/s")


if __name__ == "__main__":
    main()

"""One stream -> file (or sqlite) run in its own process, or pyarrow alone writing the same table; prints one JSON line.

Self-contained (imports nothing from ``benchmarks``), so it runs against another checkout of wormhole:
``PYTHONPATH=<checkout> python benchmarks/files_scenario.py ...`` (benchmarks/files.py does this for ``--before``).

Kinds:
- ``wormhole``: the full local engine, stream (the default columns: id, name, amount, day) -> one
  destination (``--format`` csv, jsonl, parquet or sqlite) in a scratch directory; after the timed run
  the output is read back and checksummed (row count and an order-free digest of the rows' values), so
  runs of two checkouts can be compared;
- ``pyarrow``: the same rows generated into one Arrow table of one chunk per column (not timed), then
  written by ``pyarrow.parquet.write_table`` (snappy) or ``pyarrow.csv.write_csv`` alone (timed): the limit.

Each prints wall seconds, rows/s, and the CPU seconds of the process in the timed part (every thread's:
on a machine shared with other work the wall time also counts the time the process waited for a core).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from wormhole import log
from wormhole.config import EngineConf
from wormhole.engine import Engine
from wormhole.plugins.base import ReadContext
from wormhole.plugins.batch import as_batch
from wormhole.plugins.stream import StreamReader, StreamReaderOptions, StreamSplitter
from wormhole.task_spec import TaskSpec

EXT = {"csv": "csv", "jsonl": "jsonl", "parquet": "parquet"}


def _destination(fmt: str, out: Path, writers: int | None) -> dict[str, Any]:
    more = {} if writers is None else {"concurrency": writers}
    if fmt == "sqlite":
        return {"id": "out", "plugin": "sqlite", "params": {"path": str(out / "out.db"), "table": "t"}, **more}
    return {"id": "out", "plugin": "file", "params": {"path": str(out / "data"), "format": fmt}, **more}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_wormhole(rows: int, fmt: str, splits: int, out: Path, writers: int | None) -> tuple[float, float]:
    """Wall and CPU seconds (the process's, every thread's) of the run."""
    spec = TaskSpec.from_mapping({
        "source": {"plugin": "stream", "params": {"rows": rows, "splits": splits}},
        "destinations": [_destination(fmt, out, writers)],
        "settings": {"speed": {"channel": splits}},
    })
    log.configure("json", "warning")
    engine = Engine(EngineConf(), spec, task_id=0, run_id=0, log=log.get_logger())
    start, cpu = time.perf_counter(), cpu_seconds()
    result = engine.run()
    elapsed, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    if result.exit_code != 0 or result.result["destinations"]["out"]["rows_written"] != rows:
        raise SystemExit(f"benchmark run failed: {result.result}")
    return elapsed, cpu


def _digest(lines: Any) -> tuple[int, str]:
    """Row count and the sum of the rows' digests: the same whatever the order of rows and part files."""
    n = total = 0
    for line in lines:
        n += 1
        total += int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "big")
    return n, f"{total % 2**64:016x}"


def _text_rows(fmt: str, out: Path) -> Any:
    for part in sorted((out / "data").glob(f"part-*.{EXT[fmt]}")):
        with open(part, "rb") as f:
            if fmt == "csv":
                next(f)  # the header
            yield from (line.rstrip(b"\n") for line in f)


def checksum(fmt: str, out: Path) -> tuple[int, str]:
    """Row count and an order-free digest of the output's rows (values as the format holds them)."""
    if fmt in ("csv", "jsonl"):
        return _digest(_text_rows(fmt, out))
    if fmt == "sqlite":
        conn = sqlite3.connect(out / "out.db")
        try:
            return _digest(repr(r).encode() for r in conn.execute("SELECT * FROM t"))
        finally:
            conn.close()
    table = pq.read_table(out / "data")
    values = zip(*(c.to_pylist() for c in table.columns), strict=True)
    return _digest(repr(r).encode() for r in values)


def generated_table(rows: int, splits: int) -> pa.Table:
    options = StreamReaderOptions(rows=rows, splits=splits)
    ctx = ReadContext(task_id=0, run_id=0, batch_rows=EngineConf().exchange.batch_rows,
                      dirty=None)  # type: ignore[arg-type]
    reader = StreamReader(options, ctx)
    batches = [as_batch(batch, reader.schema()).arrow(reader.schema())
               for split in StreamSplitter(options, ctx).split(splits) for batch in reader.read(split)]
    return pa.Table.from_batches(batches).combine_chunks()  # pyarrow's best case: one chunk per column


def run_pyarrow(rows: int, fmt: str, splits: int, out: Path, row_group_rows: int | None) -> tuple[float, float]:
    """Wall and CPU seconds of pyarrow writing the table (not of making it)."""
    table = generated_table(rows, splits)
    start, cpu = time.perf_counter(), cpu_seconds()
    if fmt == "parquet":
        pq.write_table(table, out / "t.parquet", compression="snappy", row_group_size=row_group_rows)
    else:
        pacsv.write_csv(table, out / "t.csv")
    return time.perf_counter() - start, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["wormhole", "pyarrow"], required=True)
    parser.add_argument("--format", choices=["csv", "jsonl", "parquet", "sqlite"], required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--splits", type=int, default=4)
    parser.add_argument("--row-group-rows", type=int, help="pyarrow parquet: rows per row group (default: pyarrow's)")
    parser.add_argument("--writers", type=int, help="the destination's concurrency (default: the store's)")
    parser.add_argument("--no-checksum", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="whb-files-") as tmp:
        out = Path(tmp)
        if args.kind == "wormhole":
            elapsed, cpu = run_wormhole(args.rows, args.format, args.splits, out, args.writers)
        else:
            elapsed, cpu = run_pyarrow(args.rows, args.format, args.splits, out, args.row_group_rows)
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        figure: dict[str, Any] = {"kind": args.kind, "format": args.format, "rows": args.rows,
                                  "seconds": round(elapsed, 3), "rows_per_s": round(args.rows / elapsed),
                                  "cpu_s": round(cpu, 3),
                                  "peak_rss_mib": round(peak_kib / 1024, 1)}
        if args.kind == "wormhole" and not args.no_checksum:
            figure["checksum"] = list(checksum(args.format, out))
    json.dump(figure, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

"""The csv, jsonl and sqlite readers alone: a 1M-row file read through the store's reader into nothing,
with the readers' Arrow batches (after) and with the tuple path they had before (``--tuples``: the Arrow
step switched off in the same revision, so both read the same file the same way up to the conversion).

Every case runs in a child process; the child times the reads alone and reports wall time, its CPU time
and the batches' forms; the parent keeps the best of ``--repeat``. Files are made once under ``--dir``.
Columns: id int, name string, amount float, day date, ts datetime, flag bool; ``--decimal`` adds a
decimal column with two-place texts (``12.50``: a scale of its own, so those batches go as tuples).

Run: ``.venv/bin/python -m benchmarks.file_read [--rows 1000000] [--repeat 3] [--decimal]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from typing import Any

COLUMNS = [("id", "int"), ("name", "string"), ("amount", "float"), ("day", "date"), ("ts", "datetime"),
           ("flag", "bool")]


def _columns(decimal: bool) -> list[tuple[str, str]]:
    return [*COLUMNS, ("price", "decimal")] if decimal else COLUMNS


def _rows(n: int, decimal: bool) -> list[list[Any]]:
    rng = random.Random(28)
    base = datetime(2020, 1, 1)
    out = []
    for i in range(n):
        row: list[Any] = [i, f"name-{rng.randint(0, 10**6)}-é", round(rng.uniform(-1e6, 1e6), 2),
                          (base + timedelta(days=rng.randint(0, 3650))).date().isoformat(),
                          (base + timedelta(seconds=rng.randint(0, 10**8))).isoformat(" "),
                          rng.random() < 0.5]
        if decimal:
            row.append(f"{rng.randint(-10**9, 10**9) / 100:.2f}")
        out.append(row)
    return out


def make_files(directory: str, n: int, decimal: bool) -> dict[str, str]:
    os.makedirs(directory, exist_ok=True)
    tag = f"{n}{'-dec' if decimal else ''}"
    paths = {fmt: os.path.join(directory, f"bench-{tag}.{ext}") for fmt, ext in
             (("csv", "csv"), ("jsonl", "jsonl"), ("sqlite", "db"))}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    rows = _rows(n, decimal)
    names = [c for c, _ in _columns(decimal)]
    with open(paths["csv"], "w", encoding="utf-8") as f:
        f.write(",".join(names) + "\n")
        f.writelines(",".join(("true" if v else "false") if isinstance(v, bool) else str(v) for v in r) + "\n"
                     for r in rows)
    with open(paths["jsonl"], "w", encoding="utf-8") as f:
        f.writelines(json.dumps(dict(zip(names, r)), ensure_ascii=False) + "\n" for r in rows)
    conn = sqlite3.connect(paths["sqlite"])
    decl = {"int": "INTEGER", "string": "TEXT", "float": "REAL", "date": "DATE", "datetime": "DATETIME",
            "bool": "BOOLEAN", "decimal": "DECIMAL TEXT"}
    conn.execute(f"CREATE TABLE t ({', '.join(f'{c} {decl[t]}' for c, t in _columns(decimal))})")
    conn.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(names))})", rows)
    conn.commit()
    conn.close()
    return paths


def _child(fmt: str, path: str, tuples: bool, decimal: bool, then_arrow: bool = False) -> None:
    from wormhole.plugins.base import Batch, ReadContext
    from wormhole.plugins.batch import arrow_for_this_process, as_batch
    from wormhole.plugins.file.convert import BatchConverter
    from wormhole.plugins.file.csv_format import CsvReader
    from wormhole.plugins.file.options import ColumnOption, FileReaderOptions
    from wormhole.plugins.file.reader import FileReader
    from wormhole.plugins.file.splitter import FileSplitter
    from wormhole.plugins.sqlite import reader as sqlite_reader
    from wormhole.plugins.sqlite.options import SqliteReaderOptions
    from wormhole.plugins.sqlite.splitter import SqliteSplitter

    arrow_for_this_process()  # as the CLI: the system allocator, pandas kept out of pyarrow's first look
    if tuples:  # the row path as it was: every batch converted in Python
        BatchConverter._arrow = lambda self, raw: None  # type: ignore[method-assign]
        CsvReader._chunks = lambda self, f, path: self._python(f, 0, 0, path, self._header)  # type: ignore[method-assign]
        sqlite_reader.arrow_batch = lambda schema, raw: None  # type: ignore[assignment]

    class Drop:
        rejected = 0

        def reject(self, origin: str, rows: Any, split_id: str | None = None) -> None:
            Drop.rejected += len(rows)

    ctx = ReadContext(task_id=1, run_id=1, batch_rows=4096, dirty=Drop())
    reader: Any
    if fmt == "sqlite":
        options: Any = SqliteReaderOptions(path=path, table="t")
        reader = sqlite_reader.SqliteReader(options, ctx)
        splits = SqliteSplitter(options, ctx).split(1)
    else:
        cols = tuple(ColumnOption(name=c, type=t) for c, t in _columns(decimal))  # type: ignore[arg-type]
        options = FileReaderOptions(path=path, format=fmt, columns=cols)  # type: ignore[arg-type]
        reader = FileReader(options, ctx)
        splits = FileSplitter(options, ctx).split(1)
    schema = reader.schema()
    rows = arrow = batches = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    for split in splits:
        for batch in reader.read(split):
            rows += len(batch)
            batches += 1
            arrow += isinstance(batch, Batch) and batch.native_arrow is not None
            if then_arrow:  # what a destination that encodes Arrow columns (parquet, csv, jsonl, mysql) asks for
                as_batch(batch, schema).arrow(schema)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    # VmHWM, not ru_maxrss: Linux keeps the latter across exec, so it would be the parent's.
    with open("/proc/self/status") as status:
        rss = next(int(x.split()[1]) for x in status if x.startswith("VmHWM")) / 1024
    print(json.dumps({"rows": rows, "wall": wall, "cpu": cpu, "arrow_batches": arrow, "batches": batches,
                      "rejected": Drop.rejected, "rss_mib": rss}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/wormhole-file-read-bench")
    ap.add_argument("--decimal", action="store_true")
    ap.add_argument("--only", nargs="*", default=["csv", "jsonl", "sqlite"])
    ap.add_argument("--then-arrow", action="store_true", help="make every batch Arrow columns after reading")
    ap.add_argument("--before", help="a checkout of the revision before (its benchmarks/ holding this script): "
                    "its readers are measured as they were, in place of the switched-off Arrow step")
    ap.add_argument("--child", nargs=3, metavar=("FORMAT", "PATH", "TUPLES"))
    args = ap.parse_args()
    if args.child:
        fmt, path, tuples = args.child
        _child(fmt, path, tuples == "1", args.decimal, args.then_arrow)
        return
    paths = make_files(args.dir, args.rows, args.decimal)
    print("| reader | batches | wall s | rows/s | CPU s | rows per CPU s | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for fmt in args.only:
        for tuples in (True, False):
            runs = []
            for _ in range(args.repeat):
                cmd = [sys.executable, "-m", "benchmarks.file_read", "--child", fmt, paths[fmt], str(int(tuples))]
                flags = ["--decimal"] * args.decimal + ["--then-arrow"] * args.then_arrow
                env = None
                if tuples and args.before:
                    cmd[-1] = "0"  # the old revision's readers yield tuples as they are
                    env = {**os.environ, "PYTHONPATH": args.before}
                out = subprocess.run(cmd + flags, check=True, capture_output=True, text=True, env=env,
                                     cwd=args.before if tuples and args.before else None).stdout
                runs.append(json.loads(out))
            best = min(runs, key=lambda r: r["cpu"])
            before = "before (its revision)" if args.before else "tuples (Arrow step off)"
            form = before if tuples else f"Arrow ({best['arrow_batches']}/{best['batches']} batches)"
            print(f"| {fmt} | {form} | {best['wall']:.2f} | {best['rows'] / best['wall']:,.0f} | {best['cpu']:.2f} | "
                  f"{best['rows'] / best['cpu']:,.0f} | {best['rss_mib']:.0f} |", flush=True)


if __name__ == "__main__":
    main()

"""The mysql reader alone: ``whb_src.t`` (benchmarks/mysql_scenario.py's 1M-row, 8-column table, built once
and reused) read through the store's reader into nothing, as 2 key-range splits on 1 thread and on 2 threads.

Every case runs in a child process (``python -m benchmarks.mysql_read --child ...``) through the plugin
contract only (splitter, ``reader.schema()``, ``reader.read(split)``), so the same script measures any
revision of the reader. The child times the reads alone (start-up and the schema/split queries left out)
and counts the rows, and its CPU time (the process's, every thread's), the steadier figure on a busy
machine; the parent takes the child's peak RSS from ``wait4``. ``tuples`` cases also turn every
batch into Python tuples, what a destination that still iterates rows pays on top.

Run: ``.venv/bin/python -m benchmarks.mysql_read [--rows N] [--repeat 3]``, or
``.venv/bin/python -m benchmarks.run --only mysql-read`` (figures into benchmarks/results/latest.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from benchmarks.mysql_scenario import REPO, SRC_DB, TABLE, BenchmarkFailure, Server, ensure_source, say, timed

SPLITS = 2
CASES: tuple[tuple[int, bool], ...] = ((1, False), (2, False), (1, True), (2, True))
"""(threads, tuples): the 2 splits read by 1 or 2 threads, batches left as they come or made tuples."""


class _Drop:
    """A dirty sink that counts: the bench table has no row the reader rejects."""

    def __init__(self) -> None:
        self.rejected = 0

    def reject(self, origin: str, rows: Any, split_id: str | None = None) -> None:
        self.rejected += len(rows)


def _read_all(server: Server, threads: int, tuples: bool) -> dict[str, Any]:
    from wormhole.config import EngineConf
    from wormhole.options import Problems, parse_options
    from wormhole.plugins import registry
    from wormhole.plugins.base import ReadContext, rows_of
    from wormhole.plugins.mysql.options import MysqlReaderOptions

    role = registry.get("mysql").source
    assert role is not None
    params = {**server.task_params(), "database": SRC_DB, "table": TABLE, "split_pk": "id", "split_factor": 1}
    problems = Problems()
    options = parse_options(MysqlReaderOptions, params, "source.params", problems)
    if problems.items:
        raise BenchmarkFailure(f"reader options: {problems.items}")
    exchange = EngineConf().exchange  # the engine's default batch sizes
    sink = _Drop()
    ctx = ReadContext(task_id=0, run_id=0, batch_rows=exchange.batch_rows, batch_bytes=exchange.batch_bytes,
                      dirty=sink, plugin="mysql")
    role.reader(options, ctx).schema()
    splits = role.splitter(options, ctx).split(SPLITS)
    if len(splits) != SPLITS:
        raise BenchmarkFailure(f"expected {SPLITS} splits, the splitter made {len(splits)}")
    counts = [0] * SPLITS
    failures: list[BaseException] = []

    def work(indexes: list[int]) -> None:
        reader = role.reader(options, ctx)  # one reader per thread, as the engine's channels have
        try:
            for i in indexes:
                for batch in reader.read(splits[i]):
                    if tuples:
                        for _row in rows_of(batch):  # what a row-at-a-time store asks of a batch
                            pass
                    counts[i] += len(batch)
        except BaseException as exc:  # the figure of a read that failed is no figure
            failures.append(exc)
            raise

    start, cpu = time.perf_counter(), time.process_time()
    workers = [threading.Thread(target=work, args=([i for i in range(SPLITS) if i % threads == t],))
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if failures:
        raise BenchmarkFailure(f"a reader thread failed: {failures[0]!r}")
    return {"rows": sum(counts), "seconds": seconds, "cpu_s": cpu, "rejected": sink.rejected}


def run_case(server: Server, threads: int, tuples: bool, repeat: int) -> dict[str, Any]:
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        cmd = [sys.executable, "-m", "benchmarks.mysql_read", "--child", str(threads),
               "--host", server.host, "--port", str(server.port), "--user", server.user]
        if tuples:
            cmd.append("--tuples")
        run = timed(cmd, cwd=REPO)
        if run.returncode != 0:
            raise BenchmarkFailure(f"mysql-read child exited {run.returncode}:\n{run.stderr[-2000:]}")
        figure = {**json.loads(run.stdout.strip().splitlines()[-1]), "peak_rss_mib": run.peak_rss_mib}
        if best is None or figure["seconds"] < best["seconds"]:
            best = figure
    assert best is not None
    return best


def run_all(server: Server, rows: int, repeat: int) -> list[dict[str, Any]]:
    admin = server.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            source = ensure_source(cur, TABLE, rows)
    finally:
        admin.close()
    say(f"mysql reader alone: {SRC_DB}.{TABLE} {source.rows:,} rows, {SPLITS} splits, best of {repeat}")
    say(f"{'threads':>7} {'batches':>8} {'seconds':>8} {'rows/s':>10} {'CPU s':>6} {'rows/CPU s':>10} "
        f"{'peak RSS MiB':>13}")
    results = []
    for threads, tuples in CASES:
        figure = run_case(server, threads, tuples, repeat)
        if figure["rows"] != source.rows or figure["rejected"]:
            raise BenchmarkFailure(f"the reader gave {figure['rows']:,} rows ({figure['rejected']} rejected), "
                                   f"the table has {source.rows:,}")
        rate = round(figure["rows"] / figure["seconds"])
        form = "tuples" if tuples else "as read"
        per_cpu = round(figure["rows"] / figure["cpu_s"])
        say(f"{threads:>7} {form:>8} {figure['seconds']:>8.2f} {rate:>10,} {figure['cpu_s']:>6.2f} {per_cpu:>10,} "
            f"{figure['peak_rss_mib']:>13}")
        results.append({"part": "mysql-read", "scenario": f"mysql reader {threads} thread(s), {form}",
                        "rows": figure["rows"], "splits": SPLITS, "threads": threads, "tuples": tuples,
                        "seconds": round(figure["seconds"], 3), "rows_per_s": rate,
                        "cpu_s": round(figure["cpu_s"], 3), "rows_per_cpu_s": per_cpu,
                        "peak_rss_mib": figure["peak_rss_mib"]})
    return results


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    group = parser.add_argument_group("mysql reader alone")
    group.add_argument(f"--{prefix}rows", type=int, default=1_000_000, help="rows of whb_src.t (default 1M)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the fastest counts (default 1)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tuples", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    server = Server.of(args)
    try:
        if args.child:
            print(json.dumps(_read_all(server, args.child, args.tuples)), flush=True)
            return
        results = run_all(server, args.rows, args.repeat)
    except BenchmarkFailure as exc:
        raise SystemExit(f"MYSQL-READ BENCHMARK FAILED: {exc}") from None
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()

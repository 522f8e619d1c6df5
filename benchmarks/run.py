"""`make bench`: run every scenario in its own process and print rows/s, peak RSS and ratios.

Each figure is the best of ``--repeat`` runs (least disturbed by the machine). The baseline, the
stream generator without the engine, runs in the same process tree, so the ratio
``engine / generator`` says what the exchange costs on this machine, whatever its speed.
Results also go to benchmarks/results/latest.json.

After the stream scenarios come the MySQL ones (benchmarks/mysql_scenario.py): wormhole against
``mysqldump | mysql`` and a naive pymysql copy on the local MariaDB. ``--only stream|mysql|spark`` runs one
part; its entries in latest.json replace that part's previous ones and the other parts' are kept.

The Spark scenario (benchmarks/spark_scenario.py: wormhole's Spark, local and auto engines against a plain
PySpark script, 1M and 5M rows) takes long, so it runs only with ``--only spark`` or ``--with-spark``
(``make bench BENCH_ARGS="--only spark"``).

``--only speed`` (benchmarks/speed.py) checks the speed limits instead of throughput: stream and MySQL
tasks run at record and byte limits (and one Spark task), each about 10 s, with the measured rate
against its limit. It runs only when asked for (``make bench BENCH_ARGS="--only speed"``).

``--only files`` (benchmarks/files.py) writes stream rows to parquet, csv, jsonl and sqlite (5M rows by
default, ``--files-rows``) next to pyarrow writing the same table alone (the limit), and with ``--before
<checkout>`` the same runs against another checkout of wormhole (checksums compared). It runs only when
asked for (``make bench BENCH_ARGS="--only files --before /tmp/base"``).

``--only pushup`` (benchmarks/pushup.py) compares ``settings.pushup`` off, adaptive and static on a
10%-selective filter over a 1M-row MySQL source: rows/s of each mode and the ratios to off. It runs
only when asked for (``make bench BENCH_ARGS="--only pushup"``).

``--only postgres`` (benchmarks/postgres_scenario.py) compares the postgres store with PostgreSQL's and MySQL's
C tools and pgloader: PostgreSQL -> PostgreSQL, MySQL -> PostgreSQL, and MySQL -> {PostgreSQL, MySQL} read
once, 1M rows by default (``--rows N``), every copy checksummed against the source. It runs only when asked
for (``make bench BENCH_ARGS="--only postgres"``).

``--only mysql-read`` (benchmarks/mysql_read.py) measures the mysql store's reader alone: the 1M-row bench
table read into nothing as 2 splits on 1 and on 2 threads, rows/s, CPU time and peak RSS.

The MySQL and PostgreSQL parts also measure the servers' own limit (benchmarks/limit.py) in the same minutes:
a ready file loaded by ``LOAD DATA LOCAL INFILE`` / psql ``\\copy FROM`` into one table and N at once, and
the source scan alone, interleaved with wormhole's runs over ``--limit-rounds`` rounds (default 2; ``--no-limit``
leaves them out), with mydumper | myloader beside the C tools; each copy's time is printed as a multiple of
the limit. ``--only mysql-profile`` (benchmarks/mysql_profile.py) watches one three-destination run: wormhole's
and mariadbd's CPU per phase, idle destinations, the reader blocked, commit and marker costs, the tail.

Whole databases (issue 38): ``--only tpch`` (benchmarks/tpch.py; ``make bench-tpch``) copies TPC-H at
``--tpch-sf`` (default 1) MySQL -> PostgreSQL against pgloader, MySQL -> MySQL against mysqldump and
mydumper + myloader, and to PostgreSQL + MySQL + Parquet in one run against the three tools one after another;
``--only many-tables`` (benchmarks/many_tables.py) copies 1,000 tables of 100 rows against ``mysqldump |
mysql``. Both run only when asked for. The snapshot demonstration (benchmarks/snapshot_money.py: money moved
between two tables during the copy, the copies' totals checked) runs after the MySQL part by default, alone
with ``--only snapshot``. Until wormhole runs database tasks these print ``wormhole: not available: ...`` beside
the peers' figures (``--require-wormhole`` makes that a failure).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import (
    files,
    limit,
    many_tables,
    mysql_profile,
    mysql_read,
    mysql_scenario,
    postgres_scenario,
    pushup,
    snapshot_money,
    spark_scenario,
    speed,
    tpch,
)
from benchmarks.dbcopy import Pg

RESULTS = Path("benchmarks/results/latest.json")

SCENARIOS = [
    ("generator baseline", ["--kind", "generator"], 1),
    ("stream->null x1", ["--kind", "exchange", "--destinations", "1"], 1),
    ("stream->null x3", ["--kind", "exchange", "--destinations", "3"], 3),
    ("stream->chain->null", ["--kind", "transform"], 1),
    ("chain alone, tuples", ["--kind", "chain"], 1),
    ("chain alone, arrow", ["--kind", "chain", "--arrow"], 1),
]
"""The chain (benchmarks/scenario.py CHAIN: filter, derive, project) runs in the task's reader threads, and
alone over batches made beforehand, as the reader gives them and as ready Arrow batches."""


def measure(args: list[str], rows: int, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-m", "benchmarks.scenario", *args, "--rows", str(rows)],
                             check=True, capture_output=True, text=True).stdout
        figure = json.loads(out.strip().splitlines()[-1])
        if best is None or figure["rows_per_s"] > best["rows_per_s"]:
            best = figure
    assert best is not None
    return best


def run_stream(rows_list: list[int], repeat: int) -> list[dict]:
    results = []
    print(f"{'scenario':<22} {'rows':>10} {'rows/s':>12} {'x generator':>12} {'peak RSS MiB':>13}", flush=True)
    for rows in rows_list:
        baseline = None
        for name, scenario, _dests in SCENARIOS:
            figure = measure(scenario, rows, repeat)
            baseline = baseline or figure["rows_per_s"]
            ratio = figure["rows_per_s"] / baseline
            results.append({"part": "stream", "scenario": name, **figure, "ratio_to_generator": round(ratio, 3)})
            print(f"{name:<22} {rows:>10,} {figure['rows_per_s']:>12,} {ratio:>12.2f} {figure['peak_rss_mib']:>13}",
                  flush=True)
    return results


def save(results: list[dict], parts: set[str]) -> None:
    """Write latest.json: this run's entries, plus the previous entries of the parts not run this time."""
    kept: list[Any] = []
    if RESULTS.exists():
        try:
            previous = json.loads(RESULTS.read_text())
        except json.JSONDecodeError:
            previous = []
        if isinstance(previous, list):
            # Entries written before parts existed are the stream scenarios.
            kept = [e for e in previous if isinstance(e, dict) and e.get("part", "stream") not in parts]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(kept + results, indent=2))


def build_parser() -> argparse.ArgumentParser:
    """Every part's options in one parser (a name two parts both declare fails here, before any run)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["stream", "mysql", "snapshot", "spark", "speed", "pushup", "mysql-read",
                                           "files", "postgres", "mysql-profile", "tpch", "many-tables"],
                        help="run one part (default: stream, mysql, then snapshot; spark only with --with-spark, "
                             "speed, pushup, mysql-read, files, postgres, tpch and many-tables only with --only)")
    parser.add_argument("--with-spark", action="store_true", help="run the (long) Spark scenario after the others")
    parser.add_argument("--rows", type=int, nargs="+",
                        help="stream rows (default 1M 5M); with --only postgres, that part's rows (default 1M)")
    parser.add_argument("--repeat", type=int,
                        help="runs per scenario, the best counts (default: 3 for stream and pushup, 1 for mysql)")
    mysql_scenario.add_arguments(parser, prefix="mysql-")
    limit.add_arguments(parser)
    spark_scenario.add_arguments(parser, prefix="spark-")
    speed.add_arguments(parser)
    pushup.add_arguments(parser)
    mysql_read.add_arguments(parser, prefix="read-")
    files.add_arguments(parser)
    postgres_scenario.add_arguments(parser, prefix="pg-")
    mysql_profile.add_arguments(parser)
    tpch.add_arguments(parser, prefix="tpch-")
    many_tables.add_arguments(parser, prefix="many-")
    snapshot_money.add_arguments(parser, prefix="money-")
    parser.add_argument("--require-wormhole", action="store_true",
                        help="tpch, many-tables, snapshot: fail when wormhole cannot run the database task")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    parts = {args.only} if args.only else {"stream", "mysql", "snapshot"} | ({"spark"} if args.with_spark else set())
    results: list[dict] = []
    if "stream" in parts:
        results += run_stream(args.rows or [1_000_000, 5_000_000], args.repeat or 3)
        save(results, {"stream"})
    if "mysql" in parts:
        if "stream" in parts:
            print(flush=True)
        opts = mysql_scenario.Options(
            rows=args.mysql_rows, repeat=args.repeat or 1, channels=tuple(args.channels), writers=args.writers,
            server=mysql_scenario.Server.of(args),
            wormhole=not args.no_wormhole, naive=not args.no_naive, keep=args.keep, **limit.option_fields(args))
        try:
            results += mysql_scenario.run_all(opts)
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"MySQL BENCHMARK FAILED: {exc}") from None
        save(results, parts - {"spark", "snapshot"})
    if "snapshot" in parts:
        if parts != {"snapshot"}:
            print(flush=True)
        try:
            results += snapshot_money.run_all(snapshot_money.options_from(
                args, "money_", mysql_scenario.Server.of(args), Pg(args.pg_host, args.pg_port, args.pg_user),
                wormhole=not args.no_wormhole, keep=args.keep, require_wormhole=args.require_wormhole))
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"SNAPSHOT DEMONSTRATION FAILED: {exc}") from None
        save(results, parts - {"spark"})
    if "spark" in parts:
        if parts != {"spark"}:
            print(flush=True)
        server = mysql_scenario.Server.of(args)
        try:
            results += spark_scenario.run_all(spark_scenario.options_from(args, args.spark_rows, server, args.keep))
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"SPARK BENCHMARK FAILED: {exc}") from None
        save(results, parts)
        if failed := spark_scenario.failed_contenders(results):
            raise SystemExit(f"SPARK BENCHMARK: failed contenders: {'; '.join(failed)}")
    if "speed" in parts:
        opts = speed.Options(parts=tuple(args.speed_parts), seconds=args.speed_seconds,
                             server=mysql_scenario.Server.of(args),
                             keep=args.keep)
        try:
            results += speed.run_all(opts)
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"SPEED BENCHMARK FAILED: {exc}") from None
        save(results, parts)
    if "pushup" in parts:
        try:
            results += pushup.run_all(pushup.options_from(args, args.repeat or 3, mysql_scenario.Server.of(args),
                                                          args.keep))
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"PUSHUP BENCHMARK FAILED: {exc}") from None
        save(results, parts)
    if "mysql-read" in parts:
        try:
            results += mysql_read.run_all(mysql_scenario.Server.of(args), args.read_rows, args.repeat or 3)
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"MYSQL-READ BENCHMARK FAILED: {exc}") from None
        save(results, parts)
    if "postgres" in parts:
        rows = args.pg_rows or (args.rows[0] if args.rows else None)
        opts = postgres_scenario.options_from(args, "pg_", rows, args.repeat or 1, mysql_scenario.Server.of(args),
                                              wormhole=not args.no_wormhole, keep=args.keep,
                                              limits=limit.option_fields(args))
        try:
            results += postgres_scenario.run_all(opts)
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"POSTGRES BENCHMARK FAILED: {exc}") from None
        save(results, parts)
    if "mysql-profile" in parts:
        try:
            results += mysql_profile.run_all(mysql_scenario.Server.of(args), args.profile_rows,
                                             args.profile_interval, args.profile_source)
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"MYSQL PROFILE FAILED: {exc}") from None
        save(results, parts)
    if "tpch" in parts:
        try:
            results += tpch.run_all(tpch.options_from(
                args, "tpch_", args.repeat or 1, mysql_scenario.Server.of(args),
                Pg(args.pg_host, args.pg_port, args.pg_user), wormhole=not args.no_wormhole, keep=args.keep,
                require_wormhole=args.require_wormhole))
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"TPC-H BENCHMARK FAILED: {exc}") from None
        save(results, parts)
    if "many-tables" in parts:
        try:
            results += many_tables.run_all(many_tables.options_from(
                args, "many_", args.repeat or 1, mysql_scenario.Server.of(args), wormhole=not args.no_wormhole,
                keep=args.keep, require_wormhole=args.require_wormhole))
        except mysql_scenario.BenchmarkFailure as exc:
            raise SystemExit(f"MANY-TABLES BENCHMARK FAILED: {exc}") from None
        save(results, parts)
    if "files" in parts:
        results += files.run_all(files.Options(rows=args.files_rows, repeat=args.repeat or 1,
                                               formats=tuple(args.files_formats), before=args.before,
                                               writers=args.files_writers))
        save(results, parts)


if __name__ == "__main__":
    main()

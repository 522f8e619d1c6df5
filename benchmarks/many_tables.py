"""Many small tables (issue 38): 1,000 tables of 100 rows, MySQL -> MySQL, wormhole against ``mysqldump | mysql``.

What it shows: the cost per table (catalog, DDL, splits, connections, commits), not throughput. The data
set: the MariaDB database ``manyt`` with ``--tables`` tables ``t0000``... of ``--rows`` rows each (id primary key,
text, a decimal, a date, an index on the date), built once with the sequence engine and reused while its
recipe and counts hold. Contenders, one after another, ``--repeat`` rounds (who goes first alternating), each
into a fresh ``manyt_copy``:

- ``mysqldump --single-transaction --quick manyt | mysql manyt_copy`` (schema included);
- wormhole: ``"tables": ["*"]``, the mysql destination ``{"database": "manyt_copy", "table": "{table}",
  "create_table": true}``, ``settings.snapshot: consistent``.

Every copy is checked table by table (count, order-independent checksum, keys; benchmarks/dbcopy.py). Issue
38's goal: wormhole within 1.5x the wall time of ``mysqldump | mysql``. Until the database task lands
wormhole refuses the spec (204): ``wormhole: not available: <error>``.

Run: ``.venv/bin/python -m benchmarks.many_tables [--tables 1000 --rows 100] [--repeat 2]``; through
``make bench BENCH_ARGS="--only many-tables"``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import dbcopy
from benchmarks.dbcopy import Row, Verdict, Wormhole
from benchmarks.mysql_scenario import BenchmarkFailure, Server, Timed, say

SCHEMA = """CREATE TABLE `{db}`.`{table}` (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(40) NOT NULL,
  amount DECIMAL(10,2),
  day DATE,
  note VARCHAR(60),
  KEY day (day)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
FILL = """INSERT INTO `{db}`.`{table}`
SELECT seq, CONCAT('{table} row ', seq), IF(seq % 11 = 0, NULL, (seq * {n} % 100000) / 100),
       DATE'2020-01-01' + INTERVAL (seq * 7 + {n}) % 2000 DAY, LEFT(SHA1(seq * 1000 + {n}), 8 + seq % 30)
FROM `{db}`.seq_1_to_{rows}"""
META_DB, META_TABLE = "whb_src", "whb_dbsets"
GOAL = 1.5
"""wormhole's wall time at most this many times mysqldump | mysql's."""


@dataclass(frozen=True, slots=True)
class Options:
    tables: int = 1000
    rows: int = 100
    threads: int = 4
    repeat: int = 1
    server: Server = field(default_factory=Server)
    src_db: str = "manyt"
    copy_db: str = "manyt_copy"
    wormhole: bool = True
    require_wormhole: bool = False
    keep: bool = False


def table_name(i: int) -> str:
    return f"t{i:04d}"


def ensure_source(cur: Any, opts: Options) -> None:
    want = hashlib.sha1(json.dumps([SCHEMA, FILL, opts.tables, opts.rows]).encode()).hexdigest()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{META_DB}` CHARACTER SET utf8mb4")
    cur.execute(f"CREATE TABLE IF NOT EXISTS `{META_DB}`.`{META_TABLE}` (name VARCHAR(64) PRIMARY KEY, "
                "recipe CHAR(40) NOT NULL, detail TEXT NOT NULL)")
    cur.execute(f"SELECT recipe FROM `{META_DB}`.`{META_TABLE}` WHERE name = %s", (opts.src_db,))
    recorded = cur.fetchone()
    names = [table_name(i) for i in range(opts.tables)]
    if recorded is not None and recorded[0] == want and dbcopy.mysql_tables(cur, opts.src_db) == names:
        say(f"  reusing {opts.src_db}: {opts.tables:,} tables of {opts.rows:,} rows")
        return
    start = time.perf_counter()
    cur.execute(f"DELETE FROM `{META_DB}`.`{META_TABLE}` WHERE name = %s", (opts.src_db,))
    dbcopy.fresh_mysql_db(cur, opts.src_db)
    cur.execute("SET autocommit = 0")  # one commit per table, not per statement: faster to build
    for i, name in enumerate(names):
        cur.execute(SCHEMA.format(db=opts.src_db, table=name))
        cur.execute(FILL.format(db=opts.src_db, table=name, rows=opts.rows, n=i))
        cur.execute("COMMIT")
    cur.execute("SET autocommit = 1")
    cur.execute(f"INSERT INTO `{META_DB}`.`{META_TABLE}` VALUES (%s, %s, %s)",
                (opts.src_db, want, json.dumps({"tables": opts.tables, "rows": opts.rows})))
    say(f"  built {opts.src_db}: {opts.tables:,} tables of {opts.rows:,} rows in {time.perf_counter() - start:.1f} s")


def wormhole_spec(opts: Options) -> dict[str, Any]:
    return {"name": f"many tables: {opts.tables} x {opts.rows} rows",
            "source": {"plugin": "mysql", "params": {**opts.server.task_params(), "database": opts.src_db,
                                                      "tables": ["*"]}},
            "destinations": [{"id": "replica", "plugin": "mysql",
                              "params": {**opts.server.task_params(), "database": opts.copy_db, "table": "{table}",
                                         "create_table": True}}],
            "settings": {"snapshot": "consistent", "speed": {"channel": opts.threads}}}


def run_all(opts: Options) -> list[dict[str, Any]]:
    say(f"many tables: MariaDB `{opts.src_db}`, {opts.tables:,} tables of {opts.rows:,} rows -> `{opts.copy_db}`; "
        f"{opts.repeat} round(s)")
    workdir = Path(tempfile.mkdtemp(prefix="whb-manyt-"))
    wormhole = Wormhole(workdir / "wormhole") if opts.wormhole else None
    unavailable = "" if opts.wormhole else "not run (--no-wormhole)"
    best: dict[str, Timed] = {}
    verdicts: dict[str, list[Verdict]] = {"mysqldump | mysql": [], "wormhole": []}
    failed: dict[str, str] = {}
    admin = opts.server.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            ensure_source(cur, opts)
            start = time.perf_counter()
            tables = dbcopy.describe_source(cur, opts.src_db)
            say(f"  source checked: {len(tables):,} tables, {dbcopy.source_rows(tables):,} rows "
                f"({time.perf_counter() - start:.1f} s)")

            def keep_best(name: str, run: Timed, r: int) -> None:
                verdict = dbcopy.verify_mysql(cur, opts.copy_db, tables)
                verdicts[name].append(verdict)
                if name not in best or run.seconds < best[name].seconds:
                    best[name] = run
                say(f"  {name:<20} round {r + 1}: {run.seconds:7.2f} s, peak RSS {run.peak_rss_mib:.0f} MiB, "
                    f"CPU {run.cpu_s:.1f} s, verified {verdict.text}")

            for r in range(opts.repeat):
                for who in ("dump", "wormhole")[::-1 if r % 2 else 1]:
                    dbcopy.fresh_mysql_db(cur, opts.copy_db)
                    if who == "dump":
                        try:
                            keep_best("mysqldump | mysql",
                                      dbcopy.run_mysqldump(opts.server, opts.src_db, opts.copy_db), r)
                        except BenchmarkFailure as exc:
                            failed["mysqldump | mysql"] = f"FAILED: {exc}"
                    elif wormhole is not None and not unavailable and "wormhole" not in failed:
                        result = wormhole.run(wormhole_spec(opts))
                        if result.refused:
                            unavailable = result.error
                            say(f"  wormhole: not available: {unavailable}")
                        elif not result.ok:
                            failed["wormhole"] = f"FAILED ({result.states or 'no result'}): {result.error}"
                            say(f"  wormhole round {r + 1}: {failed['wormhole']} (workspace {wormhole.root})")
                        else:
                            keep_best("wormhole", result.run, r)
            if not opts.keep:
                cur.execute(f"DROP DATABASE IF EXISTS `{opts.copy_db}`")
    finally:
        admin.close()
    rows = dbcopy.source_rows(tables)
    table: list[Row] = []
    for name in ("mysqldump | mysql", "wormhole"):
        run = best.get(name)
        bad = [v.text for v in verdicts[name] if not v.ok]
        if name == "wormhole" and unavailable:
            verified = f"wormhole: not available: {unavailable[:80]}..."
        else:
            verified = failed.get(name) or (bad[0] if bad else "yes" if verdicts[name] else "-")
        table.append(Row(f"{opts.tables} tables", name, run.seconds if run else None, rows, verified,
                         run.peak_rss_mib if run else None, run.cpu_s if run else None, wormhole=name == "wormhole"))
    dbcopy.print_table(f"{opts.tables:,} tables of {opts.rows:,} rows, MySQL -> MySQL, best of {opts.repeat}; "
                       "ratio = the tool's seconds / wormhole's", table)
    target: dict[str, Any] = {}
    if "wormhole" in best and "mysqldump | mysql" in best:
        times = best["wormhole"].seconds / best["mysqldump | mysql"].seconds
        status = "PASS" if times <= GOAL else "MISS"
        target = {"wormhole_over_dump": round(times, 3), "goal": GOAL, "status": status}
        say(f"  wormhole took {times:.2f}x the time of mysqldump | mysql (goal: at most {GOAL}x): {status}")
    if unavailable:
        say(f"wormhole: not available: {unavailable}")
    bad_rows = [f"{r.tool}: {r.verified}" for r in table if r.verified not in ("yes", "-")
                and not r.verified.startswith("wormhole: not available")]
    if bad_rows:
        say(f"workspace kept: {workdir}")
        raise BenchmarkFailure("; ".join(bad_rows))
    shutil.rmtree(workdir, ignore_errors=True)
    if opts.require_wormhole and unavailable:
        raise BenchmarkFailure(f"wormhole: not available: {unavailable}")
    return [r.as_json("many-tables") for r in table] + [{"part": "many-tables", "scenario": "target", **target}]


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    group = parser.add_argument_group("many small tables (benchmarks/many_tables.py)")
    group.add_argument(f"--{prefix}tables", type=int, default=1000, help="tables in the source (default 1000)")
    group.add_argument(f"--{prefix}rows", type=int, default=100, help="rows per table (default 100)")
    group.add_argument(f"--{prefix}threads", type=int, default=4, help="wormhole's channels (default 4)")


def options_from(args: argparse.Namespace, prefix: str, repeat: int, server: Server, *, wormhole: bool, keep: bool,
                 require_wormhole: bool) -> Options:
    def get(name: str) -> Any:
        return getattr(args, f"{prefix}{name}")
    return Options(tables=get("tables"), rows=get("rows"), threads=get("threads"), repeat=repeat, server=server,
                   wormhole=wormhole, keep=keep, require_wormhole=require_wormhole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--repeat", type=int, default=1, help="rounds, interleaved; the best of each counts")
    parser.add_argument("--no-wormhole", action="store_true", help="run mysqldump | mysql only")
    parser.add_argument("--require-wormhole", action="store_true", help="fail when wormhole cannot run the task")
    parser.add_argument("--keep", action="store_true", help="keep the copy afterwards")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    opts = options_from(args, "", args.repeat, Server.of(args), wormhole=not args.no_wormhole, keep=args.keep,
                        require_wormhole=args.require_wormhole)
    try:
        results = run_all(opts)
    except BenchmarkFailure as exc:
        raise SystemExit(f"MANY-TABLES BENCHMARK FAILED: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

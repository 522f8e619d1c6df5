"""One consistent snapshot across tables (issue 38), shown with money: a writer moves it while the copy runs.

The source: the MariaDB database ``whb_money`` with two tables, ``accounts_a`` and ``accounts_b``, of ``--rows``
accounts each, every balance 1000.00 at the start, so the two tables hold a constant total. During every copy
a writer thread moves money between a random row of ``accounts_a`` and one of ``accounts_b`` (two UPDATEs,
one transaction, about ``--rate`` a second): each transaction keeps the total, and at every instant the
committed rows add up to it. A copy that reads both tables at one instant therefore holds exactly that total;
one that reads ``accounts_a`` at one moment and ``accounts_b`` at another holds whatever moved in between.

Copies, each into fresh destinations while the writer runs:

- wormhole, ``settings.snapshot: consistent``, ``"tables": ["*"]`` into MySQL (``whb_money_copy``) and
  PostgreSQL (``bench_pg``, schema ``whb_money``) at once: each destination's total must equal the constant
  (the benchmark exits non-zero when it does not);
- ``mysqldump --single-transaction``: one snapshot for the whole dump, the same demand;
- controls, never a failure: ``mysqldump --skip-lock-tables`` (each table read in its own moment) and wormhole
  without the snapshot setting. They show that the writer does disturb a copy that is not consistent; when one
  happens to hold the total anyway the output says so.

After the copies the writer stops and the source's total is checked too (the writer must keep it). Until
the database task lands wormhole refuses the spec (204): ``wormhole: not available: <error>`` and the peers
run all the same (``--require-wormhole`` makes that a failure).

Run: ``.venv/bin/python -m benchmarks.snapshot_money [--rows 200000] [--rate 300]``; ``make bench`` runs it
(``BENCH_ARGS="--only snapshot"`` alone).
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql

from benchmarks import dbcopy
from benchmarks.dbcopy import Pg, Wormhole
from benchmarks.mysql_scenario import BenchmarkFailure, Server, say

TABLES = ("accounts_a", "accounts_b")
START_BALANCE = Decimal("1000.00")
SCHEMA = """CREATE TABLE `{db}`.`{table}` (
  id INT NOT NULL PRIMARY KEY,
  balance DECIMAL(14,2) NOT NULL,
  owner VARCHAR(60) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
FILL = ("INSERT INTO `{db}`.`{table}` SELECT seq, 1000.00, CONCAT('owner ', LEFT(SHA1(seq), 20)) "
        "FROM `{db}`.seq_1_to_{rows}")


@dataclass(frozen=True, slots=True)
class Options:
    rows: int = 200_000
    rate: float = 300.0
    """Writer transactions a second (at most: each one waits for its commit)."""
    threads: int = 4
    server: Server = field(default_factory=Server)
    pg: Pg = field(default_factory=Pg)
    src_db: str = "whb_money"
    copy_db: str = "whb_money_copy"
    pg_schema: str = "whb_money"
    wormhole: bool = True
    require_wormhole: bool = False
    keep: bool = False

    @property
    def total(self) -> Decimal:
        return START_BALANCE * self.rows * len(TABLES)


def mysql_total(cur: Any, db: str) -> tuple[int, Decimal]:
    cur.execute(" UNION ALL ".join(f"SELECT COUNT(*), COALESCE(SUM(balance), 0) FROM `{db}`.`{t}`" for t in TABLES))
    found = cur.fetchall()
    return sum(int(r[0]) for r in found), sum((Decimal(r[1]) for r in found), Decimal(0))


def pg_total(pg: Any, schema: str) -> tuple[int, Decimal]:
    found = pg.execute(" UNION ALL ".join(f'SELECT count(*), coalesce(sum(balance), 0) FROM "{schema}"."{t}"'
                                          for t in TABLES)).fetchall()
    return sum(int(r[0]) for r in found), sum((Decimal(r[1]) for r in found), Decimal(0))


def ensure_source(cur: Any, opts: Options) -> None:
    """The two tables with ``rows`` accounts each and the constant total: reused when they still hold it."""
    if set(dbcopy.mysql_tables(cur, opts.src_db)) == set(TABLES) and \
            mysql_total(cur, opts.src_db) == (opts.rows * len(TABLES), opts.total):
        say(f"  reusing {opts.src_db}: {opts.rows:,} accounts in each table, total {opts.total:,}")
        return
    dbcopy.fresh_mysql_db(cur, opts.src_db)
    for t in TABLES:
        cur.execute(SCHEMA.format(db=opts.src_db, table=t))
        cur.execute(FILL.format(db=opts.src_db, table=t, rows=opts.rows))
    say(f"  built {opts.src_db}: {opts.rows:,} accounts in each table, total {opts.total:,}")


class Writer(threading.Thread):
    """Moves money between ``accounts_a`` and ``accounts_b`` in transactions until stopped."""

    def __init__(self, opts: Options) -> None:
        super().__init__(daemon=True, name="money-writer")
        self.opts = opts
        self.stop = threading.Event()
        self.commits = 0
        self.failures = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def run(self) -> None:
        o = self.opts
        rng = random.Random(38)
        try:
            conn = o.server.connect(o.src_db, autocommit=False)
        except pymysql.MySQLError as exc:
            self.error = exc
            return
        pause = 1.0 / o.rate if o.rate > 0 else 0.0
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    amount = Decimal(rng.randint(1, 50_000)) / 100
                    src, dst = (("accounts_a", "accounts_b") if rng.random() < 0.5 else ("accounts_b", "accounts_a"))
                    try:
                        cur.execute(f"UPDATE `{src}` SET balance = balance - %s WHERE id = %s",
                                    (amount, rng.randint(1, o.rows)))
                        cur.execute(f"UPDATE `{dst}` SET balance = balance + %s WHERE id = %s",
                                    (amount, rng.randint(1, o.rows)))
                        conn.commit()
                        with self.lock:
                            self.commits += 1
                    except pymysql.MySQLError:
                        # A lock wait (a copier's brief global read lock) or a deadlock: nothing moved.
                        conn.rollback()
                        self.failures += 1
                    if pause:
                        self.stop.wait(pause)
        except BaseException as exc:  # reported by the main thread (finish)
            self.error = exc
        finally:
            conn.close()

    def count(self) -> int:
        with self.lock:
            return self.commits

    def finish(self) -> None:
        self.stop.set()
        self.join()
        if self.error is not None:
            raise BenchmarkFailure(f"the money writer failed: {self.error!r}")


@dataclass
class Outcome:
    name: str
    consistent: bool
    """Must the copy hold the total (a failure if not), or is it a control?"""
    seconds: float | None = None
    moves: int = 0
    """Writer transactions committed while the copy ran."""
    totals: dict[str, tuple[int, Decimal]] = field(default_factory=dict)
    error: str = ""

    def verdict(self, opts: Options) -> str:
        if self.error:
            return self.error
        wrong = {where: t for where, t in self.totals.items() if t != (opts.rows * len(TABLES), opts.total)}
        if not wrong:
            return "equal" if self.consistent else "equal (this control was not disturbed: the writer missed it)"
        text = ", ".join(f"{where} off by {t[1] - opts.total:+,}" + (f" ({t[0]:,} rows)" if t[0] != opts.rows * 2
                                                                      else "") for where, t in wrong.items())
        return f"DIFFERS: {text}" if self.consistent else f"differs, as expected of a control: {text}"

    def failed(self, opts: Options) -> bool:
        return self.consistent and (bool(self.error) or self.verdict(opts) != "equal")


def wormhole_spec(opts: Options, consistent: bool) -> dict[str, Any]:
    settings: dict[str, Any] = {"speed": {"channel": opts.threads}}
    if consistent:
        settings["snapshot"] = "consistent"
    return {"name": f"money{' consistent' if consistent else ''}",
            "source": {"plugin": "mysql", "params": {**opts.server.task_params(), "database": opts.src_db,
                                                      "tables": ["*"]}},
            "destinations": [
                {"id": "replica", "plugin": "mysql",
                 "params": {**opts.server.task_params(), "database": opts.copy_db, "table": "{table}",
                            "create_table": True}},
                {"id": "pg", "plugin": "postgres",
                 "params": {**opts.pg.task_params(), "schema": opts.pg_schema, "table": "{table}",
                            "create_table": True}}],
            "settings": settings}


def run_all(opts: Options) -> list[dict[str, Any]]:
    say(f"consistent snapshot with money: `{opts.src_db}` ({opts.rows:,} accounts in each of {', '.join(TABLES)}), "
        f"a writer moving money about {opts.rate:g} times a second during each copy")
    workdir = Path(tempfile.mkdtemp(prefix="whb-money-"))
    wormhole = Wormhole(workdir / "wormhole") if opts.wormhole else None
    unavailable = "" if opts.wormhole else "not run (--no-wormhole)"
    outcomes: list[Outcome] = []
    opts.pg.ensure_database()
    admin = opts.server.connect(autocommit=True)
    try:
        with admin.cursor() as cur, opts.pg.connect() as pg:
            ensure_source(cur, opts)
            writer = Writer(opts)
            writer.start()
            time.sleep(0.5)
            if writer.count() == 0 and writer.error is None:
                time.sleep(1.0)
            try:
                def copy(outcome: Outcome, attempt: Any, *, to_pg: bool) -> None:
                    dbcopy.fresh_mysql_db(cur, opts.copy_db)
                    dbcopy.fresh_pg_schema(pg, opts.pg_schema)
                    before = writer.count()
                    try:
                        outcome.seconds = attempt()
                    except BenchmarkFailure as exc:
                        outcome.error = f"FAILED: {str(exc)[:300]}"
                        outcomes.append(outcome)
                        return
                    outcome.moves = writer.count() - before
                    outcome.totals[f"MySQL {opts.copy_db}"] = mysql_total(cur, opts.copy_db)
                    if to_pg:
                        outcome.totals[f"PostgreSQL {opts.pg_schema}"] = pg_total(pg, opts.pg_schema)
                    outcomes.append(outcome)
                    say(f"  {outcome.name:<48} {outcome.seconds:6.2f} s, {outcome.moves:,} moves during the copy: "
                        + "; ".join(f"{w} total {t[1]:,}" for w, t in outcome.totals.items()))

                def run_wormhole(consistent: bool) -> float:
                    nonlocal unavailable
                    assert wormhole is not None
                    result = wormhole.run(wormhole_spec(opts, consistent))
                    if result.refused:
                        unavailable = result.error
                        raise BenchmarkFailure(f"wormhole: not available: {result.error}")
                    if not result.ok:
                        raise BenchmarkFailure(f"wormhole ({result.states or 'no result'}): {result.error} "
                                               f"(workspace {wormhole.root})")
                    return result.run.seconds

                if wormhole is not None:
                    copy(Outcome("wormhole, snapshot: consistent", True), lambda: run_wormhole(True), to_pg=True)
                copy(Outcome("mysqldump --single-transaction | mysql", True),
                     lambda: dbcopy.run_mysqldump(opts.server, opts.src_db, opts.copy_db).seconds, to_pg=False)
                copy(Outcome("mysqldump --skip-lock-tables | mysql (control)", False),
                     lambda: dbcopy.bash("mysqldump --skip-lock-tables | mysql", _unlocked_dump(opts)).seconds,
                     to_pg=False)
                if wormhole is not None and not unavailable:
                    copy(Outcome("wormhole, no snapshot setting (control)", False), lambda: run_wormhole(False),
                         to_pg=True)
            finally:
                writer.finish()
            source = mysql_total(cur, opts.src_db)
            say(f"  the writer committed {writer.commits:,} moves ({writer.failures:,} rolled back); the source "
                f"now holds {source[1]:,} in {source[0]:,} rows")
            if not opts.keep:
                cur.execute(f"DROP DATABASE IF EXISTS `{opts.copy_db}`")
                dbcopy.fresh_pg_schema(pg, opts.pg_schema, create=False)
    finally:
        admin.close()
    if unavailable:
        for o in outcomes:
            if o.error.startswith("FAILED: wormhole: not available"):
                o.error = "wormhole: not available"
    say("")
    say(f"the constant total: {opts.total:,}")
    say(f"{'copy':<48} {'seconds':>8} {'moves':>7}  totals  ->  verdict")
    for o in outcomes:
        secs = "-" if o.seconds is None else f"{o.seconds:.2f}"
        totals = "; ".join(f"{w} {t[1]:,}" for w, t in o.totals.items()) or "-"
        say(f"{o.name:<48} {secs:>8} {o.moves:>7}  {totals}  ->  {o.verdict(opts)}")
    if unavailable:
        say(f"wormhole: not available: {unavailable}")
    problems = [f"{o.name}: {o.verdict(opts)}" for o in outcomes
                if o.failed(opts) and o.error != "wormhole: not available"]
    if source != (opts.rows * len(TABLES), opts.total):
        problems.append(f"the source holds {source[1]:,} in {source[0]:,} rows, not {opts.total:,}: "
                        "the writer is wrong")
    if problems:
        say(f"workspace kept: {workdir}")
        raise BenchmarkFailure("; ".join(problems))
    shutil.rmtree(workdir, ignore_errors=True)
    if opts.require_wormhole and unavailable:
        raise BenchmarkFailure(f"wormhole: not available: {unavailable}")
    return [{"part": "snapshot", "scenario": o.name, "seconds": o.seconds, "moves": o.moves,
             "totals": {w: str(t[1]) for w, t in o.totals.items()}, "expected": str(opts.total),
             "verdict": o.verdict(opts)} for o in outcomes]


def _unlocked_dump(opts: Options) -> str:
    dump = ["mysqldump", *opts.server.client_args(), "--skip-lock-tables", "--quick", opts.src_db]
    return f"{shlex.join(dump)} | {shlex.join(dbcopy.mysql_cli(opts.server, opts.copy_db))}"


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    group = parser.add_argument_group("consistent snapshot with money (benchmarks/snapshot_money.py)")
    group.add_argument(f"--{prefix}rows", type=int, default=200_000, help="accounts in each table (default 200k)")
    group.add_argument(f"--{prefix}rate", type=float, default=300.0,
                       help="the writer's moves a second, at most (default 300)")


def options_from(args: argparse.Namespace, prefix: str, server: Server, pg: Pg, *, wormhole: bool, keep: bool,
                 require_wormhole: bool) -> Options:
    return Options(rows=getattr(args, f"{prefix}rows"), rate=getattr(args, f"{prefix}rate"), server=server, pg=pg,
                   wormhole=wormhole, keep=keep, require_wormhole=require_wormhole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--pg-host", default="127.0.0.1")
    parser.add_argument("--pg-port", type=int, default=5432)
    parser.add_argument("--pg-user", default="postgres")
    parser.add_argument("--no-wormhole", action="store_true", help="run the mysqldump copies only")
    parser.add_argument("--require-wormhole", action="store_true", help="fail when wormhole cannot run the task")
    parser.add_argument("--keep", action="store_true", help="keep the copies afterwards")
    parser.add_argument("--json", type=Path, help="also write the outcomes to this file")
    args = parser.parse_args()
    opts = options_from(args, "", Server.of(args), Pg(args.pg_host, args.pg_port, args.pg_user),
                        wormhole=not args.no_wormhole, keep=args.keep, require_wormhole=args.require_wormhole)
    try:
        results = run_all(opts)
    except BenchmarkFailure as exc:
        raise SystemExit(f"SNAPSHOT DEMONSTRATION FAILED: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

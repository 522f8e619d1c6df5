"""PostgreSQL scenarios: wormhole's postgres store against the C tools and pgloader, on the local servers.

Three comparisons, each contender a child process of this one, one after another, on the same data:

(a) PostgreSQL -> PostgreSQL: wormhole against ``psql -c "COPY src.pgt TO STDOUT" | psql -c "COPY dst.pgt
    FROM STDIN"`` (libpq's COPY at both ends, the fastest plain copy PostgreSQL's own tools make);
(b) MySQL -> PostgreSQL: wormhole against Debian's pgloader (``LOAD DATABASE ... WITH data only, truncate``
    into the same pre-created table, its default workers and type casts), and the C pipe of (c) as a
    second baseline;
(c) MySQL -> {PostgreSQL, MySQL}, read once, against the two C-tools copies run one after the other:
    ``mysqldump --quick | mysql``, then ``mysql --batch --raw --quick -e "SELECT <COPY text>" | psql -c
    "COPY dst.pgt FROM STDIN"``. That second pipe is the fastest fair C path: it streams (both ends run at
    once on the two cores, no temp file), MySQL formats each row as PostgreSQL's COPY text in C (text
    escaped with REPLACE, NULL as ``\\N``, bytes as ``\\x`` hex), and psql loads it with COPY, which no
    INSERT path matches. ``SELECT ... INTO OUTFILE`` writes the same text but to a file first, so load
    waits for dump.

The data set: ``whb_src.pgt`` in MariaDB (11 mixed columns, ~120 bytes a row: integers, text with quotes,
tabs, newlines, backslashes and non-ASCII, decimals, doubles, microsecond timestamps, dates, booleans,
bytes, NULLs) built once with the sequence engine and reused while its recipe, count and checksum hold;
``src.pgt`` in the PostgreSQL database ``whb`` is loaded from it by the C pipe and checked the same way.
Every destination is pre-created with the same DDL and checked after every run with an order-independent
checksum computed in its own database: the sum of two 60-bit slices of the md5 of a canonical text of each
row (same text in MySQL and PostgreSQL), and the count. A mismatch stops the benchmark.

Run alone: ``.venv/bin/python -m benchmarks.postgres_scenario [--rows N] [--channels 1 2]``; through
``make bench BENCH_ARGS="--only postgres"`` (``--rows N`` there too). MySQL's password, if any, comes from
``MYSQL_PWD``, PostgreSQL's from ``PGPASSWORD``, as their client tools read them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import psycopg

from benchmarks import limit
from benchmarks.limit import round_channels
from benchmarks.mysql_scenario import (
    REPO,
    SRC_DB,
    BenchmarkFailure,
    Server,
    Timed,
    Workspace,
    check_exit,
    ensure_source,
    say,
    timed,
    wormhole_command,
)

PG_DB = "whb"
TABLE = "pgt"
MYSQL_DEST_DB = "whb_d1"

MYSQL_SCHEMA = """
CREATE TABLE `{db}`.`{table}` (
  id BIGINT NOT NULL PRIMARY KEY,
  k INT NOT NULL,
  name VARCHAR(60),
  amount DECIMAL(12,2),
  score DOUBLE,
  created DATETIME(6),
  day DATE,
  flag BOOLEAN,
  qty SMALLINT,
  note VARCHAR(200),
  payload VARBINARY(16)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
PG_SCHEMA = """
CREATE TABLE {schema}.{table} (
  id bigint NOT NULL PRIMARY KEY,
  k integer NOT NULL,
  name varchar(60),
  amount numeric(12,2),
  score double precision,
  created timestamp(6),
  day date,
  flag boolean,
  qty smallint,
  note varchar(200),
  payload bytea
)
"""
# Deterministic. Doubles are multiples of 1/16, exact in binary and in every text form, so MySQL and
# PostgreSQL render them alike; the rest checks each copier's escaping and type handling.
MYSQL_FILL = """
INSERT INTO `{db}`.`{table}`
SELECT seq,
       (seq * 7919) % 1000003,
       CONCAT(ELT(1 + seq % 6, 'Ann', 'Zoë', 'Bob', 'Jürgen', 'Li Wei', 'Ørsted'), ' ',
              ELT(1 + seq % 7, 'Smith', 'Müller', 'García', 'Nakamura', 'O''Brien', 'Kowalski', 'Dubois'),
              ' #', seq % 100003),
       IF(seq % 17 = 0, NULL, ((seq * 7127) % 100000000) / 100),
       IF(seq % 29 = 0, NULL, ((seq * 104729) % 160000) / 16e0 - 5000),
       TIMESTAMP'2020-01-01 00:00:00' + INTERVAL seq * 61 SECOND + INTERVAL (seq * 1237) % 1000000 MICROSECOND,
       IF(seq % 13 = 0, NULL, DATE'2000-01-01' + INTERVAL seq % 9000 DAY),
       IF(seq % 19 = 0, NULL, seq % 3 = 0),
       CAST(seq % 65536 AS SIGNED) - 32768,
       CASE WHEN seq % 10 = 0 THEN NULL
            WHEN seq % 101 = 0 THEN CONCAT('tab\\there, back\\\\slash, new\\nline, "quote" ', seq)
            WHEN seq % 11 = 0 THEN CONCAT('✓ ünïcode 日本 ', LEFT(SHA1(seq), 4 + seq % 17))
            ELSE LEFT(SHA1(seq), 8 + seq % 33) END,
       IF(seq % 23 = 0, NULL, UNHEX(LEFT(SHA1(seq), 2 * (seq % 9))))
FROM `{db}`.seq_1_to_{rows}
"""
RECIPE = hashlib.sha1((MYSQL_SCHEMA + MYSQL_FILL + PG_SCHEMA).encode()).hexdigest()
COLUMNS = ("id", "k", "name", "amount", "score", "created", "day", "flag", "qty", "note", "payload")

# The canonical text of a row, the same in both databases: each column's text (doubles as exact decimals,
# timestamps with 6 fractional digits, booleans as t/f, bytes as hex), NULL as \N (concat_ws skips NULLs).
MYSQL_CANON = ("id", "k", "name", "amount", "CAST(score AS DECIMAL(20,4))",
               "DATE_FORMAT(created, '%Y-%m-%d %H:%i:%s.%f')", "day", "IF(flag, 't', 'f')", "qty", "note",
               "LOWER(HEX(payload))")
PG_CANON = ("id::text", "k::text", "name", "amount::text", "score::numeric(20,4)::text",
            "to_char(created, 'YYYY-MM-DD HH24:MI:SS.US')", "day::text", "CASE WHEN flag THEN 't' ELSE 'f' END",
            "qty::text", "note", "encode(payload, 'hex')")
MYSQL_ROW = "CONCAT_WS('|', " + ", ".join(f"IFNULL({c}, '\\\\N')" for c in MYSQL_CANON) + ")"
PG_ROW = "concat_ws('|', " + ", ".join(f"coalesce({c}, '\\N')" for c in PG_CANON) + ")"
MYSQL_SUM = ("SELECT COUNT(*), COALESCE(SUM(CAST(CONV(SUBSTRING(h, 1, 15), 16, 10) AS UNSIGNED) "
             "+ CAST(CONV(SUBSTRING(h, 16, 15), 16, 10) AS UNSIGNED)), 0) "
             f"FROM (SELECT MD5({MYSQL_ROW}) AS h FROM `{{db}}`.`{{table}}`) hashes")
PG_SUM = (f"SELECT count(*), coalesce(sum(('x' || substr(md5(r), 1, 15))::bit(60)::bigint::numeric "
          f"+ ('x' || substr(md5(r), 16, 15))::bit(60)::bigint::numeric), 0) "
          f"FROM (SELECT {PG_ROW} AS r FROM {{schema}}.{{table}}) x")

# The MySQL -> PostgreSQL C pipe: each row as COPY text, formatted by MySQL (see the module docstring).
_ESCAPED = "REPLACE(REPLACE(REPLACE(REPLACE({c}, '\\\\', '\\\\\\\\'), '\\t', '\\\\t'), '\\n', '\\\\n'), '\\r', '\\\\r')"
COPY_TEXT_SELECT = ", ".join([
    "id", "k", f"IFNULL({_ESCAPED.format(c='name')}, '\\\\N')", "IFNULL(amount, '\\\\N')",
    "IFNULL(score, '\\\\N')", "IFNULL(created, '\\\\N')", "IFNULL(day, '\\\\N')", "IFNULL(flag, '\\\\N')", "qty",
    f"IFNULL({_ESCAPED.format(c='note')}, '\\\\N')", "IFNULL(CONCAT('\\\\\\\\x', HEX(payload)), '\\\\N')"])


@dataclass(frozen=True, slots=True)
class PgServer:
    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "postgres"
    password: str = field(default_factory=lambda: os.environ.get("PGPASSWORD", ""))

    def connect(self, database: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(host=self.host, port=self.port, user=self.user, password=self.password or None,
                               dbname=database, autocommit=True, options="-c DateStyle=ISO -c TimeZone=UTC")

    def psql(self, sql: str) -> list[str]:
        # The password travels in PGPASSWORD (inherited), never on a command line.
        return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.host, "-p", str(self.port), "-U",
                self.user, "-d", PG_DB, "-c", sql]

    def url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{PG_DB}"

    def task_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user, "database": PG_DB}
        if self.password:
            params["password_env"] = "PGPASSWORD"
        return params


@dataclass(frozen=True, slots=True)
class Check:
    rows: int
    checksum: int


@dataclass
class Figure:
    scenario: str
    rows: int
    seconds: float
    peak_rss_mib: float | None
    channels: int | None = None
    writers: int | None = None
    note: str = ""
    cpu_s: float | None = None
    """user + sys CPU seconds of the contender's processes."""

    @property
    def rows_per_s(self) -> int:
        return round(self.rows / self.seconds)

    def as_json(self) -> dict[str, Any]:
        return {"part": "postgres", "scenario": self.scenario, "rows": self.rows, "seconds": round(self.seconds, 3),
                "rows_per_s": self.rows_per_s, "peak_rss_mib": self.peak_rss_mib, "channels": self.channels,
                "writers": self.writers, "note": self.note,
                "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 2)}


@dataclass(frozen=True, slots=True)
class Options:
    rows: int = 1_000_000
    repeat: int = 1
    channels: tuple[int, ...] = (1, 2)
    writers: int = 2
    mysql: Server = field(default_factory=Server)
    pg: PgServer = field(default_factory=PgServer)
    wormhole: bool = True
    keep: bool = False
    limit: bool = True
    """Also measure the servers' own limit (benchmarks/limit.py): COPY / LOAD DATA of a ready file, the scans."""
    limit_rounds: int = 2
    """Rounds of limit and wormhole runs, interleaved (with ``limit``)."""
    mydumper: bool = True
    """Unused here (the MySQL part's); accepted so both parts take the same limit options."""


# ---------------------------------------------------------------------------------------------
# Data sets and checks


def mysql_check(cur: Any, db: str, table: str = TABLE) -> Check:
    cur.execute(MYSQL_SUM.format(db=db, table=table))
    rows, checksum = cur.fetchone()
    return Check(int(rows), int(checksum))


def pg_check(pg: psycopg.Connection[Any], schema: str, table: str = TABLE) -> Check:
    row = pg.execute(PG_SUM.format(schema=schema, table=table)).fetchone()
    assert row is not None
    return Check(int(row[0]), int(row[1]))


def prepare_pg(opts: Options) -> None:
    """The database ``whb`` (UTF-8) with the schemas ``src`` and ``dst``."""
    with opts.pg.connect() as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (PG_DB,)).fetchone() is None:
            admin.execute(f"CREATE DATABASE {PG_DB} ENCODING 'UTF8' TEMPLATE template0")
    with opts.pg.connect(PG_DB) as pg:
        pg.execute("CREATE SCHEMA IF NOT EXISTS src")
        pg.execute("CREATE SCHEMA IF NOT EXISTS dst")
        pg.execute("CREATE TABLE IF NOT EXISTS src.whb_meta (tbl text PRIMARY KEY, row_count bigint NOT NULL, "
                   "recipe text NOT NULL, checksum numeric NOT NULL)")


def ensure_pg_source(opts: Options, pg: psycopg.Connection[Any], source: Check) -> None:
    """``src.pgt``: the MySQL table copied by the C pipe, reused while its recipe and checksum hold."""
    recorded = pg.execute("SELECT row_count, recipe, checksum FROM src.whb_meta WHERE tbl = %s",
                          (TABLE,)).fetchone()
    exists = pg.execute("SELECT to_regclass('src.pgt') IS NOT NULL").fetchone()
    if exists and exists[0] and recorded == (source.rows, RECIPE, source.checksum) \
            and pg_check(pg, "src") == source:
        say(f"  reusing {PG_DB} src.{TABLE}: {source.rows:,} rows, checksum matches MySQL's")
        return
    pg.execute(f"DROP TABLE IF EXISTS src.{TABLE}")
    pg.execute(PG_SCHEMA.format(schema="src", table=TABLE))
    run = run_c_pipe(opts, "src")
    built = pg_check(pg, "src")
    if built != source:
        raise BenchmarkFailure(f"loading {PG_DB} src.{TABLE} with the C pipe: {built} instead of MySQL's {source}")
    pg.execute("VACUUM ANALYZE src.pgt")
    pg.execute("INSERT INTO src.whb_meta VALUES (%s, %s, %s, %s) ON CONFLICT (tbl) DO UPDATE SET "
               "row_count = excluded.row_count, recipe = excluded.recipe, checksum = excluded.checksum",
               (TABLE, source.rows, RECIPE, source.checksum))
    say(f"  built {PG_DB} src.{TABLE} from MySQL in {run.seconds:.1f} s; checksum matches MySQL's")


def reset_destinations(cur: Any, pg: psycopg.Connection[Any], *, pg_dest: bool, mysql_dest: bool,
                       stale_row: bool) -> None:
    """Empty targets before each run; ``stale_row`` leaves one row a truncate must remove (the checksum
    then also proves it happened)."""
    if pg_dest:
        pg.execute(f"TRUNCATE dst.{TABLE}")
        if stale_row:
            pg.execute(f"INSERT INTO dst.{TABLE} (id, k, name) VALUES (-1, 0, 'stale row')")
    if mysql_dest:
        cur.execute(f"TRUNCATE TABLE `{MYSQL_DEST_DB}`.`{TABLE}`")
        if stale_row:
            cur.execute(f"INSERT INTO `{MYSQL_DEST_DB}`.`{TABLE}` (id, k, name) VALUES (-1, 0, 'stale row')")


# ---------------------------------------------------------------------------------------------
# Contenders


def _bash(label: str, pipeline: str) -> Timed:
    # pipefail: a failing producer must fail the run, not look like a fast empty load.
    cmd = ["bash", "-c", f"set -o pipefail; {pipeline}"]
    run = timed(cmd)
    check_exit(label, cmd, run)
    return run


def run_psql_copy(opts: Options) -> Timed:
    out = opts.pg.psql(f"COPY src.{TABLE} TO STDOUT")
    into = opts.pg.psql(f"COPY dst.{TABLE} FROM STDIN")
    return _bash("psql COPY | psql COPY", f"{shlex.join(out)} | {shlex.join(into)}")


def run_c_pipe(opts: Options, schema: str = "dst") -> Timed:
    select = f"SELECT {COPY_TEXT_SELECT} FROM `{SRC_DB}`.`{TABLE}`"
    dump = ["mysql", "--batch", "--raw", "--quick", "--skip-column-names", *opts.mysql.client_args(), "-e", select]
    into = opts.pg.psql(f"COPY {schema}.{TABLE} FROM STDIN")
    return _bash("mysql --batch | psql COPY", f"{shlex.join(dump)} | {shlex.join(into)}")


def run_mysqldump(opts: Options) -> Timed:
    dump = ["mysqldump", "--quick", "--no-create-info", *opts.mysql.client_args(), SRC_DB, TABLE]
    load = ["mysql", *opts.mysql.client_args(), MYSQL_DEST_DB]
    return _bash("mysqldump | mysql", f"{shlex.join(dump)} | {shlex.join(load)}")


def pgloader_script(opts: Options) -> str:
    m = opts.mysql
    auth = f"{m.user}:{m.password}" if m.password else m.user
    return (f"LOAD DATABASE\n  FROM mysql://{auth}@{m.host}:{m.port}/{SRC_DB}\n  INTO {opts.pg.url()}\n"
            f"  WITH data only, truncate\n  INCLUDING ONLY TABLE NAMES MATCHING '{TABLE}'\n"
            f"  ALTER SCHEMA '{SRC_DB}' RENAME TO 'dst';\n")


def run_pgloader(opts: Options, workdir: Path) -> Timed:
    script = workdir / "pgloader.load"
    script.write_text(pgloader_script(opts))
    script.chmod(0o600)  # it may hold MySQL's password
    cmd = ["pgloader", "--no-ssl-cert-verification", "--quiet", "--root-dir", str(workdir / "pgloader"), str(script)]
    run = timed(cmd)
    check_exit("pgloader", cmd, run)
    if "ERROR" in run.stdout + run.stderr:  # pgloader reports a rejected batch and still exits 0
        raise BenchmarkFailure("pgloader: " + "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:]))
    return run


def wormhole_spec(opts: Options, source: str, destinations: tuple[str, ...], channels: int) -> dict[str, Any]:
    src: dict[str, Any]
    if source == "postgres":
        src = {"plugin": "postgres", "params": {**opts.pg.task_params(), "schema": "src", "table": TABLE,
                                                 "split_pk": "id"}}
    else:
        src = {"plugin": "mysql", "params": {**opts.mysql.task_params(), "database": SRC_DB, "table": TABLE,
                                              "split_pk": "id"}}
    dests = []
    for plugin in destinations:
        params = ({**opts.pg.task_params(), "schema": "dst", "table": TABLE, "load": "truncate"}
                  if plugin == "postgres" else
                  {**opts.mysql.task_params(), "database": MYSQL_DEST_DB, "table": TABLE, "load": "truncate"})
        dests.append({"id": f"to_{plugin}", "plugin": plugin, "concurrency": opts.writers, "params": params})
    return {"name": f"bench {source} -> {'+'.join(destinations)} ch{channels}", "source": src,
            "destinations": dests, "settings": {"speed": {"channel": channels}}}


def run_wormhole(ws: Workspace, opts: Options, source: str, destinations: tuple[str, ...], channels: int) -> Timed:
    spec = wormhole_spec(opts, source, destinations, channels)
    run, _result = ws.run(spec, spec["name"])
    return run


# ---------------------------------------------------------------------------------------------
# The comparison


class PgLimit:
    """The servers' own limit for the data set (benchmarks/limit.py): ready files written once (outside the
    timing), ``\\copy ... FROM`` the file into one fresh PostgreSQL table, that and ``LOAD DATA`` into one
    fresh MySQL table at once (the read-once copy to both), and each source's scan alone."""

    COPY = "COPY limit x1"
    BOTH = "COPY || LOAD DATA limit"
    PG_SCAN = "postgres source scan"
    MYSQL_SCAN = "mysql source scan"
    NOTES: ClassVar[dict[str, str]] = {COPY: "psql \\copy FROM a ready file, one table",
                                       BOTH: "\\copy into PostgreSQL and LOAD DATA into MySQL at once",
                                       PG_SCAN: "psql COPY src TO STDOUT > /dev/null",
                                       MYSQL_SCAN: "mysql --quick --batch SELECT * > /dev/null"}

    def __init__(self, bench: Bench, workdir: Path) -> None:
        self.bench = bench
        self.db = limit.LIMIT_DBS[0]
        self.schema = limit.PG_LIMIT_SCHEMA
        o, pg, cur = bench.opts, bench.pg, bench.cur
        pg.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
        pg.execute(f"DROP TABLE IF EXISTS {self.schema}.{TABLE}")
        pg.execute(PG_SCHEMA.format(schema=self.schema, table=TABLE))
        limit.create_limit_tables(cur, SRC_DB, TABLE, (self.db,))
        self.pg_file, self.my_file = workdir / f"{TABLE}.copy", workdir / f"{TABLE}.tsv"
        seconds = limit.dump_pg_file(o.pg, "src", TABLE, self.pg_file)
        seconds += limit.dump_mysql_file(o.mysql, cur, SRC_DB, TABLE, self.my_file)
        say(f"  the limit's ready files: {self.pg_file.stat().st_size / 2**20:.1f} MiB COPY text, "
            f"{self.my_file.stat().st_size / 2**20:.1f} MiB LOAD DATA text, written in {seconds:.1f} s (not timed)")
        self.runs: dict[str, list[Timed]] = {}

    def once(self, name: str, attempt: Callable[[], Timed], *, pg_dest: bool, mysql_dest: bool,
             round_no: int) -> None:
        b = self.bench
        if pg_dest:
            b.pg.execute(f"TRUNCATE {self.schema}.{TABLE}")
        if mysql_dest:
            b.cur.execute(f"TRUNCATE TABLE `{self.db}`.`{TABLE}`")
        run = attempt()
        copies = ([(f"{PG_DB} {self.schema}.{TABLE}", pg_check(b.pg, self.schema))] if pg_dest else []) + \
            ([(f"{self.db}.{TABLE}", mysql_check(b.cur, self.db))] if mysql_dest else [])
        for where, copy in copies:
            if copy != b.source:
                raise BenchmarkFailure(f"{name}: WRONG COPY in {where}: {copy.rows:,} rows, checksum "
                                       f"{copy.checksum}; the source has {b.source.rows:,}, {b.source.checksum}")
        say(f"  {name:<46} run {round_no + 1}/{b.opts.limit_rounds}: {run.seconds:7.2f} s, "
            f"CPU {run.cpu_s:.1f} s{', copy verified' if copies else ''}")
        self.runs.setdefault(name, []).append(run)

    def round(self, source: str, destinations: tuple[str, ...], round_no: int) -> None:
        o = self.bench.opts
        if "mysql" in destinations:
            self.once(self.BOTH, lambda: limit.run_pg_and_mysql_load(o.pg, self.pg_file, self.schema, o.mysql,
                                                                     self.my_file, self.db, TABLE).run,
                      pg_dest=True, mysql_dest=True, round_no=round_no)
        else:
            self.once(self.COPY, lambda: limit.run_pg_copy(o.pg, self.pg_file, self.schema, TABLE).run,
                      pg_dest=True, mysql_dest=False, round_no=round_no)
        if source == "postgres":
            self.once(self.PG_SCAN, lambda: limit.run_pg_scan(o.pg, "src", TABLE).run, pg_dest=False,
                      mysql_dest=False, round_no=round_no)
        elif "mysql" not in destinations:  # one MySQL scan per round is enough: (b) and (c) read the same
            self.once(self.MYSQL_SCAN, lambda: limit.run_mysql_scan(o.mysql, SRC_DB, TABLE).run, pg_dest=False,
                      mysql_dest=False, round_no=round_no)

    def figures(self) -> list[Figure]:
        out = []
        for name, runs in self.runs.items():
            best = limit.fastest(runs)
            out.append(Figure(name, self.bench.opts.rows, best.seconds, best.peak_rss_mib, cpu_s=best.cpu_s,
                              note=f"{self.NOTES[name]}; best of {len(runs)}"))
        return out


class Bench:
    def __init__(self, opts: Options, cur: Any, pg: psycopg.Connection[Any], mysql_source: Check) -> None:
        self.opts, self.cur, self.pg, self.source = opts, cur, pg, mysql_source

    def best(self, label: str, attempt: Callable[[], Timed], *, pg_dest: bool = True, mysql_dest: bool = False,
             stale_row: bool = False, round_no: str = "") -> Timed:
        """Best (fastest) of ``repeat`` runs, each from empty targets and each verified."""
        best: Timed | None = None
        for i in range(self.opts.repeat):
            reset_destinations(self.cur, self.pg, pg_dest=pg_dest, mysql_dest=mysql_dest, stale_row=stale_row)
            run = attempt()
            self.verify(label, pg_dest, mysql_dest)
            say(f"  {label:<46} run {i + 1}/{self.opts.repeat}{round_no}: {run.seconds:7.2f} s, "
                f"peak RSS {run.peak_rss_mib} MiB, CPU {run.cpu_s:.1f} s, copy verified")
            if best is None or run.seconds < best.seconds:
                best = run
        assert best is not None
        return best

    def verify(self, label: str, pg_dest: bool, mysql_dest: bool) -> None:
        copies = []
        if pg_dest:
            copies.append((f"{PG_DB} dst.{TABLE}", pg_check(self.pg, "dst")))
        if mysql_dest:
            copies.append((f"{MYSQL_DEST_DB}.{TABLE}", mysql_check(self.cur, MYSQL_DEST_DB)))
        for where, copy in copies:
            if copy != self.source:
                raise BenchmarkFailure(f"{label}: WRONG COPY in {where}: {copy.rows:,} rows, checksum "
                                       f"{copy.checksum}; the source has {self.source.rows:,}, {self.source.checksum}")

    def wormhole(self, ws: Workspace, name: str, source: str, destinations: tuple[str, ...],
                 limit: PgLimit | None = None) -> Figure:
        """wormhole over each channel count; the fastest is the figure, the others in its note. With the
        limit, in rounds: the limit's runs for this scenario, then wormhole's (every channel count in the
        first round, the fastest after), so both are measured in the same minutes."""
        per_channel: dict[int, Timed] = {}
        rounds = self.opts.limit_rounds if limit is not None else 1
        for r in range(rounds):
            if limit is not None:
                limit.round(source, destinations, r)
            fastest_ch = min(per_channel, key=lambda c: per_channel[c].seconds) if per_channel else None
            for ch in round_channels(r, self.opts.channels, fastest_ch):
                run = self.best(f"{name} ch{ch} w{self.opts.writers}",
                                lambda c=ch: run_wormhole(ws, self.opts, source, destinations, c),
                                mysql_dest="mysql" in destinations, stale_row=True,
                                round_no=f" (round {r + 1}/{rounds})" if rounds > 1 else "")
                if ch not in per_channel or run.seconds < per_channel[ch].seconds:
                    per_channel[ch] = run
        tried = [Figure(name, self.opts.rows, run.seconds, run.peak_rss_mib, ch, self.opts.writers, cpu_s=run.cpu_s)
                 for ch, run in per_channel.items()]
        winner = min(tried, key=lambda f: f.seconds)
        if len(tried) > 1:
            winner.note = "best of channels " + ", ".join(f"{f.channels}: {f.rows_per_s:,} rows/s" for f in tried)
        return winner

    def run(self, workdir: Path) -> list[Figure]:
        o, rows = self.opts, self.opts.rows
        figures = []
        run = self.best("(a) psql COPY | psql COPY", lambda: run_psql_copy(o))
        figures.append(Figure("(a) psql COPY | psql COPY", rows, run.seconds, run.peak_rss_mib, cpu_s=run.cpu_s))
        run = self.best("(b) pgloader", lambda: run_pgloader(o, workdir))
        figures.append(Figure("(b) pgloader", rows, run.seconds, run.peak_rss_mib, cpu_s=run.cpu_s))
        pipe = self.best("(b) mysql --batch | psql COPY", lambda: run_c_pipe(o))
        figures.append(Figure("(b) mysql --batch | psql COPY", rows, pipe.seconds, pipe.peak_rss_mib,
                              cpu_s=pipe.cpu_s))
        dump = self.best("(c) mysqldump | mysql", lambda: run_mysqldump(o), pg_dest=False, mysql_dest=True)
        figures.append(Figure("(c) mysqldump | mysql", rows, dump.seconds, dump.peak_rss_mib, cpu_s=dump.cpu_s))
        figures.append(Figure("(c) C tools, one after the other", rows, dump.seconds + pipe.seconds,
                              max(dump.peak_rss_mib, pipe.peak_rss_mib), cpu_s=dump.cpu_s + pipe.cpu_s,
                              note="mysqldump | mysql, then mysql --batch | psql COPY"))
        limit = PgLimit(self, workdir) if o.limit else None
        if not o.wormhole:
            if limit is not None:
                for source, dests in (("postgres", ("postgres",)), ("mysql", ("postgres",)),
                                      ("mysql", ("postgres", "mysql"))):
                    for r in range(o.limit_rounds):
                        limit.round(source, dests, r)
                figures += limit.figures()
            return figures
        (workdir / "ws").mkdir()
        ws = Workspace(workdir / "ws")  # kept when a run fails, to inspect the task and its result
        ours = [self.wormhole(ws, "(a) wormhole postgres -> postgres", "postgres", ("postgres",), limit),
                self.wormhole(ws, "(b) wormhole mysql -> postgres", "mysql", ("postgres",), limit),
                self.wormhole(ws, "(c) wormhole mysql -> postgres + mysql", "mysql", ("postgres", "mysql"), limit)]
        return figures + (limit.figures() if limit is not None else []) + ours


TARGETS = (
    ("(a) wormhole / psql COPY | psql COPY", "(a) wormhole postgres -> postgres", "(a) psql COPY | psql COPY", 1.0),
    ("(b) wormhole / pgloader", "(b) wormhole mysql -> postgres", "(b) pgloader", 1.5),
    ("(b) wormhole / mysql --batch | psql COPY", "(b) wormhole mysql -> postgres", "(b) mysql --batch | psql COPY",
     None),
    ("(c) wormhole x2 / C tools one after the other", "(c) wormhole mysql -> postgres + mysql",
     "(c) C tools, one after the other", None),
)


def report(figures: list[Figure], opts: Options) -> dict[str, Any]:
    by_name = {f.scenario: f for f in figures}
    say("")
    say(f"PostgreSQL scenarios: {opts.rows:,} rows, best of {opts.repeat}; rows/s = source rows / wall time")
    say(f"{'scenario':<42} {'seconds':>8} {'rows/s':>10} {'peak RSS MiB':>13} {'CPU s':>6}  {'ch':>2} {'w':>2}  note")
    for f in figures:
        cpu = "-" if f.cpu_s is None else f"{f.cpu_s:.1f}"
        say(f"{f.scenario:<42} {f.seconds:>8.2f} {f.rows_per_s:>10,} {f.peak_rss_mib or '-':>13} {cpu:>6}  "
            f"{f.channels or '':>2} {f.writers or '':>2}  {f.note}")
    limits = limit_report(by_name, opts)
    targets = []
    if any(ours in by_name for _, ours, _, _ in TARGETS):
        say("")
        say(f"{'target':<48} {'ratio':>6} {'goal':>7}")
        for label, ours, theirs, goal in TARGETS:
            if ours not in by_name or theirs not in by_name:
                continue
            ratio = by_name[theirs].seconds / by_name[ours].seconds  # same source rows: a ratio of rows/s
            status = "-" if goal is None else "PASS" if ratio >= goal else "MISS"
            targets.append({"target": label, "ratio": round(ratio, 3), "goal": goal, "status": status})
            say(f"{label:<48} {ratio:>6.2f} {'-' if goal is None else '>= ' + str(goal):>7}  {status}")
    return {"part": "postgres", "scenario": "targets", "targets": targets, "limits": limits}


LIMITS = (
    ("(a) wormhole postgres -> postgres", PgLimit.COPY, "the one-table COPY FROM file limit"),
    ("(a) psql COPY | psql COPY", PgLimit.COPY, "the one-table COPY FROM file limit"),
    ("(b) wormhole mysql -> postgres", PgLimit.COPY, "the one-table COPY FROM file limit"),
    ("(b) pgloader", PgLimit.COPY, "the one-table COPY FROM file limit"),
    ("(b) mysql --batch | psql COPY", PgLimit.COPY, "the one-table COPY FROM file limit"),
    ("(c) wormhole mysql -> postgres + mysql", PgLimit.BOTH, "the COPY || LOAD DATA limit"),
    ("(c) C tools, one after the other", PgLimit.BOTH, "the COPY || LOAD DATA limit"),
)


def limit_report(by_name: dict[str, Figure], opts: Options) -> list[dict[str, Any]]:
    """Print each copy's time as a multiple of the servers' own limit; return them for latest.json."""
    found = [(ours, by_name[ours], label, by_name[lim]) for ours, lim, label in LIMITS
             if ours in by_name and lim in by_name]
    if not found:
        return []
    say("")
    say(f"against the servers' own limit (best of {opts.limit_rounds}, interleaved with wormhole in the same "
        "minutes, every copy verified):")
    out = []
    for ours, figure, label, lim in found:
        say(f"  {limit.limit_line(ours, figure.seconds, label, lim.seconds)}")
        out.append({"copy": ours, "limit": lim.scenario,
                    "times_limit": round(limit.times_limit(figure.seconds, lim.seconds), 3)})
    for scan, ours in ((PgLimit.PG_SCAN, "(a) wormhole postgres -> postgres"),
                       (PgLimit.MYSQL_SCAN, "(b) wormhole mysql -> postgres")):
        if scan in by_name and ours in by_name:
            say(f"  the {scan} alone ({by_name[scan].seconds:.2f} s) is "
                f"{by_name[scan].seconds / by_name[ours].seconds:.0%} of {ours}'s time")
    return out


def ensure_pgloader() -> None:
    if shutil.which("pgloader") is None:
        subprocess.run([str(REPO / "scripts" / "install-pgloader.sh")], check=True)


def run_all(opts: Options) -> list[dict[str, Any]]:
    """Run the PostgreSQL comparison; return its figures as latest.json entries. Raises BenchmarkFailure."""
    ensure_pgloader()
    if opts.wormhole:
        listed = subprocess.run([*wormhole_command(), "plugins"], capture_output=True, text=True).stdout
        if not any(line.split()[:1] == ["postgres"] for line in listed.splitlines()):
            raise BenchmarkFailure("the postgres plugin is not registered (`wormhole plugins` does not list it)")
    workdir = Path(tempfile.mkdtemp(prefix="whb-pg-"))
    admin = opts.mysql.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            say(f"preparing MySQL {SRC_DB}.{TABLE} and PostgreSQL {PG_DB} ({opts.rows:,} rows)")
            ensure_source(cur, TABLE, opts.rows, schema=MYSQL_SCHEMA, fill=MYSQL_FILL, recipe=RECIPE)
            source = mysql_check(cur, SRC_DB)
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{MYSQL_DEST_DB}` CHARACTER SET utf8mb4")
            cur.execute(f"DROP TABLE IF EXISTS `{MYSQL_DEST_DB}`.`{TABLE}`")
            cur.execute(f"CREATE TABLE `{MYSQL_DEST_DB}`.`{TABLE}` LIKE `{SRC_DB}`.`{TABLE}`")
            prepare_pg(opts)
            with opts.pg.connect(PG_DB) as pg:
                ensure_pg_source(opts, pg, source)
                pg.execute(f"DROP TABLE IF EXISTS dst.{TABLE}")
                pg.execute(PG_SCHEMA.format(schema="dst", table=TABLE))
                try:
                    figures = Bench(opts, cur, pg, source).run(workdir)
                finally:
                    if not opts.keep:
                        pg.execute(f"DROP TABLE IF EXISTS dst.{TABLE}")
                        cur.execute(f"DROP DATABASE IF EXISTS `{MYSQL_DEST_DB}`")
                        pg.execute(f"DROP SCHEMA IF EXISTS {limit.PG_LIMIT_SCHEMA} CASCADE")
                        limit.drop_limit_dbs(cur)
    finally:
        admin.close()
    shutil.rmtree(workdir, ignore_errors=True)
    targets = report(figures, opts)
    return [f.as_json() for f in figures] + [targets]


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The PostgreSQL part's options; benchmarks.run adds them with a ``pg-`` prefix where names clash."""
    group = parser.add_argument_group("PostgreSQL scenarios")
    group.add_argument(f"--{prefix}rows", type=int, default=None, help="rows of the data set (default 1M)")
    group.add_argument(f"--{prefix}channels", type=int, nargs="+", default=[1, 2],
                       help="source settings.speed.channel values to try; the fastest is reported (default 1 2)")
    group.add_argument(f"--{prefix}writers", type=int, default=2,
                       help="concurrency of each destination (default 2: the machine's cores)")
    group.add_argument("--pg-host", default="127.0.0.1")
    group.add_argument("--pg-port", type=int, default=5432)
    group.add_argument("--pg-user", default="postgres")


def options_from(args: argparse.Namespace, prefix: str, rows: int | None, repeat: int, mysql: Server,
                 wormhole: bool, keep: bool, limits: dict[str, Any] | None = None) -> Options:
    def get(name: str) -> Any:
        return getattr(args, f"{prefix}{name}")
    return Options(rows=rows or 1_000_000, repeat=repeat, channels=tuple(get("channels")), writers=get("writers"),
                   mysql=mysql, pg=PgServer(host=args.pg_host, port=args.pg_port, user=args.pg_user),
                   wormhole=wormhole, keep=keep, **(limits or {}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario; the fastest counts (default 1)")
    parser.add_argument("--no-wormhole", action="store_true", help="run the baselines only")
    parser.add_argument("--keep", action="store_true", help="keep the destination tables afterwards")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    limit.add_arguments(parser)
    args = parser.parse_args()
    opts = options_from(args, "", args.rows, args.repeat, Server.of(args), not args.no_wormhole, args.keep,
                        limit.option_fields(args))
    try:
        results = run_all(opts)
    except BenchmarkFailure as exc:
        raise SystemExit(f"POSTGRES BENCHMARK FAILED: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

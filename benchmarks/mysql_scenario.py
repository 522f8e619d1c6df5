"""MySQL scenarios: wormhole against ``mysqldump | mysql`` and a naive pymysql copy, on the local MariaDB.

Every contender runs as a child process of this one, one after another, on the same server and the
same data set (``whb_src.t``, built once with the sequence engine and reused while it keeps its row
count and checksum). Wall time and peak RSS come from ``os.wait4`` on the child. After every run each
destination is compared with the source by ``COUNT(*)`` and ``CHECKSUM TABLE``: a mismatch stops the
benchmark, since a fast wrong copy is not a result.

Run alone: ``.venv/bin/python -m benchmarks.mysql_scenario [--rows N] [--channels 0 2] [--writers 3]``
(from the repository root); ``make bench`` runs it after the stream scenarios through benchmarks.run.
The password, if the server needs one, is read from ``MYSQL_PWD`` like the mysql client tools do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pymysql
import pymysql.cursors

REPO = Path(__file__).resolve().parent.parent
SRC_DB = "whb_src"
DEST_DBS = ("whb_d1", "whb_d2", "whb_d3")
TABLE = "t"
SMALL_TABLE = "t_small"
META_TABLE = "whb_meta"
NAIVE_BATCH = 1000

SCHEMA = """
CREATE TABLE `{db}`.`{table}` (
  id BIGINT NOT NULL PRIMARY KEY,
  k INT NOT NULL,
  name VARCHAR(40),
  amount DECIMAL(12,2),
  score DOUBLE,
  created DATETIME(3),
  flag TINYINT,
  note VARCHAR(40)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""

# Deterministic, ~100 bytes a row. Quotes, backslashes, tabs, newlines and non-ASCII text are there on
# purpose: each copier has to escape them, and the checksum catches one that does not.
FILL = """
INSERT INTO `{db}`.`{table}`
SELECT seq,
       (seq * 7919) % 1000003,
       CONCAT(ELT(1 + seq % 6, 'Ann', 'Zoë', 'Bob', 'Jürgen', 'Li Wei', 'Ørsted'), ' ',
              ELT(1 + seq % 7, 'Smith', 'Müller', 'García', 'Nakamura', 'O''Brien', 'Kowalski', 'Dubois'),
              ' #', seq % 100003),
       IF(seq % 17 = 0, NULL, ((seq * 7127) % 100000000) / 100),
       IF(seq % 29 = 0, NULL, seq / 7e0 - 50000),
       TIMESTAMP'2020-01-01 00:00:00' + INTERVAL seq * 61 SECOND + INTERVAL (seq * 1237) % 1000 * 1000 MICROSECOND,
       CAST(seq % 256 AS SIGNED) - 128,
       CASE WHEN seq % 10 = 0 THEN NULL
            WHEN seq % 101 = 0 THEN CONCAT('tab\\there, back\\\\slash, new\\nline ', seq)
            WHEN seq % 11 = 0 THEN CONCAT('✓ ünïcode 日本 ', LEFT(SHA1(seq), 4 + seq % 17))
            ELSE LEFT(SHA1(seq), 8 + seq % 33) END
FROM `{db}`.seq_1_to_{rows}
"""
RECIPE = hashlib.sha1((SCHEMA + FILL).encode()).hexdigest()
"""Changes whenever the schema or the fill does, so a stale data set is rebuilt rather than reused."""


class BenchmarkFailure(Exception):
    """A run failed or produced a wrong copy: the benchmark has no result."""


@dataclass(frozen=True, slots=True)
class Server:
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default_factory=lambda: os.environ.get("MYSQL_PWD", ""))

    def connect(self, database: str | None = None, **kwargs: Any) -> pymysql.Connection:
        return pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                               database=database, charset="utf8mb4", **kwargs)

    @classmethod
    def arguments(cls, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        """``--host``, ``--port``, ``--user``: the server a benchmark script runs against."""
        defaults = {f.name: f.default for f in fields(cls)}  # slots: no class attributes to read them from
        parser.add_argument("--host", default=defaults["host"])
        parser.add_argument("--port", type=int, default=defaults["port"])
        parser.add_argument("--user", default=defaults["user"])

    @classmethod
    def of(cls, args: argparse.Namespace) -> Server:
        return cls(host=args.host, port=args.port, user=args.user)

    def client_args(self) -> list[str]:
        # The password travels in MYSQL_PWD (inherited), never on a command line.
        return [f"-h{self.host}", f"-P{self.port}", f"-u{self.user}"]

    def task_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user}
        if self.password:
            params["password_env"] = "MYSQL_PWD"
        return params


@dataclass(frozen=True, slots=True)
class Snapshot:
    rows: int
    checksum: int


@dataclass
class Figure:
    """One scenario: the best of its repeats."""

    scenario: str
    rows: int
    destinations: int
    seconds: float
    peak_rss_mib: float | None
    channels: int | None = None
    writers: int | None = None
    note: str = ""
    cpu_s: float | None = None
    """user + sys CPU seconds of the contender's processes."""
    server_cpu_s: float | None = None
    """CPU seconds of the local server over the run (other work on the machine included)."""

    @property
    def rows_per_s(self) -> int:
        return round(self.rows / self.seconds)

    def as_json(self) -> dict[str, Any]:
        return {"part": "mysql", "scenario": self.scenario, "rows": self.rows, "destinations": self.destinations,
                "seconds": round(self.seconds, 3), "rows_per_s": self.rows_per_s,
                "peak_rss_mib": self.peak_rss_mib, "channels": self.channels, "writers": self.writers,
                "note": self.note, "cpu_s": _round(self.cpu_s), "server_cpu_s": _round(self.server_cpu_s)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@dataclass(frozen=True, slots=True)
class Timed:
    seconds: float
    peak_rss_mib: float
    returncode: int
    stdout: str
    stderr: str
    cpu_s: float = 0.0
    """user + sys CPU seconds of the command and its waited-for children (wait4)."""


def timed(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> Timed:
    """Run ``cmd`` to its end; wall time and the peak RSS of it and its waited-for children (wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # Files, not pipes: nobody has to drain them while we block in wait4.
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        return Timed(seconds=seconds, peak_rss_mib=round(usage.ru_maxrss / 1024, 1), returncode=proc.returncode,
                     stdout=out.read().decode(errors="replace"), stderr=err.read().decode(errors="replace"),
                     cpu_s=usage.ru_utime + usage.ru_stime)


def say(text: str) -> None:
    print(text, flush=True)


# ---------------------------------------------------------------------------------------------
# Data set and destinations


def snapshot(cur: Any, db: str, table: str) -> Snapshot:
    cur.execute(f"SELECT COUNT(*) FROM `{db}`.`{table}`")
    rows = int(cur.fetchone()[0])
    cur.execute(f"CHECKSUM TABLE `{db}`.`{table}`")
    checksum = cur.fetchone()[1]
    if checksum is None:
        raise BenchmarkFailure(f"CHECKSUM TABLE {db}.{table} returned NULL (table missing?)")
    return Snapshot(rows=rows, checksum=int(checksum))


def ensure_source(cur: Any, table: str, rows: int, *, schema: str = SCHEMA, fill: str = FILL,
                  recipe: str = RECIPE) -> Snapshot:
    """``whb_src.<table>`` with ``rows`` rows, made by ``schema`` and ``fill`` (templates of ``db``, ``table``
    and ``rows``): reused when its recorded ``recipe``, count and checksum hold."""
    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{SRC_DB}` CHARACTER SET utf8mb4")
    cur.execute(f"CREATE TABLE IF NOT EXISTS `{SRC_DB}`.`{META_TABLE}` (tbl VARCHAR(64) PRIMARY KEY, "
                "row_count BIGINT NOT NULL, recipe CHAR(40) NOT NULL, checksum BIGINT UNSIGNED NOT NULL)")
    cur.execute(f"SELECT row_count, recipe, checksum FROM `{SRC_DB}`.`{META_TABLE}` WHERE tbl = %s", (table,))
    recorded = cur.fetchone()
    cur.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                (SRC_DB, table))
    exists = cur.fetchone()[0] == 1
    if exists and recorded is not None and recorded[0] == rows and recorded[1] == recipe:
        current = snapshot(cur, SRC_DB, table)
        if current == Snapshot(rows=rows, checksum=int(recorded[2])):
            say(f"  reusing {SRC_DB}.{table}: {rows:,} rows, checksum {current.checksum}")
            return current
        say(f"  {SRC_DB}.{table} changed since it was built ({current}); rebuilding")
    start = time.perf_counter()
    cur.execute(f"DROP TABLE IF EXISTS `{SRC_DB}`.`{table}`")
    cur.execute(schema.format(db=SRC_DB, table=table))
    cur.execute(fill.format(db=SRC_DB, table=table, rows=rows))
    built = snapshot(cur, SRC_DB, table)
    if built.rows != rows:
        raise BenchmarkFailure(f"building {SRC_DB}.{table}: {built.rows:,} rows instead of {rows:,}")
    cur.execute(f"REPLACE INTO `{SRC_DB}`.`{META_TABLE}` VALUES (%s, %s, %s, %s)",
                (table, rows, recipe, built.checksum))
    say(f"  built {SRC_DB}.{table}: {rows:,} rows in {time.perf_counter() - start:.1f} s, "
        f"checksum {built.checksum}")
    return built


def table_mib(cur: Any, db: str, table: str) -> float:
    cur.execute("SELECT data_length + index_length FROM information_schema.tables "
                "WHERE table_schema = %s AND table_name = %s", (db, table))
    return round(int(cur.fetchone()[0]) / 2**20, 1)


def create_destinations(cur: Any, tables: tuple[str, ...], dbs: tuple[str, ...] = DEST_DBS) -> None:
    for db in dbs:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
        for table in tables:
            cur.execute(f"DROP TABLE IF EXISTS `{db}`.`{table}`")
            cur.execute(f"CREATE TABLE `{db}`.`{table}` LIKE `{SRC_DB}`.`{table}`")


def empty_destinations(cur: Any, table: str, dbs: tuple[str, ...], stale_row: bool = False) -> None:
    """Every contender starts from empty targets. ``stale_row`` leaves one row that ``load: truncate``
    must remove, so the checksum also proves the truncate happened."""
    for db in dbs:
        cur.execute(f"TRUNCATE TABLE `{db}`.`{table}`")
        if stale_row:
            cur.execute(f"INSERT INTO `{db}`.`{table}` (id, k, name) VALUES (-1, 0, 'stale row')")


def verify(cur: Any, label: str, table: str, dbs: tuple[str, ...], source: Snapshot) -> None:
    for db in dbs:
        copy = snapshot(cur, db, table)
        if copy != source:
            raise BenchmarkFailure(
                f"{label}: WRONG COPY in {db}.{table}: {copy.rows:,} rows, checksum {copy.checksum}; "
                f"{SRC_DB}.{table} has {source.rows:,} rows, checksum {source.checksum}")


def drop_destinations(cur: Any) -> None:
    for db in DEST_DBS:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")


# ---------------------------------------------------------------------------------------------
# Contenders


def naive_copy(server: Server, src_db: str, dst_db: str, table: str) -> int:
    """The naive baseline as a user would write it: stream, fetchmany(1000), executemany, commit per batch."""
    src = server.connect(src_db, cursorclass=pymysql.cursors.SSCursor)
    dst = server.connect(dst_db, autocommit=False)
    copied = 0
    try:
        with src.cursor() as reader, dst.cursor() as writer:
            reader.execute(f"SELECT * FROM `{table}`")
            insert = f"INSERT INTO `{table}` VALUES ({', '.join(['%s'] * len(reader.description))})"
            while batch := reader.fetchmany(NAIVE_BATCH):
                writer.executemany(insert, batch)
                dst.commit()
                copied += len(batch)
    finally:
        src.close()
        dst.close()
    return copied


def check_exit(label: str, cmd: list[str], run: Timed) -> None:
    if run.returncode != 0:
        tail = "\n".join(run.stderr.strip().splitlines()[-15:])
        raise BenchmarkFailure(f"{label}: `{shlex.join(cmd)}` exited {run.returncode}\n{tail}")


def run_dump(server: Server, table: str) -> Timed:
    dump = ["mysqldump", "--quick", "--no-create-info", *server.client_args(), SRC_DB, table]
    load = ["mysql", *server.client_args(), DEST_DBS[0]]
    # pipefail: a failing mysqldump must fail the run, not look like a fast empty load.
    cmd = ["bash", "-c", f"set -o pipefail; {shlex.join(dump)} | {shlex.join(load)}"]
    run = timed(cmd)
    check_exit("mysqldump | mysql", cmd, run)
    return run


def run_naive(server: Server, table: str, dst_db: str) -> Timed:
    cmd = [sys.executable, "-m", "benchmarks.mysql_scenario", "--host", server.host, "--port", str(server.port),
           "--user", server.user, "--naive-copy", SRC_DB, dst_db, table]
    run = timed(cmd, cwd=REPO)
    check_exit(f"naive pymysql copy into {dst_db}", cmd, run)
    return run


def wormhole_command() -> list[str]:
    compile_wormhole()
    script = Path(sys.executable).parent / "wormhole"
    return [str(script)] if script.exists() else [sys.executable, "-m", "wormhole"]


_compiled: set[str] = set()
"""The ``PYTHONPATH`` values whose wormhole package was compiled."""


def compile_wormhole() -> None:
    """Compile the bytecode of the wormhole package the timed processes import (once per package and process),
    as pip does when it installs one: an editable checkout has none, and under ``PYTHONDONTWRITEBYTECODE`` every
    run would compile its ~600 modules again (0.5 s of a run, which mysqldump does not pay). ``make bench``
    compiles the checkout too; this covers ``python -m benchmarks.run`` and a ``PYTHONPATH`` tree."""
    key = os.environ.get("PYTHONPATH", "")
    if key in _compiled:
        return
    _compiled.add(key)
    where = subprocess.run([sys.executable, "-c", "import os, wormhole; print(os.path.dirname(wormhole.__file__))"],
                           capture_output=True, text=True, cwd=tempfile.gettempdir()).stdout.strip()
    if not where:
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], env=env, capture_output=True)


class Workspace:
    """A scratch directory with its own SQLite task database, where the real CLI runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db_path = root / "var" / "wormhole.db"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
        self.env.update(WORMHOLE_TASK_DB="sqlite:///var/wormhole.db", WORMHOLE_CONF=str(REPO / "conf"),
                        WORMHOLE_LOG_FORMAT="json")
        init = subprocess.run([*wormhole_command(), "db", "init"], cwd=root, env=self.env, capture_output=True,
                              text=True)
        if init.returncode != 0:
            raise BenchmarkFailure(f"wormhole db init exited {init.returncode}: {init.stderr.strip()}")

    def submit(self, spec: dict[str, Any]) -> int:
        # A plain INSERT, the way an upstream system creates a task.
        conn = sqlite3.connect(self.db_path)
        with conn:
            cur = conn.execute("INSERT INTO wormhole_task (name, spec) VALUES (?, ?)",
                               (spec["name"], json.dumps(spec)))
        conn.close()
        assert cur.lastrowid is not None
        return cur.lastrowid

    def run(self, spec: dict[str, Any], label: str, env: dict[str, str] | None = None) -> tuple[Timed, dict[str, Any]]:
        """Submit ``spec``, run it with the real CLI, and return the run's timing and its result row;
        BenchmarkFailure (the workspace kept, the log's tail) when it fails or records no result."""
        task_id = self.submit(spec)
        run = timed([*wormhole_command(), "--task-id", str(task_id)], cwd=self.root, env=env or self.env)
        conn = sqlite3.connect(self.db_path)
        try:
            row = conn.execute("SELECT result FROM wormhole_task WHERE id = ?", (task_id,)).fetchone()
        finally:
            conn.close()
        if run.returncode != 0 or row is None or row[0] is None:
            raise BenchmarkFailure(f"{label}: wormhole exited {run.returncode} (workspace {self.root} kept; "
                                   f"`wormhole task show {task_id}` there has the result)\n"
                                   + "\n".join(run.stderr.strip().splitlines()[-10:]))
        return run, json.loads(row[0])



DEFAULT_CHANNEL = 0
"""A ``--channels`` value: the task sets no ``settings.speed``, so the engine's default (``reader.channels``)
reads: the "default task settings" issue 40's goals are stated for."""


def channel_name(channels: int) -> str:
    return "default" if channels == DEFAULT_CHANNEL else f"ch{channels}"


def wormhole_spec(server: Server, table: str, destinations: int, channels: int, writers: int) -> dict[str, Any]:
    source = {**server.task_params(), "database": SRC_DB, "table": table, "split_pk": "id"}
    return {
        "name": f"bench {table} x{destinations} {channel_name(channels)} w{writers}",
        "source": {"plugin": "mysql", "params": source},
        "destinations": [{"id": db, "plugin": "mysql", "concurrency": writers,
                          "params": {**server.task_params(), "database": db, "table": table, "load": "truncate"}}
                         for db in DEST_DBS[:destinations]],
        "settings": {} if channels == DEFAULT_CHANNEL else {"speed": {"channel": channels}},
    }


def run_wormhole(ws: Workspace, server: Server, table: str, destinations: int, channels: int,
                 writers: int) -> Timed:
    task_id = ws.submit(wormhole_spec(server, table, destinations, channels, writers))
    cmd = [*wormhole_command(), "--task-id", str(task_id)]
    run = timed(cmd, cwd=ws.root, env=ws.env)
    if run.returncode != 0:
        env = " ".join(f"{k}={ws.env[k]}" for k in ("WORMHOLE_TASK_DB", "WORMHOLE_CONF"))
        raise BenchmarkFailure(f"wormhole x{destinations} ({table}, channel {channels}, writers {writers}): "
                               f"`cd {ws.root} && {env} {shlex.join(cmd)}` exited {run.returncode} "
                               f"(workspace kept; `wormhole task show {task_id}` there has the result)\n"
                               + "\n".join(run.stderr.strip().splitlines()[-15:]))
    return run


# ---------------------------------------------------------------------------------------------
# The whole comparison


@dataclass(frozen=True, slots=True)
class Options:
    rows: int = 1_000_000
    repeat: int = 1
    channels: tuple[int, ...] = (DEFAULT_CHANNEL, 2)
    writers: int = 3
    server: Server = field(default_factory=Server)
    wormhole: bool = True
    naive: bool = True
    keep: bool = False
    limit: bool = True
    """Also measure the server's own limit (benchmarks/limit.py): LOAD DATA of a ready file, the scan alone."""
    limit_rounds: int = 2
    """Rounds of limit and wormhole runs, interleaved (with ``limit``)."""
    mydumper: bool = True


class Bench:
    def __init__(self, opts: Options, cur: Any) -> None:
        self.opts = opts
        self.cur = cur
        self.sources: dict[str, Snapshot] = {}
        self.server_cpu: dict[int, float] = {}
        """The server's CPU seconds over each run, by ``id`` of its Timed."""

    def once(self, label: str, table: str, dbs: tuple[str, ...], attempt: Any, *, stale_row: bool = False,
             run_no: str = "") -> Timed:
        """One run from empty targets, verified, with the server's CPU time over it."""
        from benchmarks.limit import MYSQL_SERVER, with_server_cpu

        empty_destinations(self.cur, table, dbs, stale_row=stale_row)
        measured = with_server_cpu(MYSQL_SERVER, attempt)
        run = measured.run
        self.server_cpu[id(run)] = measured.server_cpu_s
        verify(self.cur, label, table, dbs, self.sources[table])
        say(f"  {label:<34} run {run_no}: {run.seconds:7.2f} s, peak RSS {run.peak_rss_mib} MiB, "
            f"CPU {run.cpu_s:.1f} s, server CPU {measured.server_cpu_s:.1f} s, copy verified")
        return run

    def best(self, label: str, table: str, dbs: tuple[str, ...], attempt: Any, *, stale_row: bool = False,
             round_no: str = "") -> Timed:
        """Best (fastest) of ``repeat`` runs, each from empty targets and each verified."""
        best: Timed | None = None
        for i in range(self.opts.repeat):
            run = self.once(label, table, dbs, attempt, stale_row=stale_row,
                            run_no=f"{i + 1}/{self.opts.repeat}{round_no}")
            if best is None or run.seconds < best.seconds:
                best = run
        assert best is not None
        return best

    def figure(self, scenario: str, rows: int, destinations: int, run: Timed, **more: Any) -> Figure:
        return Figure(scenario, rows, destinations, run.seconds, run.peak_rss_mib, cpu_s=run.cpu_s,
                      server_cpu_s=self.server_cpu.get(id(run)), **more)

    def naive_x3(self) -> Timed:
        runs = []
        for db in DEST_DBS:
            runs.append(run_naive(self.opts.server, TABLE, db))
            verify(self.cur, f"naive pymysql into {db}", TABLE, (db,), self.sources[TABLE])
        return Timed(seconds=sum(r.seconds for r in runs), peak_rss_mib=max(r.peak_rss_mib for r in runs),
                     returncode=0, stdout="", stderr="", cpu_s=sum(r.cpu_s for r in runs))

    def run(self) -> list[Figure]:
        from benchmarks.limit import round_channels

        o = self.opts
        small_rows = max(1, o.rows // 4)
        if o.wormhole:
            # Before the baselines: they take minutes, and the comparison is worthless without wormhole.
            listed = subprocess.run([*wormhole_command(), "plugins"], capture_output=True, text=True).stdout
            if not any(line.split()[:1] == ["mysql"] for line in listed.splitlines()):
                raise BenchmarkFailure("the mysql plugin is not registered (`wormhole plugins` does not list it)")
        say(f"preparing {SRC_DB} on {o.server.host}:{o.server.port}")
        self.sources[TABLE] = ensure_source(self.cur, TABLE, o.rows)
        tables: tuple[str, ...] = (TABLE,)
        if o.wormhole:
            self.sources[SMALL_TABLE] = ensure_source(self.cur, SMALL_TABLE, small_rows)
            tables = (TABLE, SMALL_TABLE)
        create_destinations(self.cur, tables)
        figures: list[Figure] = []
        one, three = DEST_DBS[:1], DEST_DBS
        # Kept when a run fails, so the task DB, its result (and the limit's file) can be inspected.
        workdir = Path(tempfile.mkdtemp(prefix="whb-"))
        limit = Limit(self, workdir) if o.limit else None

        run = self.best("mysqldump | mysql x1", TABLE, one, lambda: run_dump(o.server, TABLE))
        figures.append(self.figure("mysqldump | mysql x1", o.rows, 1, run))
        if limit is not None and o.mydumper and limit.has_mydumper():
            run = self.best("mydumper | myloader x1", TABLE, limit.dbs[:1], limit.mydumper)
            figures.append(self.figure("mydumper | myloader x1", o.rows, 1, run,
                                       note="2 threads each, one after the other"))
        if o.naive:
            run = self.best("naive pymysql x1", TABLE, one, lambda: run_naive(o.server, TABLE, one[0]))
            figures.append(self.figure("naive pymysql x1", o.rows, 1, run))
            run = self.best("naive pymysql x3 (3 runs)", TABLE, three, self.naive_x3)
            figures.append(self.figure("naive pymysql x3 (3 runs)", o.rows, 3, run, note="sum of 3 sequential runs"))
        if not o.wormhole:
            if limit is not None:
                for dests in (1, 3):
                    for r in range(o.limit_rounds):
                        limit.round(dests, r)
                figures += limit.figures()
            shutil.rmtree(workdir)
            return figures

        ws = Workspace(workdir)
        baselines = len(figures)
        best_channel: dict[int, int] = {}
        # With the limit, rounds interleave it with wormhole (limit, then wormhole; again), so both are
        # measured in the same minutes; wormhole runs every channel count in the first round, the fastest after.
        rounds = o.limit_rounds if limit is not None else 1
        for dests in (1, 3):
            per_channel: dict[int, Timed] = {}
            for r in range(rounds):
                if limit is not None:
                    limit.round(dests, r)
                fastest_ch = min(per_channel, key=lambda c: per_channel[c].seconds) if per_channel else None
                for ch in round_channels(r, o.channels, fastest_ch, always=DEFAULT_CHANNEL):
                    label = f"wormhole x{dests} {channel_name(ch)} w{o.writers}"
                    run = self.best(label, TABLE, DEST_DBS[:dests], stale_row=True,
                                    round_no=f" (round {r + 1}/{rounds})" if rounds > 1 else "",
                                    attempt=lambda d=dests, c=ch: run_wormhole(ws, o.server, TABLE, d, c, o.writers))
                    if ch not in per_channel or run.seconds < per_channel[ch].seconds:
                        per_channel[ch] = run
            tried = [self.figure(f"wormhole x{dests}", o.rows, dests, run, channels=ch, writers=o.writers)
                     for ch, run in per_channel.items()]
            winner = min(tried, key=lambda f: f.seconds)
            if len(tried) > 1:
                winner.note = "best of channels " + ", ".join(
                    f"{channel_name(f.channels or 0)}: {f.rows_per_s:,} rows/s" for f in tried)
            best_channel[dests] = winner.channels if winner.channels is not None else 1
            figures.append(winner)
            if DEFAULT_CHANNEL in per_channel:  # the goals' figure, whether or not it is the fastest
                figures.append(self.figure(f"wormhole x{dests} (default settings)", o.rows, dests,
                                           per_channel[DEFAULT_CHANNEL], writers=o.writers,
                                           note="no settings.speed: the engine's default channels"))
        ch = best_channel[1]
        run = self.best(f"wormhole x1 {SMALL_TABLE} {channel_name(ch)}", SMALL_TABLE, one, stale_row=True,
                        attempt=lambda: run_wormhole(ws, o.server, SMALL_TABLE, 1, ch, o.writers))
        figures.append(self.figure(f"wormhole x1 ({SMALL_TABLE}, rows/4)", small_rows, 1, run, channels=ch,
                                   writers=o.writers))
        if limit is not None:
            figures[baselines:baselines] = limit.figures()
        shutil.rmtree(workdir)
        return figures


class Limit:
    """The server's own limit (benchmarks/limit.py) for the bench table: a ready LOAD DATA file (written
    once, outside the timing) loaded into 1 and 3 fresh tables at once, and the source scan alone."""

    def __init__(self, bench: Bench, workdir: Path) -> None:
        from benchmarks import limit

        self.bench, self.lim = bench, limit
        self.dbs = limit.LIMIT_DBS
        self.file = workdir / f"{TABLE}.tsv"
        self.runs: dict[str, list[Timed]] = {}
        self._mydumper: bool | None = None
        limit.create_limit_tables(bench.cur, SRC_DB, TABLE, self.dbs)
        seconds = limit.dump_mysql_file(bench.opts.server, bench.cur, SRC_DB, TABLE, self.file)
        say(f"  the limit's ready file: {self.file.stat().st_size / 2**20:.1f} MiB in LOAD DATA text form, "
            f"written in {seconds:.1f} s (not timed)")

    def round(self, dests: int, round_no: int) -> None:
        b, o = self.bench, self.bench.opts
        name = f"LOAD DATA limit x{dests}"
        dbs = self.dbs[:dests]
        run = b.once(name, TABLE, dbs, lambda: self.lim.run_load_data(o.server, self.file, TABLE, dbs).run,
                     run_no=f"{round_no + 1}/{o.limit_rounds}")
        self.runs.setdefault(name, []).append(run)
        if dests == 1:
            scan = self.lim.with_server_cpu(self.lim.MYSQL_SERVER,
                                            lambda: self.lim.run_mysql_scan(o.server, SRC_DB, TABLE).run)
            b.server_cpu[id(scan.run)] = scan.server_cpu_s
            say(f"  {'source scan to /dev/null':<34} run {round_no + 1}/{o.limit_rounds}: {scan.run.seconds:7.2f} s, "
                f"CPU {scan.run.cpu_s:.1f} s, server CPU {scan.server_cpu_s:.1f} s")
            self.runs.setdefault("source scan to /dev/null", []).append(scan.run)

    def has_mydumper(self) -> bool:
        if self._mydumper is None:
            self._mydumper = self.lim.ensure_mydumper()
        return self._mydumper

    def mydumper(self) -> Timed:
        workdir = self.file.parent
        return self.lim.run_mydumper(self.bench.opts.server, SRC_DB, TABLE, self.dbs[0], workdir).run

    def figures(self) -> list[Figure]:
        out = []
        notes = {"LOAD DATA limit x1": "LOAD DATA LOCAL INFILE of a ready file, one table",
                 "LOAD DATA limit x3": "3 LOAD DATA LOCAL INFILE at once, 3 tables",
                 "source scan to /dev/null": "mysql --quick --batch SELECT * > /dev/null"}
        for name, runs in self.runs.items():
            best = self.lim.fastest(runs)
            dests = 3 if name.endswith("x3") else 1 if "LOAD" in name else 0
            out.append(self.bench.figure(name, self.bench.opts.rows, dests, best,
                                         note=f"{notes[name]}; best of {len(runs)}"))
        return out


TARGETS = (
    ("wormhole x1 / mysqldump | mysql", "wormhole x1", "mysqldump | mysql x1", 1.5),
    ("wormhole x3 / one mysqldump | mysql", "wormhole x3", "mysqldump | mysql x1", 1.0),
    ("wormhole x1 / naive pymysql x1", "wormhole x1", "naive pymysql x1", 2.5),
    ("wormhole x3 / naive pymysql run 3 times", "wormhole x3", "naive pymysql x3 (3 runs)", 4.0),
)


def report(figures: list[Figure], opts: Options, source_mib: float) -> dict[str, Any]:
    """Print the figure table and the targets; return the targets for latest.json."""
    by_name = {f.scenario: f for f in figures}
    say("")
    say(f"MySQL scenarios: {SRC_DB}.{TABLE} {opts.rows:,} rows ({source_mib} MiB on disk), best of {opts.repeat}; "
        "rows/s = source rows / wall time")
    say(f"{'scenario':<30} {'rows':>10} {'seconds':>8} {'rows/s':>10} {'peak RSS MiB':>13} {'CPU s':>6} "
        f"{'server CPU s':>12}  {'ch':>2} {'w':>2}  note")
    for f in figures:
        rss = "-" if f.peak_rss_mib is None else f"{f.peak_rss_mib}"
        cpu = "-" if f.cpu_s is None else f"{f.cpu_s:.1f}"
        server_cpu = "-" if f.server_cpu_s is None else f"{f.server_cpu_s:.1f}"
        say(f"{f.scenario:<30} {f.rows:>10,} {f.seconds:>8.2f} {f.rows_per_s:>10,} {rss:>13} {cpu:>6} "
            f"{server_cpu:>12}  {f.channels or '':>2} {f.writers or '':>2}  {f.note}")
    limits = limit_report(by_name, opts)
    targets = []
    if "wormhole x1" in by_name:
        say("")
        say(f"{'target':<42} {'ratio':>6} {'goal':>7}")
        for label, ours, theirs, goal in TARGETS:
            if theirs not in by_name:
                continue  # a baseline not run (--no-naive)
            ratio = by_name[theirs].seconds / by_name[ours].seconds  # same source rows: a ratio of rows/s
            status = "PASS" if ratio >= goal else "MISS"
            targets.append({"target": label, "ratio": round(ratio, 3), "goal": goal, "status": status})
            say(f"{label:<42} {ratio:>6.2f} {'>= ' + str(goal):>7}  {status}")
        big, small = by_name["wormhole x1"], by_name[f"wormhole x1 ({SMALL_TABLE}, rows/4)"]
        # Bounded by the queue settings, not the table: 4x the rows should leave the peak about where it was.
        growth = (big.peak_rss_mib or 0) / (small.peak_rss_mib or 1)
        verdict = "flat" if growth <= 1.2 else f"GROWS x{growth:.2f}"
        say(f"peak RSS of wormhole x1: {big.peak_rss_mib} MiB at {big.rows:,} rows, {small.peak_rss_mib} MiB at "
            f"{small.rows:,} rows ({verdict}); x3: {by_name['wormhole x3'].peak_rss_mib} MiB")
    return {"part": "mysql", "scenario": "targets", "targets": targets, "limits": limits}


LIMITS = (
    ("wormhole x1", "LOAD DATA limit x1", "the one-table LOAD DATA limit"),
    ("wormhole x3", "LOAD DATA limit x3", "the 3-parallel LOAD DATA limit"),
    ("wormhole x1 (default settings)", "LOAD DATA limit x1", "the one-table LOAD DATA limit"),
    ("wormhole x3 (default settings)", "LOAD DATA limit x3", "the 3-parallel LOAD DATA limit"),
    ("mysqldump | mysql x1", "LOAD DATA limit x1", "the one-table LOAD DATA limit"),
    ("mydumper | myloader x1", "LOAD DATA limit x1", "the one-table LOAD DATA limit"),
)


LIMIT_GOALS = {"wormhole x1 (default settings)": 1.3, "wormhole x3 (default settings)": 1.2}
"""Issue 40's goals: at most this multiple of the limit, with the task's default settings."""


def limit_report(by_name: dict[str, Figure], opts: Options) -> list[dict[str, Any]]:
    """Print each copy's time as a multiple of the server's own limit; return them for latest.json."""
    from benchmarks.limit import limit_line, times_limit

    limits = []
    lines = []
    for ours, theirs, label in LIMITS:
        if ours in by_name and theirs in by_name:
            a, b = by_name[ours], by_name[theirs]
            lines.append(limit_line(ours, a.seconds, label, b.seconds))
            ratio = times_limit(a.seconds, b.seconds)
            entry: dict[str, Any] = {"copy": ours, "limit": theirs, "times_limit": round(ratio, 3)}
            if (goal := LIMIT_GOALS.get(ours)) is not None:
                entry |= {"goal": goal, "status": "PASS" if ratio <= goal else "MISS"}
                lines[-1] += f"; goal at most {goal}x: {entry['status']}"
            limits.append(entry)
            if ours.startswith("wormhole") and None not in (a.cpu_s, a.server_cpu_s, b.cpu_s, b.server_cpu_s):
                # Steadier than wall time on a shared machine: what the copy cost both processes in all.
                ours_cpu, limit_cpu = (a.cpu_s or 0) + (a.server_cpu_s or 0), (b.cpu_s or 0) + (b.server_cpu_s or 0)
                lines.append(f"  CPU: {ours} {a.cpu_s:.1f} s + server {a.server_cpu_s:.1f} s = {ours_cpu:.1f} s; "
                             f"the limit {limit_cpu:.1f} s ({times_limit(ours_cpu, limit_cpu):.2f}x)")
    if scan := by_name.get("source scan to /dev/null"):
        for ours in ("wormhole x1", "wormhole x3"):
            if ours in by_name:
                lines.append(f"the source scan alone ({scan.seconds:.2f} s) is "
                             f"{scan.seconds / by_name[ours].seconds:.0%} of {ours}'s time")
    if lines:
        say("")
        say(f"against the server's own limit (best of {opts.limit_rounds}, interleaved with wormhole in the same "
            "minutes, every copy verified):")
        for line in lines:
            say(f"  {line}")
    return limits


def run_all(opts: Options) -> list[dict[str, Any]]:
    """Run the MySQL comparison; return its figures as latest.json entries. Raises BenchmarkFailure."""
    admin = opts.server.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT VERSION()")
            say(f"MariaDB {cur.fetchone()[0]}")
            try:
                figures = Bench(opts, cur).run()
                source_mib = table_mib(cur, SRC_DB, TABLE)
            finally:
                if not opts.keep:
                    drop_destinations(cur)
                    if opts.limit:
                        from benchmarks.limit import drop_limit_dbs

                        drop_limit_dbs(cur)
    finally:
        admin.close()
    targets = report(figures, opts, source_mib)
    return [f.as_json() for f in figures] + [targets]


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The MySQL part's options; benchmarks.run adds them with a ``mysql-`` prefix where names clash."""
    group = parser.add_argument_group("MySQL scenarios")
    group.add_argument(f"--{prefix}rows", type=int, default=1_000_000, help="rows of whb_src.t (default 1M)")
    group.add_argument("--channels", type=int, nargs="+", default=[DEFAULT_CHANNEL, 2],
                       help="source settings.speed.channel values to try, 0 for none set (the engine's default); the "
                            "fastest is reported, and the default's run on its own line (default 0 2)")
    group.add_argument("--writers", type=int, default=3,
                       help="concurrency of each mysql destination (default 3, the store's own default)")
    Server.arguments(group)
    group.add_argument("--no-wormhole", action="store_true", help="run the baselines only")
    group.add_argument("--no-naive", action="store_true", help="skip the naive pymysql baselines (about 3 minutes)")
    group.add_argument("--keep", action="store_true", help="keep the whb_d* databases afterwards")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario; the fastest counts (default 1)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--naive-copy", nargs=3, metavar=("SRC_DB", "DST_DB", "TABLE"), help=argparse.SUPPRESS)
    from benchmarks import limit

    limit.add_arguments(parser)
    args = parser.parse_args()
    server = Server.of(args)
    if args.naive_copy:
        naive_copy(server, *args.naive_copy)
        return
    opts = Options(rows=args.rows, repeat=args.repeat, channels=tuple(args.channels), writers=args.writers,
                   server=server, wormhole=not args.no_wormhole, naive=not args.no_naive, keep=args.keep,
                   **limit.option_fields(args))
    try:
        results = run_all(opts)
    except BenchmarkFailure as exc:
        raise SystemExit(f"MySQL BENCHMARK FAILED: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

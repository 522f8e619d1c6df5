"""The database's own limit, measured beside wormhole in the same process tree and minutes (issue 40).

What the server alone needs to take the rows, with no copier in between:

- MySQL: the source table dumped once (outside the timing) to a ready tab-separated file in ``LOAD DATA``'s
  own text form (the mysql client, ``--batch --raw`` over a SELECT that escapes text and writes NULL as
  ``\\N``), then ``LOAD DATA LOCAL INFILE`` of that file into one fresh table (the one-destination limit) and
  into N fresh tables at once, one mysql client each (the limit for N destinations read once);
- PostgreSQL: ``COPY src TO STDOUT`` once into a ready file, then psql's ``\\copy ... FROM 'file'`` (COPY FROM
  STDIN fed by the client) into one fresh table. ``\\copy`` rather than the server-side ``COPY ... FROM
  '/path'``: the rows travel the same way as wormhole's (through the client protocol), the file needs no
  server-side access, and it works against a remote server too;
- the source scan alone: ``mysql --quick --batch -e 'SELECT *' > /dev/null`` and ``psql -c 'COPY src TO
  STDOUT' > /dev/null`` (the rows cross the socket, as they do for wormhole's reader).

Every load is verified by its caller (count and checksum, like every other copy of the benchmarks). The
database names here (``whbs_lim_*``, the PostgreSQL schema ``whbs_lim``) are this module's own.

MariaDB's CPU time over a run is read from ``/proc/<pid>/stat`` of the local mariadbd/mysqld before and
after it: with the client's own CPU time (``wait4``) it says where the 2 cores went. Other work on the
same server also shows in that figure. PostgreSQL runs a process per connection, which ends with the run
and takes its CPU time with it, so the PostgreSQL part reports the client's CPU only.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.mysql_scenario import REPO, Server, Timed, check_exit, say, timed

LIMIT_DBS = ("whbs_lim_d1", "whbs_lim_d2", "whbs_lim_d3")
"""MySQL databases of the limit's fresh tables (never another benchmark's)."""
PG_LIMIT_SCHEMA = "whbs_lim"
"""PostgreSQL schema of the limit's fresh table, in the postgres part's database."""

TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary",
                        "tinyblob", "blob", "mediumblob", "longblob", "enum", "set", "json"})
"""Column types whose values may hold a tab, a newline or a backslash: LOAD DATA's escapes apply to them."""

# LOAD DATA's default text form: fields by tab, lines by newline, backslash escapes, NULL as \N.
_ESCAPE = ("REPLACE(REPLACE(REPLACE(REPLACE({c}, '\\\\', '\\\\\\\\'), '\\t', '\\\\t'), '\\n', '\\\\n'), "
           "'\\r', '\\\\r')")
_NULL = "'\\\\N'"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The limit's options, shared by the MySQL and PostgreSQL parts (declared once in benchmarks.run)."""
    group = parser.add_argument_group("the server's own limit (MySQL and PostgreSQL parts)")
    group.add_argument("--limit-rounds", type=positive, default=2,
                       help="rounds of limit and wormhole runs, interleaved; the best of each counts (default 2)")
    group.add_argument("--no-limit", action="store_true",
                       help="skip the LOAD DATA / COPY FROM limit, the source scan and mydumper")
    group.add_argument("--no-mydumper", action="store_true", help="skip mydumper | myloader")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1")
    return value


def option_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The parts' Options fields of these arguments (``limit``, ``limit_rounds``, ``mydumper``)."""
    return {"limit": not args.no_limit, "limit_rounds": args.limit_rounds, "mydumper": not args.no_mydumper}


# ---------------------------------------------------------------------------------------------
# Arithmetic and printing


def times_limit(seconds: float, limit_seconds: float) -> float:
    """wormhole's time as a multiple of the limit's: 1.0 is the limit, 1.3 is 30% slower than it."""
    if limit_seconds <= 0:
        raise ValueError(f"limit time {limit_seconds} s: not a measured limit")
    return seconds / limit_seconds


def limit_line(ours: str, seconds: float, limit: str, limit_seconds: float) -> str:
    """``wormhole x1 = 1.58x the one-table LOAD DATA limit (6.80 s / 4.30 s)``."""
    return (f"{ours} = {times_limit(seconds, limit_seconds):.2f}x {limit} "
            f"({seconds:.2f} s / {limit_seconds:.2f} s)")


def round_channels(round_no: int, channels: Sequence[int], best: int | None,
                   always: int | None = None) -> tuple[int, ...]:
    """Channel counts wormhole runs in a round: every one in the first, then the fastest so far (keeps the
    added rounds short) and ``always``, when it is one of ``channels`` (the goals' default settings: their
    figure is a best of every round too, not one run)."""
    if round_no == 0 or best is None:
        return tuple(channels)
    return (best,) if always is None or always == best or always not in channels else (best, always)


def fastest(runs: Sequence[Timed]) -> Timed:
    if not runs:
        raise ValueError("no runs")
    return min(runs, key=lambda r: r.seconds)


# ---------------------------------------------------------------------------------------------
# Server CPU


def server_pids(names: Sequence[str]) -> list[int]:
    """Local processes whose command name is one of ``names`` (the database server's)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in names:
                    pids.append(int(entry.name))
            except OSError:
                continue  # gone meanwhile
    return pids


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of ``pids`` (and their waited-for children), from /proc/<pid>/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
        total += sum(int(f) for f in fields[11:13])  # utime, stime: fields 14 and 15 of stat(5)
    return total / tick


@dataclass(frozen=True, slots=True)
class Measured:
    """One run with the server's CPU time over it."""

    run: Timed
    server_cpu_s: float


def with_server_cpu(server_names: Sequence[str], attempt: Callable[[], Timed]) -> Measured:
    pids = server_pids(server_names)
    before = cpu_seconds(pids)
    run = attempt()
    return Measured(run, cpu_seconds(pids) - before)


MYSQL_SERVER = ("mariadbd", "mysqld")
PG_SERVER: tuple[str, ...] = ()
"""Not measured (see the module's docstring)."""


# ---------------------------------------------------------------------------------------------
# MySQL


def mysql_columns(cur: Any, db: str, table: str) -> list[tuple[str, str]]:
    cur.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s ORDER BY ordinal_position", (db, table))
    return [(str(name), str(kind).lower()) for name, kind in cur.fetchall()]


def load_data_select(columns: Sequence[tuple[str, str]], db: str, table: str) -> str:
    """A SELECT whose ``mysql --batch --raw`` output is LOAD DATA's default text form of the table."""
    exprs = []
    for name, kind in columns:
        col = f"`{name}`"
        exprs.append(f"IFNULL({_ESCAPE.format(c=col) if kind in TEXT_TYPES else col}, {_NULL})")
    return f"SELECT {', '.join(exprs)} FROM `{db}`.`{table}`"


def mysql_client(server: Server, *extra: str) -> list[str]:
    return ["mysql", *server.client_args(), "--default-character-set=utf8mb4", *extra]


def bash(label: str, script: str, *, server: Sequence[str] = MYSQL_SERVER) -> Measured:
    """Run a bash script (pipefail; parallel children waited for one by one) with the server's CPU."""
    cmd = ["bash", "-c", f"set -o pipefail; {script}"]

    def attempt() -> Timed:
        run = timed(cmd)
        check_exit(label, cmd, run)
        return run
    return with_server_cpu(server, attempt)


def parallel(commands: Sequence[str]) -> str:
    """Start every command at once and fail if any fails (a plain ``wait`` loses the exit codes)."""
    starts = " ".join(f"{c} & p{i}=$!;" for i, c in enumerate(commands))
    waits = " ".join(f"wait $p{i} || rc=1;" for i in range(len(commands)))
    return f"rc=0; {starts} {waits} exit $rc"


def dump_mysql_file(server: Server, cur: Any, db: str, table: str, path: Path) -> float:
    """The table in LOAD DATA's text form, written once by the mysql client; returns seconds taken."""
    select = load_data_select(mysql_columns(cur, db, table), db, table)
    dump = mysql_client(server, "--batch", "--raw", "--quick", "--skip-column-names", "-e", select)
    return bash(f"dump {db}.{table} to {path.name}", f"{shlex.join(dump)} > {shlex.quote(str(path))}").run.seconds


def load_data_command(server: Server, path: Path, db: str, table: str) -> str:
    # CHARACTER SET binary: no conversion; the file holds the client's utf8mb4 bytes and raw binary values.
    sql = (f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE `{db}`.`{table}` CHARACTER SET binary")
    return shlex.join(mysql_client(server, "--local-infile=1", "-e", sql))


def run_load_data(server: Server, path: Path, table: str, dbs: Sequence[str]) -> Measured:
    """LOAD DATA LOCAL INFILE of ``path`` into ``table`` of each of ``dbs``, all at once."""
    return bash(f"LOAD DATA x{len(dbs)}", parallel([load_data_command(server, path, db, table) for db in dbs]))


def run_mysql_scan(server: Server, db: str, table: str) -> Measured:
    scan = mysql_client(server, "--batch", "--quick", "--skip-column-names", "-e", f"SELECT * FROM `{db}`.`{table}`")
    return bash("source scan to /dev/null", f"{shlex.join(scan)} > /dev/null")


def create_limit_tables(cur: Any, src_db: str, table: str, dbs: Sequence[str] = LIMIT_DBS) -> None:
    for db in dbs:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
        cur.execute(f"DROP TABLE IF EXISTS `{db}`.`{table}`")
        cur.execute(f"CREATE TABLE `{db}`.`{table}` LIKE `{src_db}`.`{table}`")


def drop_limit_dbs(cur: Any, dbs: Sequence[str] = LIMIT_DBS) -> None:
    for db in dbs:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")


def ensure_mydumper() -> bool:
    """mydumper and myloader, installed by scripts/install-mydumper.sh when missing; False when it cannot."""
    done = subprocess.run([str(REPO / "scripts" / "install-mydumper.sh")], capture_output=True, text=True)
    if done.stdout.strip():
        say(f"  {done.stdout.strip()}")
    if done.returncode != 0:
        say(f"  mydumper | myloader left out: {done.stderr.strip()}")
    return done.returncode == 0


def run_mydumper(server: Server, src_db: str, table: str, dst_db: str, workdir: Path, threads: int = 2) -> Measured:
    """mydumper of the table (no schema: the target exists) into a fresh directory, then myloader of it into
    ``dst_db``: the multi-threaded C tools, one after the other, as they run."""
    out = workdir / "mydumper"
    conn = ["-h", server.host, "-P", str(server.port), "-u", server.user]
    dump = ["mydumper", *conn, "-B", src_db, "-T", table, "--no-schemas", "-t", str(threads),
            "-r", "100000", "-o", str(out)]
    load = ["myloader", *conn, "-s", src_db, "-B", dst_db, "-t", str(threads), "-d", str(out)]
    return bash("mydumper | myloader",
                f"rm -rf {shlex.quote(str(out))} && {shlex.join(dump)} && {shlex.join(load)}")


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def psql(pg: Any, sql: str) -> list[str]:
    """``pg`` is benchmarks.postgres_scenario.PgServer (not imported: that module imports this one)."""
    return list(pg.psql(sql))


def dump_pg_file(pg: Any, schema: str, table: str, path: Path) -> float:
    cmd = shlex.join(psql(pg, f"COPY {schema}.{table} TO STDOUT"))
    return bash(f"dump {schema}.{table}", f"{cmd} > {shlex.quote(str(path))}", server=PG_SERVER).run.seconds


def pg_copy_command(pg: Any, path: Path, schema: str, table: str) -> str:
    return shlex.join(psql(pg, f"\\copy {schema}.{table} FROM '{path}'"))


def run_pg_copy(pg: Any, path: Path, schema: str, table: str) -> Measured:
    return bash("\\copy FROM file", pg_copy_command(pg, path, schema, table), server=PG_SERVER)


def run_pg_scan(pg: Any, schema: str, table: str) -> Measured:
    cmd = shlex.join(psql(pg, f"COPY {schema}.{table} TO STDOUT"))
    return bash("source scan to /dev/null", f"{cmd} > /dev/null", server=PG_SERVER)


def run_pg_and_mysql_load(pg: Any, pg_path: Path, schema: str, server: Server, my_path: Path, db: str,
                          table: str) -> Measured:
    """``\\copy`` into PostgreSQL and LOAD DATA into MySQL at once: the limit of a read-once copy to both."""
    return bash("\\copy || LOAD DATA", parallel([pg_copy_command(pg, pg_path, schema, table),
                                                   load_data_command(server, my_path, db, table)]),
                server=PG_SERVER)

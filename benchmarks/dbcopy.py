"""What the whole-database benchmarks share (benchmarks/tpch.py, many_tables.py, snapshot_money.py, issue 38).

- **Checks.** Every copy is compared with its source table by table: the row count and an order-independent
  checksum, the sum of two 60-bit slices of the md5 of each row's canonical text, computed where the rows are
  (SQL in MySQL and in PostgreSQL, pyarrow and hashlib for Parquet). The canonical text is the same in all
  three: the columns in the source's order joined by ``|``, NULL as ``\\N``, integers as digits, decimals with
  the source column's scale (``17.00``, ``-986.96``), dates ``YYYY-MM-DD``, datetimes ``YYYY-MM-DD
  HH:MM:SS[.ffffff]``, text as it is. It is made from the *source's* column types, so a copy whose types
  differ but whose values are the same (pgloader's ``text`` for ``varchar``, a ``numeric`` without a scale)
  still checks equal, and one that lost a digit does not. MySQL and PostgreSQL copies are also checked for
  the source's primary key and secondary indexes (by columns: the names may differ).
- **wormhole.** A database task is written to a file and run by ``wormhole run FILE`` in a workspace of its
  own (an embedded task database), timed like every contender (``mysql_scenario.timed``: wall time, peak RSS
  and CPU of the process tree). Until the database task lands (issue 38) wormhole refuses the spec (exit 204):
  that is reported as ``wormhole: not available: <error>`` and the peers run all the same.
- **The table.** Each scenario prints tool, seconds, rows/s (source rows / wall time), the tool's time over
  wormhole's (above 1: wormhole is faster), verified, peak RSS and CPU seconds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from benchmarks.mysql_scenario import REPO, BenchmarkFailure, Server, Timed, say, timed, wormhole_command

EXIT_SUCCESS, EXIT_BAD_TASK = 0, 204
"""wormhole's exit codes (wormhole.result), spelled here so a benchmark imports nothing of the tree it runs."""

NULL_TEXT = "\\N"
TIME = "/usr/bin/time"

INT_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"})


@dataclass(frozen=True, slots=True)
class Column:
    """A source column as the checks need it: its name, its kind and its scale or fractional digits."""

    name: str
    kind: str
    """``int``, ``decimal``, ``date``, ``datetime`` or ``text``."""
    scale: int = 0
    """A decimal's scale, a datetime's fractional digits."""
    arrow: pa.DataType = field(default_factory=pa.string)
    """Its Arrow type (the Parquet baseline reads the rows as this)."""


def mysql_columns(cur: Any, db: str, table: str) -> list[Column]:
    cur.execute("SELECT column_name, data_type, numeric_precision, numeric_scale, datetime_precision, column_type "
                "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                "ORDER BY ordinal_position", (db, table))
    out = []
    for name, data_type, precision, scale, frac, column_type in cur.fetchall():
        kind = str(data_type).lower()
        if kind in INT_TYPES:
            unsigned = "unsigned" in str(column_type).lower()
            wide = kind == "bigint" or (kind == "int" and unsigned)
            out.append(Column(name, "int", arrow=pa.int64() if wide else pa.int32()))
        elif kind == "decimal":
            out.append(Column(name, "decimal", int(scale), pa.decimal128(int(precision), int(scale))))
        elif kind == "date":
            out.append(Column(name, "date", arrow=pa.date32()))
        elif kind in ("datetime", "timestamp"):
            digits = int(frac or 0)
            out.append(Column(name, "datetime", digits, pa.timestamp("us" if digits else "s")))
        elif kind in TEXT_TYPES:
            out.append(Column(name, "text"))
        else:
            raise BenchmarkFailure(f"{db}.{table}.{name}: type {kind} has no canonical text in these checks")
    if not out:
        raise BenchmarkFailure(f"{db}.{table}: no columns (no such table?)")
    return out


def mysql_tables(cur: Any, db: str) -> list[str]:
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = "
                "'BASE TABLE' ORDER BY table_name", (db,))
    return [str(r[0]) for r in cur.fetchall()]


# -- checksums -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Check:
    rows: int
    checksum: int


def _mysql_text(c: Column) -> str:
    col = f"`{c.name}`"
    if c.kind == "decimal":
        expr = f"CAST({col} AS DECIMAL(65,{c.scale}))"
    elif c.kind == "date":
        expr = f"DATE_FORMAT({col}, '%Y-%m-%d')"
    elif c.kind == "datetime":
        expr = f"DATE_FORMAT({col}, '%Y-%m-%d %H:%i:%s{'.%f' if c.scale else ''}')"
    else:
        expr = col
    return f"IFNULL({expr}, '\\\\N')"


def _pg_text(c: Column) -> str:
    col = f'"{c.name}"'
    if c.kind == "decimal":
        expr = f"round({col}::numeric, {c.scale})::text"
    elif c.kind == "date":
        expr = f"to_char({col}, 'YYYY-MM-DD')"
    elif c.kind == "datetime":
        expr = f"to_char({col}, 'YYYY-MM-DD HH24:MI:SS{'.US' if c.scale else ''}')"
    else:
        expr = f"{col}::text"
    return f"coalesce({expr}, '\\N')"


def mysql_check(cur: Any, db: str, table: str, columns: Sequence[Column]) -> Check:
    row = "CONCAT_WS('|', " + ", ".join(_mysql_text(c) for c in columns) + ")"
    cur.execute("SELECT COUNT(*), COALESCE(SUM(CAST(CONV(SUBSTRING(h, 1, 15), 16, 10) AS UNSIGNED) "
                "+ CAST(CONV(SUBSTRING(h, 16, 15), 16, 10) AS UNSIGNED)), 0) "
                f"FROM (SELECT MD5({row}) AS h FROM `{db}`.`{table}`) hashes")
    rows, checksum = cur.fetchone()
    return Check(int(rows), int(checksum))


def pg_check(pg: psycopg.Connection[Any], schema: str, table: str, columns: Sequence[Column]) -> Check:
    row = "concat_ws('|', " + ", ".join(_pg_text(c) for c in columns) + ")"
    found = pg.execute("SELECT count(*), coalesce(sum(('x' || substr(h, 1, 15))::bit(60)::bigint::numeric "
                       "+ ('x' || substr(h, 16, 15))::bit(60)::bigint::numeric), 0) "
                       f'FROM (SELECT md5({row}) AS h FROM "{schema}"."{table}") hashes').fetchone()
    assert found is not None
    return Check(int(found[0]), int(found[1]))


def _arrow_text(values: pa.Array, c: Column) -> pa.Array:
    kind = values.type
    if c.kind == "decimal":
        if not pa.types.is_decimal(kind) and not pa.types.is_string(kind) and not pa.types.is_large_string(kind):
            values = pc.cast(values, pa.string())  # integers and floats through their text
        text = pc.cast(pc.cast(values, pa.decimal128(38, c.scale)), pa.string())
    elif c.kind == "date":
        if pa.types.is_timestamp(kind):
            values = pc.cast(values, pa.date32())
        text = pc.cast(values, pa.string())
    elif c.kind == "datetime":
        if pa.types.is_timestamp(kind):
            values = pc.cast(values, pa.timestamp("us" if c.scale else "s"), safe=False)
            text = pc.strftime(values, "%Y-%m-%d %H:%M:%S")
        else:
            text = pc.cast(values, pa.string())
    else:
        text = pc.cast(values, pa.string())
    return pc.fill_null(text, NULL_TEXT)


def arrow_check_batches(batches: Iterable[pa.RecordBatch], columns: Sequence[Column]) -> Check:
    rows = checksum = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        texts = [_arrow_text(batch.column(c.name), c) for c in columns]
        joined = pc.binary_join_element_wise(*texts, "|") if len(texts) > 1 else texts[0]
        for line in joined.to_pylist():
            h = hashlib.md5(line.encode()).hexdigest()
            checksum += int(h[:15], 16) + int(h[15:30], 16)
        rows += batch.num_rows
    return Check(rows, checksum)


def parquet_check(path: Path, columns: Sequence[Column]) -> Check:
    """A Parquet file, or a directory of them (files starting with ``.`` or ``_`` left out, as pyarrow does)."""
    if not path.exists():
        raise FileNotFoundError(path)
    dataset = ds.dataset(str(path), format="parquet")
    return arrow_check_batches(dataset.to_batches(columns=[c.name for c in columns], batch_size=65_536), columns)


# -- keys and indexes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Keys:
    primary: tuple[str, ...]
    indexes: frozenset[tuple[tuple[str, ...], bool]]
    """Secondary indexes and unique constraints: (columns, unique)."""

    def missing_in(self, other: Keys) -> list[str]:
        """What ``other`` lacks of these keys (it may have more indexes)."""
        out = []
        if self.primary != other.primary:
            out.append(f"primary key ({', '.join(self.primary)}) is ({', '.join(other.primary)})")
        for cols, unique in sorted(self.indexes - other.indexes):
            out.append(f"{'unique ' if unique else ''}index ({', '.join(cols)}) missing")
        return out


def mysql_keys(cur: Any, db: str, table: str) -> Keys:
    cur.execute("SELECT index_name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index SEPARATOR ',') "
                "FROM information_schema.statistics WHERE table_schema = %s AND table_name = %s "
                "GROUP BY index_name, non_unique", (db, table))
    primary: tuple[str, ...] = ()
    indexes = set()
    for name, non_unique, cols in cur.fetchall():
        columns = tuple(str(cols).lower().split(","))
        if name == "PRIMARY":
            primary = columns
        else:
            indexes.add((columns, not int(non_unique)))
    return Keys(primary, frozenset(indexes))


def pg_keys(pg: psycopg.Connection[Any], schema: str, table: str) -> Keys:
    found = pg.execute(
        "SELECT i.indisprimary, i.indisunique, array_agg(a.attname::text ORDER BY k.ord) "
        "FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
        "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
        "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum "
        "WHERE n.nspname = %s AND t.relname = %s GROUP BY i.indexrelid, i.indisprimary, i.indisunique",
        (schema, table)).fetchall()
    primary: tuple[str, ...] = ()
    indexes = set()
    for is_primary, unique, cols in found:
        columns = tuple(str(c).lower() for c in cols)
        if is_primary:
            primary = columns
        else:
            indexes.add((columns, bool(unique)))
    return Keys(primary, frozenset(indexes))


# -- a source database and its copies -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceTable:
    name: str
    columns: tuple[Column, ...]
    check: Check
    keys: Keys


def describe_source(cur: Any, db: str, *, keys: bool = True) -> list[SourceTable]:
    """Every base table of ``db`` with its columns, count and checksum (computed now) and keys."""
    tables = []
    for name in mysql_tables(cur, db):
        columns = tuple(mysql_columns(cur, db, name))
        tables.append(SourceTable(name, columns, mysql_check(cur, db, name, columns),
                                  mysql_keys(cur, db, name) if keys else Keys((), frozenset())))
    if not tables:
        raise BenchmarkFailure(f"the source database {db} has no tables")
    return tables


def source_rows(tables: Sequence[SourceTable]) -> int:
    return sum(t.check.rows for t in tables)


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    problems: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        if self.ok:
            return "yes"
        more = f" (+{len(self.problems) - 2} more)" if len(self.problems) > 2 else ""
        return "NO: " + "; ".join(self.problems[:2]) + more

    @staticmethod
    def of(problems: Sequence[str]) -> Verdict:
        return Verdict(not problems, tuple(problems))

    def __and__(self, other: Verdict) -> Verdict:
        return Verdict.of([*self.problems, *other.problems])


def _compare(where: str, table: SourceTable, copy: Check) -> list[str]:
    if copy == table.check:
        return []
    return [f"{where}.{table.name}: {copy.rows:,} rows, checksum {copy.checksum} (source {table.check.rows:,}, "
            f"{table.check.checksum})"]


def verify_mysql(cur: Any, db: str, tables: Sequence[SourceTable], *, keys: bool = True) -> Verdict:
    present = set(mysql_tables(cur, db))
    problems = []
    for t in tables:
        if t.name not in present:
            problems.append(f"{db}.{t.name} missing")
            continue
        problems += _compare(db, t, mysql_check(cur, db, t.name, t.columns))
        if keys:
            problems += [f"{db}.{t.name}: {p}" for p in t.keys.missing_in(mysql_keys(cur, db, t.name))]
    return Verdict.of(problems)


def verify_pg(pg: psycopg.Connection[Any], schema: str, tables: Sequence[SourceTable], *,
              keys: bool = True) -> Verdict:
    present = {str(r[0]) for r in pg.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)).fetchall()}
    problems = []
    for t in tables:
        if t.name not in present:
            problems.append(f"{schema}.{t.name} missing")
            continue
        problems += _compare(schema, t, pg_check(pg, schema, t.name, t.columns))
        if keys:
            problems += [f"{schema}.{t.name}: {p}" for p in t.keys.missing_in(pg_keys(pg, schema, t.name))]
    return Verdict.of(problems)


def verify_parquet(root: Path, tables: Sequence[SourceTable]) -> Verdict:
    """``root/<table>``: a directory of Parquet parts or, for the baseline, ``root/<table>.parquet``."""
    problems = []
    for t in tables:
        path = root / t.name if (root / t.name).exists() else root / f"{t.name}.parquet"
        try:
            problems += _compare(str(root), t, parquet_check(path, t.columns))
        except (FileNotFoundError, pa.ArrowException, KeyError) as exc:
            problems.append(f"{path}: {type(exc).__name__}: {exc}")
    return Verdict.of(problems)


# -- servers -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pg:
    """The local PostgreSQL: the destination database of the benchmarks (created when missing)."""

    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "postgres"
    database: str = "bench_pg"
    password: str = field(default_factory=lambda: os.environ.get("PGPASSWORD", ""))

    def connect(self, database: str | None = None) -> psycopg.Connection[Any]:
        return psycopg.connect(host=self.host, port=self.port, user=self.user, password=self.password or None,
                               dbname=database or self.database, autocommit=True,
                               options="-c DateStyle=ISO -c TimeZone=UTC")

    def ensure_database(self) -> None:
        with self.connect("postgres") as admin:
            if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone() is None:
                admin.execute(f'CREATE DATABASE "{self.database}" ENCODING \'UTF8\' TEMPLATE template0')

    def url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"

    def task_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user,
                                  "database": self.database}
        if self.password:
            params["password_env"] = "PGPASSWORD"
        return params


def fresh_mysql_db(cur: Any, db: str) -> None:
    cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    cur.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")


def fresh_pg_schema(pg: psycopg.Connection[Any], schema: str, *, create: bool = True) -> None:
    pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if create:
        pg.execute(f'CREATE SCHEMA "{schema}"')


def measured(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> Timed:
    """``mysql_scenario.timed`` with the peak RSS taken by ``/usr/bin/time``: a child's own maxrss counts the
    memory of the process that started it (Linux keeps the larger of the old and new image's high-water mark
    at exec), so a small tool started by this process, which holds Arrow buffers and checksums, would show
    this process's size. ``time`` is small and starts the command itself."""
    if not Path(TIME).exists():
        return timed(cmd, cwd=cwd, env=env)
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        run = timed([TIME, "-f", "%M", "-o", rss.name, *cmd], cwd=cwd, env=env)
        text = rss.read().strip().splitlines()
    # On a signal, time writes "Command terminated by signal N" before the figure.
    kib = int(text[-1]) if text and text[-1].isdigit() else None
    return dataclasses.replace(run, peak_rss_mib=round(kib / 1024, 1)) if kib is not None else run


def bash(label: str, script: str, *, cwd: Path | None = None) -> Timed:
    """A bash pipeline (pipefail: a failing producer fails the run instead of looking like a fast empty load)."""
    cmd = ["bash", "-c", f"set -o pipefail; {script}"]
    run = measured(cmd, cwd=cwd)
    if run.returncode != 0:
        tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-12:])
        raise BenchmarkFailure(f"{label}: `{script}` exited {run.returncode}\n{tail}")
    return run


def mysql_cli(server: Server, *extra: str) -> list[str]:
    return ["mysql", *server.client_args(), "--default-character-set=utf8mb4", *extra]


def run_mysqldump(server: Server, src: str, dst: str, *extra: str) -> Timed:
    """``mysqldump --single-transaction --quick SRC | mysql DST``: the whole database, schema included."""
    dump = ["mysqldump", *server.client_args(), "--single-transaction", "--quick", *extra, src]
    return bash("mysqldump | mysql", f"{shlex.join(dump)} | {shlex.join(mysql_cli(server, dst))}")


def ensure_tool(script: str, *commands: str) -> str | None:
    """Install a baseline with scripts/<script> when one of ``commands`` is missing; None when present,
    else why it cannot be (the benchmark then leaves that baseline out)."""
    import shutil

    if all(shutil.which(c) for c in commands):
        return None
    done = subprocess.run([str(REPO / "scripts" / script)], capture_output=True, text=True)
    if done.stdout.strip():
        say(f"  {done.stdout.strip()}")
    if done.returncode != 0:
        return done.stderr.strip() or f"scripts/{script} exited {done.returncode}"
    return None


def run_mydumper(server: Server, src: str, dst: str, workdir: Path, threads: int) -> Timed:
    """mydumper of the whole database (schema included, ``--rows`` chunks so big tables dump in parallel,
    the snapshot held by a brief lock as wormhole's), then myloader of it into ``dst``, ``threads`` each."""
    out = workdir / "mydumper"
    conn = ["-h", server.host, "-P", str(server.port), "-u", server.user]
    dump = ["mydumper", *conn, "-B", src, "-t", str(threads), "--trx-consistency-only", "-r", "100000",
            "-o", str(out)]
    load = ["myloader", *conn, "-s", src, "-B", dst, "-t", str(threads), "-o", "-d", str(out)]
    return bash("mydumper + myloader", f"rm -rf {shlex.quote(str(out))} && {shlex.join(dump)} && "
                f"{shlex.join(load)} && rm -rf {shlex.quote(str(out))}")


# -- wormhole ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WormholeRun:
    run: Timed
    exit_code: int
    finished: dict[str, Any] | None
    """The run's ``task.finished`` log event (its result), when it logged one."""

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_SUCCESS

    @property
    def refused(self) -> bool:
        """The spec was refused (204): the database task is not there (yet)."""
        return self.exit_code == EXIT_BAD_TASK

    @property
    def error(self) -> str:
        """One line saying why it did not succeed: the result's error, else the end of its output."""
        if self.finished and self.finished.get("error"):
            return str(self.finished["error"])
        lines = [ln.strip() for ln in self.run.stderr.splitlines() if ln.strip() and not ln.startswith("{")]
        if not lines:
            lines = [ln.strip() for ln in self.run.stderr.splitlines()[-3:]]
        return f"exit {self.exit_code}: " + " ".join(lines[-6:])[:600]

    @property
    def states(self) -> str:
        """Each destination's state as the result gives it: ``pg=success replica=failed``."""
        dests = (self.finished or {}).get("destinations") or {}
        return " ".join(f"{k}={(v or {}).get('status')}" for k, v in dests.items() if isinstance(v, dict))


class Wormhole:
    """``wormhole run FILE`` in a workspace of its own (embedded task database, JSON log)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
        self.env.update(WORMHOLE_TASK_DB="sqlite:///var/wormhole.db", WORMHOLE_CONF=str(REPO / "conf"),
                        WORMHOLE_LOG_FORMAT="json")
        self.runs = 0

    def run(self, spec: dict[str, Any]) -> WormholeRun:
        self.runs += 1
        path = self.root / f"task-{self.runs}.json"
        path.write_text(json.dumps(spec, indent=2))
        run = measured([*wormhole_command(), "run", str(path), "--progress", "plain"], cwd=self.root, env=self.env)
        (self.root / f"task-{self.runs}.log").write_text(run.stderr)
        return WormholeRun(run, run.returncode, finished_event(run.stderr))


def finished_event(log: str) -> dict[str, Any] | None:
    for line in reversed(log.splitlines()):
        if line.startswith("{") and '"task.finished"' in line:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == "task.finished":
                return dict(event)
    return None


# -- the table -----------------------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    tool: str
    seconds: float | None
    rows: int
    verified: str
    peak_rss_mib: float | None = None
    cpu_s: float | None = None
    wormhole: bool = False
    note: str = ""

    @property
    def rows_per_s(self) -> int | None:
        return round(self.rows / self.seconds) if self.seconds else None

    def as_json(self, part: str) -> dict[str, Any]:
        return {"part": part, "scenario": self.scenario, "tool": self.tool,
                "seconds": None if self.seconds is None else round(self.seconds, 3), "rows": self.rows,
                "rows_per_s": self.rows_per_s, "verified": self.verified, "peak_rss_mib": self.peak_rss_mib,
                "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 2), "note": self.note}


def print_table(title: str, rows: Sequence[Row]) -> None:
    """One block per scenario; the ratio is each tool's seconds over that scenario's wormhole's."""
    say("")
    say(title)
    say(f"{'scenario':<24} {'tool':<40} {'seconds':>8} {'rows/s':>10} {'/wormhole':>9} {'peak RSS MiB':>12} "
        f"{'CPU s':>7}  verified")
    for r in rows:
        ours = next((w for w in rows if w.scenario == r.scenario and w.wormhole and w.seconds), None)
        ratio = "-" if ours is None or ours.seconds is None or r.seconds is None or r.wormhole \
            else f"{r.seconds / ours.seconds:.2f}x"
        secs = "-" if r.seconds is None else f"{r.seconds:.2f}"
        rps = "-" if r.rows_per_s is None else f"{r.rows_per_s:,}"
        rss = "-" if r.peak_rss_mib is None else f"{r.peak_rss_mib:.0f}"
        cpu = "-" if r.cpu_s is None else f"{r.cpu_s:.1f}"
        say(f"{r.scenario:<24} {r.tool:<40} {secs:>8} {rps:>10} {ratio:>9} {rss:>12} {cpu:>7}  {r.verified}"
            + (f"  ({r.note})" if r.note else ""))

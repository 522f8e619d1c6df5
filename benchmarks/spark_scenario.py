"""Spark scenario: wormhole's Spark, local and auto engines against a plain PySpark script, on the local MariaDB.

For each size in ``--rows`` (default 1M and 5M) the source ``whb_src.t_<size>`` is built with the MySQL
scenario's recipe (benchmarks/mysql_scenario.py; reused while its count and checksum hold), and for each
set of destinations in ``--spark-dests`` four contenders copy it, one after another, each as a child
process. The sets (issue 37, item 6): ``parquet+mysql`` (a Parquet directory and ``whbs_d1``, the default
with ``mysql``), ``mysql`` (``whbs_d1`` alone), ``mysql3`` (``whbs_d1..3``, the figures before issue 37).

* ``plain pyspark``: benchmarks/spark_plain.py, the script a user would write (a partitioned JDBC read
  per destination, a batched JDBC write or a Parquet write each; ``--plain-persist`` reads once);
* ``wormhole local``, ``wormhole spark``, ``wormhole auto``: the wormhole CLI in a scratch workspace,
  the MySQL scenario's task (``split_pk: id``) with these destinations and ``settings.engine`` set.

The Spark and auto runs read a ``conf/engine.toml`` written into the workspace: the repository's, plus a
``[spark]`` section (``master`` = ``--spark-master``, warehouse and metastore inside the workspace, the
Spark UI off as in the plain script, ``auto_rows`` only when ``--auto-rows`` is given, so by default the
shipped threshold is what ``auto`` is measured with). The local run uses the repository's conf as is.

MySQL destinations are emptied before every run and compared with the source afterwards by ``COUNT(*)`` and
``CHECKSUM TABLE``; a Parquet directory by its row count and sums of its key, its integer and its
decimal column, the count of a nullable text column and the range of its datetime column. A contender
that exits non-zero or leaves a wrong copy is reported as FAILED with its exit code and last error line,
and the others still run. Wall time is the child's, from ``os.wait4``;
Spark start-up is reported separately: the plain script's own ``startup_s`` and, for wormhole, the
``spark.startup_s`` of the run's result (its task row). Peak RSS is the largest sum of the RSS of the
child's whole process tree (the Spark JVM included), sampled every 0.2 s.

Targets: Spark mode at least 1.5x the plain script with two destinations and 1.2x with one, at 5M rows
(checked at the largest size run; 1.0x for ``mysql3``);
``auto`` within 20 % of the faster of local and Spark at every size (its wall time at most 1.2x).

Run: ``make bench BENCH_ARGS="--only spark"`` (or ``--with-spark`` to add it to the full run), or alone:
``.venv/bin/python -m benchmarks.spark_scenario [--rows 200000] [--contenders plain local]``
from the repository root. Figures go to benchmarks/results/latest.json (through benchmarks.run) or to
``--json`` (default benchmarks/results/spark.json) when run alone. It takes long: 5M rows on 2 cores
is several minutes per contender.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks.mysql_scenario import (
    REPO,
    SRC_DB,
    BenchmarkFailure,
    Server,
    Snapshot,
    Timed,
    Workspace,
    create_destinations,
    empty_destinations,
    ensure_source,
    say,
    table_mib,
    timed,
    verify,
    wormhole_command,
    wormhole_spec,
)

CONTENDERS = ("plain", "local", "spark", "auto", "before")
LABELS = {"plain": "plain pyspark", "local": "wormhole local", "spark": "wormhole spark", "auto": "wormhole auto",
          "before": "spark (before)"}
DEFAULT_JSON = Path("benchmarks/results/spark.json")
SPARK_TARGET_ROWS = 5_000_000
DEST_SETS = ("parquet+mysql", "mysql", "mysql3")
SPARK_GOAL = {"parquet+mysql": 1.5, "mysql": 1.2, "mysql3": 1.0}
"""Spark mode's rows/s over the plain script's, by destination set (issue 37, item 6)."""


DEST_DBS = ("whbs_d1", "whbs_d2", "whbs_d3")
"""The MySQL destinations: not the MySQL part's ``whb_d*``, which a run of that part drops and remakes."""


def drop_destinations(cur: Any) -> None:
    for db in DEST_DBS:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")


def dest_dbs(dests: str) -> tuple[str, ...]:
    return DEST_DBS if dests == "mysql3" else DEST_DBS[:1]


def has_parquet(dests: str) -> bool:
    return dests.startswith("parquet")


@dataclass(frozen=True, slots=True)
class ParquetFacts:
    """What a Parquet copy is checked by: exact aggregates of the benchmark table's columns."""

    rows: int
    id_sum: int
    k_sum: int
    amount_sum: Decimal
    notes: int
    created: tuple[str, str]


def source_facts(cur: Any, table: str) -> ParquetFacts:
    cur.execute(f"SELECT COUNT(*), SUM(id), SUM(k), SUM(amount), COUNT(note), MIN(created), MAX(created) "
                f"FROM `{SRC_DB}`.`{table}`")
    n, ids, ks, amount, notes, lo, hi = cur.fetchone()
    return ParquetFacts(int(n), int(ids), int(ks), Decimal(amount).normalize(), int(notes), (str(lo), str(hi)))


def parquet_facts(path: Path) -> ParquetFacts:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["id", "k", "amount", "note", "created"])
    lo_hi = pc.min_max(t.column("created"))
    amount = Decimal(pc.sum(t.column("amount")).as_py()).normalize()
    return ParquetFacts(t.num_rows, pc.sum(t.column("id")).as_py(), pc.sum(t.column("k")).as_py(), amount,
                        t.num_rows - t.column("note").null_count,
                        (str(lo_hi["min"].as_py()), str(lo_hi["max"].as_py())))
AUTO_SLACK = 1.20
"""``auto`` may take at most this times the faster engine's wall time."""


def size_label(rows: int) -> str:
    for unit, suffix in ((1_000_000, "m"), (1_000, "k")):
        if rows % unit == 0:
            return f"{rows // unit}{suffix}"
    return str(rows)


def source_table(rows: int) -> str:
    return f"t_{size_label(rows)}"


# ---------------------------------------------------------------------------------------------
# Process tree RSS


def _children_and_rss() -> tuple[dict[int, list[int]], dict[int, int], dict[int, int]]:
    """Each process's children, RSS (pages) and CPU time (clock ticks, user + system)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(b")") + 2:].split()  # fields[0] is field 3 (state) of proc(5)
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21])
        cpu[pid] = int(fields[11]) + int(fields[12])
    return children, rss, cpu


def descendants(root: int, cpu_seen: dict[int, int] | None = None) -> tuple[set[int], int]:
    """The pids below ``root`` and the sum of their RSS in bytes; ``cpu_seen`` gets each one's CPU ticks."""
    children, rss, cpu = _children_and_rss()
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    page = os.sysconf("SC_PAGE_SIZE")
    if cpu_seen is not None:
        cpu_seen.update({pid: cpu[pid] for pid in found if pid in cpu})
    return found, sum(rss.get(pid, 0) for pid in found) * page


class TreeSampler:
    """Samples this process's descendants while a child runs: the peak of their summed RSS, and their pids.

    ``os.wait4`` only counts the children that were waited for, and PySpark never waits for its JVM,
    so the JVM's memory would be missing from ``ru_maxrss``.
    """

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.peak_bytes = 0
        self.pids: set[int] = set()
        self.cpu_ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            pids, total = descendants(me, self.cpu_ticks)
            self.pids |= pids
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return round(self.peak_bytes / 2**20, 1)

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the process tree (the JVM's and the Python workers'), as last sampled: the
        figure a loaded machine disturbs least."""
        return round(sum(self.cpu_ticks.values()) / os.sysconf("SC_CLK_TCK"), 1)


def server_ticks() -> int | None:
    """CPU ticks the local MariaDB/MySQL server has used so far (None: no such process here)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index(b"(") + 1:stat.rindex(b")")]
        if name in (b"mariadbd", b"mysqld"):
            fields = stat[stat.rindex(b")") + 2:].split()
            return int(fields[11]) + int(fields[12])
    return None


def wait_gone(pids: set[int], timeout_s: float = 60.0) -> float:
    """Wait until the processes seen during a run have exited (an orphaned Spark JVM shuts down after
    its Python driver): the next contender starts on a quiet machine. Returns the seconds waited."""
    start = time.perf_counter()
    alive = set(pids)
    while alive and time.perf_counter() - start < timeout_s:
        alive = {pid for pid in alive if os.path.exists(f"/proc/{pid}")}
        if alive:
            time.sleep(0.1)
    if alive:
        say(f"  warning: processes {sorted(alive)} still running {timeout_s:.0f} s after the contender exited")
    return round(time.perf_counter() - start, 2)


# ---------------------------------------------------------------------------------------------
# One contender's run


@dataclass
class Outcome:
    """One contender at one size. ``error`` set means it failed and has no figure."""

    contender: str
    rows: int
    dests: str = "mysql3"
    seconds: float | None = None
    peak_rss_mib: float | None = None
    maxrss_mib: float | None = None
    startup_s: float | None = None
    engine: str | None = None
    engine_reason: str | None = None
    exit_code: int | None = None
    error: str | None = None
    lingered_s: float | None = None
    cpu_s: float | None = None
    server_cpu_s: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds is not None

    @property
    def label(self) -> str:
        return LABELS[self.contender]

    @property
    def rows_per_s(self) -> int | None:
        return round(self.rows / self.seconds) if self.ok and self.seconds else None

    @property
    def seconds_excl_startup(self) -> float | None:
        if not self.ok or self.seconds is None or self.startup_s is None:
            return None
        return self.seconds - self.startup_s

    @property
    def rows_per_s_excl_startup(self) -> int | None:
        rest = self.seconds_excl_startup
        return round(self.rows / rest) if rest and rest > 0 else None

    def as_json(self) -> dict[str, Any]:
        rest = self.seconds_excl_startup
        return {"part": "spark", "scenario": self.label, "rows": self.rows, "destinations": self.dests,
                "status": "ok" if self.ok else "failed",
                "seconds": None if self.seconds is None else round(self.seconds, 3),
                "rows_per_s": self.rows_per_s,
                "spark_startup_s": self.startup_s,
                "seconds_excl_startup": None if rest is None else round(rest, 3),
                "rows_per_s_excl_startup": self.rows_per_s_excl_startup,
                "peak_rss_mib": self.peak_rss_mib, "maxrss_mib": self.maxrss_mib,
                "cpu_s": self.cpu_s, "server_cpu_s": self.server_cpu_s,
                "engine": self.engine, "engine_reason": self.engine_reason,
                "exit_code": self.exit_code, "error": self.error, "lingered_s": self.lingered_s, **self.detail}


def last_error_line(stderr: str) -> str:
    """The most telling line of a failed child's stderr: the last error record of a JSON log, else the
    last line that is not Spark's progress bar."""
    fallback = ""
    for line in reversed(stderr.splitlines()):
        line = line.strip()
        if not line or line.startswith("[Stage"):
            continue
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if isinstance(record, dict):
                if record.get("level") in ("error", "critical", "exception"):
                    detail = record.get("error") or record.get("problems") or ""
                    return f"{record.get('event', 'error')}: {detail}"
                continue
        fallback = fallback or line
    return fallback[-500:] or "(no stderr)"


def result_from_log(stderr: str) -> dict[str, Any] | None:
    """The last JSON log record that carries the engine's choice, when the task row has no result."""
    for line in reversed(stderr.splitlines()):
        if line.startswith("{") and '"engine"' in line:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "engine" in record:
                return record
    return None


def measure(cmd: list[str], *, cwd: Path, env: dict[str, str] | None) -> tuple[Timed, float, set[int], float]:
    with TreeSampler() as sampler:
        run = timed(cmd, cwd=cwd, env=env)
    return run, sampler.peak_mib, sampler.pids, sampler.cpu_s


@dataclass(frozen=True, slots=True)
class Options:
    rows: tuple[int, ...] = (1_000_000, 5_000_000)
    dests: tuple[str, ...] = ("parquet+mysql", "mysql")
    plain_persist: bool = False
    contenders: tuple[str, ...] = CONTENDERS
    master: str = "local[2]"
    auto_rows: int | None = None
    plain_partitions: int = 4
    channel: int = 2
    writers: int = 3
    spark_conf: tuple[tuple[str, str], ...] = ()
    server: Server = field(default_factory=Server)
    keep: bool = False
    repeat: int = 1
    """Rounds of the contenders (alternating their order); the best run of each is compared."""
    before: Path | None = None
    """A checkout of an earlier wormhole: the ``before`` contender runs Spark mode from it (PYTHONPATH)."""


class SparkBench:
    def __init__(self, opts: Options, cur: Any) -> None:
        self.opts = opts
        self.cur = cur
        self.ws = Workspace(Path(tempfile.mkdtemp(prefix="whb-spark-")))
        self.spark_conf_dir = self.ws.root / "conf-spark"
        self.write_spark_conf()
        self.keep_workspace = opts.keep

    def write_spark_conf(self) -> None:
        """The repository's engine.toml with its [spark] sections replaced, for the spark and auto runs."""
        o = self.opts
        lines = ["", "[spark]", f"master = {json.dumps(o.master)}", 'app_name = "wormhole-bench"',
                 f"warehouse_dir = {json.dumps(str(self.ws.root / 'spark' / 'warehouse'))}",
                 f"metastore_dir = {json.dumps(str(self.ws.root / 'spark' / 'metastore'))}"]
        if o.auto_rows is not None:
            lines.append(f"auto_rows = {o.auto_rows}")
        lines += ["", "[spark.conf]", '"spark.ui.enabled" = "false"  # as in the plain script']
        lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in o.spark_conf]
        base = (REPO / "conf" / "engine.toml").read_text(encoding="utf-8")
        base = base.split("\n[spark]", 1)[0]  # [spark] and [spark.conf] close the file
        text = base.rstrip("\n") + "\n" + "\n".join(lines)
        tomllib.loads(text)  # it must parse before any engine sees it
        self.spark_conf_dir.mkdir()
        (self.spark_conf_dir / "engine.toml").write_text(text + "\n", encoding="utf-8")

    # -- contenders

    def parquet_dir(self, contender: str) -> Path:
        return self.ws.root / "out" / contender / "data"

    def run_plain(self, table: str, rows: int, dests: str) -> Outcome:
        s = self.opts.server
        cmd = [sys.executable, "-m", "benchmarks.spark_plain", "--rows", str(rows), "--src-db", SRC_DB,
               "--table", table, "--dest-dbs", *dest_dbs(dests), "--master", self.opts.master,
               "--num-partitions", str(self.opts.plain_partitions),
               "--host", s.host, "--port", str(s.port), "--user", s.user]
        if has_parquet(dests):
            cmd += ["--parquet", str(self.parquet_dir("plain"))]
        if self.opts.plain_persist:
            cmd.append("--persist")
        # In the workspace, so anything Spark leaves in its working directory stays out of the repository.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        run, peak, pids, cpu = measure(cmd, cwd=self.ws.root, env=env)
        out = Outcome("plain", rows, dests, peak_rss_mib=peak, maxrss_mib=run.peak_rss_mib, exit_code=run.returncode,
                      lingered_s=wait_gone(pids), cpu_s=cpu)
        if run.returncode != 0:
            out.error = last_error_line(run.stderr)
            return out
        out.seconds = run.seconds
        try:
            figures = json.loads(run.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            out.error = f"no JSON line on stdout: {run.stdout.strip()[-300:]!r}"
            return out
        out.startup_s = figures.get("startup_s")
        out.engine = "spark"
        out.detail = {"read_s": figures.get("read_s"), "write_s": figures.get("write_s")}
        return out

    def run_wormhole(self, engine: str, table: str, rows: int, dests: str) -> Outcome:
        o = self.opts
        spec = wormhole_spec(o.server, table, len(dest_dbs(dests)), o.channel, o.writers)
        spec["name"] += f" engine={engine} {dests}"
        for dest, db in zip(spec["destinations"], dest_dbs(dests), strict=True):
            dest["id"] = dest["params"]["database"] = db
        if has_parquet(dests):
            spec["destinations"].insert(0, {"id": "parquet", "plugin": "file", "params": {
                "path": str(self.parquet_dir(engine)), "format": "parquet"}})
        spec["settings"]["engine"] = "spark" if engine == "before" else engine
        task_id = self.ws.submit(spec)
        env = dict(self.ws.env)
        if engine != "local":
            env["WORMHOLE_CONF"] = str(self.spark_conf_dir)
        if engine == "before":  # the earlier checkout's wormhole, imported first
            assert o.before is not None
            env["PYTHONPATH"] = str(o.before.resolve())
        cmd = [*wormhole_command(), "--task-id", str(task_id)]
        run, peak, pids, cpu = measure(cmd, cwd=self.ws.root, env=env)
        out = Outcome(engine, rows, dests, peak_rss_mib=peak, maxrss_mib=run.peak_rss_mib, exit_code=run.returncode,
                      lingered_s=wait_gone(pids), cpu_s=cpu)
        result, task_error = self.task_result(task_id)
        result = result or result_from_log(run.stderr)
        if result:
            out.engine = result.get("engine")
            out.engine_reason = result.get("engine_reason")
            spark = result.get("spark") or {}
            if isinstance(spark, dict) and spark.get("startup_s") is not None:
                out.startup_s = float(spark["startup_s"])
            out.detail = {"task_id": task_id, "duration_s": result.get("duration_s"),
                          "spark_master": spark.get("master") if isinstance(spark, dict) else None}
        if run.returncode != 0:
            out.error = last_error_line(run.stderr)
            if task_error and out.error.split(": ", 1)[-1] not in task_error and task_error not in out.error:
                out.error += f" [task error: {task_error[:300]}]"
            self.keep_workspace = True  # its task DB has the failed run
            return out
        out.seconds = run.seconds
        return out

    def task_result(self, task_id: int) -> tuple[dict[str, Any] | None, str | None]:
        conn = sqlite3.connect(self.ws.db_path)
        try:
            row = conn.execute("SELECT result, error FROM wormhole_task WHERE id = ?", (task_id,)).fetchone()
        finally:
            conn.close()
        if row is None:
            return None, None
        try:
            result = json.loads(row[0]) if row[0] else None
        except json.JSONDecodeError:
            result = None
        return (result if isinstance(result, dict) else None), row[1]

    def attempt(self, contender: str, table: str, source: Snapshot, dests: str, facts: ParquetFacts) -> Outcome:
        # wormhole loads with `truncate`: a stale row it must remove proves it did; the plain script appends.
        empty_destinations(self.cur, table, dest_dbs(dests), stale_row=contender != "plain")
        shutil.rmtree(self.parquet_dir(contender), ignore_errors=True)
        before = server_ticks()
        if contender == "plain":
            out = self.run_plain(table, source.rows, dests)
        else:
            out = self.run_wormhole(contender, table, source.rows, dests)
        after = server_ticks()
        if before is not None and after is not None:  # other clients of the server count too
            out.server_cpu_s = round((after - before) / os.sysconf("SC_CLK_TCK"), 1)
        if out.ok:
            try:
                verify(self.cur, out.label, table, dest_dbs(dests), source)
                if has_parquet(dests):
                    copy = parquet_facts(self.parquet_dir(contender))
                    if copy != facts:
                        raise BenchmarkFailure(f"{out.label}: the Parquet copy has {copy}, the source {facts}")
            except BenchmarkFailure as exc:
                out.error = str(exc)
            shutil.rmtree(self.parquet_dir(contender), ignore_errors=True)
        if out.ok:
            excl = out.seconds_excl_startup
            extra = f", {excl:.2f} s without Spark start-up" if excl is not None else ""
            engine = f", engine {out.engine}" if contender == "auto" else ""
            say(f"  {out.label:<16} {out.seconds:8.2f} s{extra}, peak RSS {out.peak_rss_mib} MiB, "
                f"{out.cpu_s} s CPU (server {out.server_cpu_s} s){engine}, copy verified")
        else:
            say(f"  {out.label:<16} FAILED (exit {out.exit_code}): {out.error}")
        return out

    def run(self) -> list[Outcome]:
        o = self.opts
        say(f"preparing {SRC_DB} on {o.server.host}:{o.server.port}")
        sources = {rows: ensure_source(self.cur, source_table(rows), rows) for rows in o.rows}
        create_destinations(self.cur, tuple(source_table(rows) for rows in o.rows), DEST_DBS)
        say(f"workspace {self.ws.root}; spark conf {self.spark_conf_dir / 'engine.toml'}")
        outcomes: list[Outcome] = []
        for rows in o.rows:
            table = source_table(rows)
            facts = source_facts(self.cur, table)
            for dests in o.dests:
                say(f"{SRC_DB}.{table}: {rows:,} rows ({table_mib(self.cur, SRC_DB, table)} MiB) -> "
                    f"{', '.join((('parquet',) if has_parquet(dests) else ()) + dest_dbs(dests))}")
                for run in range(o.repeat):  # every other round in reverse: each contender meets the same load
                    for contender in o.contenders if run % 2 == 0 else reversed(o.contenders):
                        outcomes.append(self.attempt(contender, table, sources[rows], dests, facts))
            empty_destinations(self.cur, table, DEST_DBS)  # frees the space before the next size
        if self.keep_workspace:
            say(f"workspace kept: {self.ws.root}")
        else:
            shutil.rmtree(self.ws.root, ignore_errors=True)
        return outcomes


# ---------------------------------------------------------------------------------------------
# Report


def _fmt(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _target(name: str, rows: int, value: float | None, shown: str, goal: str, passed: bool | None,
            note: str = "") -> dict[str, Any]:
    """Print one target line; its latest.json entry."""
    status = "n/a" if passed is None else ("PASS" if passed else "MISS")
    say(f"  {name:<44} {shown:>7} {goal:>9}  {status}{'  (' + note + ')' if note else ''}")
    return {"part": "spark", "scenario": "target", "target": name, "rows": rows, "value": value, "goal": goal,
            "status": status, "note": note}


def report(outcomes: list[Outcome], opts: Options) -> list[dict[str, Any]]:
    """Print a table per size, the ratios and the targets; return the target entries for the JSON."""
    targets: list[dict[str, Any]] = []
    sizes = list(dict.fromkeys(o.rows for o in outcomes))
    for rows, dests in dict.fromkeys((o.rows, o.dests) for o in outcomes):
        runs: dict[str, list[Outcome]] = {}
        for o in outcomes:
            if o.rows == rows and o.dests == dests:
                runs.setdefault(o.contender, []).append(o)
        # The best run of each (the least disturbed by the machine); a contender that never succeeded, its failure.
        at = {c: min((o for o in found if o.ok), key=lambda o: o.seconds or 0.0, default=found[-1])
              for c, found in runs.items()}
        goal = SPARK_GOAL[dests]
        say("")
        say(f"Spark scenario, {rows:,} rows -> {dests}, master {opts.master}; "
            "rows/s = source rows / wall time; peak RSS = process tree")
        say(f"{'scenario':<16} {'wall s':>8} {'rows/s':>9} {'start-up s':>10} {'excl. s':>8} {'rows/s excl.':>12} "
            f"{'peak RSS MiB':>12}  {'engine':<7} note")
        for o in at.values():
            if o.ok:
                note = o.engine_reason or ""
                if "read_s" in o.detail:
                    note = f"read {o.detail['read_s']} s, write {o.detail['write_s']} s"
                say(f"{o.label:<16} {o.seconds:>8.2f} {_fmt(o.rows_per_s, ','):>9} {_fmt(o.startup_s, '.2f'):>10} "
                    f"{_fmt(o.seconds_excl_startup, '.2f'):>8} {_fmt(o.rows_per_s_excl_startup, ','):>12} "
                    f"{_fmt(o.peak_rss_mib, ''):>12}  {o.engine or '-':<7} {note}")
            else:
                error = o.error or ""
                error = error if len(error) <= 200 else error[:200] + "..."
                say(f"{o.label:<16} {'FAILED':>8}  exit {o.exit_code}: {error}")
        if opts.repeat > 1:
            for c, found in runs.items():
                say(f"  {LABELS[c]} runs: " + ", ".join("failed" if not o.ok else f"{o.seconds:.1f} s ({o.cpu_s} s CPU)"
                                                         for o in found))
        say("")
        say(f"  {'ratio / target':<44} {'value':>7} {'goal':>9}")
        plain, spark, local, auto = (at.get(c) for c in ("plain", "spark", "local", "auto"))
        # Spark mode vs the plain script: same rows, so the ratio of rows/s is the inverse ratio of times.
        name = f"spark / plain rows/s, {dests}"
        failed = [c.label for c in (spark, plain) if c is not None and not c.ok]
        if spark is None or plain is None or failed:
            why = " and ".join(failed) + " failed" if failed else "spark and plain not both run"
            targets.append(_target(name, rows, None, "-", f">= {goal}", None, why))
        else:
            assert spark.seconds is not None and plain.seconds is not None
            ratio = plain.seconds / spark.seconds
            if rows == max(sizes):
                note = "indicative: the target is set at 5M rows" if rows < SPARK_TARGET_ROWS else ""
                targets.append(_target(name, rows, round(ratio, 3), f"{ratio:.3f}", f">= {goal}", ratio >= goal, note))
            else:
                say(f"  {name:<44} {ratio:>7.3f}")
            p, s = plain.seconds_excl_startup, spark.seconds_excl_startup
            if p and s:
                say(f"  {'spark / plain rows/s (excluding start-up)':<44} {p / s:>7.3f}")
        before = at.get("before")
        if before is not None and before.ok and plain is not None and plain.ok:
            assert before.seconds is not None and plain.seconds is not None
            say(f"  {'spark (before) / plain rows/s':<44} {plain.seconds / before.seconds:>7.3f}")
        # auto vs the faster engine, by wall time.
        engines = [c for c in (local, spark) if c is not None and c.ok]
        name = "auto wall time vs faster of local/spark"
        if auto is None:
            continue
        if not auto.ok or len(engines) < 2:
            failed = [c.label for c in (auto, local, spark) if c is not None and not c.ok]
            why = (" and ".join(failed) + " failed") if failed else "local and spark not both run"
            targets.append(_target(name, rows, None, "-", "<= +20%", None, why))
            continue
        best = min(engines, key=lambda c: c.seconds or 0.0)
        assert auto.seconds is not None and best.seconds is not None
        slower = auto.seconds / best.seconds
        say(f"  {'auto rows/s as % of ' + best.label:<44} {100 / slower:>6.1f}%")
        extra = round((slower - 1) * 100, 1)
        chose = f"auto chose {auto.engine}" + (f": {auto.engine_reason}" if auto.engine_reason else "")
        entry = _target(name, rows, extra, f"{extra:+.1f}%", "<= +20%", slower <= AUTO_SLACK,
                        chose if auto.engine else "")
        entry["auto_engine"] = auto.engine
        targets.append(entry)
    return targets


def run_all(opts: Options) -> list[dict[str, Any]]:
    """Run the Spark comparison; return latest.json entries. Raises BenchmarkFailure when it cannot run
    at all (no server, no source); a failing contender is an entry with status "failed"."""
    admin = opts.server.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT VERSION()")
            say(f"MariaDB {cur.fetchone()[0]}")
            try:
                outcomes = SparkBench(opts, cur).run()
            finally:
                if not opts.keep:
                    drop_destinations(cur)
    finally:
        admin.close()
    targets = report(outcomes, opts)
    return [o.as_json() for o in outcomes] + targets


def failed_contenders(entries: list[dict[str, Any]]) -> list[str]:
    return [f"{e['scenario']} at {e['rows']:,} rows" for e in entries
            if e.get("scenario") != "target" and e.get("status") == "failed"]


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"expected spark.KEY=VALUE, got {text!r}")
    return key, value


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The Spark part's options; benchmarks.run adds them with a ``spark-`` prefix where names clash."""
    group = parser.add_argument_group("Spark scenario")
    group.add_argument(f"--{prefix}rows", type=int, nargs="+", default=[1_000_000, 5_000_000],
                       help="source sizes (default 1000000 5000000)")
    group.add_argument("--spark-dests", nargs="+", choices=DEST_SETS, default=["parquet+mysql", "mysql"],
                       help="destination sets (default parquet+mysql mysql; mysql3: three MySQL tables)")
    group.add_argument("--plain-persist", action="store_true",
                       help="the plain script reads the source once (persist) instead of once per destination")
    group.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS[:4]),
                       help="which to run (default: plain local spark auto; before needs its checkout: --before,"
                            " --spark-before through benchmarks.run)")
    group.add_argument(f"--{prefix}before", dest="spark_before", type=Path,
                       help="a checkout of an earlier wormhole: contender 'before' runs Spark mode from it")
    group.add_argument("--spark-master", default="local[2]", help="master of the plain script and [spark] (local[2])")
    group.add_argument("--auto-rows", type=int,
                       help="[spark] auto_rows for the spark/auto runs (default: unset, the shipped default)")
    group.add_argument("--spark-conf", type=_key_value, action="append", default=[], metavar="spark.KEY=VALUE",
                       help="extra [spark.conf] setting of the spark/auto runs (repeatable)")
    group.add_argument("--plain-partitions", type=int, default=4, help="read partitions of the plain script (4)")
    group.add_argument("--wormhole-channel", type=int, default=2, help="settings.speed.channel of the task (2)")
    group.add_argument("--wormhole-writers", type=int, default=3, help="concurrency of each destination (3)")


def options_from(args: argparse.Namespace, rows: list[int], server: Server, keep: bool) -> Options:
    return Options(rows=tuple(rows), dests=tuple(dict.fromkeys(args.spark_dests)), plain_persist=args.plain_persist,
                   before=args.spark_before, repeat=getattr(args, "repeat", None) or 1,
                   contenders=tuple(dict.fromkeys(args.contenders)), master=args.spark_master,
                   auto_rows=args.auto_rows, plain_partitions=args.plain_partitions, channel=args.wormhole_channel,
                   writers=args.wormhole_writers, spark_conf=tuple(args.spark_conf), server=server, keep=keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--keep", action="store_true", help="keep the whbs_d* databases and the workspace")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of the contenders, every other one in reverse order; the best run counts")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"write the figures here ({DEFAULT_JSON})")
    args = parser.parse_args()
    opts = options_from(args, args.rows, Server.of(args), args.keep)
    try:
        results = run_all(opts)
    except BenchmarkFailure as exc:
        raise SystemExit(f"SPARK BENCHMARK FAILED: {exc}") from None
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    if failed := failed_contenders(results):
        raise SystemExit(f"SPARK BENCHMARK: failed contenders: {'; '.join(failed)}")


if __name__ == "__main__":
    main()

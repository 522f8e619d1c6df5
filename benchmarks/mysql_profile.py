"""Where the time goes in wormhole's three-destination MySQL copy (issue 40, item 2).

One run of the MySQL part's task (``whb_src.t`` into three fresh tables ``whbs_lim_p1..3``, default task
settings, channel 1, 3 writers each) with the debug log, watched every ``--interval`` seconds from outside:

- CPU: wormhole's process and the local mariadbd, from ``/proc/<pid>/stat`` (user + sys), per phase of the
  run, against what the 2 cores could give (2 x wall time);
- the server's connections (``information_schema.processlist``): a destination connection with no statement
  running is a destination waiting for rows (or for wormhole to encode them); the source's SELECT in the
  state "Sending to client"/"Writing to net" is the server blocked on wormhole's reader, which reads no more
  while a destination's queue is full (waiting for the slowest destination) or while it has no CPU;
  ``COMMIT`` and the split marker's ``INSERT`` seen running say what commits and markers cost;
- the log's events: when each split was read whole (``reader.split_done``) and committed at each destination
  (``writer.split_committed``): the phases and the tail after the last split was read.

Sampled figures are estimates (a state seen at a sample counts ``interval`` seconds). Other work on the
machine shows in mariadbd's CPU and in the wall time; the report says the load average.

``make bench BENCH_ARGS="--only mysql-profile"`` or ``python -m benchmarks.mysql_profile [--rows N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.limit import MYSQL_SERVER, cpu_seconds, server_pids
from benchmarks.mysql_scenario import (
    SRC_DB,
    TABLE,
    BenchmarkFailure,
    Server,
    Workspace,
    ensure_source,
    say,
    snapshot,
    verify,
    wormhole_command,
    wormhole_spec,
)

DBS = ("whbs_lim_p1", "whbs_lim_p2", "whbs_lim_p3")
BLOCKED_STATES = ("Sending to client", "Writing to net")


@dataclass
class Sample:
    at: float
    wormhole_cpu: float
    server_cpu: float
    dest_busy: dict[str, int]
    """Connections of each destination running a statement."""
    dest_conns: dict[str, int]
    source_blocked: bool
    source_running: bool
    statements: Counter[str] = field(default_factory=Counter)
    """What the destinations' running statements are: load, commit, marker, other."""
    load_states: Counter[str] = field(default_factory=Counter)
    """The server's state of each running LOAD DATA (waiting for the client's bytes, or inserting)."""


def kind_of(info: str) -> str:
    text = info.lstrip().upper()
    if text.startswith("LOAD DATA"):
        return "load"
    if text.startswith("COMMIT"):
        return "commit"
    if text.startswith("INSERT"):
        return "marker"
    return "other"


class Watcher(threading.Thread):
    def __init__(self, server: Server, pid: int, interval: float, src: tuple[str, str]) -> None:
        super().__init__(daemon=True)
        self.server, self.pid, self.interval, self.src = server, pid, interval, src
        self.mysqld = server_pids(MYSQL_SERVER)
        self.samples: list[Sample] = []
        self.done = threading.Event()

    def run(self) -> None:
        conn = self.server.connect(autocommit=True)
        try:
            with conn.cursor() as cur:
                while not self.done.is_set():
                    self.samples.append(self.sample(cur))
                    self.done.wait(self.interval)
        finally:
            conn.close()

    def sample(self, cur: Any) -> Sample:
        cur.execute("SELECT db, command, state, info FROM information_schema.processlist "
                    "WHERE id <> CONNECTION_ID()")
        busy: Counter[str] = Counter()
        conns: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        states: Counter[str] = Counter()
        blocked = running = False
        for db, command, state, info in cur.fetchall():
            if db in DBS:
                conns[db] += 1
                if command == "Query" and info:
                    busy[db] += 1
                    kinds[kind_of(info)] += 1
                    if kind_of(info) == "load":
                        states[state or "-"] += 1
            elif db == self.src[0] and command == "Query" and info and f"`{self.src[1]}`" in info \
                    and "SELECT" in info.upper():
                running = True
                blocked = blocked or (state or "") in BLOCKED_STATES
        return Sample(time.perf_counter(), cpu_seconds([self.pid]), cpu_seconds(self.mysqld), dict(busy), dict(conns),
                      blocked, running, kinds, states)


def parse_log(stderr: str) -> list[dict[str, Any]]:
    events = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class Phases:
    """Wall-clock seconds from the process start (epoch seconds of each boundary)."""

    start: float
    reading: float
    read_done: float
    committed: float
    end: float

    def spans(self) -> list[tuple[str, float, float]]:
        return [("setup (start to the first read)", self.start, self.reading),
                ("reading (to the last split read)", self.reading, self.read_done),
                ("tail (to the last split committed)", self.read_done, self.committed),
                ("finish (to the process's exit)", self.committed, self.end)]


def phases(events: list[dict[str, Any]], start: float, end: float) -> Phases:
    def when(name: str, last: bool = False) -> float:
        times = [at(e) for e in events if e.get("event") == name]
        if not times:
            raise BenchmarkFailure(f"no {name} event in the run's log")
        return max(times) if last else min(times)
    return Phases(start, when("reader.started"), when("reader.split_done", last=True),
                  when("writer.split_committed", last=True), end)


def split_latency(events: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Seconds from a split read whole to its commit, per destination."""
    read = {e["split_id"]: at(e) for e in events if e.get("event") == "reader.split_done"}
    out: dict[str, list[float]] = {}
    for e in events:
        if e.get("event") == "writer.split_committed" and e.get("split_id") in read:
            out.setdefault(e["destination"], []).append(at(e) - read[e["split_id"]])
    return out


def profile(server: Server, rows: int, interval: float, src: tuple[str, str] | None = None) -> dict[str, Any]:
    """Profile one x3 run of ``whb_src.t`` built with ``rows`` rows, or of the existing table ``src``."""
    src_db, table = src or (SRC_DB, TABLE)
    admin = server.connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            source = snapshot(cur, src_db, table) if src else ensure_source(cur, TABLE, rows)
            rows = source.rows
            for db in DBS:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
                cur.execute(f"DROP TABLE IF EXISTS `{db}`.`{table}`")
                cur.execute(f"CREATE TABLE `{db}`.`{table}` LIKE `{src_db}`.`{table}`")
            ws = Workspace(Path(tempfile.mkdtemp(prefix="whbs-lim-profile-")))
            spec = wormhole_spec(server, table, 3, 1, 3)
            spec["source"]["params"]["database"] = src_db
            spec["destinations"] = [{**d, "id": db, "params": {**d["params"], "database": db}}
                                    for d, db in zip(spec["destinations"], DBS, strict=True)]
            task_id = ws.submit(spec)
            load = os.getloadavg()
            with tempfile.TemporaryFile() as err:
                wall0, epoch0 = time.perf_counter(), time.time()
                proc = subprocess.Popen([*wormhole_command(), "--task-id", str(task_id)], cwd=ws.root,
                                        env={**ws.env, "WORMHOLE_LOG_LEVEL": "debug"}, stdout=subprocess.DEVNULL,
                                        stderr=err)
                server0 = cpu_seconds(server_pids(MYSQL_SERVER))
                watcher = Watcher(server, proc.pid, interval, (src_db, table))
                watcher.start()
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - wall0
                server_cpu = cpu_seconds(server_pids(MYSQL_SERVER)) - server0
                watcher.done.set()
                watcher.join()
                proc.returncode = os.waitstatus_to_exitcode(status)
                err.seek(0)
                stderr = err.read().decode(errors="replace")
            if proc.returncode != 0:
                raise BenchmarkFailure(f"wormhole x3 exited {proc.returncode} (workspace {ws.root})\n"
                                       + "\n".join(stderr.strip().splitlines()[-10:]))
            verify(cur, "wormhole x3 (profiled)", table, DBS, source)
            for db in DBS:
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
            shutil.rmtree(ws.root)  # kept only when the run failed
    finally:
        admin.close()
    return summarize(parse_log(stderr), watcher.samples, epoch0, wall0, wall, usage.ru_utime + usage.ru_stime,
                     server_cpu, load, interval, rows)


def cpu_at(samples: list[Sample], when: float, attr: str) -> float:
    """The CPU counter ``attr`` at the last sample taken by ``when`` (the first one before the first)."""
    before = [s for s in samples if s.at <= when]
    return getattr(before[-1] if before else samples[0], attr)


def summarize(events: list[dict[str, Any]], samples: list[Sample], epoch0: float, wall0: float, wall: float,
              wormhole_cpu: float, server_cpu: float, load: tuple[float, float, float], interval: float,
              rows: int) -> dict[str, Any]:
    if not samples:
        raise BenchmarkFailure("the watcher took no sample")
    ph = phases(events, epoch0, epoch0 + wall)
    perf = [(name, a - epoch0 + wall0, b - epoch0 + wall0, b - a) for name, a, b in ph.spans()]
    spans = []
    for name, a, b, seconds in perf:
        w = cpu_at(samples, b, "wormhole_cpu") - cpu_at(samples, a, "wormhole_cpu")
        m = cpu_at(samples, b, "server_cpu") - cpu_at(samples, a, "server_cpu")
        spans.append({"phase": name, "seconds": round(seconds, 2), "wormhole_cpu_s": round(w, 2),
                      "server_cpu_s": round(m, 2), "cores_used": round((w + m) / seconds, 2) if seconds > 0 else None})
    _, read_a, read_b, _ = perf[1]
    reading = [s for s in samples if read_a <= s.at <= read_b] or samples
    idle = {db: round(sum(1 for s in reading if not s.dest_busy.get(db)) / len(reading), 3) for db in DBS}
    busy = {db: round(sum(s.dest_busy.get(db, 0) for s in reading) / len(reading), 2) for db in DBS}
    source = [s for s in reading if s.source_running]
    kinds: Counter[str] = Counter()
    states: Counter[str] = Counter()
    for s in samples:
        kinds.update(s.statements)
        states.update(s.load_states)
    commits = sum(1 for e in events if e.get("event") == "writer.split_committed")
    splits = sum(1 for e in events if e.get("event") == "reader.split_done")
    latency = split_latency(events)
    return {
        "rows": rows, "wall_s": round(wall, 2), "load_average": [round(x, 2) for x in load],
        "wormhole_cpu_s": round(wormhole_cpu, 2), "server_cpu_s": round(server_cpu, 2),
        "cores_used": round((wormhole_cpu + server_cpu) / wall, 2), "phases": spans, "splits": splits,
        "commits": commits, "samples": len(samples), "interval_s": interval,
        "destination_idle_while_reading": idle, "destination_busy_connections": busy,
        "source_blocked_while_reading": round(sum(s.source_blocked for s in source) / len(source), 3)
        if source else None,
        "statement_seconds": {k: round(v * interval, 2) for k, v in kinds.most_common()},
        "load_state_seconds": {k: round(v * interval, 2) for k, v in states.most_common()},
        "commit_and_marker_s_per_split": round((kinds["commit"] + kinds["marker"]) * interval / commits, 3)
        if commits else None,
        "read_to_commit_s": {db: {"mean": round(sum(v) / len(v), 2), "max": round(max(v), 2)}
                             for db, v in latency.items()},
    }


def report(p: dict[str, Any]) -> None:
    say(f"wormhole x3 profiled: {p['rows']:,} rows, {p['wall_s']} s wall, load average {p['load_average']} "
        f"(2 cores, shared)")
    say(f"  CPU: wormhole {p['wormhole_cpu_s']} s, mariadbd {p['server_cpu_s']} s: {p['cores_used']} of the 2 cores "
        "over the run")
    say(f"  {'phase':<36} {'seconds':>8} {'wormhole CPU':>13} {'server CPU':>11} {'cores used':>11}")
    for s in p["phases"]:
        say(f"  {s['phase']:<36} {s['seconds']:>8} {s['wormhole_cpu_s']:>13} {s['server_cpu_s']:>11} "
            f"{s['cores_used'] if s['cores_used'] is not None else '-':>11}")
    say(f"  while reading, share of samples with no statement running, per destination: "
        f"{p['destination_idle_while_reading']}; busy connections on average: {p['destination_busy_connections']}")
    say(f"  while reading, the source SELECT blocked on the client (Sending to client / Writing to net): "
        f"{p['source_blocked_while_reading']}")
    say(f"  destination statements seen running (connection-seconds): {p['statement_seconds']}; "
        f"commit + marker per split and destination: {p['commit_and_marker_s_per_split']} s "
        f"({p['commits']} commits of {p['splits']} splits)")
    say(f"  LOAD DATA statements by server state (connection-seconds): {p['load_state_seconds']}")
    say(f"  split read whole -> committed, per destination: {p['read_to_commit_s']}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("MySQL profile (--only mysql-profile)")
    group.add_argument("--profile-rows", type=int, default=1_000_000, help="rows of whb_src.t (default 1M)")
    group.add_argument("--profile-interval", type=float, default=0.1, help="seconds between samples (default 0.1)")
    group.add_argument("--profile-source", metavar="DB.TABLE", type=source_table,
                       help="profile the copy of this existing table (of whb_src.t's columns) instead")


def source_table(text: str) -> tuple[str, str]:
    db, dot, table = text.partition(".")
    if not dot or not db or not table:
        raise argparse.ArgumentTypeError(f"{text!r}: DB.TABLE")
    return db, table


def run_all(server: Server, rows: int, interval: float, src: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    p = profile(server, rows, interval, src)
    report(p)
    return [{"part": "mysql-profile", "scenario": "wormhole x3", **p}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--json", type=Path, help="also write the profile to this file")
    args = parser.parse_args()
    try:
        results = run_all(Server.of(args), args.profile_rows, args.profile_interval, args.profile_source)
    except BenchmarkFailure as exc:
        raise SystemExit(f"MYSQL PROFILE FAILED: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

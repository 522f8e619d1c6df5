"""CPU of the MySQL -> MySQL copy (benchmarks/mysql_scenario.py's table and task) for two source trees,
alternated round by round: each run is the real CLI in a child process, timed by its user+sys seconds
(``os.wait4``) beside its wall time, since the machine is shared and wall time is noisy.

Run: ``.venv/bin/python -m benchmarks.mysql_cpu --tree base=/tmp/base --tree head=/tmp/head [--rows N]
[--rounds 3] [--dests 1 3] [--channels 1] [--profile DIR]`` (a tree: ``git archive <commit> | tar -x -C DIR``;
not a checkout you edit while it runs). Each tree runs with ``PYTHONPATH`` set to it, in a workspace (task
database, each run's JSON log as ``task-N.log``) of its own. The data set is built in ``whbs_perf_src``
(``--source-db``; its own database, so other benchmarks are not disturbed), destinations in
``whbs_perf_d1..3``; every copy is verified by COUNT and CHECKSUM TABLE. One run of this script at a time
(a lock file): two would write the same destinations.

Beside the client's CPU it prints the server's: the whole mysqld process (every client's work: noisy) and
that of the run's own sessions (MariaDB's PROCESSLIST names each session's OS thread, ``TID``, whose
user+sys time /proc gives). ``--profile DIR`` runs each child under a per-thread cProfile and writes
``DIR/<tree>-x<dests>-<round>.prof`` (the profiler inflates the times: compare profiles with profiles).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import mysql_scenario as ms

SRC = "whbs_perf_src"
DESTS = ("whbs_perf_d1", "whbs_perf_d2", "whbs_perf_d3")

_PROFILED = r"""
import atexit, cProfile, pstats, sys, threading
out = sys.argv.pop(1)
profiles = []
def _hook(*_a):
    sys.setprofile(None)
    p = cProfile.Profile()
    profiles.append(p)
    p.enable()
threading.setprofile(_hook)
main = cProfile.Profile()
profiles.append(main)
def _dump():
    for p in profiles:
        p.disable()
    stats = None
    for p in profiles:
        try:
            stats = pstats.Stats(p) if stats is None else stats.add(p)
        except TypeError:  # a thread's profile that saw no call
            pass
    stats.dump_stats(out)
atexit.register(_dump)
main.enable()
from wormhole.entry import main as run
run()
"""


def mysqld_pid() -> int | None:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() in ("mysqld", "mariadbd"):
                    return int(pid)
            except OSError:
                continue
    return None


def _cpu_of(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mysqld_cpu(pid: int | None) -> float:
    """User+sys seconds of the whole server process so far (every client's work: noisy on a shared machine)."""
    try:
        return _cpu_of(Path(f"/proc/{pid}/stat")) if pid else 0.0
    except OSError:
        return 0.0


class SessionCpu(threading.Thread):
    """The server's CPU spent in this run's own sessions: every 50 ms, the sessions on ``dbs`` (MariaDB's
    PROCESSLIST names each one's OS thread, ``TID``) and their thread's user+sys time; a session's share is its
    last reading less its first (what a thread did before its session was first seen is missed)."""

    def __init__(self, server: ms.Server, pid: int | None, dbs: tuple[str, ...]) -> None:
        super().__init__(daemon=True)
        self.server, self.pid, self.dbs = server, pid, dbs
        self.seen: dict[tuple[int, int], list[float]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        if self.pid is None:
            return
        conn = self.server.connect(autocommit=True)
        marks = ", ".join(["%s"] * len(self.dbs))
        try:
            with conn.cursor() as cur:
                while not self.done.wait(0.05):
                    cur.execute(f"SELECT ID, TID FROM information_schema.PROCESSLIST WHERE DB IN ({marks}) "
                                "AND ID <> CONNECTION_ID()", self.dbs)
                    for sid, tid in cur.fetchall():
                        try:
                            cpu = _cpu_of(Path(f"/proc/{self.pid}/task/{tid}/stat"))
                        except OSError:
                            continue
                        self.seen.setdefault((sid, tid), [cpu, cpu])[1] = cpu
        finally:
            conn.close()

    def stop(self) -> float:
        self.done.set()
        self.join()
        return sum(last - first for first, last in self.seen.values())


class Tree:
    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path
        self.root = Path(tempfile.mkdtemp(prefix=f"whbs-perf-{name}-"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
        self.env.update(WORMHOLE_TASK_DB="sqlite:///var/wormhole.db", WORMHOLE_CONF=str(path / "conf"),
                        WORMHOLE_LOG_FORMAT="json", PYTHONPATH=str(path))
        init = subprocess.run([sys.executable, "-m", "wormhole", "db", "init"], cwd=self.root, env=self.env,
                              capture_output=True, text=True)
        if init.returncode != 0:
            raise SystemExit(f"{name}: db init failed: {init.stderr}")

    def submit(self, spec: dict[str, Any]) -> int:
        conn = sqlite3.connect(self.root / "var" / "wormhole.db")
        with conn:
            cur = conn.execute("INSERT INTO wormhole_task (name, spec) VALUES (?, ?)", (spec["name"], json.dumps(spec)))
        conn.close()
        assert cur.lastrowid is not None
        return cur.lastrowid


def spec(server: ms.Server, src: str, dests: int, channels: int, writers: int) -> dict[str, Any]:
    source = {**server.task_params(), "database": src, "table": ms.TABLE, "split_pk": "id"}
    return {"name": f"perf x{dests}", "source": {"plugin": "mysql", "params": source},
            "destinations": [{"id": db, "plugin": "mysql", "concurrency": writers,
                              "params": {**server.task_params(), "database": db, "table": ms.TABLE,
                                         "load": "truncate"}} for db in DESTS[:dests]],
            "settings": {"speed": {"channel": channels}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a source tree")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dests", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--source-db", default=SRC, help=f"the source database (default {SRC})")
    args = parser.parse_args()
    # Two of these at once would write the same destinations (and time each other): one at a time.
    lock = open(Path(tempfile.gettempdir()) / "whbs_perf.lock", "w")  # held until exit
    fcntl.flock(lock, fcntl.LOCK_EX)
    server = ms.Server()
    src = args.source_db
    trees = [Tree(n, Path(p).resolve()) for n, p in (t.split("=", 1) for t in args.tree)]
    admin = server.connect(autocommit=True)
    cur = admin.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{src}` CHARACTER SET utf8mb4")
    cur.execute(f"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='{src}' AND table_name='t'")
    if cur.fetchone()[0] == 0 or ms.snapshot(cur, src, ms.TABLE).rows != args.rows:
        cur.execute(f"DROP TABLE IF EXISTS `{src}`.`{ms.TABLE}`")
        cur.execute(ms.SCHEMA.format(db=src, table=ms.TABLE))
        cur.execute(ms.FILL.format(db=src, table=ms.TABLE, rows=args.rows))
    source = ms.snapshot(cur, src, ms.TABLE)
    for db in DESTS:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4")
        cur.execute(f"DROP TABLE IF EXISTS `{db}`.`{ms.TABLE}`")
        cur.execute(f"CREATE TABLE `{db}`.`{ms.TABLE}` LIKE `{src}`.`{ms.TABLE}`")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, int], list[tuple[float, float, float, float]]] = {}
    pid = mysqld_pid()
    for rnd in range(args.rounds):
        for dests in args.dests:
            for tree in trees if rnd % 2 == 0 else reversed(trees):
                for db in DESTS[:dests]:
                    cur.execute(f"TRUNCATE TABLE `{db}`.`{ms.TABLE}`")
                task = tree.submit(spec(server, src, dests, args.channels, args.writers))
                cmd = [sys.executable, "-m", "wormhole", "--task-id", str(task)]
                if args.profile:
                    out = args.profile / f"{tree.name}-x{dests}-{rnd}.prof"
                    cmd = [sys.executable, "-c", _PROFILED, str(out), "--task-id", str(task)]
                server_before = mysqld_cpu(pid)
                sessions = SessionCpu(server, pid, (src, *DESTS[:dests]))
                sessions.start()
                start = time.perf_counter()
                with open(tree.root / f"task-{task}.log", "w+b") as err:
                    proc = subprocess.Popen(cmd, cwd=tree.root, env=tree.env, stdout=subprocess.DEVNULL, stderr=err)
                    _, status, usage = os.wait4(proc.pid, 0)
                    wall = time.perf_counter() - start
                    server_cpu = mysqld_cpu(pid) - server_before
                    session_cpu = sessions.stop()
                    if os.waitstatus_to_exitcode(status) != 0:
                        err.seek(0)
                        raise SystemExit(f"{tree.name} x{dests} failed:\n{err.read().decode()[-3000:]}")
                ms.verify(cur, f"{tree.name} x{dests}", ms.TABLE, DESTS[:dests], source)
                cpu = usage.ru_utime + usage.ru_stime
                results.setdefault((tree.name, dests), []).append((cpu, wall, server_cpu, session_cpu))
                print(f"round {rnd} {tree.name:<6} x{dests}: cpu {cpu:6.2f} s (user {usage.ru_utime:.2f} sys "
                      f"{usage.ru_stime:.2f}), wall {wall:6.2f} s = {args.rows / wall:9,.0f} rows/s, "
                      f"mysqld cpu {server_cpu:6.2f} s, its sessions {session_cpu:6.2f} s", flush=True)
    print("\nmedian (min) over rounds:")
    for (name, dests), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        cpus, walls, servers, sessions_cpu = (sorted(x) for x in zip(*runs, strict=True))
        mid = len(runs) // 2
        print(f"{name:<6} x{dests}: cpu {cpus[mid]:6.2f} ({cpus[0]:.2f}) s, wall {walls[mid]:6.2f} ({walls[0]:.2f}) s "
              f"= {args.rows / walls[mid]:9,.0f} ({args.rows / walls[0]:,.0f}) rows/s, "
              f"mysqld cpu {servers[mid]:6.2f} s, "
              f"its sessions {sessions_cpu[mid]:6.2f} ({sessions_cpu[0]:.2f}) s")
    admin.close()


if __name__ == "__main__":
    main()

"""Finding one altered row (issue 39): ``wormhole verify`` and ``wormhole diff`` against datafold's ``data-diff``
0.11 on a MySQL table and its PostgreSQL copy.

The data set: ``--rows`` rows (1M by default) in the MariaDB table ``whb_verify.src`` (an id key, an integer,
a text, a decimal, a timestamp with microseconds, a double), copied into PostgreSQL (``bench_pg``, schema
``whb_verify``) by wormhole itself, then one value of one row changed there. Contenders, one after another,
``--repeat`` rounds:

- ``wormhole verify --task-id N`` (the copy's task: the source against its destination);
- ``wormhole diff`` of the two tables, the same comparison given as two source specs;
- ``data-diff mysql://... src postgresql://... src -k id -c ...`` (its bisection: checksums of key segments
  computed in each database, recursing into the segments that differ; ``--threads 4``). data-diff lives in a
  virtualenv of its own (``scripts/install-data-diff.sh``, ``make bench-deps``); without it, its line says so.

Each contender must name the altered row's key (the script exits non-zero otherwise). Figures: wall time,
rows compared per second (both sides' rows), and each time's ratio to ``wormhole verify``'s. (No peak RSS:
``timed``'s wait4 figure includes the benchmark process's own pages copied at fork.)

Run: ``.venv/bin/python -m benchmarks.verify_diff [--rows 1000000] [--repeat 2] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.dbcopy import Pg
from benchmarks.mysql_scenario import BenchmarkFailure, Server, Timed, say, timed, wormhole_command

DB = "whb_verify"
ALTERED = 4242
COLUMNS = ("n", "name", "amount", "at", "ratio")
REPO = Path(__file__).resolve().parents[1]
DATA_DIFF = REPO / os.environ.get("DATA_DIFF_VENV", "var/bench-venvs/data-diff") / "bin" / "data-diff"


def build(server: Server, pg: Pg, rows: int, ws: Path) -> int:
    """The source table, its copy made by a wormhole task (whose id is returned), one value changed in it."""
    source_table(server, pg, DB, rows)
    spec = {"source": {"plugin": "mysql", "params": {**server.task_params(), "database": DB, "table": "src",
                                                      "split_pk": "id"}},
            "destinations": [{"id": "pg", "plugin": "postgres",
                              "params": {**pg.task_params(), "schema": DB, "table": "src", "create_table": True}}],
            "settings": {"speed": {"channel": 4}}}
    path = ws / "copy.json"
    path.write_text(json.dumps(spec))
    copy = timed([*wormhole_command(), "run", str(path)], cwd=ws, env=_env(ws))
    if copy.returncode != 0:
        raise BenchmarkFailure(f"the copy failed ({copy.returncode}): {copy.stderr[-2000:]}")
    with pg.connect() as conn_pg:
        conn_pg.execute(f"UPDATE {DB}.src SET amount = amount + 0.01 WHERE id = %s", (ALTERED,))
    return 1  # `wormhole run` in a fresh workspace records the first task


def source_table(server: Server, pg: Pg, db: str, rows: int, *statements: str) -> None:
    """MariaDB database ``db`` made afresh with its ``src`` table of ``rows`` rows (an id key, an int, a text, a
    decimal, a timestamp with microseconds, a double) and ``statements`` run after; PostgreSQL schema ``db``
    made afresh."""
    conn = server.connect()
    try:
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        cur.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
        cur.execute(f"CREATE TABLE {db}.src (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL, name VARCHAR(40) NULL, "
                    "amount DECIMAL(14,2) NULL, at DATETIME(6) NULL, ratio DOUBLE NULL)")
        cur.execute(f"INSERT INTO {db}.src SELECT seq, seq % 1000, CONCAT('name-', seq), seq * 1.25, "
                    "TIMESTAMP('2026-01-01 00:00:00.000001') + INTERVAL seq SECOND, seq / 7 "
                    f"FROM {db}.seq_1_to_{rows}")
        for statement in statements:
            cur.execute(statement)
        conn.commit()
    finally:
        conn.close()
    pg.ensure_database()
    with pg.connect() as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {db} CASCADE")
        admin.execute(f"CREATE SCHEMA {db}")


def drop(server: Server, pg: Pg, db: str) -> None:
    """What :func:`source_table` made, gone."""
    conn = server.connect()
    try:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS {db}")
    finally:
        conn.close()
    with pg.connect() as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {db} CASCADE")


def _env(ws: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORMHOLE_")}
    env["WORMHOLE_TASK_DB"] = f"sqlite:///{ws / 'var' / 'wormhole.db'}"
    env["WORMHOLE_LOG_LEVEL"] = "warning"
    return env


def _found(name: str, run: Timed, text: str) -> None:
    if str(ALTERED) not in text:
        raise BenchmarkFailure(f"{name} did not name row {ALTERED} (exit {run.returncode}): "
                               f"{run.stdout[-1500:]} {run.stderr[-1500:]}")


def contenders(server: Server, pg: Pg, ws: Path, task_id: int) -> dict[str, list[str] | None]:
    left = {"plugin": "mysql", "params": {**server.task_params(), "database": DB, "table": "src", "split_pk": "id"}}
    right = {"plugin": "postgres", "params": {**pg.task_params(), "schema": DB, "table": "src"}}
    mysql_url = f"mysql://{server.user}:{server.password}@{server.host}:{server.port}/{DB}"
    # data-diff's PostgreSQL driver needs a password in the URL (any, under trust authentication).
    pg_url = f"postgresql://{pg.user}:{pg.password or 'trust'}@{pg.host}:{pg.port}/{pg.database}"
    data_diff = [str(DATA_DIFF), mysql_url, "src", pg_url, f"{DB}.src", "-k", "id",
                 *(a for c in COLUMNS for a in ("-c", c)), "--threads", "4", "--json"]
    return {
        "wormhole verify": [*wormhole_command(), "verify", "--task-id", str(task_id), "--json"],
        "wormhole diff": [*wormhole_command(), "diff", json.dumps(left), json.dumps(right), "--json"],
        "data-diff 0.11": data_diff if DATA_DIFF.exists() else None,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    Server.arguments(parser)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="leave the tables behind")
    args = parser.parse_args(argv)
    server, pg = Server.of(args), Pg()
    ws = Path(tempfile.mkdtemp(prefix="wh-verify-bench-"))
    (ws / "var").mkdir()
    figures: list[dict[str, Any]] = []
    try:
        say(f"building {args.rows} rows and their PostgreSQL copy ...")
        task_id = build(server, pg, args.rows, ws)
        runs = contenders(server, pg, ws, task_id)
        best: dict[str, Timed] = {}
        for round_ in range(args.repeat):
            for name, cmd in runs.items():
                if cmd is None:
                    continue
                run = timed(cmd, cwd=ws, env=_env(ws))
                _found(name, run, run.stdout)
                say(f"  round {round_ + 1}: {name}: {run.seconds:.2f} s")
                if name not in best or run.seconds < best[name].seconds:
                    best[name] = run
        base = best.get("wormhole verify")
        for name, cmd in runs.items():
            if cmd is None:
                say(f"{name}: not installed (make bench-deps)")
                continue
            run = best[name]
            ratio = round(run.seconds / base.seconds, 2) if base else None
            figures.append({"contender": name, "seconds": round(run.seconds, 2), "rows": args.rows,
                            "rows_per_s": round(2 * args.rows / run.seconds), "time_vs_wormhole_verify": ratio})
            say(f"{name}: {run.seconds:.2f} s ({2 * args.rows / run.seconds:,.0f} rows/s over both sides)"
                + (f", {ratio}x wormhole verify's time" if ratio else ""))
    finally:
        if not args.keep:
            drop(server, pg, DB)
        shutil.rmtree(ws, ignore_errors=True)
    return figures


if __name__ == "__main__":
    main()

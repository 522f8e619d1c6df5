"""What verifying in the run costs (issue 39): ``settings.verify`` off, ``count`` and ``checksum`` on one copy of
a MySQL table into MySQL, PostgreSQL and parquet at once.

The data set: ``--rows`` rows (1M by default) in the MariaDB table ``whb_vrun.src`` (an id key, an integer, a
text, a decimal, a timestamp with microseconds, a double). Each round runs the same task three times, in
turn (off, count, checksum; the order rotates each round so none always runs first): ``wormhole run`` of
MySQL -> MySQL (``load: truncate``), PostgreSQL (``load: truncate``) and parquet (``mode: overwrite``), default
settings otherwise. Every run must exit 0; a verifying run must say ``verified`` for all three destinations,
and every copy's row count is checked. Figures: the best wall time of each mode and its ratio to off's.

Run: ``.venv/bin/python -m benchmarks.verify_run [--rows 1000000] [--repeat 2] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.dbcopy import Pg
from benchmarks.mysql_scenario import BenchmarkFailure, Server, Timed, say, timed, wormhole_command
from benchmarks.verify_diff import _env, drop, source_table

DB = "whb_vrun"
MODES = ("off", "count", "checksum")


def build(server: Server, pg: Pg, rows: int) -> None:
    """The source table (:func:`benchmarks.verify_diff.source_table`) and an empty target in each database."""
    source_table(server, pg, DB, rows, f"CREATE TABLE {DB}.dst LIKE {DB}.src")
    with pg.connect() as admin:
        admin.execute(f"CREATE TABLE {DB}.dst (id bigint PRIMARY KEY, n int NOT NULL, name varchar(40), "
                      "amount numeric(14,2), at timestamp(6), ratio double precision)")


def spec(server: Server, pg: Pg, lake: Path, mode: str) -> dict[str, Any]:
    return {"source": {"plugin": "mysql", "params": {**server.task_params(), "database": DB, "table": "src",
                                                      "split_pk": "id"}},
            "destinations": [
                {"id": "mysql", "plugin": "mysql",
                 "params": {**server.task_params(), "database": DB, "table": "dst", "load": "truncate"}},
                {"id": "pg", "plugin": "postgres",
                 "params": {**pg.task_params(), "schema": DB, "table": "dst", "load": "truncate"}},
                {"id": "lake", "plugin": "file", "params": {"path": str(lake), "format": "parquet"}}],
            "settings": {"verify": mode}}


def one(server: Server, pg: Pg, ws: Path, mode: str, rows: int, task_id: int) -> Timed:
    """``wormhole run`` of the copy with ``verify: mode`` (the workspace's ``task_id``-th task), checked."""
    path = ws / f"{mode}.json"
    path.write_text(json.dumps(spec(server, pg, ws / "lake", mode)))
    run = timed([*wormhole_command(), "run", str(path)], cwd=ws, env=_env(ws))
    if run.returncode != 0:
        raise BenchmarkFailure(f"verify {mode}: exit {run.returncode}: {run.stderr[-2000:]}")
    show = timed([*wormhole_command(), "task", "show", str(task_id)], cwd=ws, env=_env(ws))
    result = json.loads(show.stdout)["result"]
    for name, dest in result["destinations"].items():
        if dest["rows_written"] != rows:
            raise BenchmarkFailure(f"verify {mode}: {name} wrote {dest['rows_written']} rows, not {rows}")
        if mode != "off" and dest.get("verify", {}).get("state") != "verified":
            raise BenchmarkFailure(f"verify {mode}: {name} is not verified: {dest.get('verify')}")
    return run


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    Server.arguments(parser)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="leave the tables behind")
    args = parser.parse_args(argv)
    server, pg = Server.of(args), Pg()
    ws = Path(tempfile.mkdtemp(prefix="wh-vrun-bench-"))
    (ws / "var").mkdir()
    figures: list[dict[str, Any]] = []
    try:
        say(f"building {args.rows} rows ...")
        build(server, pg, args.rows)
        best: dict[str, Timed] = {}
        task_id = 0  # `wormhole run` records each run as the workspace's next task
        for round_ in range(args.repeat):
            order = MODES[round_ % 3:] + MODES[:round_ % 3]
            for mode in order:
                task_id += 1
                run = one(server, pg, ws, mode, args.rows, task_id)
                say(f"  round {round_ + 1}: verify {mode}: {run.seconds:.2f} s")
                if mode not in best or run.seconds < best[mode].seconds:
                    best[mode] = run
        base = best["off"].seconds
        for mode in MODES:
            seconds = best[mode].seconds
            figures.append({"verify": mode, "seconds": round(seconds, 2), "rows": args.rows,
                            "over_off": round(seconds / base - 1, 3)})
            say(f"verify {mode}: {seconds:.2f} s ({args.rows / seconds:,.0f} rows/s), "
                f"{100 * (seconds / base - 1):+.1f}% over off")
    finally:
        if not args.keep:
            drop(server, pg, DB)
        shutil.rmtree(ws, ignore_errors=True)
    return figures


if __name__ == "__main__":
    main()

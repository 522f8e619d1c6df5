"""Speed limits: does a limited task move at its limit, whatever its channels and destinations?

Every case is a real ``wormhole --task-id`` run (a child process, in a scratch workspace with its own
SQLite task database, as benchmarks/mysql_scenario.py runs wormhole) with ``settings.speed.record`` or
``settings.speed.byte`` set:

- stream -> null: record and byte limits, 1 and 4 channels, 1 and 3 destinations (8 cases);
- MySQL -> MySQL on the local MariaDB (``whb_src.t_speed``, the MySQL scenario's recipe, copied into
  ``whb_d1..3`` with ``load: truncate``, each copy checked by ``CHECKSUM TABLE``): the same 8 cases;
- one Spark case: stream -> null with a record limit, ``settings.engine: spark`` on ``local[2]``.

Each case runs about ``--seconds`` (default 10) at its limit, and the limits are set so that one batch
(``exchange.batch_rows``, 4,096 rows) is under 2% of a run, so a 5% tolerance is meaningful.

Printed per case: the limit, the rate measured by the run (the result's ``speed.rows_per_s`` or
``bytes_per_s``: from the first batch read to the end of the last batch's wait), their ratio and
whether it is within 5% of the limit; also the whole run's wall rate (rows or bytes over the result's
``duration_s``: planning, commits and, in Spark mode, the read job's start-up included), for context.

Run: ``.venv/bin/python -m benchmarks.run --only speed`` (figures into benchmarks/results/latest.json) or
alone ``.venv/bin/python -m benchmarks.speed [--parts stream mysql spark] [--seconds 10]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.mysql_scenario import (
    DEST_DBS,
    REPO,
    SRC_DB,
    BenchmarkFailure,
    Server,
    Workspace,
    create_destinations,
    drop_destinations,
    empty_destinations,
    ensure_source,
    say,
    verify,
)

TABLE = "t_speed"
TOLERANCE = 0.05
PARTS = ("stream", "mysql", "spark")

STREAM_RECORD = 200_000
"""rows/s of the stream cases: far below what stream -> null moves (millions of rows/s)."""
STREAM_BYTE = 12_000_000
"""bytes/s of the stream cases (the generator's rows are estimated at about 61 bytes: ~200k rows/s)."""
MYSQL_RECORD = 25_000
"""rows/s of the MySQL cases: below what 3 destinations take on 2 cores shared with MariaDB (~50k). Their
byte limit is the same pace in bytes (the source's rows, as the exchange estimates them): the table
has ``MYSQL_RECORD x seconds`` rows, so every MySQL case lasts about ``seconds``."""
SPARK_RECORD = 50_000


@dataclass(frozen=True, slots=True)
class Case:
    part: str
    kind: str
    """``record`` or ``byte``."""
    limit: int
    rows: int
    channels: int
    destinations: int

    @property
    def label(self) -> str:
        source = {"stream": "stream->null", "mysql": "mysql->mysql", "spark": "spark stream->null"}[self.part]
        return f"{source} x{self.destinations} ch{self.channels} {self.kind}"


@dataclass(frozen=True, slots=True)
class Options:
    parts: tuple[str, ...] = PARTS
    seconds: float = 10.0
    server: Server = field(default_factory=Server)
    keep: bool = False


def cases(opts: Options, mysql_row_bytes: float | None) -> list[Case]:
    out = []
    grid = [(ch, d) for d in (1, 3) for ch in (1, 4)]
    mysql_byte = round(MYSQL_RECORD * mysql_row_bytes) if mysql_row_bytes is not None else 0
    for part, record, byte, row_bytes in (("stream", STREAM_RECORD, STREAM_BYTE, 61.3),
                                          ("mysql", MYSQL_RECORD, mysql_byte, mysql_row_bytes)):
        if part not in opts.parts:
            continue
        assert row_bytes is not None
        for ch, d in grid:
            out.append(Case(part, "record", record, round(record * opts.seconds), ch, d))
        for ch, d in grid:
            out.append(Case(part, "byte", byte, round(byte / row_bytes * opts.seconds), ch, d))
    if "spark" in opts.parts:
        out.append(Case("spark", "record", SPARK_RECORD, round(SPARK_RECORD * opts.seconds), 2, 1))
    return out


def spec(case: Case, server: Server) -> dict[str, Any]:
    # DataX's rule sets the channel count: limit / per-channel limit.
    speed = {case.kind: case.limit, f"channel_{case.kind}": case.limit // case.channels}
    if case.part == "mysql":
        source = {"plugin": "mysql", "params": {**server.task_params(), "database": SRC_DB, "table": TABLE,
                                                "split_pk": "id"}}
        dests = [{"id": db, "plugin": "mysql",
                  "params": {**server.task_params(), "database": db, "table": TABLE, "load": "truncate"}}
                 for db in DEST_DBS[:case.destinations]]
    else:
        source = {"plugin": "stream", "params": {"rows": case.rows, "splits": max(4, case.channels)}}
        dests = [{"id": f"null{i}", "plugin": "stream"} for i in range(case.destinations)]
    settings: dict[str, Any] = {"speed": speed}
    if case.part == "spark":
        settings["engine"] = "spark"
    return {"name": f"bench speed {case.label}", "source": source, "destinations": dests, "settings": settings}


def spark_conf_dir(root: Path) -> Path:
    """The repository's engine.toml with a [spark] section of its own (local[2], files in the workspace)."""
    base = (REPO / "conf" / "engine.toml").read_text(encoding="utf-8").split("\n[spark]", 1)[0]
    text = base.rstrip("\n") + "\n\n" + "\n".join([
        "[spark]", 'master = "local[2]"', 'app_name = "wormhole-bench-speed"',
        f"warehouse_dir = {json.dumps(str(root / 'spark' / 'warehouse'))}",
        f"metastore_dir = {json.dumps(str(root / 'spark' / 'metastore'))}",
        "", "[spark.conf]", '"spark.ui.enabled" = "false"']) + "\n"
    tomllib.loads(text)
    conf = root / "conf-spark"
    conf.mkdir(exist_ok=True)
    (conf / "engine.toml").write_text(text, encoding="utf-8")
    return conf


def run_case(ws: Workspace, case: Case, server: Server) -> dict[str, Any]:
    env = dict(ws.env)
    if case.part == "spark":
        env["WORMHOLE_CONF"] = str(spark_conf_dir(ws.root))
    _, result = ws.run(spec(case, server), case.label, env)
    moved = [d["rows_written"] for d in result["destinations"].values()]
    if moved != [result["source"]["rows_read"]] * case.destinations:
        raise BenchmarkFailure(f"{case.label}: rows written {moved}, read {result['source']['rows_read']}")
    return result


def figure(case: Case, result: dict[str, Any]) -> dict[str, Any]:
    speed = result["speed"]
    unit = "rows" if case.kind == "record" else "bytes"
    measured = speed[f"{unit}_per_s"]
    ratio = measured / case.limit
    wall = speed[unit] / result["duration_s"]
    return {"part": "speed", "scenario": case.label, "source": case.part, "kind": case.kind, "limit": case.limit,
            "rows": speed["rows"], "bytes": speed["bytes"], "channels": case.channels,
            "destinations": case.destinations, "measured_per_s": measured, "ratio": round(ratio, 4),
            "within_5pct": abs(ratio - 1) <= TOLERANCE, "seconds": speed["seconds"], "waited_s": speed["waited_s"],
            "run_s": result["duration_s"], "wall_ratio": round(wall / case.limit, 4)}


def show(f: dict[str, Any]) -> None:
    unit = "r/s" if f["kind"] == "record" else "B/s"
    say(f"{f['scenario']:<34} {f['limit']:>12,} {unit} {f['measured_per_s']:>14,.1f} {f['ratio']:>7.4f} "
        f"{'yes' if f['within_5pct'] else 'NO':>6} {f['seconds']:>8.2f} {f['run_s']:>7.2f} {f['wall_ratio']:>7.3f}")


def run_all(opts: Options) -> list[dict[str, Any]]:
    """Every case of the chosen parts; their figures as latest.json entries. Raises BenchmarkFailure."""
    ws = Workspace(Path(tempfile.mkdtemp(prefix="whb-speed-")))
    admin = cur = None
    row_bytes: float | None = None
    if "mysql" in opts.parts:
        admin = opts.server.connect(autocommit=True)
        cur = admin.cursor()
        snapshot = ensure_source(cur, TABLE, round(MYSQL_RECORD * opts.seconds))
        create_destinations(cur, (TABLE,))
        row_bytes = mysql_row_bytes(opts.server)
        say(f"  whb_src.{TABLE}: about {row_bytes:.1f} estimated bytes a row")
    figures = []
    try:
        say(f"{'case':<34} {'limit':>16} {'measured':>14} {'ratio':>7} {'<=5%':>6} {'paced s':>8} "
            f"{'run s':>7} {'wall/limit':>7}")
        for case in cases(opts, row_bytes):
            if case.part == "mysql":
                assert cur is not None
                empty_destinations(cur, TABLE, DEST_DBS[:case.destinations])
            result = run_case(ws, case, opts.server)
            if case.part == "mysql":
                verify(cur, case.label, TABLE, DEST_DBS[:case.destinations], snapshot)
            figures.append(figure(case, result))
            show(figures[-1])
    finally:
        if cur is not None and not opts.keep:
            drop_destinations(cur)
        if admin is not None:
            admin.close()
    shutil.rmtree(ws.root, ignore_errors=True)
    missed = [f["scenario"] for f in figures if not f["within_5pct"]]
    say(f"{len(figures) - len(missed)} of {len(figures)} cases within {TOLERANCE:.0%} of their limit"
        + (f"; missed: {', '.join(missed)}" if missed else ""))
    return figures


def mysql_row_bytes(server: Server) -> float:
    """The exchange's estimate of a row of the MySQL source, as the mysql reader returns it (its first rows)."""
    from wormhole.exchange.exchanger import estimate_row_bytes

    conn = server.connect(SRC_DB)
    try:
        with conn.cursor() as c:
            c.execute(f"SELECT * FROM `{TABLE}` ORDER BY id LIMIT 1000")
            rows = c.fetchall()
    finally:
        conn.close()
    return sum(estimate_row_bytes(r) for r in rows) / len(rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Speed limits")
    group.add_argument("--speed-parts", nargs="+", choices=PARTS, default=list(PARTS),
                       help="which cases to run (default all: stream mysql spark)")
    group.add_argument("--speed-seconds", type=float, default=10.0, help="length of each case at its limit (10)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--keep", action="store_true", help="keep the whb_d* databases")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    opts = Options(parts=tuple(args.speed_parts), seconds=args.speed_seconds,
                   server=Server.of(args), keep=args.keep)
    try:
        results = run_all(opts)
    except BenchmarkFailure as exc:
        raise SystemExit(f"SPEED BENCHMARK FAILED: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""Push-up: a 10%-selective filter on a MySQL source, run in wormhole (off), in the source (static), or moved
there split by split as the scheduler measures it (adaptive).

The source is ``whb_src.t_pushup`` (1M rows by default, built once with the sequence engine and reused
while it keeps its recipe, row count and checksum), with an int column ``grp`` = ``id % 10``. The task
reads it with ``split_pk: id`` (``channels x split_factor`` key ranges), keeps ``grp = 3`` (a filter the
mysql dialect evaluates, so it can be pushed into the split queries) and writes the 10% left into
``whb_d1.t_pushup`` with ``load: truncate``: the same task for every mode but ``settings.pushup``.

Every run is a real ``wormhole --task-id`` child process in a scratch workspace (as
benchmarks/mysql_scenario.py and benchmarks/speed.py run wormhole), with the repository's engine.toml
plus a ``[pushup]`` section whose ``interval_s`` is shorter than the default 0.5 s, so the adaptive
scheduler decides while most splits are still to be read. The modes run alternately (off, adaptive,
static, ``--repeat`` times); after each run the destination must hold exactly the source's ``grp = 3``
rows (``COUNT(*)`` and ``CHECKSUM TABLE`` against a reference copy), or the benchmark fails.

Printed: per mode its runs, the best run's source rows/s (source rows / the result's ``duration_s``)
and the best wall rows/s (source rows / the child's wall time, start-up included), how many splits read with
the filter pushed into the source, and the ratios adaptive / off and static / off.

Run: ``.venv/bin/python -m benchmarks.run --only pushup`` (figures into benchmarks/results/latest.json) or
alone ``.venv/bin/python -m benchmarks.pushup [--pushup-rows N] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
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
    Snapshot,
    Workspace,
    ensure_source,
    say,
    snapshot,
)

TABLE = "t_pushup"
REFERENCE = "t_pushup_ref"
"""``whb_d1.t_pushup_ref``: the rows the filter keeps, copied by the server; every run is checked against it."""
DEST_DB = DEST_DBS[0]
MODES = ("off", "adaptive", "static")
GROUPS = 10
KEEP = 3
FILTER = f"grp = {KEEP}"

SCHEMA = """
CREATE TABLE `{db}`.`{table}` (
  id BIGINT NOT NULL PRIMARY KEY,
  grp INT NOT NULL,
  k INT NOT NULL,
  name VARCHAR(40),
  amount DECIMAL(12,2),
  score DOUBLE,
  created DATETIME(3),
  note VARCHAR(40)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""

FILL = """
INSERT INTO `{db}`.`{table}`
SELECT seq,
       seq % GROUPS,
       (seq * 7919) % 1000003,
       CONCAT(ELT(1 + seq % 6, 'Ann', 'Zoë', 'Bob', 'Jürgen', 'Li Wei', 'Ørsted'), ' #', seq % 100003),
       IF(seq % 17 = 0, NULL, ((seq * 7127) % 100000000) / 100),
       seq / 7e0 - 50000,
       TIMESTAMP'2020-01-01 00:00:00' + INTERVAL seq * 61 SECOND,
       IF(seq % 13 = 0, NULL, LEFT(SHA1(seq), 8 + seq % 33))
FROM `{db}`.seq_1_to_{rows}
""".replace("GROUPS", str(GROUPS))
RECIPE = hashlib.sha1((SCHEMA + FILL).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Options:
    rows: int = 1_000_000
    repeat: int = 3
    channels: int = 2
    split_factor: int = 10
    interval_s: float = 0.1
    server: Server = field(default_factory=Server)
    keep: bool = False


@dataclass(frozen=True, slots=True)
class Run:
    mode: str
    wall_s: float
    run_s: float
    peak_rss_mib: float
    splits: int
    pushed_splits: int
    moves: int


# ---------------------------------------------------------------------------------------------
# Data set


def prepare_destination(cur: Any) -> Snapshot:
    """``whb_d1.t_pushup`` (empty) and the reference: what the filter keeps, selected by the server."""
    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DEST_DB}` CHARACTER SET utf8mb4")
    for table in (TABLE, REFERENCE):
        cur.execute(f"DROP TABLE IF EXISTS `{DEST_DB}`.`{table}`")
        cur.execute(f"CREATE TABLE `{DEST_DB}`.`{table}` LIKE `{SRC_DB}`.`{TABLE}`")
    cur.execute(f"INSERT INTO `{DEST_DB}`.`{REFERENCE}` SELECT * FROM `{SRC_DB}`.`{TABLE}` WHERE {FILTER}")
    return snapshot(cur, DEST_DB, REFERENCE)


def verify(cur: Any, mode: str, expected: Snapshot) -> None:
    copy = snapshot(cur, DEST_DB, TABLE)
    if copy != expected:
        raise BenchmarkFailure(f"pushup {mode}: WRONG RESULT in {DEST_DB}.{TABLE}: {copy.rows:,} rows, checksum "
                               f"{copy.checksum}; the filter keeps {expected.rows:,} rows, checksum "
                               f"{expected.checksum}")


def drop_destination(cur: Any) -> None:
    for table in (TABLE, REFERENCE):
        cur.execute(f"DROP TABLE IF EXISTS `{DEST_DB}`.`{table}`")


# ---------------------------------------------------------------------------------------------
# Runs


def conf_dir(root: Path, interval_s: float) -> Path:
    """The repository's engine.toml with its ``[pushup]`` interval_s replaced (a shorter scheduler interval)."""
    text = (REPO / "conf" / "engine.toml").read_text(encoding="utf-8")
    text, n = re.subn(r"(?m)^(\[pushup\].*\n(?:(?!\[).*\n)*?)interval_s = [^#\n]*",
                      lambda m: f"{m.group(1)}interval_s = {interval_s} ", text, count=1)
    if n != 1 or tomllib.loads(text)["pushup"]["interval_s"] != interval_s:
        raise BenchmarkFailure("conf/engine.toml has no [pushup] interval_s to replace")
    conf = root / "conf-pushup"
    conf.mkdir(exist_ok=True)
    (conf / "engine.toml").write_text(text, encoding="utf-8")
    return conf


def spec(mode: str, opts: Options) -> dict[str, Any]:
    server = opts.server
    return {
        "name": f"bench pushup {mode}",
        "source": {"plugin": "mysql", "params": {**server.task_params(), "database": SRC_DB, "table": TABLE,
                                                 "split_pk": "id", "split_factor": opts.split_factor}},
        "transforms": [{"filter": FILTER}],
        "destinations": [{"id": DEST_DB, "plugin": "mysql",
                          "params": {**server.task_params(), "database": DEST_DB, "table": TABLE,
                                     "load": "truncate"}}],
        "settings": {"pushup": mode, "speed": {"channel": opts.channels}},
    }


def run_mode(ws: Workspace, env: dict[str, str], mode: str, opts: Options, expected: Snapshot) -> Run:
    run, result = ws.run(spec(mode, opts), f"pushup {mode}", env)
    written = result["destinations"][DEST_DB]["rows_written"]
    if written != expected.rows:
        raise BenchmarkFailure(f"pushup {mode}: {written:,} rows written, the filter keeps {expected.rows:,}")
    transforms = result.get("transforms")
    if not transforms or "splits" not in transforms:
        raise BenchmarkFailure(f"pushup {mode}: the result has no transforms placement (keys: {sorted(result)})")
    placements: dict[str, list[str]] = transforms["placements"]
    splits: dict[str, str] = transforms["splits"]
    pushed = sum(1 for pid in splits.values() if placements.get(pid))
    if mode == "off" and pushed:
        raise BenchmarkFailure(f"pushup off: {pushed} splits read with the filter pushed")
    if mode == "static" and pushed != len(splits):
        raise BenchmarkFailure(f"pushup static: {len(splits) - pushed} of {len(splits)} splits read unpushed")
    return Run(mode=mode, wall_s=run.seconds, run_s=float(result["duration_s"]), peak_rss_mib=run.peak_rss_mib,
               splits=len(splits), pushed_splits=pushed, moves=len(transforms.get("moves", [])))


def run_all(opts: Options) -> list[dict[str, Any]]:
    """Every mode ``repeat`` times, alternately; their figures as latest.json entries. Raises BenchmarkFailure."""
    ws = Workspace(Path(tempfile.mkdtemp(prefix="whb-pushup-")))
    env = {**ws.env, "WORMHOLE_CONF": str(conf_dir(ws.root, opts.interval_s))}
    admin = opts.server.connect(autocommit=True)
    runs: list[Run] = []
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT VERSION()")
            say(f"MariaDB {cur.fetchone()[0]}")
            say(f"preparing {SRC_DB}.{TABLE} on {opts.server.host}:{opts.server.port}")
            ensure_source(cur, TABLE, opts.rows, schema=SCHEMA, fill=FILL, recipe=RECIPE)
            expected = prepare_destination(cur)
            say(f"  filter {FILTER!r} keeps {expected.rows:,} rows; channels {opts.channels}, split_factor "
                f"{opts.split_factor}, [pushup] interval_s {opts.interval_s}")
            try:
                for i in range(opts.repeat):
                    for mode in MODES:
                        cur.execute(f"TRUNCATE TABLE `{DEST_DB}`.`{TABLE}`")
                        r = run_mode(ws, env, mode, opts, expected)
                        verify(cur, mode, expected)
                        runs.append(r)
                        say(f"  {mode:<9} run {i + 1}/{opts.repeat}: {r.run_s:6.2f} s run, {r.wall_s:6.2f} s wall, "
                            f"{opts.rows / r.run_s:>9,.0f} rows/s, pushed splits {r.pushed_splits}/{r.splits}, "
                            f"moves {r.moves}, peak RSS {r.peak_rss_mib} MiB, {expected.rows:,} rows verified")
            finally:
                if not opts.keep:
                    drop_destination(cur)
    finally:
        admin.close()
    shutil.rmtree(ws.root, ignore_errors=True)
    return report(runs, opts, expected.rows)


def report(runs: list[Run], opts: Options, kept: int) -> list[dict[str, Any]]:
    best = {m: min((r for r in runs if r.mode == m), key=lambda r: r.run_s) for m in MODES}
    say("")
    say(f"Push-up: {SRC_DB}.{TABLE} {opts.rows:,} rows, filter {FILTER!r} keeps {kept:,}, best of {opts.repeat}; "
        "rows/s = source rows / run time (wall: child process, start-up included)")
    say(f"{'mode':<9} {'runs (s)':<17} {'rows/s':>9} {'wall rows/s':>11} {'x off':>6}  {'pushed splits':<17} "
        f"{'peak RSS MiB':>12}")
    figures = []
    wall = {m: min(r.wall_s for r in runs if r.mode == m) for m in MODES}
    off = best["off"]
    for mode in MODES:
        b = best[mode]
        ratio = off.run_s / b.run_s
        pushed = [f"{r.pushed_splits}/{r.splits}" for r in runs if r.mode == mode]
        say(f"{mode:<9} {' '.join(f'{r.run_s:.2f}' for r in runs if r.mode == mode):<17} "
            f"{round(opts.rows / b.run_s):>9,} {round(opts.rows / wall[mode]):>11,} {ratio:>6.2f}  "
            f"{' '.join(pushed):<17} {b.peak_rss_mib:>12}")
        figures.append({"part": "pushup", "scenario": f"pushup {mode}", "rows": opts.rows, "rows_kept": kept,
                        "seconds": round(b.run_s, 3), "wall_s": round(wall[mode], 3),
                        "rows_per_s": round(opts.rows / b.run_s), "wall_rows_per_s": round(opts.rows / wall[mode]),
                        "ratio_to_off": round(ratio, 3), "splits": b.splits, "pushed_splits": b.pushed_splits,
                        "pushed_splits_runs": pushed,
                        "moves": b.moves, "peak_rss_mib": b.peak_rss_mib, "channels": opts.channels,
                        "split_factor": opts.split_factor, "interval_s": opts.interval_s})
    say(f"adaptive / off: {off.run_s / best['adaptive'].run_s:.2f} (wall {wall['off'] / wall['adaptive']:.2f}); "
        f"static / off: {off.run_s / best['static'].run_s:.2f} (wall {wall['off'] / wall['static']:.2f})")
    return figures


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Push-up")
    group.add_argument("--pushup-rows", type=int, default=1_000_000, help="rows of whb_src.t_pushup (default 1M)")
    group.add_argument("--pushup-channels", type=int, default=2, help="settings.speed.channel (default 2)")
    group.add_argument("--pushup-split-factor", type=int, default=10,
                       help="the source's split_factor: channels x this splits (default 10)")
    group.add_argument("--pushup-interval", type=float, default=0.1,
                       help="[pushup] interval_s of the adaptive scheduler (default 0.1; built-in 0.5)")


def options_from(args: argparse.Namespace, repeat: int, server: Server, keep: bool) -> Options:
    return Options(rows=args.pushup_rows, repeat=repeat, channels=args.pushup_channels,
                   split_factor=args.pushup_split_factor, interval_s=args.pushup_interval, server=server, keep=keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    Server.arguments(parser)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each mode, alternately (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep whb_d1.t_pushup and its reference")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    try:
        results = run_all(options_from(args, args.repeat, Server.of(args), args.keep))
    except BenchmarkFailure as exc:
        raise SystemExit(f"PUSHUP BENCHMARK FAILED: {exc}") from None
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""stream -> files (parquet, csv, jsonl) and sqlite: wormhole's rows/s and peak RSS next to pyarrow alone.

Every case runs in its own process (benchmarks/files_scenario.py), the best of ``--repeat`` runs:

- wormhole: the local engine, stream (id, name, amount, day) -> one destination of the format; its output
  is checksummed (row count and an order-free digest of the rows as the format holds them);
- pyarrow alone, the limit: the same rows as one Arrow table written by ``pyarrow.parquet.write_table``
  or ``pyarrow.csv.write_csv`` (jsonl and sqlite have no pyarrow writer); for parquet also with
  wormhole's row groups (``ROW_GROUP_ROWS``, 128Ki rows: a bound on a writer's memory) instead of
  pyarrow's default 1Mi, the same file layout as wormhole's;
- ``--before <checkout>``: the same wormhole cases against another checkout of wormhole (its directory,
  put first on PYTHONPATH), e.g. the commit before the columnar writers; the checksums of both must agree.

Run: ``.venv/bin/python -m benchmarks.run --only files [--rows 5000000] [--before /path/to/checkout]``, or
alone ``.venv/bin/python -m benchmarks.files --rows 1000000 --before /tmp/base``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCENARIO = Path(__file__).with_name("files_scenario.py")
ROW_GROUP_ROWS = 128 * 1024
"""wormhole's parquet row groups (wormhole.plugins.file.parquet_part.ROW_GROUP_ROWS, not imported: the
benchmark must not load the wormhole it measures)."""
FORMATS = ("parquet", "csv", "jsonl", "sqlite")
LIMITED = ("parquet", "csv")
"""Formats pyarrow writes alone (the limit)."""


@dataclass(frozen=True, slots=True)
class Options:
    rows: int
    repeat: int
    formats: tuple[str, ...]
    before: str | None
    writers: int | None = None
    """The destination's concurrency (None: the store's default, 1 for file and sqlite)."""


def _run(kind: str, fmt: str, rows: int, pythonpath: str | None, extra: tuple[str, ...]) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    # By path, not -m: the scenario's directory (not the working directory) leads sys.path, so the
    # wormhole imported is PYTHONPATH's when it is set.
    out = subprocess.run([sys.executable, str(SCENARIO), "--kind", kind, "--format", fmt, "--rows", str(rows),
                          *extra], check=True, capture_output=True, text=True, env=env, cwd="/").stdout
    figure: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return figure


def _best(kind: str, fmt: str, rows: int, repeat: int, pythonpath: str | None,
          *extra: str) -> dict[str, Any]:
    figures = [_run(kind, fmt, rows, pythonpath, extra) for _ in range(repeat)]
    if len({json.dumps(f.get("checksum")) for f in figures}) != 1:
        raise SystemExit(f"FILES BENCHMARK FAILED: {kind} {fmt}: runs disagree: {figures}")
    return max(figures, key=lambda f: f["rows_per_s"])


def run_all(opts: Options) -> list[dict[str, Any]]:
    here = str(Path(__file__).resolve().parent.parent)
    results: list[dict[str, Any]] = []
    print(f"{'stream ->':<10} {'rows':>10} {'before r/s':>11} {'after r/s':>11} {'pyarrow r/s':>12} "
          f"{'pyarrow/after':>13} {'CPU s before':>12} {'after':>6} {'pyarrow':>7} "
          f"{'RSS MiB before':>14} {'after':>6} {'pyarrow':>7}", flush=True)
    writers = ("--writers", str(opts.writers)) if opts.writers else ()
    for fmt in opts.formats:
        after = _best("wormhole", fmt, opts.rows, opts.repeat, here, *writers)
        before = _best("wormhole", fmt, opts.rows, opts.repeat, opts.before, *writers) if opts.before else None
        limit = _best("pyarrow", fmt, opts.rows, opts.repeat, here) if fmt in LIMITED else None
        same_groups = (_best("pyarrow", fmt, opts.rows, opts.repeat, here, "--row-group-rows", str(ROW_GROUP_ROWS))
                       if fmt == "parquet" else None)
        if before is not None and before["checksum"] != after["checksum"]:
            raise SystemExit(f"FILES BENCHMARK FAILED: {fmt}: before wrote {before['checksum']}, "
                             f"after {after['checksum']}")
        entry = {"part": "files", "scenario": f"stream->{fmt}", "rows": opts.rows, "after": after,
                 "before": before, "pyarrow": limit, "pyarrow_same_row_groups": same_groups, "writers": opts.writers,
                 "pyarrow_over_after": round(limit["rows_per_s"] / after["rows_per_s"], 2) if limit else None}
        results.append(entry)

        def cell(figure: dict[str, Any] | None, key: str) -> str:
            return "-" if figure is None else f"{figure[key]:,}"

        ratio = f"{entry['pyarrow_over_after']:.2f}x" if limit else "-"
        print(f"{fmt:<10} {opts.rows:>10,} {cell(before, 'rows_per_s'):>11} {cell(after, 'rows_per_s'):>11} "
              f"{cell(limit, 'rows_per_s'):>12} {ratio:>13} {cell(before, 'cpu_s'):>12} {cell(after, 'cpu_s'):>6} "
              f"{cell(limit, 'cpu_s'):>7} {cell(before, 'peak_rss_mib'):>14} {cell(after, 'peak_rss_mib'):>6} "
              f"{cell(limit, 'peak_rss_mib'):>7}", flush=True)
        if same_groups is not None:
            print(f"{'  pyarrow with 128Ki-row row groups:':<36} {same_groups['rows_per_s']:>11,} rows/s "
                  f"({same_groups['rows_per_s'] / after['rows_per_s']:.2f}x wormhole), "
                  f"{same_groups['cpu_s']} CPU s", flush=True)
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files-rows", type=int, default=5_000_000, help="files: rows per run")
    parser.add_argument("--files-formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--before", help="files: a checkout of wormhole to compare with (put on PYTHONPATH)")
    parser.add_argument("--files-writers", type=int, help="files: the destination's concurrency")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--before")
    parser.add_argument("--writers", type=int, help="the destination's concurrency (default: the store's)")
    args = parser.parse_args()
    run_all(Options(rows=args.rows, repeat=args.repeat, formats=tuple(args.formats), before=args.before,
                    writers=args.writers))


if __name__ == "__main__":
    main()

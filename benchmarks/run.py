"""`make bench`: run every scenario in its own process and print rows/s, peak RSS and ratios.

Each figure is the best of ``--repeat`` runs (least disturbed by the machine). The baseline, the
stream generator without the engine, runs in the same process tree, so the ratio
``engine / generator`` says what the exchange costs on this machine, whatever its speed.
Results also go to benchmarks/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SCENARIOS = [
    ("generator baseline", ["--kind", "generator"], 1),
    ("stream->null x1", ["--kind", "exchange", "--destinations", "1"], 1),
    ("stream->null x3", ["--kind", "exchange", "--destinations", "3"], 3),
]


def measure(args: list[str], rows: int, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-m", "benchmarks.scenario", *args, "--rows", str(rows)],
                             check=True, capture_output=True, text=True).stdout
        figure = json.loads(out.strip().splitlines()[-1])
        if best is None or figure["rows_per_s"] > best["rows_per_s"]:
            best = figure
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = []
    print(f"{'scenario':<22} {'rows':>10} {'rows/s':>12} {'x generator':>12} {'peak RSS MiB':>13}")
    for rows in args.rows:
        baseline = None
        for name, scenario, _dests in SCENARIOS:
            figure = measure(scenario, rows, args.repeat)
            baseline = baseline or figure["rows_per_s"]
            ratio = figure["rows_per_s"] / baseline
            results.append({"scenario": name, **figure, "ratio_to_generator": round(ratio, 3)})
            print(f"{name:<22} {rows:>10,} {figure['rows_per_s']:>12,} {ratio:>12.2f} {figure['peak_rss_mib']:>13}")
    out = Path("benchmarks/results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""`make demo`: run a real fan-out task on the embedded defaults and show what happened.

Uses the installed `.venv/bin/wormhole` exactly as a user or a scheduler would: init the SQLite
task DB, submit conf/examples/demo-fanout.json, run `wormhole --task-id N`, print the result row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORMHOLE = str(ROOT / ".venv" / "bin" / "wormhole")
EXPECTED = 202  # the sqlite destination is given a 2-row dirty budget for a source with 5 dirty rows


def wormhole(*args: str, capture: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORMHOLE_TASK_DB": "sqlite:///var/wormhole.db", "WORMHOLE_LOG_FORMAT": "console"}
    return subprocess.run([WORMHOLE, *args], cwd=ROOT, env=env, text=True, capture_output=capture)


def main() -> int:
    print("== wormhole db init")
    print(wormhole("db", "init").stdout.strip())
    submitted = wormhole("task", "submit", "conf/examples/demo-fanout.json")
    if submitted.returncode != 0:
        print(submitted.stderr, file=sys.stderr)
        return submitted.returncode
    task_id = submitted.stdout.strip()
    print(f"== submitted conf/examples/demo-fanout.json as task {task_id}")
    print(f"== wormhole --task-id {task_id}   (logs below; JSON lines when not on a terminal)")
    run = wormhole("--task-id", task_id, capture=False)
    task = json.loads(wormhole("task", "show", task_id).stdout)
    result = task["result"]
    print(f"\n== task {task_id}: status {task['status']}, exit code {run.returncode}, "
          f"{result['source']['rows_read']:,} rows read once in {result['duration_s']} s")
    print(f"{'destination':<15} {'plugin':<7} {'status':<12} {'written':>9} {'rejected':>9}  note")
    for dest_id, d in result["destinations"].items():
        note = d["error"] or ""
        if d["status"] == "success":
            params = next(x for x in task["spec"]["destinations"] if x["id"] == dest_id)["params"]
            note = f"output: {params['path']}"
        elif d["rolled_back"]:
            note = f"rolled back: {note}"
        counts = f"{d['rows_written']:>9,} {d['rows_rejected']:>9,}"
        print(f"{dest_id:<15} {d['plugin']:<7} {d['status']:<12} {counts}  {note}")
    if result["dirty_file"]:
        print(f"rejected rows and their reasons: {result['dirty_file']}")
    print(f"full result: .venv/bin/wormhole task show {task_id}")
    if run.returncode != EXPECTED:
        print(f"demo expected exit code {EXPECTED} (partial: one destination over its dirty budget)", file=sys.stderr)
        return 1
    print("\nThe source was read once; two destinations committed; the one over its dirty-row budget was "
          "rolled back on its own (exit 202 = partial).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

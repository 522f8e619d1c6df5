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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORMHOLE = str(ROOT / ".venv" / "bin" / "wormhole")
EXPECTED = 202  # the sqlite destination is given a 2-row dirty budget for a source with 5 dirty rows


def wormhole(*args: str, capture: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORMHOLE_TASK_DB": "sqlite:///var/wormhole.db", "WORMHOLE_LOG_FORMAT": "console"}
    return subprocess.run([WORMHOLE, *args], cwd=ROOT, env=env, text=True, capture_output=capture)


def outcome(d: dict[str, Any]) -> str:
    """What happened to a destination's rows, in words: a rolled-back count must never read as committed."""
    written = d["rows_written"]
    if d["status"] == "success":
        return f"committed ({written:,} written)"
    if d["rolled_back"]:
        return f"rolled back ({written:,} written, undone)"
    if d["rollback_error"]:
        return f"FAILED, rollback failed ({written:,} written, may remain)"
    return "failed (nothing written)" if written == 0 else f"failed ({written:,} written, not undone)"


def brief(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def render(task: dict[str, Any], exit_code: int) -> str:
    """The demo's table of one finished task (``wormhole task show`` JSON)."""
    result = task["result"]
    rows = []
    for dest_id, d in result["destinations"].items():
        if d["status"] == "success":
            params = next(x for x in task["spec"]["destinations"] if x["id"] == dest_id)["params"]
            note = f"output: {params['path']}"
        else:
            note = f"error: {brief(d['error'] or 'unknown')}"
            if d["rollback_error"]:
                note += f"; rollback error: {brief(d['rollback_error'])}"
        rows.append((dest_id, d["plugin"], outcome(d), f"{d['rows_rejected']:,}", note))
    width = max(len("outcome"), *(len(r[2]) for r in rows))
    lines = [f"== task {task['id']}: status {task['status']}, exit code {exit_code}, "
             f"{result['source']['rows_read']:,} rows read once in {result['duration_s']} s",
             f"{'destination':<15} {'plugin':<7} {'outcome':<{width}} {'rejected':>9}  note"]
    lines += [f"{r[0]:<15} {r[1]:<7} {r[2]:<{width}} {r[3]:>9}  {r[4]}" for r in rows]
    if result["dirty_file"]:
        lines.append(f"rejected rows and their reasons: {result['dirty_file']}")
    return "\n".join(lines)


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
    print()
    print(render(task, run.returncode))
    print(f"full result: .venv/bin/wormhole task show {task_id}")
    if run.returncode != EXPECTED:
        print(f"demo expected exit code {EXPECTED} (partial: one destination over its dirty budget)", file=sys.stderr)
        return 1
    print("\nThe source was read once; two destinations committed; the one over its dirty-row budget was "
          "rolled back on its own (exit 202 = partial).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

from wormhole.progress import outcome_lines, output_of

ROOT = Path(__file__).resolve().parent.parent
WORMHOLE = str(ROOT / ".venv" / "bin" / "wormhole")
EXPECTED = 202  # the sqlite destination is given a 2-row dirty budget for a source with 5 dirty rows


def wormhole(*args: str, capture: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORMHOLE_TASK_DB": "sqlite:///var/wormhole.db", "WORMHOLE_LOG_FORMAT": "console"}
    return subprocess.run([WORMHOLE, *args], cwd=ROOT, env=env, text=True, capture_output=capture)


def render(task: dict[str, Any], exit_code: int) -> str:
    """The demo's table of one finished task (``wormhole task show`` JSON): the outcome table a run on a
    terminal prints itself."""
    outputs = {d["id"]: output_of(d["params"]) for d in task["spec"]["destinations"]}
    return "\n".join(outcome_lines(task["id"], task["status"], exit_code, task["result"], outputs))


def main() -> int:
    print("== wormhole db init")
    print(wormhole("db", "init").stdout.strip())
    submitted = wormhole("task", "submit", "conf/examples/demo-fanout.json")
    if submitted.returncode != 0:
        print(submitted.stderr, file=sys.stderr)
        return submitted.returncode
    task_id = submitted.stdout.strip()
    print(f"== submitted conf/examples/demo-fanout.json as task {task_id}")
    print(f"== wormhole --task-id {task_id}   (on a terminal: the plan, live progress and the outcome table; "
          "log lines otherwise)")
    run = wormhole("--task-id", task_id, capture=False)
    task = json.loads(wormhole("task", "show", task_id).stdout)
    if not sys.stderr.isatty():  # on a terminal the run printed this table itself
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

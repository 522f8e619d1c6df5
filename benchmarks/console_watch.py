"""Does watching cost a run anything? ``wormhole run`` of 4 million stream rows into two null sinks, alternately
alone and with a poller asking the console (``wormhole console``, its own process, as beside a daemon) what the
live page asks, every ``--poll-s``: ``python -m benchmarks.console_watch [--runs 10] [--poll-s 1.0]``. Prints each
run's wall time and the medians (docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PORT = 18750
SPEC = {"name": "bench", "source": {"plugin": "stream", "params": {"rows": 4_000_000, "splits": 8}},
        "destinations": [{"id": "a", "plugin": "stream", "params": {}}, {"id": "b", "plugin": "stream", "params": {}}]}


def poll(stop: threading.Event, every_s: float) -> None:
    while not stop.is_set():
        for path in ("/api/running", "/api/tasks?limit=50"):
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}") as answer:
                answer.read()
        stop.wait(every_s)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--poll-s", type=float, default=1.0)
    args = parser.parse_args()
    command = [sys.executable, "-m", "wormhole", "--log-format", "json"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "WORMHOLE_CONSOLE_TOKEN": "benchmark-token-0123456789"}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*command, "db", "init"], cwd=tmp, env=env, check=True, capture_output=True)
        Path(tmp, "b.json").write_text(json.dumps(SPEC))
        console = subprocess.Popen([*command, "console", "--http", f"127.0.0.1:{PORT}"], cwd=tmp, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
        times: dict[str, list[float]] = {"alone": [], "watched": []}
        try:
            for i in range(args.runs):
                kind = "watched" if i % 2 else "alone"
                stop = threading.Event()
                poller = threading.Thread(target=poll, args=(stop, args.poll_s))
                if kind == "watched":
                    poller.start()
                started = time.perf_counter()
                subprocess.run([*command, "run", "b.json"], cwd=tmp, env=env, check=True, capture_output=True)
                times[kind].append(round(time.perf_counter() - started, 2))
                stop.set()
                if kind == "watched":
                    poller.join()
        finally:
            console.terminate()
            console.wait()
    print(json.dumps({"runs": times, "median_s": {k: statistics.median(v) for k, v in times.items()}}))


if __name__ == "__main__":
    main()

"""One benchmark scenario in its own process, so its peak RSS is its own; prints one JSON line.

Kinds:
- ``exchange``: stream -> N null destinations through the full local engine (readers, DoubleQueues,
  writer pools, monitor), no task database;
- ``generator``: the stream reader alone, no exchange: the baseline the engine is compared with.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from wormhole import log
from wormhole.config import EngineConf, TaskSpec
from wormhole.engine import Engine
from wormhole.plugins.base import ReadContext
from wormhole.plugins.stream import StreamReader, StreamReaderOptions, StreamSplitter


def run_exchange(rows: int, destinations: int, splits: int) -> float:
    spec = TaskSpec.from_mapping({
        "source": {"plugin": "stream", "params": {"rows": rows, "splits": splits}},
        "destinations": [{"id": f"null{i}", "plugin": "stream"} for i in range(destinations)],
        "settings": {"speed": {"channel": splits}},
    })
    log.configure("json", "warning")
    engine = Engine(EngineConf(), spec, task_id=0, run_id=0, log=log.get_logger())
    start = time.perf_counter()
    result = engine.run()
    elapsed = time.perf_counter() - start
    if result.exit_code != 0 or any(d["rows_written"] != rows for d in result.result["destinations"].values()):
        raise SystemExit(f"benchmark run failed: {result.result}")
    return elapsed


def run_generator(rows: int, splits: int) -> float:
    options = StreamReaderOptions(rows=rows, splits=splits)
    ctx = ReadContext(task_id=0, run_id=0, batch_rows=EngineConf().exchange.batch_rows,
                      dirty=None)  # type: ignore[arg-type]
    source = StreamReader(options, ctx)
    start = time.perf_counter()
    n = sum(len(batch) for split in StreamSplitter(options, ctx).split(splits) for batch in source.read(split))
    assert n == rows
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["exchange", "generator"], required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--destinations", type=int, default=1)
    parser.add_argument("--splits", type=int, default=4)
    args = parser.parse_args()
    if args.kind == "exchange":
        elapsed = run_exchange(args.rows, args.destinations, args.splits)
    else:
        elapsed = run_generator(args.rows, args.splits)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    json.dump({"kind": args.kind, "rows": args.rows, "destinations": args.destinations, "seconds": round(elapsed, 3),
               "rows_per_s": round(args.rows / elapsed), "peak_rss_mib": round(peak_kib / 1024, 1)}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

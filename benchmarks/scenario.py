"""One benchmark scenario in its own process, so its peak RSS is its own; prints one JSON line.

Kinds:
- ``exchange``: stream -> N null destinations through the full local engine (readers, DoubleQueues,
  writer pools, monitor), no task database;
- ``generator``: the stream reader alone, no exchange: the baseline the engine is compared with;
- ``transform``: stream -> 1 null destination through the local engine with the task's chain
  :data:`CHAIN` (a filter, a derive and a projection) in the reader threads;
- ``chain``: that chain alone, run by one :class:`~wormhole.transform.chain.ChainRunner` over the stream
  reader's batches made beforehand (as the reader gives them, and with ``--arrow`` as ready Arrow batches:
  what the chain costs once readers yield Arrow), no engine.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from wormhole import log
from wormhole.config import EngineConf
from wormhole.engine import Engine
from wormhole.plugins.base import ReadContext
from wormhole.plugins.stream import StreamReader, StreamReaderOptions, StreamSplitter
from wormhole.task_spec import TaskSpec


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


CHAIN = [{"filter": "amount > 0 AND id % 10 != 3"},
         {"derive": {"total": "amount * 2 + id", "year": "year(day)", "tag": "concat(name, '!')"}},
         {"project": {"keep": ["id", "tag", "total", "year"]}}]
"""About 45% of the rows pass the filter."""


def run_transform(rows: int, splits: int) -> tuple[float, int]:
    spec = TaskSpec.from_mapping({
        "source": {"plugin": "stream", "params": {"rows": rows, "splits": splits}},
        "transforms": CHAIN,
        "destinations": [{"id": "null", "plugin": "stream"}],
        "settings": {"speed": {"channel": splits}},
    })
    log.configure("json", "warning")
    engine = Engine(EngineConf(), spec, task_id=0, run_id=0, log=log.get_logger())
    start = time.perf_counter()
    result = engine.run()
    elapsed = time.perf_counter() - start
    written = result.result["destinations"]["null"]["rows_written"]
    if result.exit_code != 0 or not 0 < written < rows:
        raise SystemExit(f"benchmark run failed: {result.result}")
    return elapsed, written


def run_chain(rows: int, arrow: bool) -> tuple[float, int]:
    """The chain over ``rows`` rows: the reader's batches of 1M rows made first, run through again as needed."""
    from wormhole.options import Problems
    from wormhole.plugins.batch import Batch, as_batch
    from wormhole.transform.chain import Chain
    from wormhole.transform.operators import bind, parse_transforms

    options = StreamReaderOptions(rows=min(rows, 1_000_000), splits=1)
    ctx = ReadContext(task_id=0, run_id=0, batch_rows=EngineConf().exchange.batch_rows,
                      dirty=None)  # type: ignore[arg-type]
    source = StreamReader(options, ctx)
    schema = source.schema()
    batches = [b for split in StreamSplitter(options, ctx).split(1) for b in source.read(split)]
    if arrow:
        batches = [Batch.of_arrow(as_batch(b, schema).arrow(schema)) for b in batches]
    problems = Problems()
    runner = Chain("task", bind(parse_transforms(CHAIN, "transforms", "task", problems), schema, problems),
                   schema).runner()
    assert not problems.items, problems.items
    done = kept = 0
    start = time.perf_counter()
    while done < rows:
        for batch in batches:
            kept += len(runner.run(batch))
            done += len(batch)
            if done >= rows:
                break
    return time.perf_counter() - start, kept


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
    parser.add_argument("--kind", choices=["exchange", "generator", "transform", "chain"], required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--destinations", type=int, default=1)
    parser.add_argument("--splits", type=int, default=4)
    parser.add_argument("--arrow", action="store_true", help="chain: over ready Arrow batches")
    args = parser.parse_args()
    kept = None
    if args.kind == "exchange":
        elapsed = run_exchange(args.rows, args.destinations, args.splits)
    elif args.kind == "transform":
        elapsed, kept = run_transform(args.rows, args.splits)
    elif args.kind == "chain":
        elapsed, kept = run_chain(args.rows, args.arrow)
    else:
        elapsed = run_generator(args.rows, args.splits)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    json.dump({"kind": args.kind, "rows": args.rows, "destinations": args.destinations, "seconds": round(elapsed, 3),
               "rows_per_s": round(args.rows / elapsed), "peak_rss_mib": round(peak_kib / 1024, 1),
               **({"rows_kept": kept} if kept is not None else {})}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

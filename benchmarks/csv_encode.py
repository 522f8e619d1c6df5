"""CPU of the csv file writer alone, in-process: the stream store's batches (default columns id, name, amount,
day; 4,096 rows each, Arrow) written to one csv part by the file store's part writer (``TextPart`` with
``CsvEncoder``: encode and file write, no engine), next to ``pyarrow.csv.write_csv`` of the same rows as one
table of one chunk per column (pyarrow's best case), the limit.

Run: ``.venv/bin/python -m benchmarks.csv_encode [--rows 5000000] [--repeat 5]``; against another checkout
(the same figures of its writer): ``PYTHONPATH=<checkout> .venv/bin/python benchmarks/csv_encode.py``. The
rows are made first (not timed); each side is timed by ``time.process_time()`` (CPU, not wall: the machine is
shared), the best of ``--repeat`` rounds in which the two take turns. The part's SHA-256 is printed: two
checkouts must write the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

import wormhole
from wormhole.errors import WriteError
from wormhole.plugins.base import ReadContext
from wormhole.plugins.batch import as_batch
from wormhole.plugins.file.csv_format import CsvEncoder
from wormhole.plugins.file.options import FileWriterOptions
from wormhole.plugins.file.text_part import TextPart
from wormhole.plugins.stream import StreamReader, StreamReaderOptions, StreamSplitter

BATCH_ROWS = 4096
"""The exchange's default batch (wormhole.config's ``batch_rows``)."""


def _best(fns: list[Callable[[], None]], repeat: int) -> list[float]:
    """The least CPU seconds of each function over ``repeat`` rounds, the functions taking turns within a
    round (so both see the same load on a shared machine)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    options = StreamReaderOptions(rows=args.rows, splits=4)
    ctx = ReadContext(task_id=0, run_id=0, batch_rows=BATCH_ROWS, dirty=None)  # type: ignore[arg-type]
    reader = StreamReader(options, ctx)
    batches = [b for split in StreamSplitter(options, ctx).split(4) for b in reader.read(split)]
    arrow = [as_batch(b, reader.schema()).arrow(reader.schema()) for b in batches]
    table = pa.Table.from_batches(arrow).combine_chunks()
    writer_options = FileWriterOptions(path="unused", format="csv")
    with tempfile.TemporaryDirectory(prefix="whb-csv-") as tmp:
        part_path = str(Path(tmp) / "part.csv")

        def wormhole_part() -> None:
            part = TextPart(part_path, CsvEncoder(writer_options, reader.schema()), WriteError)
            part.open()
            for batch in batches:
                part.write(as_batch(batch))
            part.close()

        def pyarrow_alone() -> None:
            pa_csv.write_csv(table, str(Path(tmp) / "alone.csv"))

        ours, alone = _best([wormhole_part, pyarrow_alone], args.repeat)
        digest = hashlib.sha256(Path(part_path).read_bytes()).hexdigest()
    figure = {"wormhole": wormhole.__file__, "rows": args.rows, "cpu_s": round(ours, 3),
              "pyarrow_cpu_s": round(alone, 3), "ratio": round(ours / alone, 2), "sha256": digest}
    print(json.dumps(figure))


if __name__ == "__main__":
    main()

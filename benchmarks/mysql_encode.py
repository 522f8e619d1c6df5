"""The mysql writer's LOAD DATA encoder alone: the row encoder (``load_payload`` over tuples) against the
Arrow encoder (``arrow_payload`` over a record batch), and the tuple -> Arrow conversion a tuple batch
needs first, on rows shaped like the bench table (benchmarks/mysql_scenario.py: 8 columns, ~100 bytes).

Run: ``.venv/bin/python -m benchmarks.mysql_encode [--rows 1000000] [--batch 4096]``. Each encoder runs
over the rows in batches of ``--batch`` rows (the exchange's and the writer's default size); every
payload is checked equal to the row encoder's, so a fast wrong encoder has no figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from tests.mysql_load_reference import load_payload
from wormhole.plugins.batch import arrow_from_rows
from wormhole.plugins.mysql.arrow_load import arrow_payload
from wormhole.plugins.schema import Column, Schema

SCHEMA = Schema((Column("id", "int"), Column("k", "int"), Column("name", "string"),
                 Column("amount", "decimal", precision=12, scale=2), Column("score", "float"),
                 Column("created", "datetime"), Column("flag", "int"), Column("note", "string")))
_FIRST = ("Ann", "Zoë", "Bob", "Jürgen", "Li Wei", "Ørsted")
_LAST = ("Smith", "Müller", "García", "Nakamura", "O'Brien", "Kowalski", "Dubois")
_START = datetime(2020, 1, 1)


def row(seq: int) -> tuple[Any, ...]:
    """Row ``seq`` as the bench table's fill makes it (the same expressions, in Python)."""
    sha = hashlib.sha1(str(seq).encode()).hexdigest()
    if seq % 10 == 0:
        note = None
    elif seq % 101 == 0:
        note = f"tab\there, back\\slash, new\nline {seq}"
    elif seq % 11 == 0:
        note = "✓ ünïcode 日本 " + sha[:4 + seq % 17]
    else:
        note = sha[:8 + seq % 33]
    return (seq, (seq * 7919) % 1000003, f"{_FIRST[seq % 6]} {_LAST[seq % 7]} #{seq % 100003}",
            None if seq % 17 == 0 else Decimal((seq * 7127) % 100000000).scaleb(-2),
            None if seq % 29 == 0 else seq / 7 - 50000,
            _START + timedelta(seconds=seq * 61, microseconds=(seq * 1237) % 1000 * 1000),
            seq % 256 - 128, note)


def rate(rows: int, seconds: float) -> int:
    return int(rows / seconds) if seconds else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=4096)
    args = parser.parse_args()
    types = [c.type for c in SCHEMA.columns]
    batches = [[row(i) for i in range(start, min(start + args.batch, args.rows + 1))]
               for start in range(1, args.rows + 1, args.batch)]
    t0 = time.perf_counter()
    old = [load_payload(types, b) for b in batches]
    t_rows = time.perf_counter() - t0
    t0 = time.perf_counter()
    arrow = [arrow_from_rows(SCHEMA, b) for b in batches]
    t_convert = time.perf_counter() - t0
    t0 = time.perf_counter()
    new = [arrow_payload(b) for b in arrow]
    t_arrow = time.perf_counter() - t0
    if [p.to_pybytes() for p in new] != old:
        raise SystemExit("the Arrow payload differs from the row encoder's")
    figures = {"rows": args.rows, "batch": args.batch,
               "row_encoder_rows_per_s": rate(args.rows, t_rows),
               "arrow_encoder_rows_per_s": rate(args.rows, t_arrow),
               "tuples_to_arrow_rows_per_s": rate(args.rows, t_convert),
               "tuples_to_arrow_plus_encoder_rows_per_s": rate(args.rows, t_convert + t_arrow),
               "payload_mib": round(sum(map(len, old)) / 2**20, 1)}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

"""The mysql LOAD DATA and INSERT encoders on a batch with one exact column (a zero date every 100 rows): the
old row encoder over tuples (``tests/mysql_load_reference.py``, the oracle) against the Arrow encoder the writer
uses now. Run: ``PYTHONPATH=$PWD python -m benchmarks.mysql_exact_encode``."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from tests.mysql_load_reference import load_payload, sql_values
from wormhole.plugins.base import Batch, Column, Schema
from wormhole.plugins.batch import rows_of
from wormhole.plugins.mysql.arrow_load import arrow_payload, sql_rows

ROWS = 20_000
SCHEMA = Schema((Column("id", "int"), Column("s", "string"), Column("d", "decimal", precision=12, scale=2),
                 Column("f", "float"), Column("dt", "datetime"), Column("z", "date")))


def _rows() -> list[tuple[Any, ...]]:
    return [(i, f"name {i}\tx", Decimal(i) / 100, i * 0.5, datetime(2024, 1, 1, 3, 4, i % 60),
             "0000-00-00" if i % 100 == 0 else date(2024, 1, 1 + i % 28)) for i in range(ROWS)]


def _best_ms(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main() -> None:
    batch = Batch.of_rows(_rows(), SCHEMA)
    form, tuples, types = batch.arrow_form, rows_of(batch), [c.type for c in SCHEMA.columns]
    assert arrow_payload(form).to_pybytes() == load_payload(types, tuples)
    print(f"LOAD DATA, {ROWS} rows: row encoder {_best_ms(lambda: load_payload(types, tuples)):.1f} ms, "
          f"Arrow {_best_ms(lambda: arrow_payload(form)):.1f} ms")
    print(f"INSERT literals, {ROWS} rows: row encoder {_best_ms(lambda: sql_values(types, tuples)):.1f} ms, "
          f"Arrow {_best_ms(lambda: sql_rows(form)):.1f} ms")


if __name__ == "__main__":
    main()

"""The sqlite store binds a batch of Arrow columns from its columns: the same stored values as its rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.plugin_helpers import SCHEMA as EVERY_TYPE
from tests.plugin_helpers import run_destination
from tests.unit.test_file_arrow import ROWS
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, Column, Schema
from wormhole.plugins.batch import arrow_from_rows, rows_from_arrow
from wormhole.plugins.sqlite import SqliteWriterOptions

SCHEMA = Schema(tuple(Column(c.name, c.type, precision=38, scale=18) if c.type == "decimal" else c
                      for c in EVERY_TYPE.columns))
"""Every logical type, the decimal with a declared scale: a decimal without one is written from tuples
(its Arrow form pads every value to scale 18; tests/unit/test_batch.py)."""


def stored(path: Path, rows: Any) -> list[tuple[Any, ...]]:
    [result] = run_destination(registry.get("sqlite").sink, SqliteWriterOptions(path=str(path), table="t"), [rows])
    assert (result.written, result.rejected) == (len(ROWS), ())
    conn = sqlite3.connect(path)
    try:
        return [tuple((type(v).__name__, v) for v in r) for r in conn.execute("SELECT * FROM t ORDER BY rowid")]
    finally:
        conn.close()


def test_an_arrow_batch_is_stored_as_its_rows_are_without_making_tuples(tmp_path: Path) -> None:
    batch = Batch.of_arrow(arrow_from_rows(SCHEMA, ROWS))
    columnar = stored(tmp_path / "arrow.db", batch)
    assert not batch._rows, "the Arrow batch was turned into tuples"
    assert columnar == stored(tmp_path / "rows.db", list(rows_from_arrow(batch.arrow_form)))
    assert columnar[0][2:4] == (("str", "1.100000000000000000"), ("str", "héllo 😀 wörld"))

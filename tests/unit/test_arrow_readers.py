"""The sqlite, csv and jsonl readers yield Arrow batches holding the values their tuple path gave: the same
types and texts (a decimal's scale, a json value, an int beyond int64), the same rows rejected with the
same reasons; a batch Arrow cannot hold as the tuple path gave it goes as tuples."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.plugin_helpers import ListDirtySink, read_ctx
from wormhole.plugins.base import Rows
from wormhole.plugins.sqlite import SqliteReaderOptions
from wormhole.plugins.sqlite import reader as sqlite_reader
from wormhole.plugins.sqlite.reader import SqliteReader
from wormhole.plugins.sqlite.splitter import SqliteSplitter


def typed(batches: list[Any]) -> list[tuple[tuple[str, str], ...]]:
    """Every value with its type and repr: Decimal('1.50') == Decimal('1.5'), but a writer writes each its way."""
    return [tuple((type(v).__name__, repr(v)) for v in row) for batch in batches for row in batch]


def forms(batches: list[Any]) -> list[str]:
    return ["arrow" if isinstance(b, Rows) and b.native_arrow is not None else "tuples" for b in batches]


def rejections(sink: ListDirtySink) -> list[tuple[Any, str]]:
    return [(r.row, r.reason) for r in sink.rows]


# ---------------------------------------------------------------------------------------------
# sqlite

SQLITE_TABLE = ("CREATE TABLE t (i INTEGER, f REAL, s TEXT, b BLOB, d DECIMAL TEXT, flag BOOLEAN, day DATE, "
                "ts DATETIME, doc JSON TEXT)")
CLEAN = [
    (9223372036854775807, 1.5, "héllo 😀", b"\x00\xff", "12345678901234567890.123456789012345678", 1,
     "2024-02-29", "2024-02-29 23:59:59.000001", '{"a": [1, null], "b": "é"}'),
    (-9223372036854775808, -0.0, "", b"", "-0.25", 0, "0001-01-01", "9999-12-31T23:59:59", "null"),
    (None, None, None, None, None, None, None, None, None),
    (0, 1e300, "x", b"y", "100", 7, "2000-01-01", "2000-01-01", '"text"'),
]


def _sqlite(tmp_path: Path, rows: list[tuple[Any, ...]]) -> Path:
    path = tmp_path / "in.db"
    conn = sqlite3.connect(path)
    conn.execute(SQLITE_TABLE)
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    return path


def _read_sqlite(path: Path, batch_rows: int) -> tuple[list[Any], ListDirtySink]:
    sink = ListDirtySink()
    options = SqliteReaderOptions(path=str(path), table="t")
    ctx = read_ctx(sink, batch_rows)
    reader = SqliteReader(options, ctx)
    (split,) = SqliteSplitter(options, ctx).split(1)
    return list(reader.read(split)), sink


def _both(path: Path, batch_rows: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    batches, sink = _read_sqlite(path, batch_rows)
    with monkeypatch.context() as m:
        m.setattr(sqlite_reader, "arrow_batch", lambda schema, raw: None)
        old, old_sink = _read_sqlite(path, batch_rows)
    return batches, sink, old, old_sink


def test_sqlite_reads_arrow_batches_of_the_values_the_tuple_path_gave(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    batches, sink, old, old_sink = _both(_sqlite(tmp_path, CLEAN), 2, monkeypatch)
    assert forms(batches) == ["arrow", "arrow"]
    assert forms(old) == ["tuples", "tuples"]
    assert typed(batches) == typed(old)
    assert typed(batches)[1][4] == ("Decimal", "Decimal('-0.25')")
    assert not sink.rows and not old_sink.rows


def test_sqlite_a_batch_arrow_cannot_hold_goes_as_tuples_and_bad_rows_are_rejected_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean = (0, 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01", "[]")
    awkward = [
        (1, 2.0, "a", b"", "1.50", 1, "2024-01-01", "2024-01-01", "[]"),  # a decimal's own scale: tuples
        clean,
        ("three", 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01", "[]"),  # SQLite keeps a text: tuples
        (4, 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01 10:00:00+02:00", "[]"),  # aware: tuples
        (5, 2.0, "a", b"", "1.5", 1, "2024-02-30", "2024-01-01", "[]"),  # no such day: rejected
        clean,
        (7, 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01", "{bad"),  # not JSON: rejected
        clean,
    ]
    batches, sink, old, old_sink = _both(_sqlite(tmp_path, awkward), 2, monkeypatch)
    assert typed(batches) == typed(old)
    assert rejections(sink) == rejections(old_sink)
    assert [r for r, _ in rejections(sink)] == [awkward[4], awkward[6]]
    assert typed(batches)[0][4] == ("Decimal", "Decimal('1.50')")
    assert forms(batches) == ["tuples", "tuples", "arrow", "arrow"]

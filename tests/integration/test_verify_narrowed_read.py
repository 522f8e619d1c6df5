"""``wormhole verify --task-id`` of an incremental task asks the source's server for the window's rows only:
the read of a MariaDB table with the window as a condition returns the window's rows (and, for a time, a
day either side), where a side that is not narrowed is sent the whole table and filters it itself."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime

import pytest

from tests.mysql_helpers import Databases, create_table, execute, q
from wormhole.plugins import registry
from wormhole.verify import diff
from wormhole.verify.window import RowRange

pytestmark = [pytest.mark.mysql]


def _read(side: diff.Side) -> tuple[int, int]:
    """(rows the server sent for the splits verify cut, each split's SELECT as it is; rows kept in the range)."""
    ctx = diff._context(side, threading.Event(), diff._Rejections(), 1000)
    schema, splits = diff._schema_and_splits(side, ctx, 2)
    reader = registry.source(side.source.plugin).reader(side.source.options, ctx)
    sent = sum(b.num_rows for s in splits for b in reader.read(s))
    kept = sum(b.num_rows for s in splits for b in diff._batches(side, ctx, schema, s))
    return sent, kept


@pytest.mark.parametrize(("rows", "narrow", "expected"), [
    (RowRange("id", "int", None, False, 500, True), True, (490, 490)),
    (RowRange("id", "int", None, False, 500, True), False, (990, 490)),
    (RowRange("ts", "datetime", datetime(2024, 1, 10), False, datetime(2024, 1, 20), True), True, (289, 240)),
])
def test_the_window_is_a_condition_of_the_sources_read(dbs: Databases, rows: RowRange, narrow: bool,
                                                       expected: tuple[int, int]) -> None:
    db = dbs.create("vnarrow")
    create_table(dbs.admin, db, "t", "id INT PRIMARY KEY, ts DATETIME(6) NOT NULL")
    execute(dbs.admin, f"INSERT INTO {q(db)}.t SELECT seq, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq HOUR "
                       f"FROM {q(db)}.seq_1_to_1000")
    # The task's own where (id > 10) is kept beside the window's.
    side = diff.parse_side({"plugin": "mysql", "params": dbs.server.params(db, table="t", where="id > 10")}, "source")
    assert _read(dataclasses.replace(side, rows=rows, narrow=narrow)) == expected

"""The condition an incremental task's window narrows a SQL source's read by (``wormhole verify --task-id``): it
holds for every row of the window, so the server leaves out rows outside it and never one inside."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from wormhole.plugins.sql import backquote, quote
from wormhole.verify.window import RowRange


def test_integer_and_decimal_bounds_are_both_inclusive_on_the_server() -> None:
    assert RowRange("id", "int", None, False, 500, True).sql(backquote) == "`id` <= 500"
    assert RowRange("id", "int", 100, False, 500, False).sql(quote) == '"id" >= 100 AND "id" <= 500'
    assert RowRange("n", "decimal", Decimal("-1.50"), True, None, True).sql(backquote) == "`n` >= -1.50"


def test_a_time_is_widened_by_a_day_and_a_date_is_not() -> None:
    rows = RowRange("ts", "datetime", datetime(2024, 1, 10, 6, 30, 0, 250), False, datetime(2024, 1, 20), True)
    assert rows.sql(backquote) == "`ts` >= '2024-01-09 06:30:00.000250' AND `ts` <= '2024-01-21 00:00:00'"
    zoned = RowRange("ts", "datetime", datetime(2024, 1, 10, 8, tzinfo=UTC), True, None, True)
    assert zoned.sql(quote) == "\"ts\" >= '2024-01-09 08:00:00'"
    assert RowRange("d", "date", date(2024, 2, 1), True, date(2024, 3, 1), False).sql(quote) == \
        "\"d\" >= '2024-02-01' AND \"d\" <= '2024-03-01'"


def test_a_bound_it_cannot_write_is_left_to_the_mask() -> None:
    assert RowRange("ts", "datetime", datetime(1, 1, 1), True, None, True).sql(backquote) is None  # a day before 1
    assert RowRange("id", "int", None, False, None, True).sql(backquote) is None
    assert RowRange("id", "int", "500", False, None, True).sql(backquote) is None  # not a number of the kind
    assert RowRange("x", "json", None, False, 3, True).sql(backquote) is None


@pytest.mark.parametrize("rows", [
    RowRange("v", "int", 3, False, 7, True),
    RowRange("v", "int", 3, True, 7, False),
])
def test_the_mask_still_decides_the_window_inside_the_wider_read(rows: RowRange) -> None:
    batch = pa.record_batch({"v": pa.array(range(10))})
    inside = [i for i, kept in enumerate(rows.mask(batch, "source").to_pylist()) if kept]
    assert inside == ([4, 5, 6, 7] if not rows.lower_inclusive else [3, 4, 5, 6])

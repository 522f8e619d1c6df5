"""The incremental window's rules on fixed values: bounds by the column's type, lag, per-destination lowers, the
watermark a commit sets, the filters the window becomes, and what validation refuses."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from wormhole.errors import ConfigError, InvalidTaskConfig
from wormhole.incremental import IncrementalSpec, Window, decode, encode, literal, plan_window, windowed
from wormhole.plugins.base import SourceBounds
from wormhole.task_spec import TaskSpec

NOW = datetime(2026, 11, 27, 12, 0, 5)


def window(kind: str, maximum: Any, kept: dict[str, Any], **spec: Any) -> Window:
    inc = IncrementalSpec(column="c", **spec)
    return plan_window(inc, "k", ["a", "b"], SourceBounds(kind, maximum, NOW), kept)


def test_an_integer_key_reads_past_each_watermark_up_to_the_maximum_at_plan_time() -> None:
    w = window("int", 900, {"a": 500, "b": 700})
    assert (w.upper, w.upper_inclusive, w.inclusive_lower) == (900, True, False)
    assert (w.lowest(), w.bound_of("a"), w.bound_of("b")) == (500, 500, 700)
    assert (w.advanced("a"), w.advanced("b")) == (900, 900)


def test_a_timestamp_window_ends_before_now_less_the_lag_and_lastmodified_reads_the_lag_again() -> None:
    w = window("datetime", None, {"a": datetime(2026, 11, 27, 11, 0)}, mode="lastmodified", lag_s=30)
    assert (w.upper, w.upper_inclusive, w.inclusive_lower) == (datetime(2026, 11, 27, 11, 59, 35), False, True)
    assert w.bound_of("a") == datetime(2026, 11, 27, 10, 59, 30)
    assert w.bound_of("b") is None and w.lowest() is None  # b has no watermark: it reads from the first row
    appended = window("datetime", None, {"a": datetime(2026, 11, 27, 11, 0)}, lag_s=30)
    assert appended.bound_of("a") == datetime(2026, 11, 27, 11, 0)  # append never reads a row twice


def test_a_date_key_takes_a_day_once_it_is_over() -> None:
    w = window("date", None, {}, initial="2026-11-01")
    assert (w.upper, w.upper_inclusive, w.lowers) == (date(2026, 11, 27), False, {"a": date(2026, 11, 1),
                                                                                   "b": date(2026, 11, 1)})


def test_a_watermark_never_moves_back_and_an_empty_source_reads_nothing() -> None:
    w = window("int", 300, {"a": 500})
    assert w.advanced("a") == 500 and w.advanced("b") == 300
    empty = window("int", None, {"a": 5})
    assert empty.upper is None and empty.advanced("a") == 5


@pytest.mark.parametrize(("kind", "spec", "message"), [
    ("float", {}, "must be an integer, a decimal, a date or a timestamp"),
    ("int", {"mode": "lastmodified"}, "lastmodified needs a timestamp column"),
    ("int", {"lag_s": 5}, "only a timestamp column has a lag"),
    ("int", {"initial": "x1"}, "'x1' is not a value of the int column c"),
])
def test_what_a_window_cannot_be_made_of_is_named(kind: str, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        window(kind, 1, {}, **spec)


def test_values_keep_their_type_through_the_task_database_and_the_expression_language() -> None:
    values = [7, -3, Decimal("12.50"), Decimal("1E+3"), date(2026, 1, 2), datetime(2026, 1, 2, 3, 4, 5, 6)]
    assert [decode(json.loads(json.dumps(encode(v)))) for v in values] == values
    assert [literal(v) for v in values] == ["7", "(-3)", "12.50", "1000", "DATE '2026-01-02'",
                                            "TIMESTAMP '2026-01-02 03:04:05.000006'"]
    w = window("int", 900, {"a": 500, "b": 700})
    assert Window.from_json(w.to_json()) == w


def spec(**incremental: Any) -> dict[str, Any]:
    return {"name": "n",
            "source": {"plugin": "sqlite", "params": {"path": "s.db", "table": "t"}, "incremental": incremental},
            "transforms": [{"filter": "c > 0"}],
            "destinations": [{"id": "a", "plugin": "stream", "params": {}},
                             {"id": "b", "plugin": "stream", "params": {}, "transforms": [{"filter": "c < 5"}]}]}


def test_the_window_becomes_the_task_s_first_filter_and_a_lagging_destination_s_own() -> None:
    task = TaskSpec.from_mapping(spec(column="c"))
    shaped = windowed(task, window("int", 900, {"a": 700, "b": 500}))
    assert [op.raw for op in shaped.transforms] == ["`c` > 500 AND `c` <= 900", "c > 0"]
    assert shaped.transforms[0].path == "source.incremental[0].filter"
    a, b = shaped.destinations
    assert [op.raw for op in a.transforms] == ["`c` > 700"]
    assert [op.raw for op in b.transforms] == ["c < 5"]  # b starts at the shared bound
    nothing = windowed(task, window("int", None, {}))
    assert nothing.transforms[0].raw == "FALSE"


def test_validation_names_a_store_that_cannot_read_incrementally_and_a_bad_block() -> None:
    doc = spec(column="c")
    doc["source"] = {"plugin": "stream", "params": {"rows": 1, "columns": [{"name": "c", "type": "int"}]},
                     "incremental": {"column": "c"}}
    with pytest.raises(InvalidTaskConfig, match=r"source\.incremental: the stream store cannot read incrementally"):
        TaskSpec.from_mapping(doc)
    with pytest.raises(InvalidTaskConfig) as bad:
        TaskSpec.from_mapping(spec(column="c", mode="sometimes", lag_s=-1, extra=1))
    for path in ("source.incremental.mode", "source.incremental.lag_s", "source.incremental.extra"):
        assert path in str(bad.value), bad.value
    with pytest.raises(InvalidTaskConfig, match=r"source\.incremental\.column: must be a plain column name"):
        TaskSpec.from_mapping(spec(column="c; DROP TABLE t"))
    with pytest.raises(InvalidTaskConfig, match=r"source\.incremental\.initial: must be an integer"):
        TaskSpec.from_mapping(spec(column="c", initial=1.5))

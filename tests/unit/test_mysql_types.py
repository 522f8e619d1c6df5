"""The mysql store's column encoders and decoders (pure functions: no server needed)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from tests.mysql_old_read import convert_column
from wormhole.plugins.base import Batch, Column, Schema
from wormhole.plugins.mysql.arrow_load import arrow_payload, sql_rows
from wormhole.plugins.mysql.types import READ_CONVERTERS, ZeroDate


def _form(kinds: list[str], rows: list[tuple[Any, ...]]) -> Any:
    """The rows as the batch a writer gets (exact columns where Arrow cannot hold a value)."""
    return Batch.of_rows(rows, Schema(tuple(Column(f"c{i}", k) for i, k in enumerate(kinds)))).arrow_form  # type: ignore[arg-type]


def load_payload(kinds: list[str], rows: list[tuple[Any, ...]]) -> bytes:
    return arrow_payload(_form(kinds, rows)).to_pybytes()


def sql_values(kinds: list[str], rows: list[tuple[Any, ...]]) -> list[str]:
    return sql_rows(_form(kinds, rows))


def test_load_payload_escapes_and_marks_nulls() -> None:
    rows = [(1, "tab\there\nline\\back\x00\r", b"\x00\t\n", None, Decimal("1E-30"), 0.1, True),
            (2, None, None, datetime(2024, 1, 2, 3, 4, 5, 6), Decimal("100"), -1e300, False)]
    payload = load_payload(["int", "string", "bytes", "datetime", "decimal", "float", "bool"], rows).decode()
    assert payload == ("1\ttab\\there\\nline\\\\back\\0\\r\t00090a\t\\N\t0.000000000000000000000000000001\t0.1\t1\n"
                       "2\t\\N\t\\N\t2024-01-02T03:04:05.000006\t100\t-1e+300\t0\n")


def test_aware_datetimes_are_written_as_utc() -> None:
    east = timezone(timedelta(hours=2))
    rows = [(datetime(2024, 1, 1, 5, tzinfo=east),), (datetime(2024, 1, 1, tzinfo=UTC),), (None,)]
    assert load_payload(["datetime"], rows) == b"2024-01-01T03:00:00\n2024-01-01T00:00:00\n\\N\n"
    assert sql_values(["datetime", "date"], [("0000-00-00 00:00:00", "0000-00-00")]) == \
        ["('0000-00-00 00:00:00','0000-00-00')"]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), Decimal("NaN"), Decimal("-Infinity")])
def test_values_mysql_cannot_hold_raise(value: object) -> None:
    kind = "float" if isinstance(value, float) else "decimal"
    with pytest.raises(ValueError, match="MySQL"):
        load_payload([kind], [(value,)])
    with pytest.raises(ValueError, match="MySQL"):
        sql_values([kind], [(value,)])


def test_sql_literals_escape_quotes_and_bytes() -> None:
    assert sql_values(["string", "bytes", "json", "int"], [("it's \\ \"x\"\x1a", b"\xff'", {"k": "v'"}, True)]) == \
        ["('it\\'s \\\\ \\\"x\\\"\\Z',X'ff27','{\\\"k\\\": \\\"v\\'\\\"}',1)"]


def test_raw_columns_convert_at_once_and_zero_dates_raise() -> None:
    assert convert_column("decimal", [b"1.50", None]) == [Decimal("1.50"), None]
    assert convert_column("datetime", [b"2024-01-02 03:04:05.123"]) == [datetime(2024, 1, 2, 3, 4, 5, 123000)]
    assert convert_column("bit", [b"\x03\xff"]) == [1023]
    assert convert_column("string", [b"\xf0\x9f\x98\x80"]) == ["😀"]
    with pytest.raises(ValueError):
        convert_column("date", [b"2024-01-01", b"0000-00-00"])
    with pytest.raises(ZeroDate, match="0000-00-00"):  # what the reader's value-by-value pass sees
        READ_CONVERTERS["date"](b"0000-00-00")  # type: ignore[misc]
    assert convert_column("date", [date(2024, 1, 1).isoformat().encode()]) == [date(2024, 1, 1)]


def test_shard_credentials_default_to_the_source_separately() -> None:
    from tests.plugin_helpers import parse
    from wormhole.plugins.mysql.options import MysqlReaderOptions

    options, problems = parse(MysqlReaderOptions, {
        "user": "etl", "password_env": "SRC_PW", "query": "SELECT 1",
        "connections": [{"host": "a", "database": "d1"}, {"host": "b", "database": "d2", "user": "ro"},
                        {"host": "c", "port": 3307, "database": "d3", "password": "x"}]})
    assert not problems, problems.items
    got = [(s.endpoint.user, s.endpoint.password, s.endpoint.password_env, s.endpoint.mark) for s in options.shards]
    assert got == [("etl", None, "SRC_PW", "a:3306/d1"), ("ro", None, "SRC_PW", "b:3306/d2"),
                   ("etl", "x", None, "c:3307/d3")]
    assert "x" not in repr(options.shards[2].endpoint)  # never in a log line or traceback


def test_json_null_is_a_value_not_sql_null() -> None:
    """Issue 23: a JSON column holding null reads as JSON_NULL and is written back as JSON null."""
    from wormhole.plugins.values import JSON_NULL

    assert convert_column("json", [b"null", None, b'{"a": null}']) == [JSON_NULL, None, {"a": None}]
    assert convert_column("json", [b"null"]) == [JSON_NULL]
    assert READ_CONVERTERS["json"] is not None and READ_CONVERTERS["json"](b"null") is JSON_NULL
    assert sql_values(["json"], [(JSON_NULL,), (None,)]) == ["('null')", "(NULL)"]
    assert load_payload(["json"], [(JSON_NULL,), (None,)]) == b"null\n\\N\n"

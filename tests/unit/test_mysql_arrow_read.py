"""The mysql reader's raw columns as Arrow batches (no server needed): every kind decoded by vectorised
casts into exactly the batch schema, and the batch's tuples exactly the values the reader gave before
(its column-at-a-time conversion: tests/mysql_old_read.py), dirty rows and zero dates included."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.mysql_old_read import old_read
from wormhole.plugins.base import Column, Schema
from wormhole.plugins.batch import arrow_schema, rows_of
from wormhole.plugins.mysql.arrow_read import BatchDecoder
from wormhole.plugins.mysql.types import KIND_TYPES


def column(name: str, kind: str, precision: int | None = None, scale: int | None = None) -> Column:
    return Column(name, KIND_TYPES[kind], unsigned=kind == "uint64", precision=precision, scale=scale)


def decode(columns: Sequence[Column], kinds: Sequence[str], raw: list[list[Any]],
           zero_dates: str = "keep") -> tuple[Sequence[Any], list[tuple[tuple[Any, ...], str]]]:
    """The new decoder's batch and rejected rows, checked against the old conversion (repr: types, a
    decimal's exponent and -0.0 count)."""
    rows, rejected = BatchDecoder(columns, kinds, zero_dates).decode([list(c) for c in raw])
    want_rows, want_rejected = old_read(kinds, raw, zero_dates)
    assert repr(list(rows_of(rows))) == repr(want_rows)
    got_rejected = [(r.row, r.reason) for r in rejected]
    assert repr(got_rejected) == repr(want_rejected)
    if rows.native_arrow is not None:
        assert rows.arrow_form.schema.equals(arrow_schema(Schema(tuple(columns))), check_metadata=True)
    return rows, got_rejected


AWKWARD: list[tuple[Column, str, list[Any]]] = [
    (column("ti", "int"), "int", [b"-128", b"127", None, b"0"]),
    (column("bi", "int"), "int", [b"-9223372036854775808", b"9223372036854775807", None, b"0"]),
    (column("iu", "int"), "int", [b"4294967295", b"0", None, b"1"]),
    (column("yr", "int"), "int", [b"2155", b"1901", None, b"0000"]),
    (column("bu", "uint64"), "uint64", [b"18446744073709551615", b"0", None, b"9223372036854775808"]),
    (column("dec65", "decimal", 65, 30), "decimal",
     [b"99999999999999999999999999999999999.999999999999999999999999999999",
      b"-99999999999999999999999999999999999.999999999999999999999999999999", None,
      b"0.000000000000000000000000000001"]),
    (column("d2", "decimal", 10, 2), "decimal", [b"12345678.90", b"-0.01", None, b"0.00"]),
    (column("d0", "decimal", 5, 0), "decimal", [b"99999", b"-1", None, b"0"]),
    (column("fl", "float32"), "float32", [b"16777216", b"123456.7890625", None, b"3.4028234663852886e38"]),
    (column("db", "float"), "float", [b"1.7976931348623157e308", b"-2.2250738585072014e-308", None, b"0.1"]),
    (column("vc", "string"), "string", ["😀🎉 ünïcödé 𝄞".encode(), b"", None, b"tab\there\n\\N \x00"]),
    (column("tm", "string"), "string", [b"838:59:59.000000", b"-838:59:59.000000", None, b"00:00:00.000001"]),
    (column("vb", "bytes"), "bytes", [bytes(range(256)), b"", None, b"\xf0\x9f\x98"]),
    (column("dt", "date"), "date", [b"2024-02-29", b"1000-01-01", None, b"9999-12-31"]),
    (column("dtm", "datetime"), "datetime",
     [b"2024-01-02 03:04:05.123456", b"1000-01-01 00:00:00.000000", None, b"9999-12-31 23:59:59.999999"]),
    (column("ts", "datetime"), "datetime", [b"2038-01-19 03:14:07.999", b"1970-01-01 00:00:01.000", None,
                                            b"2024-01-02 03:04:05"]),
    (column("js", "json"), "json", ['{"a": [1, 2.5, "x😀", 12345678901234567890], "b": null}'.encode(), b"[]",
                                    None, b"null"]),
    (column("bt", "bit"), "bit", [b"\x03\xff", b"\x00\x00", None, b"\x02\x00"]),
    (column("b1", "bit"), "bit", [b"\x01", b"\x00", None, b"\x01"]),
    (column("b64", "bit"), "bit", [b"\x7f" + b"\xff" * 7, b"\x00" * 8, None, b"\x00" * 7 + b"\x01"]),
]


def test_every_awkward_kind_is_an_arrow_batch_with_the_old_values() -> None:
    columns = [c for c, _, _ in AWKWARD]
    rows, rejected = decode(columns, [k for _, k, _ in AWKWARD], [v for _, _, v in AWKWARD])
    assert rows.native_arrow is not None and len(rows) == 4 and rejected == []
    batch = rows.arrow_form
    assert batch.schema.field("bu").type == pa.uint64() and batch.schema.field("bi").type == pa.int64()
    assert batch.schema.field("dec65").type == pa.decimal256(65, 30)
    assert batch.schema.field("d2").type == pa.decimal128(10, 2)
    assert batch.schema.field("js").metadata == {b"wormhole.type": b"json"}
    assert batch.column("js").to_pylist()[3] == "null"  # JSON null is the text; SQL NULL is null
    assert batch.column("bt").to_pylist() == [1023, 0, None, 512]


@pytest.mark.parametrize("policy", ["keep", "null", "reject"])
def test_zero_and_invalid_dates_follow_the_policy_as_before(policy: str) -> None:
    columns = [column("id", "int"), column("dt", "date"), column("dtm", "datetime")]
    raw: list[list[Any]] = [
        [b"1", b"2", b"3", b"4", b"5"],
        [b"2024-02-29", b"0000-00-00", b"2024-00-10", b"0000-01-01", b"2024-02-30"],
        [b"2024-01-02 03:04:05.5", b"0000-00-00 00:00:00.000000", None, b"2024-01-01 00:00:00", b"0000-01-01 00:00:00"]]
    rows, rejected = decode(columns, ["int", "date", "datetime"], raw, policy)
    if policy == "keep":  # a date kept as its text has no Arrow date: its column is exact (the text, typed date)
        assert rows.exact and rows_of(rows)[1][1] == "0000-00-00"
        field = rows.arrow_form.schema.field("dt")
        assert field.metadata[b"wormhole.exact"] == b"text" and field.metadata[b"wormhole.type"] == b"date"
        assert rows.arrow_form.column("dt")[1].as_py() == b"0000-00-00"
        assert rows.arrow_form.schema.field("id").type == pa.int64()  # the other columns keep their types
    elif policy == "null":
        assert rows.native_arrow is not None and [r[1] for r in rows_of(rows)][1:] == [None] * 4
    else:
        assert rows.native_arrow is not None and [r[0] for r in rows_of(rows)] == [1]
        assert [r[0][0] for r in rejected] == [2, 3, 4, 5]
        assert "zero date 0000-00-00 has no value (zero_dates is 'reject')" in rejected[0][1]


def test_values_that_do_not_convert_reject_their_rows_with_the_reason() -> None:
    columns = [column("id", "int"), column("s", "string"), column("js", "json"), column("d", "decimal", 10, 2)]
    raw: list[list[Any]] = [
        [b"1", b"2", b"3", b"4"],
        [b"ok", b"a\xffb", b"\xed\xa0\x80", None],  # not UTF-8; a UTF-8-encoded surrogate
        [b"{}", b"[1]", b"not json", b'{"a": 1'],
        [b"1.00", b"2.00", b"3.00", b"4.00"]]
    rows, rejected = decode(columns, ["int", "string", "json", "decimal"], raw)
    assert rows.native_arrow is not None and list(rows_of(rows)) == [(1, "ok", {}, Decimal("1.00"))]
    assert [r[0][0] for r in rejected] == [2, 3, 4]
    assert rejected[0][1].startswith("column 1: cannot read b'a\\xffb' as string: 'utf-8' codec can't decode")
    assert rejected[2][1].startswith("column 2: cannot read b'{\"a\": 1' as json: Expecting")
    assert rejected[2][0] == (4, None, None, Decimal("4.00"))  # the row as read, its bad cell None


def test_values_arrow_cannot_hold_go_on_in_an_exact_column() -> None:
    # BIT(64) beyond int64, a decimal wider than the declared column, a fraction shorter than the scale
    raw = [[b"\xff" * 8, b"\x00" * 8], [b"123456.78", b"1.00"], [b"1.5", b"2.50"]]
    kinds = ["bit", "decimal", "decimal"]
    for k, col in enumerate([column("b", "bit"), column("d", "decimal", 5, 2), column("e", "decimal", 10, 2)]):
        rows, _ = decode([col], [kinds[k]], [raw[k]])
        assert rows.exact, col


def test_all_null_columns_and_one_row() -> None:
    columns = [c for c, _, _ in AWKWARD]
    kinds = [k for _, k, _ in AWKWARD]
    decode(columns, kinds, [[None, None] for _ in range(len(AWKWARD))])
    decode(columns, kinds, [[v[0]] for _, _, v in AWKWARD])


_DOUBLES = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), _DOUBLES), min_size=1, max_size=30),
       st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=1, max_size=30))
def test_doubles_and_integers_parse_exactly(doubles: list[float | None], ints: list[int | None]) -> None:
    for style in ("", ".17g", "g"):  # the shortest text, as the server sends it, and longer or shorter ones
        floats = [None if v is None else format(v, style).encode() for v in doubles]
        decode([column("f", "float")], ["float"], [floats])
    decode([column("i", "int")], ["int"], [[None if v is None else str(v).encode() for v in ints]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.tuples(st.datetimes(), st.integers(0, 6))), min_size=1, max_size=20),
       st.integers(1, 65), st.data())
def test_datetimes_and_decimals_parse_exactly(stamps: list[Any], precision: int, data: st.DataObject) -> None:
    texts = [None if s is None else _datetime_text(*s) for s in stamps]
    decode([column("t", "datetime")], ["datetime"], [texts])
    decode([column("d", "date")], ["date"], [[None if t is None else t[:10] for t in texts]])
    scale = data.draw(st.integers(0, min(precision, 30)))
    digits = st.integers(-(10**precision - 1), 10**precision - 1)
    values = data.draw(st.lists(st.one_of(st.none(), digits), min_size=1, max_size=20))
    decode([column("d", "decimal", precision, scale)], ["decimal"], [[_decimal_text(v, scale) for v in values]])


def _datetime_text(stamp: datetime, digits: int) -> bytes:
    text = stamp.strftime("%Y-%m-%d %H:%M:%S")
    if digits:  # DATETIME(n) sends n digits after the point
        text += "." + f"{stamp.microsecond:06d}"[:digits]
    return text.encode()


def _decimal_text(value: int | None, scale: int) -> bytes | None:
    if value is None:
        return None
    sign, text = ("-" if value < 0 else ""), str(abs(value)).rjust(scale + 1, "0")
    return (sign + (text[:-scale] + "." + text[-scale:] if scale else text)).encode()


def test_a_datetime_at_the_ends_of_pythons_range() -> None:
    edge = [b"0001-01-01 00:00:00", b"9999-12-31 23:59:59.999999", None]
    rows, _ = decode([column("t", "datetime")], ["datetime"], [edge])
    assert rows.native_arrow is not None and rows_of(rows)[0][0] == datetime.min and rows_of(rows)[1][0] == datetime.max
    assert datetime.max - rows_of(rows)[1][0] == timedelta(0)


def test_zerofill_columns_read_as_their_numbers() -> None:
    columns = [column("i", "int"), column("d", "decimal", 10, 2), column("f", "float")]
    raw: list[list[Any]] = [[b"0000000012", None], [b"00000012.50", b"00000000.00"],
                            [b"00000000000000000001.5", b"00000000000000000000"]]
    rows, _ = decode(columns, ["int", "decimal", "float"], raw)
    assert rows.native_arrow is not None
    assert list(rows_of(rows)) == [(12, Decimal("12.50"), 1.5), (None, Decimal("0.00"), 0.0)]

"""The checksum of rows (wormhole.verify, issue 39): order-independent, every change the issue lists found,
and the same rows in every Arrow form a store gives back compare equal."""

from __future__ import annotations

import json
import random
import struct
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wormhole.plugins.arrow_form import EXACT_KEY, LOGICAL_KEY, exact_codec, exact_from_rows
from wormhole.plugins.schema import Column, Schema
from wormhole.plugins.values import json_loads
from wormhole.verify import Digest, digest, hashing, row_hashes
from wormhole.verify.canonical import array_hashes, python_hashes

ROWS: list[tuple[Any, ...]] = [
    (1, 18446744073709551615, Decimal("12345678.90"), 1.7976931348623157e308, 1.100000023841858,
     "😀 ünïcödé", datetime(2024, 1, 2, 3, 4, 5, 123456), date(2024, 2, 29), '{"a": [1, 2.5], "b": null}',
     b"\x00\xff"),
    (2, 0, Decimal("-0.01"), -0.5, 16777216.0, "", datetime(1000, 1, 1), date(1000, 1, 1), "null", b""),
    (3, None, None, None, None, None, None, None, None, None),
    (4, 9223372036854775808, Decimal("0.00"), 0.1, -1.5, " pad", datetime(9999, 12, 31, 23, 59, 59, 999999),
     date(9999, 12, 31), '"just a string"', bytes(range(256))),
]
NAMES = ["id", "bu", "d2", "db", "fl", "s", "dt", "day", "js", "bl"]
TYPES = [pa.int32(), pa.uint64(), pa.decimal128(12, 2), pa.float64(), pa.float64(), pa.string(), pa.timestamp("us"),
         pa.date32(), pa.string(), pa.binary()]
LOGICAL = ["int", "int", "decimal", "float", "float", "string", "datetime", "date", "json", "bytes"]


def batch_of(rows: list[tuple[Any, ...]], types: list[pa.DataType] | None = None,
             logical: list[str] | None = None) -> pa.RecordBatch:
    """The rows as a record batch of ``types``, each field marked with its logical type as wormhole's are."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in NAMES]
    fields = [pa.field(n, t, metadata={LOGICAL_KEY: k.encode()})
              for n, t, k in zip(NAMES, types or TYPES, logical or LOGICAL, strict=True)]
    arrays = [pa.array(list(c), f.type) for c, f in zip(columns, fields, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def with_column(batch: pa.RecordBatch, name: str, array: pa.Array, logical: str | None = None) -> pa.RecordBatch:
    """``batch`` with column ``name`` replaced by ``array`` (its field marked ``logical``, else unmarked)."""
    index = batch.schema.get_field_index(name)
    meta = {LOGICAL_KEY: logical.encode()} if logical else None
    return batch.set_column(index, pa.field(name, array.type, metadata=meta), array)


def single(name: str, array: pa.Array, logical: str | None = None) -> Digest:
    meta = {LOGICAL_KEY: logical.encode()} if logical else None
    return digest([pa.RecordBatch.from_arrays([array], schema=pa.schema([pa.field(name, array.type, metadata=meta)]))])


BASE = digest([batch_of(ROWS)])


# -- the Digest ------------------------------------------------------------------------------------

def test_a_digest_adds_up_prints_short_and_parses_back() -> None:
    a, b = digest([batch_of(ROWS[:2])]), digest([batch_of(ROWS[2:])])
    assert a + b == BASE and BASE.rows == 4
    assert Digest.empty() + BASE == BASE and Digest.empty() == Digest(0, 0)
    text = str(BASE)
    assert text.startswith("4:") and len(text) == 2 + 16
    assert Digest.parse(text) == BASE
    assert digest([]) == Digest.empty() and digest([batch_of([])]) == Digest.empty()


def test_the_order_of_rows_and_batches_and_the_batch_boundaries_do_not_matter() -> None:
    rng = random.Random(7)
    for _ in range(5):
        rows = ROWS[:]
        rng.shuffle(rows)
        cut = rng.randrange(len(rows) + 1)
        batches = [batch_of(rows[:cut]), batch_of(rows[cut:])]
        rng.shuffle(batches)
        assert digest(batches) == BASE
    table = pa.Table.from_batches([batch_of(ROWS)])
    assert digest([table]) == BASE
    assert digest(batch_of(ROWS).slice(i, 1) for i in range(len(ROWS))) == BASE


def test_a_duplicated_row_pair_changes_the_digest_where_a_xor_would_cancel_it() -> None:
    doubled = digest([batch_of(ROWS + ROWS[:1] + ROWS[:1])])
    assert doubled != BASE and doubled.rows == 6
    hashes = row_hashes(batch_of(ROWS + ROWS[:1] + ROWS[:1]))
    assert np.bitwise_xor.reduce(hashes) == np.bitwise_xor.reduce(row_hashes(batch_of(ROWS)))  # xor cannot tell
    assert doubled.total != BASE.total  # the sum can, whatever the row count says


# -- every change the issue lists is found ---------------------------------------------------------

def changed(row: int, column: str, value: Any) -> list[tuple[Any, ...]]:
    rows = [list(r) for r in ROWS]
    rows[row][NAMES.index(column)] = value
    return [tuple(r) for r in rows]


def float_next_bit(x: float) -> float:
    (bits,) = struct.unpack("<Q", struct.pack("<d", x))
    return float(struct.unpack("<d", struct.pack("<Q", bits ^ 1))[0])


@pytest.mark.parametrize(("row", "column", "value"), [
    (0, "bu", 18446744073709551614),  # one value changed, in each type
    (0, "d2", Decimal("12345678.91")),
    (0, "s", "😀 ünïcödé "),
    (0, "js", '{"a": [1, 2.5], "b": 0}'),
    (0, "bl", b"\x00\xfe"),
    (0, "day", date(2024, 2, 28)),
    (2, "s", ""),  # NULL -> ''
    (1, "s", None),  # '' -> NULL
    (0, "dt", datetime(2024, 1, 2, 3, 4, 5)),  # a timestamp's microseconds truncated
    (0, "dt", datetime(2024, 1, 2, 3, 4, 5, 123000)),  # ... to milliseconds
    (0, "db", float_next_bit(1.7976931348623157e308)),  # a float's last bit changed
    (3, "db", float_next_bit(0.1)),
    (1, "js", None),  # the JSON null -> SQL NULL
    (1, "bu", None),  # 0 -> NULL
    (2, "bu", 0),  # NULL -> 0
])
def test_every_change_is_found(row: int, column: str, value: Any) -> None:
    assert digest([batch_of(changed(row, column, value))]) != BASE


def test_a_deleted_or_an_added_row_is_found() -> None:
    assert digest([batch_of(ROWS[:3])]) != BASE
    assert digest([batch_of([*ROWS, (5, *([None] * 9))])]) != BASE


def test_two_columns_values_swapped_are_found() -> None:
    rows = [(1, "a", "b"), (2, "c", "d")]
    names = ["id", "x", "y"]
    straight = pa.RecordBatch.from_pylist([dict(zip(names, r, strict=True)) for r in rows])
    swapped = pa.RecordBatch.from_arrays([straight.column(0), straight.column(2), straight.column(1)], names=names)
    assert digest([straight]) != digest([swapped])
    # the same values in the columns named in another order: the order of `columns` is what is compared
    assert digest([straight], ["id", "y", "x"]) == digest([swapped], ["id", "x", "y"])


def test_values_of_different_logical_types_differ() -> None:
    assert single("x", pa.array([5])) != single("x", pa.array([5.0]))  # an exact number is no float
    assert single("x", pa.array([True])) != single("x", pa.array([1]))
    assert single("x", pa.array(["5"])) != single("x", pa.array([5]))
    assert single("x", pa.array(["ab"])) != single("x", pa.array([b"ab"]))
    assert single("x", pa.array(["null"]), "json") != single("x", pa.array([None], pa.string()), "json")
    assert single("x", pa.array([""])) != single("x", pa.array([None], pa.string()))
    assert single("x", pa.array([0])) != single("x", pa.array([None], pa.int64()))
    assert single("x", pa.array([date(1970, 1, 1)])) != single("x", pa.array([0]))


# -- the same rows in every Arrow form compare equal -----------------------------------------------

def forms_equal(name: str, *arrays: pa.Array, logical: str | None = None) -> None:
    base = batch_of(ROWS)
    digests = {str(a.type): digest([with_column(base, name, a, logical)]) for a in arrays}
    assert set(digests.values()) == {BASE}, digests


def test_integers_of_every_width_and_signedness_and_decimals_are_one_number() -> None:
    ids = [1, 2, 3, 4]
    forms_equal("id", *(pa.array(ids, t) for t in (pa.int8(), pa.int16(), pa.int64(), pa.uint8(), pa.uint32(),
                                                   pa.uint64(), pa.decimal128(10, 0), pa.decimal128(12, 2),
                                                   pa.decimal128(38, 18), pa.decimal256(65, 30))))
    forms_equal("id", pa.array(["1", "2.0", "+3.00", "0004"]), logical="int")
    assert single("x", pa.array([5])) == single("x", pa.array([Decimal("5.000")], pa.decimal128(38, 18)))
    assert single("x", pa.array([-7], pa.int8())) == single("x", pa.array(["-7.0"]), "decimal")


def test_decimals_of_any_scale_and_their_text_are_one_number() -> None:
    values = [Decimal("12345678.90"), Decimal("-0.01"), None, Decimal("0.00")]
    forms_equal("d2", *(pa.array(values, t) for t in (pa.decimal128(38, 18), pa.decimal256(65, 30),
                                                      pa.decimal128(10, 2))))
    forms_equal("d2", pa.array(["12345678.9", "-.01", None, "0"]), pa.array([b"12345678.900", b"-0.010", None,
                                                                             b"-0"]), logical="decimal")
    tiny = [Decimal("0.000000000000000001"), Decimal("-0.000001"), Decimal("0E-18")]  # Arrow writes 1E-18
    assert single("x", pa.array(tiny, pa.decimal128(38, 18))) == single(
        "x", pa.array(["0.000000000000000001", "-0.000001000", "0"]), "decimal")


def test_a_batch_with_exact_columns_compares_as_the_typed_one() -> None:
    """Exact columns (values Arrow cannot hold: an integer beyond 64 bits, decimals of their own scales, a
    zero date, an aware datetime) decode into the typed column's canonical form."""
    schema = Schema((Column("big", "int"), Column("dec", "decimal"), Column("day", "date"),
                     Column("at", "datetime"), Column("s", "string")))
    rows = [(2**70, Decimal("2.50"), "0000-00-00", datetime(2024, 1, 1, 10, tzinfo=timezone(timedelta(hours=2))),
             "a\udcffb"),
            (-(2**64), Decimal("1E-7"), date(2024, 2, 29), datetime(2024, 1, 1, 8, 0, 0, 1, tzinfo=UTC), "x"),
            (5, Decimal("7"), None, None, None)]
    exact = exact_from_rows(schema, rows)
    assert all(exact_codec(f) is not None for f in exact.schema)
    typed = pa.RecordBatch.from_arrays([
        pa.array([2**70, -(2**64), 5], pa.decimal128(38, 0)),
        pa.array([Decimal("2.5"), Decimal("0.0000001"), Decimal(7)], pa.decimal128(20, 10)),
        pa.array(["0000-00-00", "2024-02-29", None]),
        pa.array([datetime(2024, 1, 1, 8), datetime(2024, 1, 1, 8, 0, 0, 1), None], pa.timestamp("us")),
        pa.array([b"a\xed\xb3\xbfb", b"x", None], pa.binary()),
    ], names=["big", "dec", "day", "at", "s"])
    as_typed = digest([typed], logical={"day": "date", "s": "string"})
    assert digest([exact]) == as_typed
    # The same rows as Python values an int column's pickle codec holds (a reader's float in an int column)
    # still compare by value: a float 5.0 is no exact 5.
    assert digest([exact_from_rows(Schema((Column("x", "int"),)), [(5.0,)])]) != single("x", pa.array([5]))


def test_floats_by_their_exact_binary_value() -> None:
    exact32 = [1.5, -0.5, None, 16777216.0]
    assert single("x", pa.array(exact32, pa.float32())) == single("x", pa.array(exact32, pa.float64()))
    assert single("x", pa.array([1.100000023841858], pa.float64())) == single("x", pa.array([1.1], pa.float32()))
    assert single("x", pa.array([1.1], pa.float32())) != single("x", pa.array([1.1], pa.float64()))
    assert single("x", pa.array([-0.0])) == single("x", pa.array([0.0]))
    quiet, other = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0], float("nan")
    assert single("x", pa.array([quiet])) == single("x", pa.array([other])) != single("x", pa.array([None],
                                                                                                      pa.float64()))
    assert single("x", pa.array(["0.1", "1e400", "-0"]), "float") == single("x", pa.array([0.1, float("inf"), 0.0]))


def test_timestamps_in_any_unit_and_zone_annotation_are_one_instant() -> None:
    values = [datetime(2024, 1, 2, 3, 4, 5, 123456), datetime(2000, 1, 1), None, datetime(2038, 1, 19, 3, 14, 7)]
    us = pa.array(values, pa.timestamp("us"))
    forms = [us.cast(pa.timestamp("ns")), us.cast(pa.timestamp("us", "UTC"))]
    whole = pa.array(values[1:], pa.timestamp("us"))
    assert single("t", whole) == single("t", whole.cast(pa.timestamp("s"))) == single("t", whole.cast(
        pa.timestamp("ms")))
    assert {single("t", a) for a in forms} == {single("t", us)}
    texts = pa.array(["2024-01-02T03:04:05.123456", "2000-01-01 00:00:00+00:00", None, "2038-01-19T05:14:07+02:00"])
    assert single("t", texts, "datetime") == single("t", us)
    nanos = pa.array([1_000_000_001], pa.timestamp("ns"))  # a nanosecond is kept where there is one
    assert single("t", nanos) != single("t", nanos.cast(pa.timestamp("us"), safe=False))
    assert single("t", pa.array(["0000-00-00 00:00:00"]), "datetime") != single("t", pa.array([None],
                                                                                              pa.timestamp("us")))


def test_dates_as_day_numbers() -> None:
    values = [date(2024, 2, 29), date(1000, 1, 1), None]
    d32 = pa.array(values, pa.date32())
    assert single("d", d32) == single("d", d32.cast(pa.date64())) == single(
        "d", pa.array(["2024-02-29", "1000-01-01", None]), "date")
    assert single("d", pa.array(["0000-00-00"]), "date") != single("d", pa.array(["0000-00-00"]))
    zero = single("d", pa.array(["0000-00-00", "2024-02-29"]), "date")  # text as str or as bytes: one value
    assert zero == single("d", pa.array([b"0000-00-00", b"2024-02-29"]), "date")
    assert single("t", pa.array([b"0000-00-00 00:00:00"]), "datetime") == single(
        "t", pa.array(["0000-00-00 00:00:00"]), "datetime")


def test_strings_and_bytes_in_every_arrow_form() -> None:
    values = ["😀 ünïcödé", "", None, " pad"]
    forms_equal("s", pa.array(values, pa.large_string()), pa.array(values, pa.string_view()),
                pa.array(values).dictionary_encode(), pa.array(values, pa.large_string()).dictionary_encode())
    raw = [b"\x00\xff", b"", None, bytes(range(256))]
    forms_equal("bl", pa.array(raw, pa.large_binary()), pa.array(raw, pa.binary_view()))
    fixed = [b"ab", b"\x00\x00", None]
    assert single("b", pa.array(fixed, pa.binary(2))) == single("b", pa.array(fixed, pa.binary()))
    assert single("b", pa.array(fixed, pa.binary(2)).slice(1)) == single("b", pa.array(fixed[1:], pa.binary()))


def test_long_values_and_values_across_hashing_chunks() -> None:
    values = ["x" * 70_000, "y" * 200_000, "", "z"] * 3
    whole = single("s", pa.array(values))
    assert whole == digest([pa.record_batch([pa.array(values[i:i + 1])], names=["s"]) for i in range(len(values))])
    assert whole != single("s", pa.array(["x" * 69_999 + "y", *values[1:]]))
    assert single("s", pa.array(["ab"])) != single("s", pa.array(["ba"]))
    assert single("s", pa.array(["a\x00"])) != single("s", pa.array(["a"]))


def test_json_canonical_text() -> None:
    same = ['{"b": 1, "a": [1.50, "x😀"]}', '{"a":[1.5,"x\\ud83d\\ude00"],"b":1.0}',
            '{ "a" : [ 1.500 , "x😀" ] , "b" : 1 }']
    assert len({single("j", pa.array([t]), "json") for t in same}) == 1
    assert single("j", pa.array(['{"a": 1}']), "json") != single("j", pa.array(['{"a": 2}']), "json")
    assert single("j", pa.array(['"text"']), "json") == single("j", pa.array(["text"]), "json")  # parquet's bare text
    nulls = pa.array(["null", None, "[]"])
    assert single("j", nulls, "json") != single("j", pa.array([None, None, "[]"], pa.string()), "json")
    assert digest([pa.record_batch([nulls], names=["j"])], logical={"j": "json"}, json_null="null") == single(
        "j", pa.array([None, None, "[]"], pa.string()), "json")
    nested = pa.array([{"b": 1, "a": [1, 2]}])  # a struct, as parquet gives a nested column
    assert single("j", nested) == single("j", pa.array(['{"a": [1, 2], "b": 1}']), "json")


def test_bools() -> None:
    assert single("b", pa.array([True, False, None])) == single("b", pa.array([1, 0, None]), "bool") == single(
        "b", pa.array(["true", "f", None]), "bool")
    with pytest.raises(ValueError, match="other than 0 and 1"):
        single("b", pa.array([2]), "bool")


# -- the arguments ---------------------------------------------------------------------------------

def test_columns_by_name_in_order_and_without_case() -> None:
    batch = batch_of(ROWS)
    assert digest([batch], NAMES) == BASE
    assert digest([batch], [n.upper() for n in NAMES]) == BASE
    assert digest([batch], NAMES[::-1]) != BASE
    assert digest([batch.select(["id", "s"])]) == digest([batch], ["id", "s"])
    with pytest.raises(KeyError, match="'nope' is not in the batch"):
        digest([batch], ["nope"])
    both = pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], names=["A", "a"])
    assert digest([both], ["a"]) == digest([both.select([1])])  # the exact name wins
    two = pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], names=["Ab", "aB"])
    with pytest.raises(KeyError, match="ambiguous"):
        digest([two], ["ab"])


def test_a_logical_type_a_column_cannot_hold_is_refused() -> None:
    with pytest.raises(TypeError, match="date"):
        single("x", pa.array([1.5]), "date")
    with pytest.raises(TypeError, match="no logical type"):
        single("x", pa.array([1], pa.time64("us")))
    with pytest.raises(TypeError, match="unknown logical type"):
        single("x", pa.array([1]), "money")


def test_a_plain_pyarrow_table_infers_its_logical_types() -> None:
    plain = pa.RecordBatch.from_arrays([a.cast(t) for a, t in zip(batch_of(ROWS).columns, TYPES, strict=True)],
                                       names=NAMES)
    assert digest([plain], logical={"js": "json"}) == BASE
    assert digest([plain]) != BASE  # without it, js is a string column
    assert EXACT_KEY not in (plain.schema.field(0).metadata or {})


# -- the value-by-value path agrees with the column kernels ----------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.decimals(min_value=-10**20, max_value=10**20, places=6,
                                                 allow_nan=False, allow_infinity=False)), max_size=20))
def test_numbers_hash_the_same_from_arrow_decimals_text_and_python(values: list[Decimal | None]) -> None:
    by_arrow = array_hashes(pa.array(values, pa.decimal128(38, 6)), "decimal", "value")
    small = [v for v in values if v is None or abs(v) < 10**12]  # decimal(18,6): the unscaled integers' path
    assert array_hashes(pa.array(small, pa.decimal128(18, 6)), "decimal", "value").tolist() == array_hashes(
        pa.array(small, pa.decimal128(38, 6)), "decimal", "value").tolist()
    by_text = array_hashes(pa.array([None if v is None else str(v) for v in values], pa.string()), "decimal", "value")
    assert by_arrow.tolist() == by_text.tolist() == python_hashes(values, "decimal", "value").tolist()
    integral = [i for i, v in enumerate(values) if v is not None and v == v.to_integral_value() and abs(v) < 2**63]
    ints = array_hashes(pa.array([int(values[i] or 0) for i in integral], pa.int64()), "int", "value")
    assert ints.tolist() == by_arrow[integral].tolist()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.datetimes(min_value=datetime(1000, 1, 1))), max_size=20),
       st.lists(st.one_of(st.none(), st.floats(allow_nan=True)), max_size=20))
def test_datetimes_and_floats_hash_the_same_from_arrow_and_python(times: list[datetime | None],
                                                                  floats: list[float | None]) -> None:
    assert array_hashes(pa.array(times, pa.timestamp("us")), "datetime", "value").tolist() == \
        python_hashes(times, "datetime", "value").tolist()
    assert array_hashes(pa.array(floats, pa.float64()), "float", "value").tolist() == \
        python_hashes(floats, "float", "value").tolist()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.decimals(allow_nan=False, allow_infinity=False)
    | st.text().filter(lambda t: "\x00#" not in t and "#\x00" not in t),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


def json_dump(v: Any, space: str) -> str:
    """JSON text of ``v`` with its decimals as written (``1.50``, ``1E+2``), ``space`` around the punctuation."""
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dict):
        items = [json.dumps(k) + space + ":" + space + json_dump(x, space) for k, x in reversed(v.items())]
        return "{" + space + ("," + space).join(items) + space + "}"
    if isinstance(v, list):
        return "[" + space + ("," + space).join(json_dump(x, space) for x in v) + space + "]"
    return json.dumps(v)


@settings(max_examples=80, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_a_json_documents_text_and_its_parsed_value_hash_alike(value: Any, spaced: bool) -> None:
    """The column kernel's canonical text (json.loads/dumps in C) is the value-by-value one's, whatever the
    document's layout, key order or number spelling."""
    text = json_dump(value, " " if spaced else "")
    from_text = array_hashes(pa.array([text]), "json", "value")
    from_value = python_hashes([json_loads(text)], "json", "value")
    assert from_text.tolist() == from_value.tolist()


def test_a_variable_length_hash_is_its_definition_wherever_the_value_falls() -> None:
    """sum(R[position] * T[byte]) over the value's bytes, finalised with its length: the same for a value
    hashed among others in one chunk, across chunks, or longer than a chunk (piece by piece)."""
    def reference(value: bytes) -> int:
        raw = np.frombuffer(value, np.uint8)
        weights = hashing.mix(np.arange(len(raw), dtype=np.uint64) ^ hashing.TAG["positions"])
        total = int((weights * hashing._BYTES_TABLE[raw]).sum(dtype=np.uint64)) if len(raw) else 0
        length = np.array([(total + len(raw) * int(hashing._LENGTH)) % 2**64], np.uint64)
        return int(hashing.mix(hashing.mix(length) ^ hashing.TAG["bytes"])[0])

    rng = random.Random(3)
    values = [bytes(rng.randrange(256) for _ in range(n)) for n in (0, 1, 7, 40_000, 30_000, 65_536, 65_537, 3)]
    values.append(bytes(rng.randrange(256) for _ in range(200_000)))
    got = hashing.variable("bytes", pa.array(values, pa.binary())).tolist()
    assert got == [reference(v) for v in values]


def test_a_json_column_of_bytes_that_are_no_json_or_no_utf8_still_hashes() -> None:
    texts = pa.array([b'{"a": 1}', b"\xff\xfe not json", b"plain"], pa.binary())
    hashes = array_hashes(texts, "json", "value").tolist()
    assert len(set(hashes)) == 3
    assert hashes[0::2] == array_hashes(pa.array(['{"a":1}', '"plain"']), "json", "value").tolist()

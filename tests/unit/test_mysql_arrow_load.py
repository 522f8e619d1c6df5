"""The mysql writer's Arrow encoder writes the LOAD DATA payload the row encoder writes, byte for byte."""

from __future__ import annotations

import math
import struct
from datetime import date, datetime
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mysql_load_reference import load_payload
from wormhole.plugins.base import Column, Schema
from wormhole.plugins.batch import arrow_from_rows, exact_from_rows
from wormhole.plugins.mysql.arrow_load import arrow_payload
from wormhole.plugins.sql.narrowing import Narrowing, mysql_target, narrowings
from wormhole.plugins.values import JSON_NULL


def both(schema: Schema, rows: list[tuple[Any, ...]]) -> tuple[bytes, bytes]:
    """(the row encoder's payload, the Arrow encoder's) for the same rows."""
    old = load_payload([c.type for c in schema.columns], rows)
    return old, arrow_payload(arrow_from_rows(schema, rows)).to_pybytes()


def floats_at_every_magnitude() -> list[float]:
    """Around each place where ``repr`` or Arrow changes notation, and the extremes."""
    values = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1 / 3,
              2.0 ** 53, 2.0 ** 53 + 2, 9999999999999998.0, 123456789012.5, 16777216.0, 3.4028234663852886e38]
    for exponent in range(-12, 20):
        for mantissa in (1.0, 1.5, 9.999999999999998, 1.2345678901234567, 7.0):
            values += [mantissa * 10.0 ** exponent, -mantissa * 10.0 ** exponent]
    return values


def test_floats_are_written_as_repr_writes_them() -> None:
    schema = Schema((Column("f", "float"),))
    rows = [(v,) for v in floats_at_every_magnitude()]
    old, new = both(schema, rows)
    assert new == old


def test_awkward_values_of_every_type() -> None:
    schema = Schema((Column("i", "int"), Column("u", "int", unsigned=True),
                     Column("d", "decimal", precision=65, scale=30), Column("d2", "decimal", precision=12, scale=2),
                     Column("s", "string"), Column("b", "bytes"), Column("dt", "date"), Column("ts", "datetime"),
                     Column("j", "json"), Column("bo", "bool")))
    rows: list[tuple[Any, ...]] = [
        (-2 ** 63, 2 ** 64 - 1, Decimal("0.000000000000000000000000000001"), Decimal("-0.01"),
         "tab\there\nnew\\back \x00nul\r 'q' \"dq\" \\N 😀", bytes(range(256)), date(1, 1, 1),
         datetime(2024, 1, 2, 3, 4, 5, 6), {"a": [1, 2.5, "x\t😀"], "b": None}, True),
        (None,) * 10,
        (2 ** 63 - 1, 0, Decimal("-99999999999999999999999999999999999.999999999999999999999999999999"),
         Decimal("0.00"), "", b"", date(9999, 12, 31), datetime(9999, 12, 31, 23, 59, 59, 999999), JSON_NULL, False),
        (0, 1, Decimal("0E-30"), Decimal("-12345678.90"), "\\", b"\x00\t\n\\N", date(2024, 2, 29),
         datetime(1, 1, 1), "just a string", None),
    ]
    old, new = both(schema, rows)
    assert new == old
    batch = arrow_from_rows(schema, rows)
    assert arrow_payload(batch.slice(1, 2)).to_pybytes() == load_payload([c.type for c in schema.columns], rows[1:3])


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_float_mysql_cannot_hold_raises_as_the_row_encoder_does(value: float) -> None:
    batch = arrow_from_rows(Schema((Column("f", "float"),)), [(1.0,), (value,)])
    with pytest.raises(ValueError, match="MySQL cannot store the float"):
        arrow_payload(batch)


# -- random rows -------------------------------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)) | st.sampled_from("\\\t\n\r\x00N"), max_size=12)
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | _TEXT
                     | st.floats(allow_nan=False, allow_infinity=False),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                     max_leaves=6)


def _decimal(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    # Quantized to the column's scale, as a MySQL reader hands them; no negative zero (Arrow has none:
    # its text is 0.00, the row encoder's -0.00, which MySQL loads as the same 0.00).
    limit = 10 ** precision - 1
    return st.integers(-limit, limit).map(lambda unscaled: Decimal(unscaled).scaleb(-scale, Context(prec=80)))


_FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.integers(0, 2 ** 64 - 1).map(
    lambda bits: struct.unpack("d", struct.pack("Q", bits))[0]).filter(math.isfinite)


@st.composite
def columns_and_rows(draw: st.DrawFn) -> tuple[Schema, list[tuple[Any, ...]]]:
    kinds = draw(st.lists(st.sampled_from(["int", "uint", "decimal", "float", "string", "bytes", "date",
                                           "datetime", "json", "bool"]), min_size=1, max_size=6))
    columns, values = [], []
    for i, kind in enumerate(kinds):
        if kind == "int":
            column, strategy = Column(f"c{i}", "int"), st.integers(-2 ** 63, 2 ** 63 - 1)
        elif kind == "uint":
            column, strategy = Column(f"c{i}", "int", unsigned=True), st.integers(0, 2 ** 64 - 1)
        elif kind == "decimal":
            precision = draw(st.integers(1, 65))
            scale = draw(st.integers(0, min(precision, 30)))
            column, strategy = Column(f"c{i}", "decimal", precision=precision, scale=scale), _decimal(precision, scale)
        elif kind == "float":
            column, strategy = Column(f"c{i}", "float"), _FLOATS
        elif kind in ("string", "bytes", "date", "bool"):
            column = Column(f"c{i}", kind)  # type: ignore[arg-type]
            strategy = {"string": _TEXT, "bytes": st.binary(max_size=12), "date": st.dates(),
                        "bool": st.booleans()}[kind]
        elif kind == "datetime":
            column, strategy = Column(f"c{i}", "datetime"), st.datetimes()
        else:
            column, strategy = Column(f"c{i}", "json"), _JSON.map(lambda v: JSON_NULL if v is None else v)
        columns.append(column)
        values.append(st.none() | strategy)
    rows = draw(st.lists(st.tuples(*values), min_size=1, max_size=8))
    return Schema(tuple(columns)), rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns_and_rows())
def test_random_rows_give_the_row_encoders_payload(case: tuple[Schema, list[tuple[Any, ...]]]) -> None:
    schema, rows = case
    old, new = both(schema, rows)
    assert new == old


def test_an_empty_batch_and_sliced_binary_columns() -> None:
    schema = Schema((Column("b", "bytes"), Column("s", "string")))
    rows = [(b"\x01\x02", "a\tb"), (None, None), (b"", ""), (b"\xff" * 5, "\\")]
    batch = arrow_from_rows(schema, rows)
    assert arrow_payload(batch.slice(0, 0)).to_pybytes() == b""
    for start in range(4):
        assert arrow_payload(batch.slice(start, 2)).to_pybytes() == load_payload(["bytes", "string"],
                                                                                 rows[start:start + 2])
    assert isinstance(arrow_payload(batch), pa.Buffer)


def test_a_decimal_with_more_places_than_its_target_decimal_raises_and_one_that_fits_loads() -> None:
    natives = ("decimal(10,2)", "decimal(65,30) unsigned", "int(11)")
    four = Schema((Column("a", "decimal", precision=12, scale=4),))
    free = Schema((Column("b", "decimal"),))
    schema = Schema((*four.columns, *free.columns, Column("c", "decimal", precision=12, scale=0)))
    targets = narrowings(schema, [mysql_target(n) for n in natives], "MySQL")
    assert targets == (Narrowing("places", "decimal(10,2)", 2, "MySQL"),
                       Narrowing("places", "decimal(65,30) unsigned", 30, "MySQL"), None)
    fits = arrow_from_rows(four, [(Decimal("1.2300"),), (None,), (Decimal("-7.1000"),)])
    assert arrow_payload(fits, targets=targets[:1]).to_pybytes() == b"1.2300\n\\N\n-7.1000\n"
    with pytest.raises(ValueError, match=r"^-0\.0050 has more decimal places than decimal\(10,2\) holds"):
        arrow_payload(arrow_from_rows(four, [(Decimal("1.2300"),), (Decimal("-0.0050"),)]), targets=targets[:1])
    # A decimal of no declared scale travels as each value's own text (an exact column): it is scanned.
    with pytest.raises(ValueError, match=r"^0\.0000000000000000000000000000001 has more decimal places"):
        arrow_payload(exact_from_rows(free, [(Decimal("1E-31"),)]), targets=targets[1:2])
    assert arrow_payload(exact_from_rows(free, [(Decimal("1E-30"),)]), targets=targets[1:2]).to_pybytes() == \
        b"0.000000000000000000000000000001\n"

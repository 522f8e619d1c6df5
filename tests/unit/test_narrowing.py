"""Which written columns a narrower target column is checked for, and which values it refuses."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pyarrow as pa

from wormhole.plugins.base import Column, Schema
from wormhole.plugins.batch import arrow_from_rows, exact_from_rows
from wormhole.plugins.sql.narrowing import (
    Narrowing,
    TargetType,
    as_integers,
    mysql_target,
    narrowing,
    postgres_target,
    refused,
    refused_rows,
)


def test_each_stores_declared_types_are_read_as_what_they_hold() -> None:
    assert mysql_target("decimal(10,2) unsigned") == TargetType("decimal", "decimal(10,2) unsigned", 2)
    assert mysql_target("datetime") == TargetType("time", "datetime", 0)  # whole seconds
    assert mysql_target("timestamp(3)") == TargetType("time", "timestamp(3)", 3)
    assert mysql_target("int(10) unsigned") == TargetType("integer", "int(10) unsigned", 0)
    assert mysql_target("float") == TargetType("single", "float", 0)
    assert mysql_target("varchar(3) utf8mb4") == TargetType("text", "varchar(3)", 3)
    assert mysql_target("varbinary(3)") is None and mysql_target("text utf8mb4") is None
    assert postgres_target("character varying(3)") == TargetType("text", "character varying(3)", 3)
    assert postgres_target("character varying") is None
    assert postgres_target("numeric(10,2)") == TargetType("decimal", "numeric(10,2)", 2)
    assert postgres_target("numeric") is None  # no declared scale: every value kept
    assert postgres_target("timestamp with time zone") is None  # the full 6 digits
    assert postgres_target("time(1) without time zone") == TargetType("time", "time(1) without time zone", 1)
    assert postgres_target("real") == TargetType("single", "real", 0)


def test_a_column_whose_declared_type_cannot_exceed_its_target_is_never_checked() -> None:
    dec = TargetType("decimal", "decimal(10,2)", 2)
    assert narrowing(Column("a", "decimal", precision=10, scale=2), dec, "MySQL") is None
    assert narrowing(Column("a", "decimal", precision=12, scale=4), dec, "MySQL") == \
        Narrowing("places", "decimal(10,2)", 2, "MySQL")
    assert narrowing(Column("a", "decimal"), dec, "MySQL") is not None  # free scale: each value's own
    assert narrowing(Column("a", "int"), dec, "MySQL") is None
    assert narrowing(Column("a", "decimal", precision=15, scale=3), TargetType("double", "double", 0), "MySQL") is None
    assert narrowing(Column("a", "float"), TargetType("double", "double", 0), "MySQL") is None
    assert narrowing(Column("a", "float", native="float"), TargetType("single", "float", 0), "MySQL") is None
    dt0 = TargetType("time", "datetime", 0)
    assert narrowing(Column("a", "datetime", native="datetime"), dt0, "MySQL") is None  # a MySQL DATETIME source
    assert narrowing(Column("a", "datetime", native="datetime(6)"), dt0, "MySQL") is not None
    assert narrowing(Column("a", "datetime"), TargetType("time", "datetime(6)", 6), "MySQL") is None
    text = TargetType("text", "varchar(3)", 3)
    assert narrowing(Column("a", "string", native="varchar(3) utf8mb4"), text, "MySQL") is None
    assert narrowing(Column("a", "string"), text, "MySQL") == Narrowing("length", "varchar(3)", 3, "MySQL")


def test_a_string_longer_by_trailing_spaces_is_told_by_characters_not_bytes() -> None:
    batch = arrow_from_rows(Schema((Column("s", "string"),)), [("été",), ("ab  ",), (None,), ("abc",), ("abcd",)])
    n = Narrowing("length", "varchar(3)", 3, "PostgreSQL")
    # 'été' is 5 bytes, 3 characters; 'abcd' is the server's own error, 'ab  ' it would cut silently
    assert refused(batch, 0, n) == [(1, "ab  ")]
    assert refused(batch.slice(2), 0, n) == []


def test_the_values_a_narrower_column_would_change_and_only_those() -> None:
    schema = Schema((Column("d", "decimal", precision=12, scale=4), Column("f", "float"),
                     Column("t", "datetime"), Column("i", "int")))
    rows = [(Decimal("1.2300"), 0.1, datetime(2024, 1, 1, 0, 0, 0, 123000), 5),
            (Decimal("1.2345"), 0.30000000000000004, datetime(2024, 1, 1, 0, 0, 0, 123400), 2**53 + 1),
            (None, float("nan"), None, None)]
    batch = arrow_from_rows(schema, rows)
    places = Narrowing("places", "decimal(10,2)", 2, "MySQL")
    assert refused(batch, 0, places) == [(1, Decimal("1.2345"))]  # trailing zeros lose nothing
    single = Narrowing("single", "float", 0, "MySQL")
    assert refused(batch, 1, single) == [(1, 0.30000000000000004)]  # 0.1 reads back 0.1; NaN is not this check's
    assert refused(batch, 2, Narrowing("fraction", "datetime(3)", 3, "MySQL")) == \
        [(1, datetime(2024, 1, 1, 0, 0, 0, 123400))]
    assert refused(batch, 3, Narrowing("double", "double", 0, "MySQL")) == [(1, 2**53 + 1)]
    assert refused(batch, 0, Narrowing("places", "decimal(10,4)", 4, "MySQL")) == []  # its type fits: no scan
    assert refused_rows(batch, (places, None, None, None)) == {
        1: "column d: 1.2345 has more decimal places than decimal(10,2) holds (MySQL would round it)"}


def test_a_float_target_takes_a_value_it_stores_exactly_or_that_reads_back_by_its_shortest_text() -> None:
    schema = Schema((Column("d", "decimal"), Column("f", "float")))
    rows = [(Decimal("0.1"), 0.10000000149011612),  # 0.1 reads back 0.1; the float32 nearest 0.1, exactly
            (Decimal("12345678901234567890"), 1e300),  # 20 digits; beyond float32's range
            (Decimal("0.10000000149011612"), 0.5)]
    batch = exact_from_rows(schema, rows)
    assert [r for r, _ in refused(batch, 0, Narrowing("double", "double", 0, "MySQL"))] == [1]
    # a FLOAT reads 0.10000000149011612 back as 0.1: 17 digits are more than it holds
    assert [r for r, _ in refused(batch, 0, Narrowing("single", "float", 0, "MySQL"))] == [1, 2]
    assert [r for r, _ in refused(arrow_from_rows(Schema((schema.columns[1],)), [(r[1],) for r in rows]), 0,
                                  Narrowing("single", "real", 0, "PostgreSQL"))] == [1]


def test_whole_numbers_for_an_integer_column_go_as_integers() -> None:
    schema = Schema((Column("d", "decimal", precision=10, scale=2), Column("f", "float"), Column("s", "string")))
    batch = arrow_from_rows(schema, [(Decimal("2.00"), 3.0, "x"), (None, None, None)])
    integer = Narrowing("integer", "integer", 0, "PostgreSQL")
    out = as_integers(batch, (integer, integer, None))
    assert out.schema.types == [pa.int64(), pa.int64(), pa.string()]
    assert out.to_pylist() == [{"d": 2, "f": 3, "s": "x"}, {"d": None, "f": None, "s": None}]

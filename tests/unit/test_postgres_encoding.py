"""Which PostgreSQL columns travel undecoded (:mod:`wormhole.plugins.postgres.passthrough`), and which targets
take them: decided from the catalog alone, before any row."""

from __future__ import annotations

from wormhole.plugins.base import Encoding
from wormhole.plugins.postgres.catalog import ColumnInfo
from wormhole.plugins.postgres.passthrough import FORMAT, source_encoding, takes


def info(name: str, declared: str, base: str, kind: str = "string", element: str = "") -> ColumnInfo:
    return ColumnInfo(name, kind, declared, base=base, element=element)


PLAIN = [info("id", "bigint", "int8", "int"), info("v", "character varying(40)", "varchar"),
         info("n", "numeric(12,3)", "numeric", "decimal"), info("d", "date", "date", "date"),
         info("q", "s.qty", "int4", "int")]  # a domain: its base type's binary form


def test_a_table_of_plain_types_is_read_undecoded_with_its_declared_types() -> None:
    assert source_encoding(PLAIN, "reject") == Encoding(
        FORMAT, ("bigint", "character varying(40)", "numeric(12,3)", "date", "s.qty"))


def test_a_column_read_through_an_expression_or_of_another_type_keeps_the_table_on_values() -> None:
    for other in (info("r", "real", "float4", "float4"), info("z", "timestamp with time zone", "timestamptz"),
                  info("a", "integer[]", "_int4", "array"), info("m", "mood", "mood"), info("x", "xml", "xml")):
        assert source_encoding([*PLAIN, other], "reject") is None, other
    assert source_encoding([], "reject") is None  # a query: its columns are not a table's


def test_arrays_of_built_in_plain_types_are_read_undecoded_and_others_are_not() -> None:
    arrays = [info("a", "integer[]", "_int4", "array", "int4"),
              info("n", "numeric(12,3)[]", "_numeric", "array", "numeric"),
              info("t", "text[]", "_text", "array", "text")]
    assert source_encoding([*PLAIN, *arrays], "reject") == Encoding(
        FORMAT, ("bigint", "character varying(40)", "numeric(12,3)", "date", "s.qty", "integer[]", "numeric(12,3)[]",
                 "text[]"))
    for other in (info("m", "mood[]", "_mood", "array"),  # a type of the database: no element known
                  info("z", "timestamp with time zone[]", "_timestamptz", "array", "timestamptz")):
        assert source_encoding([*PLAIN, other], "reject") is None, other


def test_special_dates_null_asks_for_a_conversion_only_where_a_date_or_timestamp_is_read() -> None:
    assert source_encoding(PLAIN, "null") is None
    assert source_encoding([c for c in PLAIN if c.base != "date"], "null") is not None


def test_a_target_takes_the_rows_only_with_exactly_the_same_types_in_binary_copy() -> None:
    encoding = source_encoding(PLAIN, "reject")
    assert encoding is not None
    same = list(encoding.columns)
    assert takes(encoding, same, "auto")
    assert not takes(encoding, same, "text")  # the user asked for text COPY
    assert not takes(encoding, ["bigint", "text", *same[2:]], "auto")  # varchar(40) -> text: values
    assert not takes(encoding, ["bigint", "character varying(40)", "numeric(14,3)", *same[3:]], "auto")
    assert not takes(encoding, same[:-1], "auto")
    assert not takes(Encoding("mysql.text", encoding.columns), same, "auto")

"""A JSON array as PostgreSQL's array literal (:func:`wormhole.plugins.postgres.encoding.array_literal`), which a
postgres array column reads back to the same value: checked here as text, on the server in
tests/e2e/test_postgres_arrays.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from wormhole.plugins.base import Batch, Column, Schema
from wormhole.plugins.postgres.encoding import array_literal, array_literals, field_text


@pytest.mark.parametrize(("text", "literal"), [
    ('["a\\"b", "back\\\\slash", "{x}", "c,d", " s ", "NULL", "", null]',
     '{"a\\"b","back\\\\slash","{x}","c,d"," s ","NULL","",NULL}'),
    ("[[1, 2], [3, null]]", "{{1,2},{3,NULL}}"),
    ("[]", "{}"),
    ("[[]]", "{{}}"),  # PostgreSQL names it malformed, as it should
    (' [ 1.50 , 12345678901234567890.123456789e-3, "NaN", -0 ] ', "{1.50,12345678901234567890.123456789e-3,"
                                                                 '"NaN",-0}'),  # numbers as written
    ('[{"a": 1.10, "b": [1]}, true, false]', '{"{\\"a\\": 1.10, \\"b\\": [1]}",true,false}'),  # json[] elements
    ('["\\u00e9\\ud83d\\ude00", "tab\\t"]', '{"é😀","tab\t"}'),
])
def test_a_json_array_becomes_the_array_literal_of_the_same_value(text: str, literal: str) -> None:
    assert array_literal(text) == literal


@pytest.mark.parametrize("text", ["{1,2}", "[0:1]={1,2}", "[1,", "[1] x", "[1 2]", '"[1]"', "", "null", "[1,]"])
def test_any_other_text_is_left_for_postgresql_to_read_or_refuse(text: str) -> None:
    assert array_literal(text) == text


def test_a_column_and_a_row_without_arrow_form_are_converted_alike() -> None:
    assert array_literals(pa.array(['["x"]', None, "{y}"])).to_pylist() == ['{"x"}', None, "{y}"]
    # a list in a string column travels in an exact column: written value by value as an array literal
    form = Batch.of_rows([(["a\tb", None],), ('["c"]',), (None,)], Schema((Column("a", "string"),))).arrow_form
    assert field_text(form, 0, array=True).to_pylist() == ['{"a\\tb",NULL}', '{"c"}', "\\N"]

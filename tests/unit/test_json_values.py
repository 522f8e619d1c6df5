"""JSON numbers exact (wormhole.plugins.values): parsed as decimals, written back digit for digit by one C
encoder call, the same text as json.dumps for a value without decimals."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from wormhole.plugins.values import JSON_NULL, json_dumps, json_encoder, json_loads


@pytest.mark.parametrize("text", [
    "12345678901234567890.123456789", "0.1000000000000000055511151231257827", '{"price": 0.10000000000000000001}',
    '[1.50, -0.0, 1.5E-7, {"n": 123456789012345678901234567890}]', '{"a": "\\u0000", "b": 2.5}', '["\\u0000"]',
])
def test_a_document_is_written_back_with_its_digits(text: str) -> None:
    assert json_dumps(json_loads(text)) == text
    compact = json_encoder((",", ":"))(json_loads(text))
    assert json.loads(compact, parse_float=Decimal) == json.loads(text, parse_float=Decimal)
    assert ", " not in compact.replace('", "', "")


def test_1e400_is_a_number_not_an_error() -> None:
    assert json_dumps(json_loads("1e400")) == "1E+400"
    assert json_dumps(json_loads(b'{"x": 1e400}')) == '{"x": 1E+400}'


def test_without_decimals_the_text_is_json_dumps_text() -> None:
    value = {"a": [1, 2.5, None, True, "é\n"], "b": {"c": 1e300}, 3: "k"}
    assert json_dumps(value) == json.dumps(value, ensure_ascii=False)
    assert json_dumps([JSON_NULL, Decimal("1.0")]) == "[null, 1.0]"


@pytest.mark.parametrize("bad", [Decimal("NaN"), Decimal("-Infinity"), Decimal("sNaN"), float("inf")])
def test_a_number_json_has_not_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        json_dumps({"x": [bad]})

"""The filters a repair task selects the differing keys by (:mod:`wormhole.verify.repair`): every key value a
key column holds spelt as the transforms' language reads it back, split into filters the language takes."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from wormhole.transform.expr import parse
from wormhole.transform.tree import MAX_EXPRESSION_CHARS, In, Lit
from wormhole.verify.repair import _filters, literal


def test_each_key_value_reads_back_as_itself() -> None:
    for value in (0, -7, 2**63 - 1, Decimal("-12.50"), "it's", "", "naïve ✓", date(2026, 1, 2),
                  datetime(2026, 1, 2, 3, 4, 5, 123456), True):
        text = literal(value)
        assert text is not None
        found = parse(f"k IN ({text})")
        assert isinstance(found, In) and isinstance(found.items[0], Lit)
        assert found.items[0].value == value, (value, text, found.items[0].value)
    assert literal(b"\x00") is None  # no binary literal: such a key is not repaired by key


def test_many_keys_make_several_filters_each_within_the_language_limit() -> None:
    keys = [(f"key-{i:06d}-{'x' * 20}",) for i in range(2_000)]
    filters = _filters(["name"], keys)
    assert isinstance(filters, list) and len(filters) > 1
    assert all(len(f) < MAX_EXPRESSION_CHARS for f in filters)
    selected = [item.value for f in filters for item in parse(f).items]  # type: ignore[attr-defined]
    assert selected == [k[0] for k in keys]
    composite = _filters(["a", "b"], [(1, "x"), (2, "y")])
    assert composite == ["(`a` = 1 AND `b` = 'x') OR (`a` = 2 AND `b` = 'y')"]
    parse(composite[0])
    assert _filters(["k"], [(b"\x01",)]) == "a key value of type bytes cannot be selected by a filter"

"""A source and three destinations with different transforms, and their expected output computed here,
independently of wormhole's transform code (plain Python over the source rows)."""

from __future__ import annotations

import hashlib
from typing import Any

SALT_ENV = "TEST_MASK_SALT"
SALT = "pepper-42"
ROWS = 3000


SHORT_NAMES = {22: "a", 24: "ab", 26: "abc"}
"""Names no longer than the partial mask's ``keep`` (2), and one just longer, in the rows it masks."""


def source_rows(n: int = ROWS) -> list[tuple[Any, ...]]:
    """id, name (NULL every 7th, a few short ones), amount, status ('test' every 10th), grp."""
    return [(i, None if i % 7 == 0 else SHORT_NAMES.get(i, f"user{i}"), i * 0.5, "test" if i % 10 == 0 else "ok",
             i % 5) for i in range(1, n + 1)]


TASK_TRANSFORMS = [{"filter": "status != 'test'"}, {"filter": "amount >= 10"},
                   {"project": {"drop": ["status"]}}, {"derive": {"amount2": "amount * 2"}}]
EVEN_TRANSFORMS = [{"filter": "id % 2 = 0 AND name IS NOT NULL"}, {"rename": {"name": "who"}},
                   {"mask": {"columns": ["who"], "method": "partial", "keep": 2}}]
HASH_TRANSFORMS = [{"project": ["id", "name", "grp"]},
                   {"mask": {"columns": ["name"], "method": "hash", "salt_env": SALT_ENV}},
                   {"filter": "grp IN (1, 3)"}, {"cast": {"grp": "string"}}]


def after_task(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(i, name, amount, grp, amount * 2) for i, name, amount, status, grp in rows
            if status != "test" and amount >= 10]


def expected_all(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """id, name, amount, grp, amount2."""
    return after_task(rows)


def _partial(s: str) -> str:
    """All but the last 2 characters masked; a value no longer than 2 masked whole ('ab' -> '**')."""
    return "*" * (len(s) - 2) + s[-2:] if len(s) > 2 else "*" * len(s)


def expected_even(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """id, who (masked but its last 2), amount, grp, amount2."""
    assert {i: _partial(SHORT_NAMES[i]) for i in SHORT_NAMES} == {22: "*", 24: "**", 26: "*bc"}
    return [(i, _partial(name), amount, grp, a2) for i, name, amount, grp, a2 in after_task(rows)
            if i % 2 == 0 and name is not None]


def expected_hashes(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """id, name (salted SHA-256), grp as text."""
    return [(i, None if name is None else hashlib.sha256((SALT + name).encode()).hexdigest(), str(grp))
            for i, name, _, grp, _ in after_task(rows) if grp in (1, 3)]


def task(source: dict[str, Any], destinations: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    return {"name": "transforms", "source": source, "transforms": TASK_TRANSFORMS,
            "destinations": destinations, "settings": settings}

"""Which table of a database task starts next (wormhole/database/run.py): DataX's assignFairly across schemas."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

from wormhole.database.run import _first_startable


def table(schema: str, name: str) -> Any:
    return SimpleNamespace(job=SimpleNamespace(ref=SimpleNamespace(schema=schema, name=name)))


def test_the_schema_with_fewest_tables_running_goes_first_then_the_largest() -> None:
    pending = [table("a", "big"), table("a", "mid"), table("b", "small"), table("b", "tiny")]
    waiting = Counter(t.job.ref.schema for t in pending)
    assert _first_startable(pending, Counter({"a": 2, "b": 1}), waiting, lambda t: True) is pending[2]
    assert _first_startable(pending, Counter({"a": 1, "b": 1}), waiting, lambda t: True) is pending[0]
    # One that cannot start (its slots, a file another table writes) is passed over, not waited for.
    assert _first_startable(pending, Counter({"a": 0, "b": 3}), waiting,
                            lambda t: t.job.ref.name != "big") is pending[1]
    assert _first_startable(pending, Counter(), waiting, lambda t: False) is None
    # A schema with nothing left waiting does not hold the others back.
    assert _first_startable(pending[:2], Counter({"a": 4, "b": 0}), Counter({"a": 2, "b": 0}),
                            lambda t: True) is pending[0]

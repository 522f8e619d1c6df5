"""An expression evaluated by wormhole and compiled for a source, for the tests that compare the two."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wormhole.transform.check import check
from wormhole.transform.expr import parse
from wormhole.transform.pyfn import compile_py
from wormhole.transform.sqlgen import NotPushable


def evaluated_and_pushed(text: str, schema: dict[str, str], read: Any, compile_sql: Callable[..., Any], dialect: str,
                         pushed: bool) -> tuple[list[Any], Any]:
    """The expression ``text`` checked against ``schema``: its values as wormhole computes them on ``read``
    (an object whose ``get(name)`` gives a column's values), and its SQL in ``dialect`` by ``compile_sql``
    (sqlgen's compile_sql or compile_filter), or None where sqlgen pushes nothing, as ``pushed`` must say."""
    tree = parse(text)
    typed = check(tree, schema)
    values = compile_py(tree, typed)(read)
    try:
        sql = compile_sql(tree, typed, dialect)
    except NotPushable:
        assert not pushed, text
        return values, None
    assert pushed, text
    return values, sql

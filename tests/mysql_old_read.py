"""The mysql reader's conversion before its batches became Arrow (main at 3124193, ``MysqlReader._convert``),
kept as the reference the Arrow reader's values and dirty rows are held to (tests/unit/test_mysql_arrow_read.py,
tests/integration/test_mysql_arrow_reader.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from wormhole.plugins.mysql.types import READ_CONVERTERS, ZeroDate
from wormhole.plugins.values import json_column, json_parse

_FAST: dict[str, Callable[[Any], Any]] = {
    # Chains of C functions over a whole column: no Python frame per value.
    "decimal": lambda vs: map(Decimal, map(bytes.decode, vs)),
    "date": lambda vs: map(date.fromisoformat, map(bytes.decode, vs)),
    "datetime": lambda vs: map(datetime.fromisoformat, map(bytes.decode, vs)),
    "string": lambda vs: map(bytes.decode, vs),
    "int": lambda vs: map(int, vs),
    "uint64": lambda vs: map(int, vs),
    "float": lambda vs: map(float, vs),
    "float32": lambda vs: map(float, vs),
    "json": lambda vs: json_column(map(json_parse, vs)),  # exact numbers; the JSON literal null is JSON_NULL
}


def convert_column(kind: str, values: list[Any]) -> list[Any]:
    """One column of raw values at C speed (the old reader's, no longer the store's); raises on the first bad
    value (the caller then converts value by value to find the bad rows and apply the zero-date policy)."""
    fn = READ_CONVERTERS[kind]
    if kind == "bytes":
        return values
    fast = _FAST.get(kind)
    if None in values:
        present = [v for v in values if v is not None]
        it = iter(fast(present) if fast is not None else map(fn, present))
        return [None if v is None else next(it) for v in values]
    return list(fast(values) if fast is not None else map(fn, values))


def old_read(kinds: Sequence[str], raw: list[list[Any]], zero_dates: str) -> tuple[list[tuple[Any, ...]],
                                                                                  list[tuple[tuple[Any, ...], str]]]:
    """The reader's conversion before the Arrow batches (main at 3124193, MysqlReader._convert): the
    rows it yielded and the rows it rejected with their reasons."""
    columns = [list(c) for c in raw]
    bad: dict[int, str] = {}
    for i, kind in enumerate(kinds):
        try:
            columns[i] = convert_column(kind, columns[i])
        except (ValueError, ArithmeticError, UnicodeDecodeError):
            fn = READ_CONVERTERS[kind]
            assert fn is not None
            out: list[Any] = []
            for r, v in enumerate(columns[i]):
                if v is None:
                    out.append(None)
                    continue
                try:
                    out.append(fn(v))
                except ZeroDate as exc:
                    if zero_dates == "keep":
                        out.append(str(exc))
                    elif zero_dates == "null":
                        out.append(None)
                    else:
                        bad.setdefault(r, f"column {i}: zero date {exc} has no value (zero_dates is 'reject')")
                        out.append(None)
                except (ValueError, ArithmeticError, UnicodeDecodeError) as exc:
                    bad.setdefault(r, f"column {i}: cannot read {v[:40]!r} as {kind}: {exc}")
                    out.append(None)
            columns[i] = out
    rows = list(zip(*columns, strict=True))
    rejected = [(rows[r], reason) for r, reason in sorted(bad.items())]
    return [row for r, row in enumerate(rows) if r not in bad], rejected

"""The mysql reader's conversion before its batches became Arrow (main at 3124193, ``MysqlReader._convert``),
kept as the reference the Arrow reader's values and dirty rows are held to (tests/unit/test_mysql_arrow_read.py,
tests/integration/test_mysql_arrow_reader.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wormhole.plugins.mysql.types import READ_CONVERTERS, ZeroDate, convert_column


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

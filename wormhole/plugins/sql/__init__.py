"""What any SQL store needs: identifier quoting and name checks, key-range split points, and the
batch-then-row-by-row write that finds exactly the rows a failed batch could not take.

The mysql and sqlite stores both build on this module; a new SQL store should too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from wormhole.options import Problems, join_path
from wormhole.plugins.base import Rejected, Row, WriteResult
from wormhole.sql_text import where_problem

# -- identifiers ---------------------------------------------------------------------------------


def quote(identifier: str, mark: str = '"') -> str:
    """``identifier`` between ``mark``s with inner marks doubled: safe in any SQL text, whatever
    the name holds. Standard SQL (SQLite) quotes with ``"``, MySQL with a backtick."""
    return mark + identifier.replace(mark, mark * 2) + mark


def backquote(identifier: str) -> str:
    """A MySQL identifier in backticks."""
    return quote(identifier, "`")


def check_names(names: Sequence[str] | None, path: str, problems: Problems,
                check_one: Callable[[str, str, Problems], None] | None = None) -> None:
    """Column names: each non-empty (and passing ``check_one``), no two alike ignoring case, since
    SQL column names are case-insensitive in MySQL and SQLite alike."""
    if names is None:
        return
    for i, name in enumerate(names):
        if check_one is not None:
            check_one(name, join_path(path, i), problems)
        elif not name:
            problems.add(join_path(path, i), "must not be empty")
    lowered = [n.lower() for n in names]
    if len(set(lowered)) != len(lowered):
        problems.add(path, "names must be unique")


def check_column_types(types: dict[str, str] | None, path: str, problems: Problems) -> None:
    """``column_types``: each key ``table.column`` or ``schema.table.column``, each type some text."""
    for key, value in (types or {}).items():
        if not isinstance(key, str) or key.count(".") < 1 or not all(key.split(".")):
            problems.add(join_path(path, str(key)), "must be 'table.column' or 'schema.table.column'")
        elif not isinstance(value, str) or not value.strip():
            problems.add(join_path(path, key), "must be a type (non-empty text)")


def check_where(where: str | None, path: str, problems: Problems, dialect: str) -> None:
    """A ``where`` is one condition: the engine reads ``(where) AND (<split range>)``, and a where that
    closes a parenthesis it did not open (``id > 0) OR (1=1``) would read every row in every split."""
    problem = None if where is None else where_problem(where, dialect)
    if problem is not None:
        problems.add(join_path(path, "where"), problem)


# -- servers and secrets ------------------------------------------------------------------------


def parse_server(text: str, default_port: int) -> tuple[str, int] | None:
    """``host``, ``host:port`` or ``[ipv6]:port`` as (host, port); None when it is neither."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:]
    elif text.count(":") > 1:  # a bare IPv6 address
        host, port_text = text, ""
    else:
        host, _, port_text = text.partition(":")
    if not host or (port_text and not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536)):
        return None
    return host, int(port_text) if port_text else default_port


def resolve_password(password: str | None, password_env: str | None) -> str:
    """The password to connect with; ``password_env`` names an environment variable holding it."""
    if password_env is not None:
        value = os.environ.get(password_env)
        if value is None:
            # Resolved when connecting, so the error names the variable instead of failing auth.
            raise KeyError(password_env)
        return value
    return password or ""


# -- split points --------------------------------------------------------------------------------


def int_points(low: int, high: int, count: int) -> list[int]:
    """Up to ``count + 1`` ascending boundaries from ``low`` to ``high`` cutting the integer key
    range into ``count`` near-equal ranges (fewer when the range is narrower than ``count``)."""
    if low == high:
        return [low]
    return sorted({low + (high - low) * i // count for i in range(count)} | {high})


_FIRST, _LAST = 32, 126
_RADIX = _LAST - _FIRST + 1


def ascii_points(low: str, high: str, count: int) -> list[str]:
    """``count + 1`` strings from ``low`` to ``high`` spaced evenly as base-95 numbers (printable
    ASCII; other characters are clamped). Only a hint: the database orders them under the key's own
    collation afterwards, so the ranges it gets are disjoint whatever the collation."""
    width = max(len(low), len(high), 1)

    def number(s: str) -> int:
        n = 0
        for ch in s.ljust(width, chr(_FIRST))[:width]:
            n = n * _RADIX + (min(max(ord(ch), _FIRST), _LAST) - _FIRST)
        return n

    def text(n: int) -> str:
        chars = []
        for _ in range(width):
            n, digit = divmod(n, _RADIX)
            chars.append(chr(digit + _FIRST))
        return "".join(reversed(chars)).rstrip(chr(_FIRST)) or chr(_FIRST)

    a, b = number(low), number(high)
    if a >= b:
        return [low, high]
    return [low, *(text(a + (b - a) * i // count) for i in range(1, count)), high]


def key_ranges(points: Sequence[Any]) -> list[tuple[Any, Any, str]]:
    """``(low, high, op)`` per range between consecutive ``points``: ``key >= low AND key op high``,
    half-open (``<``) except the last, which is closed (``<=``), so together they cover
    ``[points[0], points[-1]]`` once. A single point makes no range (the caller selects ``key = p``)."""
    last = len(points) - 2
    return [(points[i], points[i + 1], "<=" if i == last else "<") for i in range(len(points) - 1)]


# -- batch, then row by row ----------------------------------------------------------------------

VALUE_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, AttributeError, ArithmeticError,
                                                  RecursionError)
"""A value the driver cannot take for its column (``"x".isoformat()``, a number too large, a lone
surrogate, JSON too deep): the row's fault, never the destination's."""


def batch_then_rows(count: int, batch: Callable[[], bool] | None, by_row: Callable[[], WriteResult]) -> WriteResult:
    """Write ``count`` rows at once with ``batch`` (None when some value could not even be encoded); when
    that is not possible or ``batch`` returns False (some row's value failed it and the batch was
    undone), ``by_row`` replays them one at a time so only the bad rows are rejected."""
    if batch is not None and batch():
        return WriteResult(written=count)
    return by_row()


def rows_one_by_one(rows: Sequence[Row], write_one: Callable[[Row], str | None],
                    room: int | None = None) -> WriteResult:
    """Each row through ``write_one``, which writes it and returns None, or returns why the row
    was rejected (a failing single-row statement undoes only itself). Once more than ``room`` rows are
    rejected (the record limit left to the batch) the rest is not tried: ``stopped``."""
    rejected = []
    for tried, row in enumerate(rows, 1):
        reason = write_one(row)
        if reason is not None:
            rejected.append(Rejected(row, reason))
            if room is not None and len(rejected) > room:
                return WriteResult(written=tried - len(rejected), rejected=tuple(rejected), stopped=len(rows) - tried)
    return WriteResult(written=len(rows) - len(rejected), rejected=tuple(rejected))


def room_left(limit: int | None, rejected: int) -> int | None:
    """How many more rows a batch that rejected ``rejected`` may reject before it goes over ``limit``."""
    return None if limit is None else limit - rejected

"""The expression tree of transforms: frozen nodes the parser (:mod:`wormhole.transform.expr`) builds
and every compiler walks (Python, Arrow, SQL, Spark), with the limits that keep those walks bounded.

Nodes are frozen dataclasses, so equal definitions hash equal and a tree can key a cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_EXPRESSION_CHARS = 10_000
MAX_NESTING = 64
"""Parentheses, CASE, CAST and calls inside one another (the parser recurses on them)."""
MAX_DEPTH = 200
"""Levels of the tree, which every compiler walks recursively (AND and OR chains are built balanced)."""


class ExprError(ValueError):
    """A problem with one expression; ``pos`` is the character offset (None: the whole expression)."""

    def __init__(self, message: str, pos: int | None = None) -> None:
        super().__init__(message if pos is None else f"{message} (at character {pos + 1})")
        self.pos = pos


# ---------------------------------------------------------------------------------------------
# The tree


class Expr:
    """Base of every node; nodes are frozen dataclasses, so equal definitions hash equal."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Lit(Expr):
    value: Any
    """None, bool, int, float, Decimal, str, date or datetime."""


@dataclass(frozen=True, slots=True)
class Col(Expr):
    name: str
    pos: int = 0


@dataclass(frozen=True, slots=True)
class Neg(Expr):
    x: Expr


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: str
    """One of + - * / % = != < <= > >= AND OR."""
    a: Expr
    b: Expr


@dataclass(frozen=True, slots=True)
class Not(Expr):
    x: Expr


@dataclass(frozen=True, slots=True)
class IsNull(Expr):
    x: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class In(Expr):
    x: Expr
    items: tuple[Lit, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Between(Expr):
    x: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like(Expr):
    x: Expr
    pattern: str
    """The pattern as written: ``%`` any run, ``_`` one character, ``\\`` escapes the next one."""
    negated: bool = False

    def parts(self) -> tuple[str | None, ...]:
        """The pattern as pieces: a literal character, or None for ``%`` and "" for ``_``."""
        out: list[str | None] = []
        i = 0
        p = self.pattern
        while i < len(p):
            ch = p[i]
            if ch == "\\" and i + 1 < len(p):
                out.append(p[i + 1])
                i += 2
                continue
            out.append(None if ch == "%" else "" if ch == "_" else ch)
            i += 1
        return tuple(out)

    def regex(self) -> str:
        """The pattern as an anchored regular expression that RE2 (Arrow's) and Java (Spark's) read alike:
        a character other than an ASCII letter or digit is written as its code point, never as itself."""
        def piece(p: str | None) -> str:
            if p is None:
                return ".*"
            if p == "":
                return "."
            return p if p.isascii() and p.isalnum() else f"\\x{{{ord(p):x}}}"
        return "(?s)^" + "".join(piece(p) for p in self.parts()) + "\\z"


@dataclass(frozen=True, slots=True)
class Func(Expr):
    name: str
    args: tuple[Expr, ...]
    pos: int = 0


@dataclass(frozen=True, slots=True)
class Case(Expr):
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    x: Expr
    to: str
    pos: int = 0


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Neg | Not | IsNull | Like | Cast):
        return (e.x,)
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, In):
        return (e.x, *e.items)
    if isinstance(e, Between):
        return (e.x, e.low, e.high)
    if isinstance(e, Func):
        return e.args
    if isinstance(e, Case):
        parts = [x for pair in e.whens for x in pair]
        return (*parts, e.default) if e.default is not None else tuple(parts)
    return ()


def depth(e: Expr) -> int:
    """The number of levels of the tree (found without recursion: it guards the recursive walks)."""
    level, deepest = [e], 0
    while level:
        deepest += 1
        level = [c for node in level for c in children(node)]
    return deepest

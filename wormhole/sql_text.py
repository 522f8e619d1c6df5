"""Where SQL text holds its string literals, quoted names and comments: a small lexer per dialect.

It answers two questions about SQL text a task author wrote, without parsing SQL:

- what a job variable's placeholder stands in (code, a string literal, a quoted name, a comment), so
  a value can be checked to be one literal there and a typed one written as one (:mod:`wormhole.variables`);
- whether a ``where`` is one boolean term: its parentheses balance outside literals and comments,
  no ``;`` ends it and no line comment swallows what the engine appends (``(where) AND (range)``).

Dialects: ``mysql`` (``\\`` escapes in ``'``/``"`` strings, backtick names, ``#`` and ``-- `` comments;
the session never has NO_BACKSLASH_ESCAPES), ``postgres`` (standard strings, ``E'...'``, ``$tag$``
quotes, nested block comments), ``sqlite`` and ``expr`` (the transforms' language): standard SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DIALECTS = ("mysql", "postgres", "sqlite", "expr")

_MYSQL_ESCAPES = {0: "\\0", 10: "\\n", 13: "\\r", 26: "\\Z", 34: '\\"', 39: "\\'", 92: "\\\\"}
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


@dataclass(frozen=True, slots=True)
class Span:
    """A part of the text that is not code: ``kind`` is string, name, dollar or comment."""

    kind: str
    start: int
    end: int
    mark: str
    """What opened it: the quote (``'``, ``"``, a backtick, ``E'``), ``$tag$``, ``--``, ``#`` or ``/*``."""
    closed: bool = True


def scan(text: str, dialect: str) -> list[Span]:
    """The literals, quoted names and comments of ``text``, in order; the rest is code."""
    spans: list[Span] = []
    i, n = 0, len(text)
    while i < n:
        # What opens a quoted part and what opens a comment start with different characters.
        span = _quoted_span(text, i, dialect) or _comment_span(text, i, dialect)
        if span is None:
            i += 1
        else:
            spans.append(span)
            i = span.end
    return spans


def _quoted_span(text: str, i: int, dialect: str) -> Span | None:
    """The string, quoted name or dollar-quoted part that starts at ``i``, if one does."""
    c, n, mysql = text[i], len(text), dialect == "mysql"
    if c == "'" or (c == '"' and mysql):
        end, closed = _quoted(text, i + 1, c, backslash=mysql)
        return Span("string", i, end, c, closed)
    if dialect == "postgres" and c in "Ee" and text[i + 1:i + 2] == "'" and not _word_char(text, i - 1):
        end, closed = _quoted(text, i + 2, "'", backslash=True)
        return Span("string", i, end, "E'", closed)
    if (c == "`" and dialect in ("mysql", "sqlite")) or c == '"':
        end, closed = _quoted(text, i + 1, c, backslash=False)
        return Span("name", i, end, c, closed)
    if c == "[" and dialect == "sqlite":
        close = text.find("]", i + 1)
        return Span("name", i, n if close < 0 else close + 1, "[", close >= 0)
    if c == "$" and dialect == "postgres" and not _word_char(text, i - 1) and (m := _DOLLAR.match(text, i)):
        close = text.find(m.group(0), m.end())
        return Span("dollar", i, n if close < 0 else close + len(m.group(0)), m.group(0), close >= 0)
    return None


def _comment_span(text: str, i: int, dialect: str) -> Span | None:
    """The comment that starts at ``i``, if one does."""
    c, two, n, mysql = text[i], text[i:i + 2], len(text), dialect == "mysql"
    if (two == "--" and (not mysql or i + 2 >= n or text[i + 2] in " \t\n\r\f\v")) or (c == "#" and mysql):
        close = text.find("\n", i)
        return Span("comment", i, n if close < 0 else close + 1, two if c == "-" else c)
    if two == "/*" and not (mysql and text[i + 2:i + 3] in ("!", "+")):
        end, closed = _block_comment(text, i, nested=dialect == "postgres")
        return Span("comment", i, end, "/*", closed)
    return None


def _word_char(text: str, i: int) -> bool:
    return i >= 0 and (text[i].isalnum() or text[i] in "_$")


def _quoted(text: str, i: int, quote: str, *, backslash: bool) -> tuple[int, bool]:
    """The end of a quoted part whose body starts at ``i`` (a doubled quote is one), and whether it closes."""
    n = len(text)
    while i < n:
        c = text[i]
        if backslash and c == "\\":
            i += 2
        elif c == quote:
            if text[i + 1:i + 2] != quote:
                return i + 1, True
            i += 2
        else:
            i += 1
    return n, False


def _block_comment(text: str, i: int, *, nested: bool) -> tuple[int, bool]:
    depth, i, n = 1, i + 2, len(text)
    while i < n:
        if text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i, True
        elif nested and text.startswith("/*", i):
            depth += 1
            i += 2
        else:
            i += 1
    return n, False


def span_at(spans: list[Span], position: int) -> Span | None:
    """The span holding ``position`` strictly inside it (past its opening mark), or None for code."""
    for span in spans:
        if span.start < position < span.end or (position == span.end and not span.closed):
            return span
    return None


def structure(spans: list[Span]) -> list[tuple[str, str, bool]]:
    """What a text's spans are, without where: two texts alike in it have the same literals and comments."""
    return [(s.kind, s.mark, s.closed) for s in spans]


NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def is_literal(value: str, dialect: str) -> bool:
    """``value`` is one SQL literal by itself: a number, or one whole string literal."""
    if NUMBER.fullmatch(value):
        return True
    spans = scan(value, dialect)
    return (len(spans) == 1 and spans[0].kind == "string" and spans[0].closed
            and spans[0].start == 0 and spans[0].end == len(value))


def escape_string(value: str, dialect: str, quote: str = "'") -> str:
    """``value`` as the body of a string literal opened by ``quote`` in ``dialect``."""
    if dialect == "mysql" or quote == "E'":
        return value.translate(_MYSQL_ESCAPES)
    return value.replace(quote, quote * 2)


def string_literal(value: str, dialect: str) -> str:
    """``value`` as one string literal of ``dialect``."""
    return "'" + escape_string(value, dialect) + "'"


def where_problem(where: str, dialect: str) -> str | None:
    """Why ``where`` is not one boolean term the engine can AND with a split's range, or None.

    The engine writes ``(where) AND (range)``; a ``)`` closing more than it opened (``0) OR (1=1``)
    would move the range into an OR, a ``;`` would end the statement, and a line comment or an
    unclosed literal would swallow the range."""
    spans = scan(where, dialect)
    for span in spans:
        if not span.closed:
            return f"a {span.kind} opened by {span.mark} at offset {span.start} is never closed"
        if span.kind == "comment" and span.mark != "/*":
            return f"a {span.mark} comment at offset {span.start} would swallow the condition the engine appends"
    depth, position = 0, 0
    for span in [*spans, Span("end", len(where), len(where), "")]:
        for offset in range(position, span.start):
            c = where[offset]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth < 0:
                    return f"the ) at offset {offset} closes a parenthesis it did not open: a where must be " \
                           "one condition (the engine appends AND with each split's range)"
            elif c == ";":
                return f"the ; at offset {offset} ends the statement: a where is one condition"
        position = span.end
    if depth:
        return f"{depth} parenthesis(es) opened and never closed"
    return None

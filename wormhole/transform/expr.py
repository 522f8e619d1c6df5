"""The expression language of transforms: a whitelist grammar parsed into a small frozen AST
(:mod:`wormhole.transform.tree`).

User text is never evaluated: a hand-written tokenizer and a precedence-climbing parser accept only
the constructs below, and everything else is a :class:`ExprError` naming the offset. Literals stay
values in the tree (compilers bind them as parameters); identifiers are checked against the schema
later (:mod:`wormhole.transform.check`).

Grammar, loosest binding first::

    expr     := or
    or       := and ('OR' and)*
    and      := not ('AND' not)*
    not      := 'NOT'* pred
    pred     := sum [ cmp sum | ['NOT'] 'IN' '(' literal (',' literal)* ')'
                    | ['NOT'] 'BETWEEN' sum 'AND' sum | 'IS' ['NOT'] 'NULL' | ['NOT'] 'LIKE' string ]
    sum      := product (('+' | '-') product)*
    product  := unary (('*' | '/' | '%') unary)*
    unary    := '-'* primary
    primary  := number | string | 'TRUE' | 'FALSE' | 'NULL' | 'DATE' string | 'TIMESTAMP' string
              | name | function '(' [expr (',' expr)*] ')' | 'CAST' '(' expr 'AS' type ')'
              | 'CASE' ['expr'] ('WHEN' expr 'THEN' expr)+ ['ELSE' expr] 'END' | '(' expr ')'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from wormhole.options import INT64
from wormhole.transform.tree import (
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    MAX_NESTING,
    Between,
    Binary,
    Case,
    Cast,
    Col,
    Expr,
    ExprError,
    Func,
    In,
    IsNull,
    Like,
    Lit,
    Neg,
    Not,
    depth,
)

# ---------------------------------------------------------------------------------------------
# Tokens

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)
  | (?P<str>'(?:[^']|'')*')
  | (?P<qid>`(?:[^`]|``)+`|"(?:[^"]|"")+")
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|[-+*/%=<>(),])
""", re.VERBOSE | re.ASCII)  # ASCII: \d is 0-9 only (int() would read other scripts' digits)

KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "LIKE", "TRUE", "FALSE", "CASE", "WHEN",
                      "THEN", "ELSE", "END", "CAST", "AS", "DATE", "TIMESTAMP"})
CAST_TYPES = frozenset({"int", "float", "decimal", "string", "bool", "date", "datetime"})
_TYPE_WORDS = {"int": "int", "integer": "int", "bigint": "int", "float": "float", "double": "float",
               "real": "float", "decimal": "decimal", "numeric": "decimal", "string": "string", "text": "string",
               "varchar": "string", "bool": "bool", "boolean": "bool", "date": "date", "datetime": "datetime",
               "timestamp": "datetime"}


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # num str id qid op kw end
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ExprError(f"unexpected character {text[pos]!r}", pos)
        kind = m.lastgroup
        assert kind is not None
        if kind != "ws":
            word = m.group()
            if kind == "id" and word.upper() in KEYWORDS:
                out.append(_Tok("kw", word.upper(), pos))
            else:
                out.append(_Tok(kind, word, pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


# ---------------------------------------------------------------------------------------------
# Parser


def parse(text: Any) -> Expr:
    """The tree of ``text``, or ExprError saying what is wrong and where."""
    if not isinstance(text, str):
        raise ExprError(f"must be an expression string, not {type(text).__name__}")
    if not text.strip():
        raise ExprError("is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExprError(f"is longer than {MAX_EXPRESSION_CHARS} characters")
    tree = _Parser(_tokens(text)).whole()
    if depth(tree) > MAX_DEPTH:
        raise ExprError(f"nests deeper than {MAX_DEPTH} levels (a long chain of operators?)")
    return tree


class _Parser:
    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.i = 0
        self.depth = 0

    # -- helpers

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, kind: str, text: str | None = None) -> bool:
        t = self.tok
        return t.kind == kind and (text is None or t.text == text)

    def accept(self, kind: str, text: str | None = None) -> bool:
        if self.at(kind, text):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, text: str, what: str | None = None) -> _Tok:
        if not self.at(kind, text):
            raise ExprError(f"expected {what or repr(text)}, found {self._show(self.tok)}", self.tok.pos)
        return self.take()

    @staticmethod
    def _show(t: _Tok) -> str:
        return "the end of the expression" if t.kind == "end" else repr(t.text)

    # -- grammar

    def whole(self) -> Expr:
        e = self.expr()
        if not self.at("end"):
            raise ExprError(f"unexpected {self._show(self.tok)}", self.tok.pos)
        return e

    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ExprError(f"nests deeper than {MAX_NESTING} levels", self.tok.pos)
        try:
            terms = [self.conj()]
            while self.accept("kw", "OR"):
                terms.append(self.conj())
            return _balanced("OR", terms)
        finally:
            self.depth -= 1

    def conj(self) -> Expr:
        terms = [self.negation()]
        while self.accept("kw", "AND"):
            terms.append(self.negation())
        return _balanced("AND", terms)

    def negation(self) -> Expr:
        nots = 0
        while self.accept("kw", "NOT"):  # a loop, not recursion, as unary minus
            nots += 1
        e = self.predicate()
        for _ in range(nots):
            e = Not(e)
        return e

    def predicate(self) -> Expr:
        e = self.sum()
        t = self.tok
        if t.kind == "op" and t.text in ("=", "!=", "<>", "<", "<=", ">", ">="):
            self.take()
            return Binary("!=" if t.text == "<>" else t.text, e, self.sum())
        if self.accept("kw", "IS"):
            negated = self.accept("kw", "NOT")
            self.expect("kw", "NULL", "NULL after IS")
            return IsNull(e, negated)
        negated = self.accept("kw", "NOT")
        if self.accept("kw", "IN"):
            return In(e, self.in_list(), negated)
        if self.accept("kw", "BETWEEN"):
            low = self.sum()
            self.expect("kw", "AND", "AND in BETWEEN")
            return Between(e, low, self.sum(), negated)
        if self.accept("kw", "LIKE"):
            pat = self.tok
            if pat.kind != "str":
                raise ExprError("LIKE takes a string literal pattern", pat.pos)
            self.take()
            return Like(e, _unquote(pat.text), negated)
        if negated:
            raise ExprError(f"expected IN, BETWEEN or LIKE after NOT, found {self._show(self.tok)}", self.tok.pos)
        return e

    def in_list(self) -> tuple[Lit, ...]:
        self.expect("op", "(", "'(' after IN")
        items: list[Lit] = []
        while True:
            item = self.unary()
            if not isinstance(item, Lit):
                raise ExprError("IN takes a list of literals", self.toks[self.i - 1].pos)
            items.append(item)
            if len(items) > 10_000:
                raise ExprError("IN lists at most 10000 values", self.tok.pos)
            if not self.accept("op", ","):
                break
        self.expect("op", ")", "')' closing the IN list")
        return tuple(items)

    def sum(self) -> Expr:
        e = self.product()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            e = Binary(self.take().text, e, self.product())
        return e

    def product(self) -> Expr:
        e = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/", "%"):
            e = Binary(self.take().text, e, self.unary())
        return e

    def unary(self) -> Expr:
        signs = []
        while self.at("op", "-"):  # a loop, not recursion: the depth check bounds - - - ... x
            signs.append(self.take())
        if signs and self.at("num"):  # -9223372036854775808 is in range, though its digits alone are not
            x: Expr = Lit(_check_int(-_number(self.take(), checked=False), signs.pop().pos))
        else:
            x = self.primary()
        for minus in reversed(signs):
            if isinstance(x, Lit) and isinstance(x.value, int | float | Decimal) and not isinstance(x.value, bool):
                x = Lit(_check_int(-x.value, minus.pos))
            else:
                x = Neg(x)
        return x

    def primary(self) -> Expr:
        t = self.take()
        if t.kind == "num":
            return Lit(_number(t))
        if t.kind == "str":
            return Lit(_unquote(t.text))
        if t.kind == "qid":
            return Col(t.text[1:-1].replace(t.text[0] * 2, t.text[0]), t.pos)
        if t.kind == "op" and t.text == "(":
            e = self.expr()
            self.expect("op", ")", "')'")
            return e
        if t.kind == "kw":
            return self.keyword(t)
        if t.kind == "id":
            if self.accept("op", "("):
                return self.call(t)
            return Col(t.text, t.pos)
        raise ExprError(f"unexpected {self._show(t)}", t.pos)

    def call(self, name: _Tok) -> Expr:
        args: list[Expr] = []
        if not self.accept("op", ")"):
            while True:
                args.append(self.expr())
                if not self.accept("op", ","):
                    break
            self.expect("op", ")", f"')' closing {name.text}(")
        return Func(name.text.lower(), tuple(args), name.pos)

    def keyword(self, t: _Tok) -> Expr:
        if t.text in ("TRUE", "FALSE"):
            return Lit(t.text == "TRUE")
        if t.text == "NULL":
            return Lit(None)
        if t.text == "DATE" and self.accept("op", "("):  # the function date(x), not a DATE '...' literal
            return self.call(t)
        if t.text in ("DATE", "TIMESTAMP"):
            s = self.tok
            if s.kind != "str":
                raise ExprError(f"{t.text} takes a string literal", s.pos)
            self.take()
            try:
                value: Any = date.fromisoformat(_unquote(s.text)) if t.text == "DATE" else \
                    datetime.fromisoformat(_unquote(s.text))
            except ValueError as exc:
                raise ExprError(f"bad {t.text} literal {s.text}: {exc}", s.pos) from None
            if isinstance(value, datetime) and value.tzinfo is not None:
                raise ExprError("TIMESTAMP literals have no time zone", s.pos)
            return Lit(value)
        if t.text == "CAST":
            self.expect("op", "(", "'(' after CAST")
            x = self.expr()
            self.expect("kw", "AS", "AS in CAST")
            name = self.take()
            to = _TYPE_WORDS.get(name.text.lower()) if name.kind in ("id", "kw") else None
            if to is None:
                raise ExprError(f"unknown type {name.text!r} in CAST (types: {', '.join(sorted(CAST_TYPES))})",
                                name.pos)
            self.expect("op", ")", "')' closing CAST")
            return Cast(x, to, t.pos)
        if t.text == "CASE":
            return self.case()
        raise ExprError(f"unexpected keyword {t.text}", t.pos)

    def case(self) -> Expr:
        subject = None if self.at("kw", "WHEN") else self.expr()
        whens: list[tuple[Expr, Expr]] = []
        while self.accept("kw", "WHEN"):
            cond = self.expr()
            self.expect("kw", "THEN", "THEN")
            whens.append((cond if subject is None else Binary("=", subject, cond), self.expr()))
        if not whens:
            raise ExprError("CASE needs at least one WHEN", self.tok.pos)
        default = self.expr() if self.accept("kw", "ELSE") else None
        self.expect("kw", "END", "END closing CASE")
        return Case(tuple(whens), default)


def _balanced(op: str, terms: list[Expr]) -> Expr:
    """``a op b op c ...`` as a balanced tree (AND and OR are associative in three-valued logic too)."""
    if len(terms) == 1:
        return terms[0]
    mid = len(terms) // 2
    return Binary(op, _balanced(op, terms[:mid]), _balanced(op, terms[mid:]))


def _unquote(text: str) -> str:
    return text[1:-1].replace("''", "'")


MAX_NUMBER_CHARS = 100
"""Longest number literal: past DECIMAL(65)'s digits, and short of what int() refuses to convert (4300)."""


def _number(t: _Tok, checked: bool = True) -> Any:
    text = t.text
    if len(text) > MAX_NUMBER_CHARS:
        raise ExprError(f"number {text[:20]}... has more than {MAX_NUMBER_CHARS} characters", t.pos)
    if text.isdigit():
        return _check_int(int(text), t.pos) if checked else int(text)
    if "e" in text.lower():
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ExprError(f"number {text} is out of the range of a float", t.pos)
        return value
    return Decimal(text)  # 2.50 is exact, as in SQL; it becomes a float next to a float column


def _check_int(value: Any, pos: int) -> Any:
    if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        raise ExprError(f"integer {value} is out of the 64-bit range", pos)
    return value

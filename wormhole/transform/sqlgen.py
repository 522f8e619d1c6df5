"""Expressions compiled to SQL for a source to evaluate (push-down): MySQL/MariaDB, SQLite and PostgreSQL.

Every literal is a bound parameter and every identifier is a checked column name, quoted: user text
never reaches the SQL as text. The SQL means exactly what :mod:`.pyfn` computes, so where a database
would differ it is told precisely (strings compared as UTF-8 bytes, not by a collation; division
in doubles; LIKE case-sensitive), and where it cannot be told, the expression is not pushed
(:class:`NotPushable`) and runs in wormhole instead.

PostgreSQL: every bound value is cast to its type (``CAST($1 AS bigint)``), strings are compared
``COLLATE "C"`` (code point order in UTF-8), integer arithmetic runs in ``numeric`` (exact, no overflow,
as Python's ints), decimals too (PostgreSQL's ``+ - *`` on numeric are exact), a zero divisor is made
NULL (PostgreSQL raises), and a date or timestamp Python has no value for (infinity, BC, a year after
9999) is NULL in an expression, as the reader gives it with ``special_dates: null``. A double precision
column is not pushed: it may hold NaN, which PostgreSQL sorts above every number and holds equal to
itself, and Python does not. A column whose SQL value is not the one the reader gives (a ``char(n)``:
PostgreSQL drops its padding to compare or measure it, the reader keeps it) is read through the SQL the
source's schema gives for it (``Column.as_read``): an expression means the value as read in every placement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

from wormhole.plugins.base import PARAM_MARK, render_marks
from wormhole.transform.check import Typed, int_bound
from wormhole.transform.tree import Between, Binary, Case, Cast, Col, Expr, Func, In, IsNull, Like, Lit, Neg, Not

Dialect = Literal["mysql", "sqlite", "postgres"]
PARAM = PARAM_MARK


class NotPushable(Exception):
    """The expression has no exact equivalent in this dialect; it runs in wormhole instead."""


@dataclass(frozen=True, slots=True)
class SqlText:
    """SQL with :data:`PARAM` marks and the values bound to them, in order."""

    text: str
    args: tuple[Any, ...]

    def render(self, placeholder: str, escape_percent: bool = False) -> str:
        return render_marks(self.text, placeholder, escape_percent)


def compile_sql(e: Expr, typed: Typed, dialect: Dialect, as_read: Mapping[str, str] | None = None) -> SqlText:
    """SQL for ``e`` (a checked expression) in ``dialect``; NotPushable when it has no exact one. ``as_read``:
    column -> the SQL of the value the reader gives (:attr:`~wormhole.plugins.schema.Column.as_read`), which
    the expression computes on instead of the bare column."""
    gen = _Gen(typed, dialect, as_read)
    text = gen.sql(e)
    return SqlText(text, tuple(gen.args))


def compile_filter(e: Expr, typed: Typed, dialect: Dialect, as_read: Mapping[str, str] | None = None) -> SqlText:
    """SQL for the filter condition ``e``: :func:`compile_sql`'s, and in PostgreSQL each top-level comparison
    of a date or timestamp column with a literal once more on the bare column (``"at" >= $1``), so an index
    on it serves the read (an incremental window's bounds). The exact form makes a value Python has none for
    (infinity) NULL through a CASE, which no index matches; the added conjunct holds wherever the exact one
    is true, so the rows kept are the same."""
    exact = compile_sql(e, typed, dialect, as_read)
    if dialect != "postgres":
        return exact
    gen = _Gen(typed, dialect)
    extra = [f"({quote_name(c.a.name, dialect)} {c.op} {gen.bind(c.b.value)})" for c in _conjuncts(e)
             if isinstance(c, Binary) and c.op in ("=", "<", "<=", ">", ">=") and isinstance(c.a, Col)
             and isinstance(c.b, Lit) and c.b.value is not None and typed.of(c.a) in ("date", "datetime")
             and type(c.b.value) is (datetime if typed.of(c.a) == "datetime" else date)]
    if not extra:
        return exact
    return SqlText(f"({exact.text} AND {' AND '.join(extra)})", (*exact.args, *gen.args))


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == "AND":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def quote_name(name: str, dialect: Dialect) -> str:
    if "\x00" in name:
        raise NotPushable("a column name holds NUL")
    if dialect == "mysql":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


# No lower() or upper() in either: MariaDB maps case one character to one ('ß' stays 'ß', Python
# and Spark make 'SS'; 'İ' lowers to 'i', not 'i̇'; no final sigma), SQLite only in ASCII.
_MYSQL_FUNCS = {"length": "CHAR_LENGTH", "ltrim": "LTRIM", "rtrim": "RTRIM", "abs": "ABS", "year": "YEAR",
                "month": "MONTH", "day": "DAYOFMONTH", "date": "DATE"}
_SQLITE_FUNCS = {"length": "length", "ltrim": "ltrim", "rtrim": "rtrim", "abs": "abs"}
_SQLITE_DATE_PART = {"year": (1, 4), "month": (6, 2), "day": (9, 2)}
# No lower() or upper() in PostgreSQL either: under COLLATE "C" they change ASCII letters only.
_PG_FUNCS = {"length": "char_length({})", "ltrim": "ltrim({}, ' ')", "rtrim": "rtrim({}, ' ')",
             "trim": "btrim({}, ' ')", "abs": "abs({})", "year": "CAST(EXTRACT(YEAR FROM {}) AS bigint)",
             "month": "CAST(EXTRACT(MONTH FROM {}) AS bigint)", "day": "CAST(EXTRACT(DAY FROM {}) AS bigint)",
             "date": "CAST({} AS date)"}
_PG_TYPES = ((bool, "boolean"), (int, "bigint"), (float, "double precision"), (Decimal, "numeric"), (str, "text"),
             (datetime, "timestamp"), (date, "date"))
"""The SQL type each bound Python value is cast to (the first that matches: a datetime is a date too)."""
_PG_NAMES = {"int": "bigint", "float": "double precision", "decimal": "numeric", "string": "text", "bool": "boolean",
             "date": "date", "datetime": "timestamp"}
_PG_CASTS: dict[tuple[str, str], str] = {
    ("int", "float"): "CAST({} AS double precision)", ("int", "decimal"): "CAST({} AS numeric)",
    ("int", "string"): "CAST({} AS text)", ("date", "string"): "CAST({} AS text)", ("int", "bool"): "({} <> 0)",
    ("bool", "int"): "CAST({} AS integer)", ("bool", "string"): "CAST({} AS text)",
    ("date", "datetime"): "CAST({} AS timestamp)", ("datetime", "date"): "CAST({} AS date)",
    ("decimal", "float"): "CAST({} AS double precision)"}
# Integer arithmetic must not overflow where Python's ints do not: MySQL computes it in DECIMAL(65, 0)
# (BIGINT UNSIGNED 1 - 2 and BIGINT -(-2^63) are errors there), SQLite in 64 bits only when the result
# cannot leave them (it turns an overflow into a double).
_INT_COLUMN = {"mysql": 2**64, "sqlite": 2**63}
_INT_LIMIT = {"mysql": 10**65, "sqlite": 2**63}


class _Gen:
    def __init__(self, typed: Typed, dialect: Dialect, as_read: Mapping[str, str] | None = None) -> None:
        self.typed = typed
        self.dialect = dialect
        self.as_read = as_read or {}
        self.args: list[Any] = []

    def bind(self, value: Any) -> str:
        if self.dialect == "sqlite":
            if isinstance(value, date):
                if isinstance(value, datetime):
                    raise NotPushable("SQLite holds datetimes as text in more than one form")
                value = value.isoformat()
            elif isinstance(value, Decimal):
                # sqlite3 binds no Decimal, and SQLite compares numbers as doubles: exact (in order
                # against ints and other such literals) up to 15 significant digits.
                if len(value.normalize().as_tuple().digits) > 15:
                    raise NotPushable("SQLite holds decimals as doubles: more than 15 digits are not exact")
                value = float(value)
        self.args.append(value)
        if self.dialect == "postgres":
            if isinstance(value, str) and "\x00" in value:
                raise NotPushable("PostgreSQL text cannot hold NUL")
            kind = next(t for py, t in _PG_TYPES if isinstance(value, py))
            if kind == "bigint" and not -2**63 <= value < 2**63:
                kind = "numeric"
            return f"CAST({PARAM} AS {kind})"
        if self.dialect == "mysql" and isinstance(value, date):
            # A bound date is a quoted string to MySQL: typed here, or a CASE of it would be a string.
            return f"CAST({PARAM} AS {'DATETIME(6)' if isinstance(value, datetime) else 'DATE'})"
        return PARAM

    def sql(self, e: Expr) -> str:
        if self.dialect == "sqlite" and self.typed.of(e) == "datetime":
            raise NotPushable("SQLite holds datetimes as text in more than one form")
        if self.typed.of(e) == "null":
            return "NULL"  # always NULL; MySQL would type -(NULL) as a double and widen a COALESCE with it
        if self.dialect == "postgres" and self._null_in(e):
            return f"CAST(NULL AS {_PG_NAMES[self.typed.of(e)]})"
        return _SQL[type(e)](self, e)

    def _null_in(self, e: Expr) -> bool:
        """``e`` is NULL because an operand it is NULL on is a bare NULL (which PostgreSQL cannot type:
        ``NULL + NULL`` is an error there)."""
        if isinstance(e, Binary) and e.op not in ("AND", "OR"):
            operands: tuple[Expr, ...] = (e.a, e.b)
        elif isinstance(e, Func) and e.name != "coalesce":
            operands = e.args
        elif isinstance(e, Neg | Like | In | Between):
            operands = (e.x,)  # IN and BETWEEN: NULL whatever the items when x is
        else:
            return False
        return any(self.typed.of(o) == "null" for o in operands)

    def _literal(self, e: Lit) -> str:
        if isinstance(e.value, bool):
            if self.dialect == "postgres":
                return "TRUE" if e.value else "FALSE"
            return "1" if e.value else "0"
        return self.bind(e.value)

    def _neg(self, e: Neg) -> str:
        return f"(- {self.wide(e.x, e)})"  # the space: MySQL would read `--1` (a bound -1) as a comment

    def _not(self, e: Not) -> str:
        return f"(NOT {self.sql(e.x)})"

    def _is_null(self, e: IsNull) -> str:
        x = quote_name(e.x.name, self.dialect) if isinstance(e.x, Col) and self.typed.of(e.x) == "float" \
            else self.sql(e.x)  # a FLOAT is NULL or not exactly (see _column)
        return f"({x} IS {'NOT ' if e.negated else ''}NULL)"

    def _between(self, e: Between) -> str:
        # Each use of x renders it again: its parameters are bound once per occurrence, in order.
        x, lo = self.operand(e.x, e.low), self.operand(e.low, e.x)
        x2, hi = self.operand(e.x, e.high), self.operand(e.high, e.x)
        return f"({'NOT ' if e.negated else ''}({x} >= {lo} AND {x2} <= {hi}))"

    def _case(self, e: Case) -> str:
        self.branches(e, [v for _, v in e.whens] + ([e.default] if e.default is not None else []))
        whens = " ".join(f"WHEN {self.sql(c)} THEN {self.branch(v, e)}" for c, v in e.whens)
        default = f" ELSE {self.branch(e.default, e)}" if e.default is not None else ""
        return f"(CASE {whens}{default} END)"

    def branch(self, e: Expr, result: Expr) -> str:
        """``e`` as a value ``result`` (a CASE or coalesce) may give: a double in SQLite when ``result`` is a
        float (SQLite gives an int branch back as it is; pyfn, MySQL and Spark make it a double)."""
        text = self.sql(e)
        if self.dialect == "sqlite" and self.typed.of(result) == "float" and self.typed.of(e) in ("int", "decimal") \
                and text != "NULL":
            return f"CAST({text} AS REAL)"
        if self.dialect == "postgres" and self.typed.of(result) == "float" and self.typed.of(e) in ("int", "decimal") \
                and text != "NULL":
            return f"CAST({text} AS double precision)"
        if self.dialect == "mysql" and self.typed.of(result) == "float" and self.typed.of(e) in ("int", "decimal") \
                and text != "NULL":
            # MySQL types COALESCE(NULL, 1) as BIGINT when its float branch is a bare NULL: 1 + 2^63 - 1 then
            # overflows there, where pyfn adds doubles. The branch as a double, as pyfn makes it.
            return f"({text} + 0e0)"
        if self.dialect == "mysql" and self.typed.of(result) == "int" and not isinstance(e, Col | Lit):
            # MySQL types arithmetic and functions of NULL (NULL + NULL, -NULL, ABS(NULL)) as DOUBLE, which
            # makes the whole CASE or coalesce a double (2^63 - 1 rounded): its int branches as DECIMAL(65, 0).
            return f"CAST({text} AS DECIMAL(65, 0))"
        return text

    def branches(self, e: Expr, values: list[Expr]) -> None:
        """A decimal CASE or coalesce in MySQL is DECIMAL(65, 30) at most: 35 digits before the point."""
        if self.dialect == "mysql" and self.typed.of(e) == "decimal" and any(
                self.typed.of(v) == "int" and int_bound(v, self.typed, _INT_COLUMN["mysql"]) >= 10**35
                for v in values):
            raise NotPushable("MySQL's decimal result would not hold this integer")

    def _column(self, e: Col) -> str:
        name = quote_name(e.name, self.dialect)
        if e.name in self.as_read:
            if not self.as_read[e.name]:
                raise NotPushable(f"no SQL of the source gives column {e.name} as the reader reads it")
            return self.as_read[e.name].format(name)
        kind = self.typed.of(e)
        if self.dialect == "mysql" and kind == "float":
            # A FLOAT column holds single-precision values that MySQL compares as they are stored, and the
            # schema cannot tell FLOAT from DOUBLE: what reads one runs in wormhole, on the value it read.
            raise NotPushable("MySQL's FLOAT is single precision (a float column is not pushed)")
        if self.dialect == "mysql" and kind in ("date", "datetime"):
            # A zero or partial date is NULL in an expression, as wormhole reads it (pyfn._temporal).
            return (f"(CASE WHEN YEAR({name}) > 0 AND MONTH({name}) > 0 AND DAYOFMONTH({name}) > 0 "
                    f"THEN {name} END)")
        if self.dialect == "postgres" and kind == "float":
            raise NotPushable("a PostgreSQL double precision column may hold NaN, which it orders unlike Python")
        if self.dialect == "postgres" and kind in ("date", "datetime"):
            high = "<= '9999-12-31'" if kind == "date" else "< '10000-01-01'"
            return f"(CASE WHEN {name} >= '0001-01-01' AND {name} {high} THEN {name} END)"
        return name

    def wide(self, e: Expr, result: Expr) -> str:
        """``e`` as an operand of integer arithmetic whose result is ``result``: in MySQL as DECIMAL(65, 0)."""
        if self.dialect == "sqlite" and self.typed.of(result) == "decimal":
            raise NotPushable("SQLite computes decimals as doubles")  # and -(-2^63) of an int is an error
        if self.typed.of(result) != "int":
            return self.sql(e)
        if self.dialect == "postgres":  # numeric: exact, and never overflows as bigint would
            text = self.sql(e)
            return f"CAST({text} AS numeric)" if text != "NULL" else text
        never = self.dialect == "sqlite" and isinstance(result, Binary) and result.op == "%"  # |r| < |divisor|
        if not never and int_bound(result, self.typed, _INT_COLUMN[self.dialect]) >= _INT_LIMIT[self.dialect]:
            raise NotPushable(f"{self.dialect} cannot hold every value of this integer arithmetic")
        text = self.sql(e)
        return f"CAST({text} AS DECIMAL(65, 0))" if self.dialect == "mysql" and text != "NULL" else text

    def operand(self, e: Expr, *others: Expr) -> str:
        """``e`` as one side of a comparison with ``others``: MySQL strings as UTF-8 bytes (code point order,
        case and trailing spaces significant), as Python, SQLite and Spark compare them; an int (or a decimal,
        which may hold one) against a float as a double in SQLite too (it compares them exactly, the others
        as doubles)."""
        text = self.sql(e)
        kinds = {self.typed.of(e)} | {self.typed.of(o) for o in others}
        if self.dialect == "mysql" and "string" in kinds and text != "NULL":
            return f"CAST(CONVERT({text} USING utf8mb4) AS BINARY)"
        if self.dialect == "postgres" and text != "NULL":
            if "string" in kinds:
                return f'({text} COLLATE "C")'
            if "float" in kinds and self.typed.of(e) in ("int", "decimal"):
                return f"CAST({text} AS double precision)"
        if self.dialect == "sqlite" and self.typed.of(e) in ("int", "decimal") and "float" in kinds and text != "NULL":
            if isinstance(e, Lit):
                self.args[-1] = float(self.args[-1])  # its one bound parameter, bound as a double
                return text
            return f"CAST({text} AS REAL)"
        return text

    def _binary(self, e: Binary) -> str:
        op = e.op
        if op in ("AND", "OR"):
            return f"({self.sql(e.a)} {op} {self.sql(e.b)})"
        if op in ("=", "!=", "<", "<=", ">", ">="):
            sql_op = "<>" if op == "!=" else op
            return f"({self.operand(e.a, e.b)} {sql_op} {self.operand(e.b, e.a)})"
        if self.typed.of(e) == "decimal" and self.dialect != "postgres":
            # MySQL keeps at most 65 digits and 30 places (1e-30 * 1e-30 is 0 there); SQLite has doubles.
            raise NotPushable(f"{self.dialect} does not compute decimals exactly")
        if op == "/":
            a, b = self.sql(e.a), self.sql(e.b)
            # Double division in both (MySQL divides integers as decimals, SQLite truncates); a zero
            # divisor gives NULL in both.
            if self.dialect == "postgres":  # PostgreSQL raises on a zero divisor
                return f"(CAST({a} AS double precision) / NULLIF(CAST({b} AS double precision), 0))"
            left = f"({a} + 0e0)" if self.dialect == "mysql" else f"CAST({a} AS REAL)"
            return f"({left} / {b})"
        a, b = self.wide(e.a, e), self.wide(e.b, e)
        if op == "%" and self.dialect == "postgres":
            return f"MOD({a}, NULLIF({b}, 0))"
        if op == "%":
            return f"MOD({a}, {b})" if self.dialect == "mysql" else f"({a} % {b})"
        return f"({a} {op} {b})"

    def _in(self, e: In) -> str:
        x = self.operand(e.x, *e.items)
        items = ", ".join(self.operand(i, e.x, *e.items) for i in e.items)
        return f"({x} {'NOT ' if e.negated else ''}IN ({items}))"

    def _like(self, e: Like) -> str:
        parts = e.parts()
        x = self.sql(e.x)
        neg = "NOT " if e.negated else ""
        if self.dialect == "sqlite":
            # SQLite's LIKE ignores ASCII case; GLOB does not.
            glob = "".join("*" if p is None else "?" if p == "" else f"[{p}]" if p in "*?[" else p for p in parts)
            return f"({neg}({x} GLOB {self.bind(glob)}))"
        escaped = "".join("%" if p is None else "_" if p == "" else "!" + p if p in "%_!" else p for p in parts)
        if self.dialect == "postgres":
            return f"({neg}(({x}) COLLATE \"C\" LIKE {self.bind(escaped)} ESCAPE '!'))"
        return f"({neg}(CONVERT({x} USING utf8mb4) COLLATE utf8mb4_bin LIKE {self.bind(escaped)} ESCAPE '!'))"

    def _func(self, e: Func) -> str:
        name = e.name
        if name == "coalesce":
            self.branches(e, list(e.args))
            return f"COALESCE({', '.join(self.branch(a, e) for a in e.args)})"
        if self.dialect == "postgres":
            return self._pg_func(e)
        args = [self.wide(a, e) if name == "abs" else self.sql(a) for a in e.args]
        if name == "concat":
            return f"CONCAT({', '.join(args)})" if self.dialect == "mysql" else f"({' || '.join(args)})"
        if name == "substr":
            fn = "SUBSTRING" if self.dialect == "mysql" else "substr"
            return f"{fn}({', '.join(args)})"
        if name == "trim":
            return f"TRIM({args[0]})" if self.dialect == "mysql" else f"trim({args[0]}, ' ')"
        if self.dialect == "mysql" and name in _MYSQL_FUNCS:
            return f"{_MYSQL_FUNCS[name]}({args[0]})"
        if self.dialect == "sqlite" and name in _SQLITE_FUNCS:
            return f"{_SQLITE_FUNCS[name]}({args[0]})"
        if name in _SQLITE_DATE_PART:
            start, length = _SQLITE_DATE_PART[name]
            return f"CAST(substr({args[0]}, {start}, {length}) AS INTEGER)"
        if name == "date" and self.dialect == "sqlite":
            return f"substr({args[0]}, 1, 10)"
        raise NotPushable(f"{self.dialect}'s {name}() differs from wormhole's outside ASCII")

    def _pg_func(self, e: Func) -> str:
        name = e.name
        if name == "substr":
            bounds = [a.value for a in e.args[1:] if isinstance(a, Lit)]
            if len(bounds) != len(e.args) - 1 or bounds[0] is None or bounds[0] < 1 \
                    or (len(bounds) > 1 and (bounds[1] is None or bounds[1] < 0)):
                raise NotPushable("substr from before the first character or of a negative length")
            args = [self.sql(e.args[0])] + [f"CAST({self.sql(a)} AS integer)" for a in e.args[1:]]
            return f"substr({', '.join(args)})"
        if name == "concat":
            return f"({' || '.join(self.sql(a) for a in e.args)})"
        if name not in _PG_FUNCS:
            raise NotPushable(f"postgres's {name}() differs from wormhole's outside ASCII")
        return _PG_FUNCS[name].format(self.wide(e.args[0], e) if name == "abs" else self.sql(e.args[0]))

    def _cast(self, e: Cast) -> str:
        source, target = self.typed.of(e.x), e.to
        x = self.sql(e.x)
        if source == target:
            return x
        if source == "null" and self.dialect == "postgres":
            return f"CAST({x} AS {_PG_NAMES[target]})"  # a bare NULL of no type would be text
        if source == "null":
            return x  # NULL whatever it is (and its parameters stay bound)
        if (source, target) == ("float", "int") and self.dialect == "sqlite":
            # SQLite saturates a double beyond the 64-bit range, wormhole gives NULL (x rendered per use).
            return (f"(CASE WHEN {x} >= -9223372036854775808.0 AND {self.sql(e.x)} < 9223372036854775808.0 "
                    f"THEN CAST({self.sql(e.x)} AS INTEGER) END)")
        if self.dialect == "postgres":
            if (source, target) not in _PG_CASTS:
                raise NotPushable(f"a CAST from {source} to {target} is not exact in postgres")
            return _PG_CASTS[(source, target)].format(x)
        pushable: dict[tuple[str, str], Callable[[str], str]] = (
            {("int", "float"): lambda v: f"({v} + 0e0)", ("int", "decimal"): lambda v: f"CAST({v} AS DECIMAL(65, 0))",
             ("int", "string"): lambda v: f"CAST({v} AS CHAR)", ("date", "string"): lambda v: f"CAST({v} AS CHAR)"}
            if self.dialect == "mysql" else
            {("int", "float"): lambda v: f"CAST({v} AS REAL)", ("int", "string"): lambda v: f"CAST({v} AS TEXT)",
             ("date", "string"): lambda v: v})
        if (source, target) not in pushable:
            raise NotPushable(f"a CAST from {source} to {target} is not exact in {self.dialect}")
        return pushable[(source, target)](x)


_SQL: dict[type[Expr], Callable[[Any, Any], str]] = {
    Lit: _Gen._literal, Col: _Gen._column, Neg: _Gen._neg, Binary: _Gen._binary, Not: _Gen._not,
    IsNull: _Gen._is_null, In: _Gen._in, Between: _Gen._between, Like: _Gen._like, Func: _Gen._func,
    Case: _Gen._case, Cast: _Gen._cast}
"""Each node's SQL: a type-dispatch table."""

"""The expression language: parser (whitelist, positions), type checker (every problem at once) and
the Python batch compiler (SQL's NULL logic, the documented semantics), plus what sqlgen must never do.

The agreement of the Python, SQL and Spark compilers on random expressions is
tests/integration/test_expr_agree.py's (and tests/spark/test_expr_agree_spark.py's).
"""

from __future__ import annotations

import sqlite3
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from wormhole.transform.check import check
from wormhole.transform.expr import parse
from wormhole.transform.pyfn import compile_py
from wormhole.transform.sqlgen import NotPushable, compile_sql
from wormhole.transform.tree import MAX_DEPTH, Between, Binary, Col, ExprError, In, Like, Lit, Neg, Not, depth

SCHEMA = {"i": "int", "j": "int", "f": "float", "m": "decimal", "s": "string", "t": "string", "b": "bool",
          "c": "bool", "d": "date", "ts": "datetime"}
T, F, N = True, False, None


class Batch:
    def __init__(self, cols: dict[str, list[Any]]) -> None:
        self.cols = cols
        self.n = len(next(iter(cols.values()))) if cols else 1

    def get(self, name: str) -> list[Any]:
        return self.cols.get(name, [None] * self.n)


def run(text: str, **cols: list[Any]) -> list[Any]:
    """The expression's values over the given columns (every other column is NULL)."""
    tree = parse(text)
    typed = check(tree, SCHEMA)
    assert not typed.problems, typed.problems
    return compile_py(tree, typed)(Batch(cols))


def value(text: str, **row: Any) -> Any:
    return run(text, **{k: [v] for k, v in row.items()})[0]


def problems(text: str) -> list[str]:
    return check(parse(text), SCHEMA).problems


def error(text: str) -> ExprError:
    with pytest.raises(ExprError) as info:
        parse(text)
    return info.value


# ---------------------------------------------------------------------------------------------
# Parser


@pytest.mark.parametrize(("text", "pos", "words"), [
    ("i = ", 4, "unexpected the end"),
    ("i = 1)", 5, "unexpected ')'"),
    ("(i = 1", 6, "expected ')'"),
    ("i == 1", 3, "unexpected '='"),
    ("'open", 0, "unexpected character \"'\""),
    ("i = 1; DROP TABLE t", 5, "unexpected character ';'"),
    ("s = 'x' OR 1=1 --", 17, "unexpected the end"),
    ("i = 1 /* comment */", 7, "unexpected '*'"),
    ("i = 1 # comment", 6, "unexpected character '#'"),
    ("s LIKE t", 7, "LIKE takes a string literal"),
    ("i NOT 3", 6, "expected IN, BETWEEN or LIKE after NOT"),
    ("i IN (j)", 6, "IN takes a list of literals"),
    ("i IN (1 + 1)", 8, "expected ')' closing the IN list"),
    ("CASE b END", 7, "CASE needs at least one WHEN"),
    ("CASE WHEN b THEN 1", 18, "expected END closing CASE"),
    ("CAST(i AS blob)", 10, "unknown type 'blob'"),
    ("DATE '2024-13-01'", 5, "bad DATE literal"),
    ("TIMESTAMP '2024-01-01T00:00+02:00'", 10, "no time zone"),
    ("i = 9223372036854775808", 4, "out of the 64-bit range"),
    ("f < 1e999", 4, "out of the range of a float"),
    ("i = ٣", 4, "unexpected character '٣'"),
    ("i IS 1", 5, "expected NULL after IS"),
    ("1 < i < 3", 6, "unexpected '<'"),
    ("lower(s", 7, "expected ')' closing lower("),
])
def test_syntax_errors_name_the_place(text: str, pos: int, words: str) -> None:
    exc = error(text)
    assert exc.pos == pos, str(exc)
    assert words in str(exc)
    assert str(exc).endswith(f"(at character {pos + 1})")


@pytest.mark.parametrize("text", ["", "   ", None, 42, "x" * 10_001])
def test_empty_non_text_and_huge_expressions_are_refused(text: Any) -> None:
    assert error(text).pos is None


def test_injection_attempts_are_literals_or_errors() -> None:
    tree = parse("s = '; DROP TABLE t; --' OR t = 'x'' OR ''1''=''1'")
    assert tree == Binary("OR", Binary("=", Col("s", 0), Lit("; DROP TABLE t; --")),
                          Binary("=", Col("t", 28), Lit("x' OR '1'='1")))
    for dialect in ("mysql", "sqlite"):
        sql = compile_sql(tree, check(tree, SCHEMA), dialect)
        assert "DROP" not in sql.text and "'1'" not in sql.text
        assert sql.args == ("; DROP TABLE t; --", "x' OR '1'='1")
    weird = parse('`we``ird` = 1 AND "dou""ble" = 2')
    assert weird == Binary("AND", Binary("=", Col("we`ird", 0), Lit(1)), Binary("=", Col('dou"ble', 18), Lit(2)))
    typed = check(weird, {"we`ird": "int", 'dou"ble': "int"})
    assert compile_sql(weird, typed, "mysql").text == "((`we``ird` = \x00) AND (`dou\"ble` = \x00))"
    assert compile_sql(weird, typed, "sqlite").text == '(("we`ird" = \x00) AND ("dou""ble" = \x00))'
    for text in ("i = 1 UNION SELECT 1", "i = 1 --", "s = x'41'", "@@version = 1", "s = 'a' || 'b'"):
        error(text)
    assert problems("sleep(10) = 0") == [  # a name the grammar takes is still only ever a whitelisted one
        "unknown function sleep() (functions: abs, coalesce, concat, date, day, length, lower, ltrim, month, rtrim, "
        "substr, trim, upper, year)"]


def test_precedence_and_shapes() -> None:
    assert parse("NOT i = 1 AND b") == Binary("AND", Not(Binary("=", Col("i", 4), Lit(1))), Col("b", 14))
    assert parse("i + 2 * j - 1") == Binary("-", Binary("+", Col("i", 0), Binary("*", Lit(2), Col("j", 8))), Lit(1))
    assert parse("i not between 1 and 2 and b") == Binary("AND", Between(Col("i", 0), Lit(1), Lit(2), True),
                                                          Col("b", 26))
    assert parse("-(i)") == Neg(Col("i", 2))
    assert parse("- -3") == Lit(3)
    assert parse("i = -9223372036854775808") == Binary("=", Col("i", 0), Lit(-(2**63)))
    assert parse("1.50") == Lit(Decimal("1.50")) and parse("1.5e0") == Lit(1.5)
    assert parse("s not like 'a\\%'") == Like(Col("s", 0), "a\\%", True)
    assert parse("i in (1, -2, NULL)") == In(Col("i", 0), (Lit(1), Lit(-2), Lit(None)))
    assert parse("date(ts) = DATE '2024-01-05'") == Binary("=", parse("date(ts)"), Lit(date(2024, 1, 5)))
    simple = parse("CASE i WHEN 1 THEN 'one' ELSE 'other' END")
    assert simple.whens == ((Binary("=", Col("i", 5), Lit(1)), Lit("one")),)  # type: ignore[attr-defined]


def test_nesting_and_chains_are_bounded_without_recursion_errors() -> None:
    assert "nests deeper than 64" in str(error("(" * 65 + "i" + ")" * 65))
    assert parse("(" * 60 + "i" + ")" * 60) == Col("i", 60)
    long_or = " OR ".join(f"i = {k}" for k in range(800))
    assert depth(parse(long_or)) <= 12  # AND and OR chains are balanced
    assert run(long_or, i=[5, 800, None]) == [True, False, None]
    assert "nests deeper than" in str(error(" + ".join(["i"] * (MAX_DEPTH + 1))))
    assert "nests deeper than" in str(error("-" * 5000 + "i"))
    assert "nests deeper than" in str(error("NOT " * 2000 + "b"))
    deepest = " + ".join(["i"] * MAX_DEPTH)
    assert run(deepest, i=[1]) == [MAX_DEPTH]
    tree = parse(deepest)
    assert compile_sql(tree, check(tree, SCHEMA), "mysql").text.count('`i`') == MAX_DEPTH


# ---------------------------------------------------------------------------------------------
# Type checker


def test_every_problem_is_listed() -> None:
    found = problems("x + 1 = 2 AND nope(1) AND s + 1 > 0 AND NOT i AND y")
    assert found == [
        "unknown column 'x' (columns: i, j, f, m, s, t, b, c, d, ts)",
        "unknown function nope() (functions: abs, coalesce, concat, date, day, length, lower, ltrim, month, rtrim, "
        "substr, trim, upper, year)",
        "'+' needs numbers, not a string and a int",
        "NOT needs booleans, not a int",
        "unknown column 'y' (columns: i, j, f, m, s, t, b, c, d, ts)",
    ]


@pytest.mark.parametrize(("text", "message"), [
    ("i = 'a'", "cannot compare a int with a string (=)"),
    ("d < i", "cannot compare a date with a int (<)"),
    ("b = 1", "cannot compare a bool with a int (=)"),
    ("i LIKE 'a'", "LIKE needs a string, not a int"),
    ("i IN (1, 'a')", "IN compares a int with a string"),
    ("s BETWEEN 1 AND 2", "BETWEEN compares a string with a int"),
    ("i % f", "'%' needs integers"),
    ("i AND b", "AND needs booleans, not a int"),
    ("-s", "cannot negate a string"),
    ("CAST(f AS string)", "cannot CAST a float to string"),
    ("CAST(d AS int)", "cannot CAST a date to int"),
    ("substr(s, 0)", "substr() argument 2 must be an integer literal >= 1"),
    ("substr(s, i)", "substr() argument 2 must be an integer literal >= 1"),
    ("substr(s, 1, -1)", "substr() argument 3 must be an integer literal >= 0"),
    ("substr(s)", "substr() takes 3 argument(s), not 1"),
    ("length()", "length() takes 1 argument(s), not 0"),
    ("coalesce()", "coalesce() needs at least one argument"),
    ("coalesce(i, s)", "coalesce() mixes int, string"),
    ("abs(s)", "abs() argument 1 must be decimal or float or int, not string"),
    ("year(i)", "year() argument 1 must be date or datetime, not int"),
    ("CASE WHEN i THEN 1 END", "CASE WHEN needs a boolean condition, not a int"),
    ("CASE WHEN b THEN 1 ELSE 'one' END", "CASE results mix int, string"),
    ("i = 1." + "1" * 38, "has more than 38 digits"),
])
def test_type_errors(text: str, message: str) -> None:
    found = problems(text)
    assert len(found) == 1 and message in found[0], found


@pytest.mark.parametrize(("text", "kind"), [
    ("i / j", "float"), ("i + j", "int"), ("i + 1.5", "decimal"), ("i + f", "float"), ("m * f", "float"),
    ("i % j", "int"), ("coalesce(i, 1.5)", "decimal"), ("coalesce(NULL, NULL)", "null"), ("NULL + 1", "int"),
    ("CASE WHEN b THEN 1 ELSE 2.5e0 END", "float"), ("length(s)", "int"), ("date(ts)", "date"),
    ("CAST(s AS timestamp)", "datetime"), ("i IS NULL", "bool"), ("abs(m)", "decimal"), ("-f", "float"),
])
def test_result_types(text: str, kind: str) -> None:
    typed = check(parse(text), SCHEMA)
    assert typed.problems == [] and typed.type == kind


# ---------------------------------------------------------------------------------------------
# Python compiler: NULL logic


def test_three_valued_truth_tables() -> None:
    b = [T, T, T, F, F, F, N, N, N]
    c = [T, F, N, T, F, N, T, F, N]
    assert run("b AND c", b=b, c=c) == [T, F, N, F, F, F, N, F, N]
    assert run("b OR c", b=b, c=c) == [T, T, T, T, F, N, T, N, N]
    assert run("NOT b", b=[T, F, N]) == [F, T, N]
    assert run("b IS NULL", b=[T, F, N]) == [F, F, T]
    assert run("NOT (b IS NOT NULL)", b=[T, F, N]) == [F, F, T]
    assert run("b = c", b=b, c=c) == [T, F, N, F, T, N, N, N, N]
    # A bool column holding 1 and 0 (MySQL's TINYINT(1)) means the same.
    assert run("b AND c", b=[1, 1, 0, None], c=[1, 0, None, 1]) == [T, F, F, N]
    assert run("b OR c", b=[1, 0, 0, None], c=[0, 0, None, 0]) == [T, F, N, N]


def test_in_and_not_in_with_null() -> None:
    i = [1, 2, None]
    assert run("i IN (1, 3)", i=i) == [T, F, N]
    assert run("i IN (1, NULL)", i=i) == [T, N, N]
    assert run("i NOT IN (1, 3)", i=i) == [F, T, N]
    assert run("i NOT IN (1, NULL)", i=i) == [F, N, N]
    assert run("i IN (0, 0)", i=[0, 1]) == [T, F]  # a repeated value is no NULL
    assert run("i NOT IN (NULL)", i=i) == [N, N, N]
    assert run("NULL IN (1)", i=i) == [N, N, N]
    assert run("f IN (0.1, 2)", f=[0.1, 2.0, 0.2]) == [T, T, F]  # a decimal next to floats compares as a double
    assert run("m IN (1, 2.5e0)", m=[Decimal("1.0"), Decimal("2.5"), Decimal("3")]) == [T, T, F]


def test_between() -> None:
    i = [0, 1, 5, 9, None]
    assert run("i BETWEEN 1 AND 5", i=i) == [F, T, T, F, N]
    assert run("i NOT BETWEEN 1 AND 5", i=i) == [T, F, F, T, N]
    assert run("i BETWEEN 1 AND NULL", i=i) == [F, N, N, N, N]
    assert run("i NOT BETWEEN 1 AND NULL", i=i) == [T, N, N, N, N]
    assert run("i BETWEEN 5 AND 1", i=i) == [F, F, F, F, N]
    assert run("s BETWEEN 'a' AND 'b'", s=["a", "ab", "b", "B", "ba"]) == [T, T, T, F, F]
    assert run("d BETWEEN DATE '2024-01-01' AND DATE '2024-12-31'",
               d=[date(2023, 12, 31), date(2024, 2, 29)]) == [F, T]


@pytest.mark.parametrize(("pattern", "matches", "misses"), [
    ("a%", ["a", "abc", "a\nb"], ["A", "ba", ""]),
    ("%b", ["b", "ab", "a\nb"], ["B", "ba"]),
    ("_", ["a", "é", "%", "\n"], ["", "ab"]),
    ("a_c", ["abc", "aéc"], ["ac", "abbc", "ABC"]),
    ("100\\%", ["100%"], ["100", "1000", "100\\%"]),
    ("a\\_b", ["a_b"], ["axb"]),
    ("a\\\\b", ["a\\b"], ["ab", "a\\\\b"]),
    ("ends\\", ["ends\\"], ["ends"]),
    ("%.*%", ["x.*y"], ["xy"]),
    ("[a]", ["[a]"], ["a"]),
    ("", [""], [" "]),
    ("É%", ["École"], ["école"]),
])
def test_like_is_case_sensitive_with_backslash_escapes(pattern: str, matches: list[str], misses: list[str]) -> None:
    text = "s LIKE '" + pattern.replace("'", "''") + "'"
    assert run(text, s=matches + misses + [None]) == [T] * len(matches) + [F] * len(misses) + [N]
    assert run("s NOT " + text[2:], s=matches + misses + [None]) == [F] * len(matches) + [T] * len(misses) + [N]


# ---------------------------------------------------------------------------------------------
# Python compiler: values


def test_arithmetic() -> None:
    assert run("i / j", i=[7, 7, 1, None, 7], j=[2, 0, 3, 1, None]) == [3.5, None, 1 / 3, None, None]
    assert value("f / 0.0", f=1.0) is None and value("-0.0e0 / 0.0", f=1.0) is None
    assert run("i % j", i=[7, -7, 7, -7, 7], j=[2, 2, -2, -2, 0]) == [1, -1, 1, -1, None]
    assert value("i + 1.5", i=2) == Decimal("3.5")
    assert value("i * 0.1 = 0.3", i=3) is True  # decimals are exact
    assert value("i * 0.1e0 = 0.3", i=3) is False  # a float is a double
    assert value("-i", i=None) is None and value("abs(i)", i=-3) == 3
    assert value("NULL + 1") is None


def test_strings_compare_by_code_point_case_sensitively() -> None:
    s, t = ["B", "a", "a ", "é", "Z", "a"], ["a", "a", "a", "z", "a", "A"]
    assert run("s < t", s=s, t=t) == [T, F, F, F, T, F]
    assert run("s = t", s=s, t=t) == [F, T, F, F, F, F]


def test_case() -> None:
    b, i = [T, F, N, F], [1, 2, 3, None]
    assert run("CASE WHEN b THEN 'yes' WHEN i > 1 THEN 'big' ELSE 'other' END", b=b, i=i) == \
        ["yes", "big", "big", "other"]
    assert run("CASE WHEN b THEN 1 END", b=b) == [1, None, None, None]
    assert run("CASE WHEN b THEN 1 ELSE 2.5e0 END", b=b) == [1.0, 2.5, 2.5, 2.5]
    assert run("CASE i WHEN 1 THEN 'one' WHEN NULL THEN 'null' ELSE 'else' END", i=i) == \
        ["one", "else", "else", "else"]
    cols = {"b": [T, F], "s": ["x", "y"]}
    assert run("CASE WHEN b THEN 'z' ELSE s END", **cols) == ["z", "y"]
    assert cols["s"] == ["x", "y"]  # the ELSE column is not written to


def test_functions() -> None:
    s = ["  Ab é ", None]
    assert run("lower(s)", s=s) == ["  ab é ", None] and run("upper(s)", s=s) == ["  AB É ", None]
    assert run("length(s)", s=s) == [7, None]
    assert run("trim(s)", s=s) == ["Ab é", None]
    assert run("ltrim(s)", s=["\t a "]) == ["\t a "] and run("rtrim(s)", s=[" a \n"]) == [" a \n"]  # spaces only
    assert run("substr(s, 3)", s=s) == ["Ab é ", None]
    assert run("substr(s, 3, 2)", s=s) == ["Ab", None]
    assert run("substr(s, 20, 2)", s=s) == ["", None]
    assert run("concat(s, '-', t)", s=["a", "a", None], t=["b", None, "b"]) == ["a-b", None, None]
    assert run("coalesce(i, j, 0)", i=[1, None, None], j=[2, 3, None]) == [1, 3, 0]
    assert run("coalesce(i, 1.5)", i=[1, None]) == [Decimal(1), Decimal("1.5")]
    assert run("year(d) * 10000 + month(d) * 100 + day(d)", d=[date(2024, 2, 29)]) == [20240229]
    assert run("date(ts)", ts=[datetime(2024, 1, 5, 23, 59)]) == [date(2024, 1, 5)]
    assert value("upper('straße')") == "STRASSE"


@pytest.mark.parametrize(("text", "expected"), [
    ("CAST('abc' AS int)", None), ("CAST(' 12 ' AS int)", 12), ("CAST('+7' AS int)", 7), ("CAST('1.5' AS int)", None),
    ("CAST('٣' AS int)", None), ("CAST('99999999999999999999' AS int)", None), ("CAST('' AS int)", None),
    ("CAST('1e3' AS float)", 1000.0), ("CAST('1e999' AS float)", None), ("CAST('inf' AS float)", None),
    ("CAST('NaN' AS float)", None), ("CAST('1.5d' AS float)", None), ("CAST('.5' AS float)", 0.5),
    ("CAST('2024-02-29' AS date)", date(2024, 2, 29)), ("CAST('2023-02-29' AS date)", None),
    ("CAST('2024-1-5' AS date)", None), ("CAST(' 2024-01-05' AS date)", None), ("CAST('0000-01-01' AS date)", None),
    ("CAST('2024-01-05\n' AS date)", None),
    ("CAST('2024-01-05 10:30' AS datetime)", datetime(2024, 1, 5, 10, 30)), ("CAST('2024-01-05' AS datetime)", None),
    ("CAST(' Yes ' AS bool)", True), ("CAST('f' AS bool)", False), ("CAST('on' AS bool)", None),
    ("CAST(2 AS bool)", True), ("CAST(TRUE AS string)", "true"), ("CAST(FALSE AS int)", 0),
    ("CAST(-2.7e0 AS int)", -2), ("CAST(1e19 AS int)", None), ("CAST(-9.223372036854775808e18 AS int)", -(2**63)),
    ("CAST(2.99 AS int)", 2), ("CAST(DATE '2024-01-05' AS string)", "2024-01-05"),
    ("CAST(DATE '2024-01-05' AS datetime)", datetime(2024, 1, 5)),
    ("CAST('0.1234567890123456789' AS decimal)", Decimal("0.123456789012345679")),
    ("CAST('1e20' AS decimal)", None), ("CAST(CAST(' 1.50 ' AS decimal) AS string)", "1.5"),
    ("CAST(1.50 AS string)", "1.5"), ("CAST(-0.0 AS string)", "0"), ("CAST(100 + 0.000 AS string)", "100"),
    ("CAST(0.0000001 AS string)", "0.0000001"), ("CAST(NULL AS date)", None), ("CAST(12 AS string)", "12"),
])
def test_casts_that_fail_give_null(text: str, expected: Any) -> None:
    got = value(text)
    assert got == expected and type(got) is type(expected)


# ---------------------------------------------------------------------------------------------
# SQL: what is never pushed, and parameters in order


def _sqlite(text: str, rows: list[tuple[Any, ...]]) -> list[Any]:
    tree = parse(text)
    sql = compile_sql(tree, check(tree, SCHEMA), "sqlite")
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE r (i INTEGER, f REAL)")
    conn.executemany("INSERT INTO r VALUES (?, ?)", rows)
    return [r[0] for r in conn.execute(f"SELECT {sql.render('?')} FROM r", sql.args)]


def test_sql_binds_repeated_operands_once_per_use() -> None:
    assert _sqlite("i % 10 + 1 BETWEEN 2 AND 5", [(0, None), (1, None), (4, None), (5, None)]) == [0, 1, 1, 0]
    assert _sqlite("CAST(f + 0.5e0 AS int)", [(0, 1.0), (0, -2.0), (0, 1e300), (0, None)]) == [1, -1, None, None]
    tree = parse("-(i - -1)")
    mysql = compile_sql(tree, check(tree, SCHEMA), "mysql")
    assert "--" not in mysql.render("%s") % tuple(repr(a) for a in mysql.args)


def test_a_float_coalesce_or_case_of_an_int_is_a_double_in_sqlite() -> None:
    """SQLite hands an int branch back as it is; pyfn and the other engines make it a double (2^63 - 1
    becomes 2^63, which no int holds: NULL; found by test_expr_agree)."""
    big = 2**63 - 1
    rows = [(big, None), (3, None), (0, 2.5)]
    for text in ("CAST(coalesce(f, i) AS int)", "CAST(CASE WHEN f IS NULL THEN i ELSE f END AS int)"):
        tree = parse(text)
        expected = compile_py(tree, check(tree, SCHEMA))(_Cols(rows))
        assert expected == [None, 3, 2]
        assert _sqlite(text, rows) == expected, text


class _Cols:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.n = len(rows)
        self._cols = {"i": [r[0] for r in rows], "f": [r[1] for r in rows]}

    def get(self, name: str) -> list[Any]:
        return self._cols[name]


@pytest.mark.parametrize(("text", "dialect"), [
    ("lower(s) = 'a'", "mysql"), ("upper(s) = 'A'", "sqlite"), ("ts IS NULL", "sqlite"),
    ("m + 1 > 0", "sqlite"), ("i = 1.0000000000000001", "sqlite"), ("CAST(s AS int) = 1", "mysql"),
    ("CAST(f AS int) = 1", "mysql"), ("CAST(m AS string) = '1'", "mysql"),
    # issue 23: a FLOAT column (item 6), arithmetic that could overflow the store's integers (7), decimal
    # arithmetic beyond MySQL's 30 places and 65 digits (8)
    ("f = 0.1", "mysql"), ("abs(f) > 1", "mysql"), ("i + 1000 > 0", "sqlite"), ("-i > 0", "sqlite"),
    ("abs(i) > 0", "sqlite"), ("i * i * i * i > 0", "mysql"), ("m * m > 0", "mysql"), ("m + 1 > 1", "mysql"),
])
def test_not_pushable(text: str, dialect: Any) -> None:
    tree = parse(text)
    with pytest.raises(NotPushable):
        compile_sql(tree, check(tree, SCHEMA), dialect)


def test_decimal_arithmetic_keeps_every_digit_and_ints_have_no_limit() -> None:
    """Issue 23 items 2 and 7: Python's default context rounded to 28 significant digits."""
    big = Decimal("123456789012345678901234567890.123456789012345678901234567891")
    tiny = Decimal("1E-30")
    assert run("m * 1", m=[big, tiny, None]) == [big, tiny, None]
    assert run("-m", m=[big]) == [big.copy_negate()] and run("abs(m)", m=[big.copy_negate()]) == [big]
    assert run("m + 1 > 1", m=[tiny]) == [True] and run("m * m > 0", m=[tiny]) == [True]
    digits = int(str(big).replace(".", ""))
    assert run("m * m", m=[big]) == [Decimal(f"{digits * digits}E-60")]  # 120 digits, exact
    assert run("i + 1000 > 0", i=[2**63 - 1]) == [True] and run("-i", i=[-(2**63)]) == [2**63]
    # An int against a float compares as a double, as MySQL and Spark compare them.
    assert run("i = 9.223372036854775807e18", i=[2**63 - 1]) == [True]
    assert run("i IN (9.223372036854775807e18, 1.5e0)", i=[2**63 - 1]) == [True]


def test_a_zero_date_is_null_in_an_expression() -> None:
    """Issue 23 item 9: a zero date kept as text (zero_dates: keep) raised TypeError/AttributeError."""
    zd = ["0000-00-00", "2024-00-10", date(2024, 1, 5), None]
    assert run("d >= DATE '2000-01-01'", d=zd) == [None, None, True, None]
    assert run("year(d)", d=zd) == [None, None, 2024, None]
    assert run("CAST(d AS string)", d=zd) == [None, None, "2024-01-05", None]
    assert run("d IS NULL", d=zd) == [True, True, False, True]
    assert run("coalesce(ts, TIMESTAMP '2000-01-01 00:00:00') < TIMESTAMP '2001-01-01 00:00:00'",
               ts=["0000-00-00 00:00:00", datetime(2024, 1, 5)]) == [True, False]

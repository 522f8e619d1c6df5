"""The substitution rules of job variables (wormhole/variables.py), as the README states them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from wormhole.errors import InvalidTaskConfig
from wormhole.variables import builtin_values, load_params, parse_params, resolve, values_for_run


def test_strings_anywhere_whole_or_inside_keys_and_numbers_untouched() -> None:
    doc = {"a": "${x}", "b": ["pre ${x} ${y} post", 3, True, None], "${x}": {"c": "$${x} $$${x} ${ unclosed"}}
    out = resolve(doc, {"x": "1", "y": "two", "z": "unused"})
    assert out.check() == {"a": "1", "b": ["pre 1 two post", 3, True, None],
                           "${x}": {"c": "${x} $${x} ${ unclosed"}}
    assert out.used == {"x": "1", "y": "two"}


def test_unresolved_and_bad_names_are_problems_by_path() -> None:
    out = resolve({"s": {"p": [{"w": "${a}"}]}, "t": "${1x}"}, {})
    assert out.problems[0].startswith("s.p[0].w: unresolved variable ${a}: give it with -p a=VALUE")
    assert out.problems[1].startswith("t: ${1x} is not a variable name")
    with pytest.raises(InvalidTaskConfig) as info:
        out.check()
    assert info.value.exit_code == 204


def test_a_value_under_a_secret_key_is_shown_masked() -> None:
    out = resolve({"password": "${pw}", "user": "${u}"}, {"pw": "s3cret", "u": "etl"})
    assert out.check()["password"] == "s3cret"
    assert out.shown() == {"pw": "***", "u": "etl"}


def test_built_ins_params_and_recorded_values() -> None:
    # A run no schedule's tick started has its start as its tick.
    assert builtin_values(datetime(2026, 3, 4, 5, 6, 7)) == {"run_date": "2026-03-04", "run_ts": "2026-03-04 05:06:07",
                                                           "tick_date": "2026-03-04", "tick_ts": "2026-03-04 05:06:07"}
    values = values_for_run('{"run_date": "2020-01-01", "n": 5}', '{"n": "7"}', datetime(2026, 3, 4))
    assert values == {"run_date": "2020-01-01", "run_ts": "2026-03-04 00:00:00", "n": "7",
                      "tick_date": "2026-03-04", "tick_ts": "2026-03-04 00:00:00"}
    assert parse_params(["a=1", "b=x=y", "a=2"]) == {"a": "2", "b": "x=y"}
    with pytest.raises(ValueError, match="not name=value"):
        parse_params(["novalue"])
    with pytest.raises(InvalidTaskConfig, match=r"params: expected a JSON object"):
        load_params("[1]")
    with pytest.raises(InvalidTaskConfig, match=r"params.bad name: not a variable name"):
        load_params('{"bad name": "1"}')


def _where(where: str, values: dict[str, str], plugin: str = "mysql") -> Any:
    out = resolve({"source": {"plugin": plugin, "params": {"where": where}}}, values, dialect_of=lambda p: p)
    return out.problems or out.document["source"]["params"]["where"]


@pytest.mark.parametrize(("where", "values", "expected"), [
    ("id > ${n}", {"n": "0) OR (1=1"}, "is not one SQL literal"),
    ("id > ${n}", {"n": "-1.5e3"}, "id > -1.5e3"),
    ("id > ${n}", {"n": "'x'"}, "id > 'x'"),
    ("t_${d}.id > 0", {"d": "20260101"}, "t_20260101.id > 0"),
    ("name = '${s}'", {"s": "O'Brien"}, "would end the string literal"),
    ("name = '${s}'", {"s": "a\\"}, "would end the string literal"),
    ("name = ${s:str}", {"s": "O'Brien\\"}, "name = 'O\\'Brien\\\\'"),
    ("d >= ${d:date}", {"d": "2026-01-02"}, "d >= '2026-01-02'"),
    ("d >= ${d:date}", {"d": "2026-02-30"}, "is not a date"),
    ("id > ${n:int}", {"n": "1 OR 1=1"}, "is not an integer"),
    ("id > ${n:sql}", {"n": "1 OR 1=1"}, "id > 1 OR 1=1"),
    ("x = 1 -- ${c}", {"c": "a\nOR 1=1"}, "would end the comment"),
    ("`${c}` = 1", {"c": "a` OR `b"}, "would end the quoted name"),
    ("id > ${n:float}", {"n": "1"}, "has no type 'float'"),
])
def test_a_value_in_sql_is_one_literal_or_a_problem(where: str, values: dict[str, str], expected: str) -> None:
    got = _where(where, values)
    assert got == expected if isinstance(got, str) else expected in got[0]


def test_postgres_and_sqlite_escape_by_doubling_and_a_glued_minus_is_no_comment() -> None:
    assert _where("n = ${s:str}", {"s": "O'Brien\\"}, "postgres") == "n = 'O''Brien\\'"
    assert _where("n = E'${s:str}'", {"s": "O'Brien\\"}, "postgres") == "n = E'O\\'Brien\\\\'"
    assert "other literals or comments" in _where("id -${n}", {"n": "-1"}, "postgres")[0]
    assert _where("id -${n}", {"n": "-1"}, "mysql") == "id --1"  # MySQL's -- needs a space after it
    # Outside SQL text a value goes as it is; a typed one is checked everywhere.
    out = resolve({"p": "out/${d}", "q": "${n:int}"}, {"d": "a) OR (1", "n": "x"})
    assert out.problems == ("q: ${n:int} = 'x' is not an integer (digits, an optional sign)",)


@pytest.mark.parametrize(("where", "problem"), [
    ("id > 0) OR (1=1", "the ) at offset 6 closes a parenthesis it did not open"),
    ("id > 0; DROP TABLE t", "the ; at offset 6 ends the statement"),
    ("id > 0 -- note", "a -- comment at offset 7 would swallow"),
    ("(id > 0", "1 parenthesis(es) opened and never closed"),
    ("name = 'a", "a string opened by ' at offset 7 is never closed"),
    ("name = ')' AND /* ( */ id > 0", None),
])
def test_a_where_is_one_condition(where: str, problem: str | None) -> None:
    from wormhole.sql_text import where_problem

    got = where_problem(where, "mysql")
    assert got == problem if problem is None else got is not None and got.startswith(problem)

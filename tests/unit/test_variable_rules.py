"""The substitution rules of job variables (wormhole/variables.py), as the README states them."""

from __future__ import annotations

from datetime import datetime

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

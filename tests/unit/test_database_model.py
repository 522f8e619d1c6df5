"""A database task's table patterns, target templates and clashes (wormhole.database.model), and what the task
spec refuses of a database task before anything connects."""

from __future__ import annotations

from typing import Any

import pytest

from wormhole.database.model import ListedTable, TablePatterns, TableRef, clashes, render, template_problem
from wormhole.errors import InvalidTaskConfig
from wormhole.task_spec import TaskSpec


def listed(*keys: str, rows: int = 0) -> list[ListedTable]:
    return [ListedTable(TableRef(*k.split(".", 1)), rows) for k in keys]


def test_patterns_select_by_schema_and_name_and_excludes_win() -> None:
    tables = listed("shop.orders", "shop.tmp_1", "shop.a.b", "crm.customers", "crm.tmp_x")
    chosen = TablePatterns.parse(["*", "crm.*", "!tmp_*", "!crm.tmp_*"], "shop").select(tables)
    assert sorted(t.ref.key for t in chosen) == ["crm.customers", "shop.a.b", "shop.orders"]


def test_a_dotted_pattern_names_its_schema_and_globs_are_case_sensitive() -> None:
    tables = listed("shop.Orders", "shop.orders", "other.orders")
    assert [t.ref.key for t in TablePatterns.parse(["shop.o*"], None).select(tables)] == ["shop.orders"]


def test_the_largest_tables_come_first_then_by_name() -> None:
    tables = [ListedTable(TableRef("s", name), rows) for name, rows in (("b", 5), ("a", 5), ("z", 9))]
    assert [t.ref.name for t in TablePatterns.parse(["*"], "s").select(tables)] == ["z", "a", "b"]


def test_an_include_that_matches_nothing_is_named() -> None:
    with pytest.raises(InvalidTaskConfig) as caught:
        TablePatterns.parse(["orders", "nosuch*", "!orders"], "shop").select(listed("shop.orders"))
    assert caught.value.problems == ["source.params.tables: 'nosuch*' matches no table"]


def test_excludes_that_leave_nothing_are_refused() -> None:
    with pytest.raises(InvalidTaskConfig, match="the excludes leave no table to read"):
        TablePatterns.parse(["*", "!*"], "shop").select(listed("shop.orders"))


@pytest.mark.parametrize(("template", "problem"), [
    ("{table}", None), ("{schema}_{table}", None), ("x{{y}}_{table}", None),
    ("{tbl}", "'{tbl}' names '{tbl}': only {schema} and {table}"),
    ("{table", "'{table' is not a template"),
])
def test_templates_name_only_schema_and_table(template: str, problem: str | None) -> None:
    found = template_problem(template)
    assert (found is None) if problem is None else (found is not None and found.startswith(problem))


def test_render_and_clashes_fold_case_where_the_store_does() -> None:
    a, b = TableRef("s", "Case"), TableRef("s", "case")
    targets = {a: render("{table}", a), b: render("{table}", b)}
    assert clashes(targets, fold_case=False) == []
    assert clashes(targets, fold_case=True) == ["'s.Case' and 's.case' both map to 'case'"]


def task(source: dict[str, Any], *destinations: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {"source": source, "destinations": list(destinations), "settings": settings}


SOURCE = {"plugin": "sqlite", "params": {"path": "/tmp/none.db", "tables": ["*"]}}


def problems(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidTaskConfig) as caught:
        TaskSpec.from_mapping(spec)
    return caught.value.problems


def test_a_destination_whose_targets_do_not_use_table_is_refused() -> None:
    found = problems(task(SOURCE, {"id": "lake", "plugin": "file", "params": {"path": "/tmp/one", "format": "csv"}}))
    assert found == ["destinations[0].params: every table needs a target of its own: put {table} in path"]


def test_a_sql_destination_defaults_its_table_to_the_source_tables_name() -> None:
    spec = TaskSpec.from_mapping(task(SOURCE, {"id": "copy", "plugin": "sqlite", "params": {"path": "/tmp/c.db"}}))
    assert spec.destinations[0].params["table"] == "{table}" and spec.source.tables == ("*",)


def test_what_a_database_task_cannot_do_yet_is_refused_with_the_reason() -> None:
    dest = {"id": "copy", "plugin": "sqlite", "params": {"path": "/tmp/c.db"}}
    found = problems(task(SOURCE, dest, engine="spark", consistency="all_or_nothing"))
    assert any(p.startswith("settings.engine: a database task") for p in found)
    assert any(p.startswith("settings.consistency: a database task commits each table on its own") for p in found)
    stream = {"id": "s", "plugin": "stream", "params": {}}
    assert any("cannot take a database task's tables" in p for p in problems(task(SOURCE, stream)))

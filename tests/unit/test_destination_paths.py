"""Validation: two destinations may not write the same path, or one inside the other's directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from wormhole.errors import InvalidTaskConfig
from wormhole.task_spec import TaskSpec


def files(path: str, dest_id: str = "f", **params: Any) -> dict[str, Any]:
    return {"id": dest_id, "plugin": "file", "params": {"path": path, "format": "csv", **params}}


def sqlite(path: str, dest_id: str = "s", table: str = "t") -> dict[str, Any]:
    return {"id": dest_id, "plugin": "sqlite", "params": {"path": path, "table": table}}


def task(*destinations: dict[str, Any]) -> dict[str, Any]:
    return {"source": {"plugin": "stream", "params": {"rows": 10}}, "destinations": list(destinations)}


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidTaskConfig) as info:
        TaskSpec.from_mapping(raw)
    return info.value.problems


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(("first", "second", "relation"), [
    ("out/x", "out/x", "the same path as"),
    ("out/x", "out/x/", "the same path as"),
    ("out/x", "./out/x", "the same path as"),
    ("out/x", "out/y/../x", "the same path as"),
    ("out/x", "{cwd}/out/x", "the same path as"),
    ("out/x", "out//x/.", "the same path as"),
    ("out/x", "out/x/sub", "inside the path of"),
    ("out/x/sub/deeper", "out/x", "a directory holding the path of"),
    ("out/x", "{cwd}/out/x/y/../sub", "inside the path of"),
], ids=["same", "trailing-slash", "dot-slash", "dotdot", "absolute", "double-slash", "nested", "holding",
        "absolute-nested"])
def test_file_destinations_on_one_path_are_refused(tmp_path: Path, first: str, second: str, relation: str) -> None:
    second = second.format(cwd=tmp_path)
    found = problems_of(task(files(first, "a"), files(second, "b", mode="append")))
    assert len(found) == 1, found
    assert found[0].startswith("destinations[1].params.path: ")
    assert f"is {relation} destinations[0].params.path;" in found[0]


def test_the_key_paths_survive_a_long_path(tmp_path: Path) -> None:
    deep = "/".join(["a-rather-long-directory-name"] * 20)
    (found,) = problems_of(task(files(deep, "a"), files(deep + "/inner", "b")))
    assert found.startswith("destinations[1].params.path: is inside the path of destinations[0].params.path;")


def test_a_symlinked_spelling_of_the_same_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (found,) = problems_of(task(files("real/out", "a"), files("link/out", "b")))
    assert found.startswith("destinations[1].params.path: ") and "destinations[0]" in found


def test_every_clash_is_named(tmp_path: Path) -> None:
    found = problems_of(task(files("out", "a"), files("other", "b"), files("out/in", "c"),
                             sqlite("other/db.sqlite", "d")))
    assert len(found) == 2, found
    assert found[0].startswith("destinations[2].params.path: ") and "destinations[0].params.path" in found[0]
    assert found[1].startswith("destinations[3].params.path: ") and "destinations[1].params.path" in found[1]


def test_a_sqlite_file_inside_a_file_destination_is_refused() -> None:
    (found,) = problems_of(task(sqlite("out/db.sqlite"), files("out")))
    assert found.startswith("destinations[1].params.path: ")
    assert "is a directory holding the path of destinations[0].params.path" in found
    assert found.endswith("(" + str(Path("out/db.sqlite").resolve()) + " is in " + str(Path("out").resolve()) + ")")


def test_two_sqlite_destinations_on_one_file_are_reported_once() -> None:
    (found,) = problems_of(task(sqlite("out/db.sqlite", "a"), sqlite("./out/db.sqlite", "b", table="u")))
    assert "admits one writing destination" in found


@pytest.mark.parametrize("second", ["out/xy", "out/x.csv", "out/y", "elsewhere/x", ".out.x"])
def test_siblings_and_shared_prefixes_are_fine(second: str) -> None:
    spec = TaskSpec.from_mapping(task(files("out/x", "a"), files(second, "b"), sqlite("out/db.sqlite")))
    assert [d.id for d in spec.destinations] == ["a", "b", "s"]


def test_paths_resolve_against_the_working_directory(tmp_path: Path) -> None:
    raw = task(files("x", "a"), files(str(tmp_path / "elsewhere" / "x"), "b"))
    TaskSpec.from_mapping(raw)
    os.chdir(tmp_path / ".")  # the same directory: still fine
    (tmp_path / "elsewhere").mkdir()
    os.chdir(tmp_path / "elsewhere")
    (found,) = problems_of(raw)  # now "x" is <tmp>/elsewhere/x
    assert "is the same path as destinations[0].params.path" in found

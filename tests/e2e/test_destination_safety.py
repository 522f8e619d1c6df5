"""What file and SQLite destinations may touch, through the CLI as a user runs it: overwrite replaces only
wormhole's own output, destinations may not share a path, a failed SQLite destination leaves no file it
created, and SQLite creates its directory and plain column types. Spark mode's overwrite rule is checked
on the test run's SparkSession (tests/spark/test_spark_file_overwrite.py), without a driver JVM per run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, run_task
from tests.plugin_helpers import tiny_tmpfs

pytestmark = pytest.mark.e2e


def stream(rows: int) -> dict[str, Any]:
    return {"plugin": "stream", "params": {"rows": rows, "splits": 2, "seed": 3}}


def files(dest_id: str, path: str, fmt: str = "jsonl", **params: Any) -> dict[str, Any]:
    return {"id": dest_id, "plugin": "file", "params": {"path": path, "format": fmt, **params}}


def sqlite_dest(dest_id: str, path: str) -> dict[str, Any]:
    return {"id": dest_id, "plugin": "sqlite", "params": {"path": path, "table": "t"}}


def jsonl_ids(path: Path) -> list[int]:
    return sorted(json.loads(line)["id"] for part in path.glob("part-*.jsonl")
                  for line in part.read_text(encoding="utf-8").splitlines())


def leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.wormhole-*")]


def unrelated(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "notes.txt").write_text("months of work\n", encoding="utf-8")
    return directory


class TestOverwrite:
    def test_a_directory_wormhole_did_not_write_fails_that_destination_alone(self, ws: Workspace) -> None:
        """Exit 202: the destination fails naming the path and the opt-in; the file is intact; the others commit."""
        target = unrelated(ws.root / "data")
        spec = {"source": stream(1000),
                "destinations": [files("keep", "data"), files("j", "out/j"), sqlite_dest("s", "out/db.sqlite")]}
        code, task, stderr = run_task(ws, spec)
        assert code == 202, stderr[-3000:]
        assert task["status"] == "partial"
        dests = task["result"]["destinations"]
        assert dests["keep"]["status"] == "failed" and dests["keep"]["rolled_back"] is True
        error = dests["keep"]["error"]
        assert str(target) in error and "notes.txt" in error and '"overwrite": "force"' in error
        assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
        assert (target / "notes.txt").read_text(encoding="utf-8") == "months of work\n"
        assert dests["j"]["status"] == dests["s"]["status"] == "success"
        assert jsonl_ids(ws.root / "out/j") == list(range(1000))
        assert leftovers(ws.root) == []

    def test_a_previous_wormhole_output_is_replaced(self, ws: Workspace) -> None:
        """The second run replaces the first run's parts (and a csv output by jsonl parts)."""
        for rows, fmt in ((1000, "csv"), (300, "jsonl"), (200, "jsonl")):
            code, _, stderr = run_task(ws, {"source": stream(rows),
                                            "destinations": [files("j", "out/j", fmt, header=True)
                                                             if fmt == "csv" else files("j", "out/j", fmt)]})
            assert code == 0, stderr[-3000:]
        names = sorted(p.name for p in (ws.root / "out/j").iterdir())
        assert names[0] == "_SUCCESS" and all(n.endswith(".jsonl") for n in names[1:]), names  # only jsonl parts
        assert jsonl_ids(ws.root / "out/j") == list(range(200))
        assert leftovers(ws.root) == []

    def test_force_replaces_any_directory(self, ws: Workspace) -> None:
        target = unrelated(ws.root / "data")
        code, _, stderr = run_task(ws, {"source": stream(100),
                                        "destinations": [files("d", "data", overwrite="force")]})
        assert code == 0, stderr[-3000:]
        names = sorted(p.name for p in target.iterdir())
        assert names[0] == "_SUCCESS" and all(n.startswith("part-") for n in names[1:]), names
        assert jsonl_ids(target) == list(range(100))

    @pytest.mark.parametrize("path", [".", "./", "out/.."])
    def test_the_working_directory_is_refused_at_validation(self, ws: Workspace, path: str) -> None:
        """Exit 204 before anything runs: the workspace (task db, conf) is untouched, even with force."""
        before = sorted(str(p) for p in ws.root.rglob("*"))
        spec = {"source": stream(10), "destinations": [files("d", path, overwrite="force")]}
        (ws.root / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        proc = ws.run("validate", "spec.json")
        assert proc.returncode == 204
        assert "destinations[0].params.path" in proc.stderr and "working directory" in proc.stderr
        code, task, _ = run_task(ws, spec)
        assert code == 204 and "destinations[0].params.path" in task["error"]
        assert sorted(str(p) for p in ws.root.rglob("*")) == sorted([*before, str(ws.root / "spec.json")])


class TestSharedPaths:
    @pytest.mark.parametrize(("first", "second", "relation"), [
        ("out/x", "./out/x/", "the same path as"),
        ("out/x", "out/y/../x", "the same path as"),
        ("out/x", "{root}/out/x", "the same path as"),
        ("out/x", "out/x/nested", "inside the path of"),
        ("out/x/db.sqlite", "out/x", "a directory holding the path of"),
    ], ids=["same", "dotdot", "absolute", "nested", "sqlite-inside"])
    def test_validate_refuses_two_destinations_on_one_path(self, ws: Workspace, first: str, second: str,
                                                           relation: str) -> None:
        """Exit 204 naming both destinations; a run of the task creates nothing."""
        second = second.format(root=ws.root)
        one = sqlite_dest("a", first) if first.endswith(".sqlite") else files("a", first)
        spec = {"source": stream(10), "destinations": [one, files("b", second, mode="append")]}
        (ws.root / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        proc = ws.run("validate", "spec.json")
        assert proc.returncode == 204, proc.stderr
        assert "destinations[1].params.path" in proc.stderr and "destinations[0].params.path" in proc.stderr
        assert relation in proc.stderr
        code, task, _ = run_task(ws, spec)
        assert code == 204 and "destinations[1].params.path" in task["error"]
        assert not (ws.root / "out").exists()


class TestSqlite:
    def test_a_created_file_is_removed_after_a_full_disk(self, ws: Workspace, tmp_path: Path) -> None:
        """The database file the run created, and its journal, are gone; the other destination commits."""
        with tiny_tmpfs(tmp_path / "tiny", size="2m") as full:
            spec = {"source": stream(300_000),
                    "destinations": [files("j", "out/j"), sqlite_dest("full", str(full / "db.sqlite"))]}
            code, task, stderr = run_task(ws, spec, timeout=120)
            assert code == 202, stderr[-3000:]
            dests = task["result"]["destinations"]
            assert dests["full"]["status"] == "failed" and "full" in dests["full"]["error"].lower()
            assert dests["full"]["rolled_back"] is True
            assert list(full.iterdir()) == []  # neither db.sqlite nor db.sqlite-journal
            assert dests["j"]["status"] == "success"

    def test_a_file_that_existed_is_kept_after_a_full_disk(self, ws: Workspace, tmp_path: Path) -> None:
        with tiny_tmpfs(tmp_path / "tiny", size="2m") as full:
            db = full / "db.sqlite"
            conn = sqlite3.connect(db)
            conn.execute("CREATE TABLE kept (id INTEGER)")
            conn.execute("INSERT INTO kept VALUES (42)")
            conn.commit()
            conn.close()
            code, _, stderr = run_task(ws, {"source": stream(300_000),
                                            "destinations": [files("j", "out/j"), sqlite_dest("full", str(db))]})
            assert code == 202, stderr[-3000:]
            conn = sqlite3.connect(db)
            try:
                assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("kept",)]
                assert conn.execute("SELECT * FROM kept").fetchall() == [(42,)]
            finally:
                conn.close()

    def test_missing_directories_are_created_and_types_are_plain(self, ws: Workspace) -> None:
        code, _, stderr = run_task(ws, {"source": stream(100),
                                        "destinations": [sqlite_dest("s", "out/a/b/c/db.sqlite")]})
        assert code == 0, stderr[-3000:]
        conn = sqlite3.connect(ws.root / "out/a/b/c/db.sqlite")
        try:
            info = conn.execute("PRAGMA table_info(t)").fetchall()
            assert [(name, declared) for _, name, declared, *_ in info] == [
                ("id", "INTEGER"), ("name", "TEXT"), ("amount", "REAL"), ("day", "DATE")]
            assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (100,)
        finally:
            conn.close()

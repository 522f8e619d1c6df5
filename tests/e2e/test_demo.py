"""The demo's table (scripts/demo.py) for a real run: a rolled-back destination never reads as committed."""

from __future__ import annotations

import importlib.util
import re
import sqlite3
from types import ModuleType

import pytest

from tests.conftest import REPO, Workspace

pytestmark = pytest.mark.e2e


def demo_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wormhole_demo", REPO / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_demo_table_says_a_rolled_back_destination_was_undone(ws: Workspace) -> None:
    """The demo's shape, smaller: csv and jsonl commit, sqlite writes rows, goes over its budget of 2 dirty
    rows and is rolled back. Its line says its rows were undone and why, never a plain written count."""
    spec = {
        "source": {"plugin": "stream", "params": {"rows": 60_000, "splits": 4, "seed": 42, "dirty_every": 10_000}},
        "destinations": [
            {"id": "csv_export", "plugin": "file", "params": {"path": "out/csv", "format": "csv"},
             "error_limit": {"record": 10}},
            {"id": "jsonl_lake", "plugin": "file", "params": {"path": "out/jsonl", "format": "jsonl"},
             "error_limit": {"percentage": 0.001}},
            {"id": "sqlite_report", "plugin": "sqlite", "params": {"path": "report.sqlite", "table": "orders"},
             "error_limit": {"record": 2}},
        ],
        "settings": {"speed": {"channel": 4}},
    }
    task_id = ws.submit(spec)
    code = ws.run("--task-id", str(task_id)).returncode
    task = ws.show(task_id)
    assert code == 202, task["result"]
    report = task["result"]["destinations"]["sqlite_report"]
    assert report["rolled_back"] and report["rows_written"] > 0, report  # rows were written, then undone

    table = demo_module().render(task, code)

    lines = {line.split()[0]: line for line in table.splitlines()[2:] if line and not line.startswith(" ")}
    rolled = lines["sqlite_report"]
    assert f"rolled back ({report['rows_written']:,} written, undone)" in rolled, table
    assert "record limit of 2" in rolled, table  # the error, briefly
    # The written count appears only inside "rolled back (... undone)", never as a bare column.
    assert re.sub(r"rolled back \([^)]*\)", "", rolled).count(f"{report['rows_written']:,}") == 0, table
    assert "committed" not in rolled, table
    for dest_id in ("csv_export", "jsonl_lake"):
        written = task["result"]["destinations"][dest_id]["rows_written"]
        assert f"committed ({written:,} written)" in lines[dest_id], table
        assert "rolled back" not in lines[dest_id], table


def test_the_manual_smallest_task_runs(ws: Workspace) -> None:
    """The manual's smallest task (docs/manual/tasks.md) promises: `wormhole run conf/examples/quickstart.json`
    exits 0 with the rows in a csv directory and a sqlite table (tests/unit/test_docs.py keeps the manual's
    copy equal)."""
    proc = ws.run("run", str(REPO / "conf" / "examples" / "quickstart.json"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = ws.root / "var" / "quickstart"
    assert (out / "orders_csv" / "_SUCCESS").is_file()
    csv_rows = sum(len(p.read_text(encoding="utf-8").splitlines()) - 1 for p in (out / "orders_csv").glob("part-*.csv"))
    with sqlite3.connect(out / "report.db") as conn:
        table_rows = conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    assert csv_rows == table_rows == 100_000

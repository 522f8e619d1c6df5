"""`wormhole --task-id N` as a user runs it: a subprocess, a task inserted by plain SQL, real files and SQLite."""

from __future__ import annotations

import csv
import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace, run_task
from tests.plugin_helpers import tiny_tmpfs

pytestmark = pytest.mark.e2e

ROWS = 1_000_000


def stream(rows: int, **extra: Any) -> dict[str, Any]:
    return {"plugin": "stream", "params": {"rows": rows, "splits": 4, "seed": 7, **extra}}


def jsonl(dest_id: str, path: str = "out/jsonl", **extra: Any) -> dict[str, Any]:
    return {"id": dest_id, "plugin": "file", "params": {"path": path, "format": "jsonl"}, **extra}


def csv_dest(dest_id: str, path: str = "out/csv", **extra: Any) -> dict[str, Any]:
    return {"id": dest_id, "plugin": "file", "params": {"path": path, "format": "csv"}, **extra}


def sqlite_dest(dest_id: str, path: str = "out/db.sqlite", **extra: Any) -> dict[str, Any]:
    return {"id": dest_id, "plugin": "sqlite", "params": {"path": path, "table": "t"}, **extra}


def canon(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """(id, name, amount, day) in one comparable form, whatever the store gave back."""
    rid, name, amount, day = row
    empty = ("", None, "\\N")  # csv writes NULL as \N
    return (int(rid), name if name not in empty else None,
            float(amount) if amount not in empty else None, str(day) if day not in empty else None)


def read_jsonl(path: Path) -> list[tuple[Any, ...]]:
    rows = []
    for part in sorted(path.glob("*.jsonl")):
        with part.open(encoding="utf-8") as f:
            rows.extend(canon((o["id"], o["name"], o["amount"], o["day"])) for o in map(json.loads, f))
    return rows


def read_csv(path: Path) -> list[tuple[Any, ...]]:
    rows = []
    for part in sorted(path.glob("*.csv")):
        with part.open(encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            assert next(reader) == ["id", "name", "amount", "day"]
            rows.extend(canon(tuple(r)) for r in reader)
    return rows


def read_sqlite(path: Path, table: str = "t") -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return [canon(r) for r in conn.execute(f"SELECT id, name, amount, day FROM {table}")]
    finally:
        conn.close()


def expected_rows(rows: int, seed: int = 7) -> list[tuple[Any, ...]]:
    """What the stream source generates, produced in-process by the same plugin."""
    from tests.plugin_helpers import tuples_of
    from wormhole.plugins.base import ReadContext
    from wormhole.plugins.stream import StreamReader, StreamReaderOptions, StreamSplitter

    options = StreamReaderOptions(rows=rows, seed=seed)
    ctx = ReadContext(task_id=0, run_id=0, batch_rows=4096, dirty=None)  # type: ignore[arg-type]
    src = StreamReader(options, ctx)
    return [canon(r) for s in StreamSplitter(options, ctx).split(1) for b in src.read(s) for r in tuples_of(b)]


def sqlite_tables(path: Path) -> list[str]:
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    finally:
        conn.close()


def leftovers(root: Path) -> list[str]:
    """Temporary directories a file destination left behind (there must be none)."""
    return [str(p) for p in root.rglob("*.wormhole-*")]


class TestFanOut:
    def test_million_rows_to_three_destinations(self, ws: Workspace) -> None:
        """1M rows to jsonl, csv and sqlite: every id once everywhere, same contents, read once, exit 0."""
        spec = {"name": "fan-out", "source": stream(ROWS),
                "destinations": [jsonl("j", concurrency=2), csv_dest("c"), sqlite_dest("s")]}
        code, task, stderr = run_task(ws, spec)
        assert code == 0, stderr[-3000:]
        assert task["status"] == "success" and task["result"]["exit_code"] == 0
        assert task["runs"][-1]["status"] == "success"
        result = task["result"]
        assert result["source"]["rows_read"] == ROWS  # read once, not once per destination
        for dest in ("j", "c", "s"):
            assert result["destinations"][dest]["rows_written"] == ROWS
            assert result["destinations"][dest]["status"] == "success"
        expected = sorted(expected_rows(ROWS))
        for got in (read_jsonl(ws.root / "out/jsonl"), read_csv(ws.root / "out/csv"),
                    read_sqlite(ws.root / "out/db.sqlite")):
            assert len(got) == ROWS
            assert sorted(got) == expected
        assert (ws.root / "out/jsonl/_SUCCESS").exists()
        assert leftovers(ws.root) == []
        finished = [e for e in log_events(stderr) if e["event"] == "task.finished"]
        assert len(finished) == 1 and finished[0]["destinations"]["s"]["written"] == ROWS
        assert finished[0]["task_id"] and finished[0]["run_id"]


def failing_fanout(**settings: Any) -> dict[str, Any]:
    """200,000 rows to jsonl, sqlite and a sink that breaks after 50,000 rows."""
    return {"source": stream(200_000), "settings": settings,
            "destinations": [jsonl("j"), {"id": "bad", "plugin": "stream", "params": {"fail_after": 50_000}},
                             sqlite_dest("s")]}


class TestFailureIsolation:
    def test_failing_destination_is_rolled_back_alone(self, ws: Workspace) -> None:
        """A sink failing mid-run: exit 202, partial, it alone fails; the others are complete."""
        code, task, stderr = run_task(ws, failing_fanout(), timeout=120)
        assert code == 202, stderr[-3000:]
        assert task["status"] == "partial"
        dests = task["result"]["destinations"]
        assert dests["bad"]["status"] == "failed" and dests["bad"]["rolled_back"] is True
        assert "fail after 50000 rows" in dests["bad"]["error"]
        assert "bad" in task["error"]
        assert sorted(read_jsonl(ws.root / "out/jsonl")) == sorted(expected_rows(200_000))
        assert len(read_sqlite(ws.root / "out/db.sqlite")) == 200_000

    def test_sqlite_destination_on_a_full_disk(self, ws: Workspace, tmp_path: Path) -> None:
        """A SQLite target whose disk fills up mid-run fails alone and leaves no table behind."""
        with tiny_tmpfs(tmp_path / "tiny", size="2m") as full:
            spec = {"source": stream(300_000),
                    "destinations": [jsonl("j"), sqlite_dest("full", path=str(full / "db.sqlite")), csv_dest("c")]}
            code, task, stderr = run_task(ws, spec, timeout=120)
            assert code == 202, stderr[-3000:]
            dests = task["result"]["destinations"]
            assert dests["full"]["status"] == "failed"
            assert "full" in dests["full"]["error"].lower()
            assert dests["full"]["rolled_back"] is True
            assert "t" not in sqlite_tables(full / "db.sqlite")
            assert len(read_jsonl(ws.root / "out/jsonl")) == 300_000
            assert len(read_csv(ws.root / "out/csv")) == 300_000

    def test_all_or_nothing_rolls_back_everything(self, ws: Workspace) -> None:
        """With consistency all_or_nothing the same failure rolls back every destination: exit 203."""
        code, task, stderr = run_task(ws, failing_fanout(consistency="all_or_nothing"), timeout=120)
        assert code == 203, stderr[-3000:]
        assert task["status"] == "failed"
        dests = task["result"]["destinations"]
        assert dests["bad"]["status"] == "failed"
        assert dests["j"]["status"] == dests["s"]["status"] == "rolled_back"
        assert "all_or_nothing" in dests["j"]["error"]
        assert not (ws.root / "out/jsonl").exists()
        assert "t" not in sqlite_tables(ws.root / "out/db.sqlite")
        assert leftovers(ws.root) == []


class TestDirtyRows:
    def spec(self, *dests: dict[str, Any]) -> dict[str, Any]:
        # 10 dirty rows in 10,000 (0.1%): ids 999, 1999, ..., 9999
        return {"source": stream(10_000, dirty_every=1000), "destinations": list(dests)}

    def test_within_every_limit_exits_201(self, ws: Workspace) -> None:
        """Rejected rows within the record and percentage limits: success, exit 201, rows in the dirty file."""
        code, task, stderr = run_task(ws, self.spec(
            jsonl("rec", error_limit={"record": 10}),
            csv_dest("pct", error_limit={"percentage": 0.001})))
        assert code == 201, stderr[-3000:]
        assert task["status"] == "success"
        for dest in ("rec", "pct"):
            assert task["result"]["destinations"][dest]["rows_rejected"] == 10
            assert task["result"]["destinations"][dest]["rows_written"] == 9_990
        assert len(read_jsonl(ws.root / "out/jsonl")) == 9_990
        lines = [json.loads(line) for line in Path(ws.root / task["result"]["dirty_file"]).read_text().splitlines()]
        assert len(lines) == 20
        assert sorted(line["row"][0] for line in lines if line["origin"] == "rec") == list(range(999, 10_000, 1000))
        for line in lines:
            assert "surrogate" in line["reason"]
            assert line["row"][1].startswith("dirty-")

    def test_over_the_limits_fails_those_destinations(self, ws: Workspace) -> None:
        """One rejected row over the record limit, or a share over the percentage, fails that destination only."""
        code, task, stderr = run_task(ws, self.spec(
            jsonl("ok", error_limit={"record": 10}),
            csv_dest("rec", error_limit={"record": 9}),
            sqlite_dest("pct", error_limit={"percentage": 0.0009})))
        assert code == 202, stderr[-3000:]
        dests = task["result"]["destinations"]
        assert dests["ok"]["status"] == "success"
        assert dests["rec"]["status"] == "failed" and "record limit of 9" in dests["rec"]["error"]
        assert dests["pct"]["status"] == "failed" and "percentage limit" in dests["pct"]["error"]
        assert not (ws.root / "out/csv").exists()
        assert "t" not in sqlite_tables(ws.root / "out/db.sqlite")

    def test_default_budget_is_zero(self, ws: Workspace) -> None:
        """With no limit anywhere, the engine default (record = 0) fails a destination on its first bad row."""
        code, task, _ = run_task(ws, self.spec(jsonl("j")))
        assert code == 203
        assert "record limit of 0" in task["result"]["destinations"]["j"]["error"]


class TestBadTasks:
    @pytest.mark.parametrize(("spec", "path"), [
        ({"destinations": [{"id": "a", "plugin": "file", "params": {"path": "out/x", "format": "csv"}}]}, "source"),
        ({"source": stream(10), "destinations": [{"id": "a", "plugin": "nosuch", "params": {}}]},
         "destinations[0].plugin"),
        ({"source": {"plugin": "stream", "params": {"rows": "many"}},
          "destinations": [{"id": "a", "plugin": "file", "params": {"path": "out/x", "format": "csv"}}]},
         "source.params.rows"),
        ({"source": stream(10), "destinations": [
            {"id": "a", "plugin": "file", "params": {"path": "out/x", "format": "csv"}},
            {"id": "a", "plugin": "file", "params": {"path": "out/y", "format": "csv"}}]}, "destinations[1].id"),
        ({"source": stream(10), "destinations": [
            {"id": "a", "plugin": "file", "params": {"path": "out/x", "format": "csv", "colour": "red"}}]},
         "destinations[0].params.colour"),
        ('{"source": {"plugin": "stream", ', "malformed JSON"),
    ], ids=["missing-source", "unknown-plugin", "wrong-type", "duplicate-id", "unknown-key", "malformed-json"])
    def test_bad_task_exits_204_naming_the_key(self, ws: Workspace, spec: Any, path: str) -> None:
        """A bad task exits 204, names the key path in the log and the task row, and writes nothing."""
        code, task, stderr = run_task(ws, spec)
        assert code == 204
        assert path in stderr
        assert task["status"] == "failed" and path in task["error"]
        assert task["runs"][-1]["exit_code"] == 204
        assert not (ws.root / "out").exists()

    def test_unknown_task_id_exits_204(self, ws: Workspace) -> None:
        """A task id that does not exist exits 204 with a message saying so."""
        proc = ws.run("--task-id", "4242")
        assert proc.returncode == 204
        assert "no task with id 4242" in proc.stderr


class TestProcesses:
    def test_two_processes_one_task(self, ws: Workspace) -> None:
        """Two processes started for one task: exactly one runs it, the other exits 205 and says why."""
        task_id = ws.submit({"source": stream(2_000_000),
                             "destinations": [{"id": "n", "plugin": "stream", "params": {"delay_ms": 2}}]})
        procs = [ws.popen("--task-id", str(task_id)) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        codes = sorted(p.returncode for p in procs)
        assert codes == [0, 205], [o[1][-2000:] for o in outs]
        loser = outs[[p.returncode for p in procs].index(205)][1]
        assert "task.claim_refused" in loser and "running" in loser
        task = ws.show(task_id)
        assert task["attempts"] == 1 and len(task["runs"]) == 1

    def test_sigterm_rolls_back_and_records_the_run(self, ws: Workspace) -> None:
        """SIGTERM mid-run: exit within 10 s, every destination rolled back, the run recorded as interrupted."""
        task_id = ws.submit({"source": stream(100_000_000), "destinations": [jsonl("j"), sqlite_dest("s")]})
        proc = ws.popen("--task-id", str(task_id))
        deadline = time.monotonic() + 60
        while not leftovers(ws.root) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # well into the transfer
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 10
        assert proc.returncode == 203, stderr[-2000:]
        task = ws.show(task_id)
        assert task["status"] == "failed" and "SIGTERM" in task["error"]
        assert task["runs"][-1]["status"] == "interrupted"
        assert task["result"]["interrupted"] is True
        assert all(d["rolled_back"] for d in task["result"]["destinations"].values())
        assert not (ws.root / "out/jsonl").exists()
        assert leftovers(ws.root) == []
        assert "t" not in sqlite_tables(ws.root / "out/db.sqlite")


@pytest.mark.mysql
class TestMySqlTaskDb:
    def test_same_flow_with_the_task_db_on_mariadb(self, tmp_path: Path, mysql_db: str) -> None:
        """db init, a raw INSERT, a run, the result row and a claim refusal, with the task DB on MariaDB."""
        ws = make_workspace(tmp_path, task_db=mysql_db)
        ws.run("db", "init", check=True)  # idempotent
        spec = {"source": stream(300_000, dirty_every=100_000),
                "destinations": [jsonl("j", error_limit={"record": 3}), csv_dest("c", error_limit={"record": 2}),
                                 sqlite_dest("s", error_limit={"record": 3})]}
        code, task, stderr = run_task(ws, spec)
        assert code == 202, stderr[-3000:]
        assert task["status"] == "partial" and task["attempts"] == 1
        dests = task["result"]["destinations"]
        assert dests["j"]["rows_written"] == dests["s"]["rows_written"] == 299_997
        assert dests["c"]["status"] == "failed"
        assert len(read_sqlite(ws.root / "out/db.sqlite")) == 299_997
        assert ws.run("--task-id", str(task["id"])).returncode == 205
        assert ws.run("task", "retry", str(task["id"])).returncode == 0
        listed = ws.run("task", "list", "--status", "pending", check=True).stdout
        assert f"{task['id']:>6}  pending" in listed

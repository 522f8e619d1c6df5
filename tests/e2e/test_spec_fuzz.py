"""Fuzz: thousands of mutated task specs through `wormhole validate` and through real runs.

Seeded and repeatable (``WORMHOLE_FUZZ_SEED``, ``WORMHOLE_FUZZ_SPECS`` to widen a local run). The CLI
runs in-process through click's runner, the way the console script calls it, so thousands of cases
take seconds. What must hold for every case:

- no traceback, ever, on stdout or stderr;
- ``validate`` exits 0 or 204, nothing else;
- an invalid spec run through ``wormhole run`` exits 204, records nothing, creates no output;
- a spec inserted into the task table as an upstream system would, then run with ``--task-id``,
  never leaves its row ``running``, and an invalid one ends ``failed`` with exit 204.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from wormhole.cli import cli
from wormhole.config import TaskSpec
from wormhole.errors import InvalidTaskConfig

pytestmark = pytest.mark.e2e

SEED = int(os.environ.get("WORMHOLE_FUZZ_SEED", "20261123"))
VALIDATE_SPECS = int(os.environ.get("WORMHOLE_FUZZ_SPECS", "2000"))
RUN_SPECS = max(1, VALIDATE_SPECS // 8)

OUT = "out"
"""Every path a base spec names lies under this directory of the case's working directory."""

BASES: list[dict[str, Any]] = [
    {"name": "fan-out", "source": {"plugin": "stream", "params": {"rows": 300, "splits": 3, "seed": 7,
                                                                  "dirty_every": 100}},
     "destinations": [
         {"id": "csv", "plugin": "file", "params": {"path": f"{OUT}/csv", "format": "csv"},
          "error_limit": {"record": 5}},
         {"id": "db", "plugin": "sqlite", "params": {"path": f"{OUT}/t.db", "table": "t", "write_mode": "upsert",
                                                      "key": ["id"]}, "concurrency": 1},
         {"id": "null", "plugin": "stream", "params": {"fail_after": 1000, "delay_ms": 0}}],
     "settings": {"engine": "local", "consistency": "isolated", "speed": {"channel": 2},
                  "error_limit": {"record": 3, "percentage": 0.5}}},
    {"name": "typed", "source": {"plugin": "stream", "params": {"rows": 50, "columns": [
        {"name": "id", "type": "int"}, {"name": "s", "type": "string"}, {"name": "d", "type": "decimal"},
        {"name": "t", "type": "datetime"}, {"name": "j", "type": "json"}, {"name": "b", "type": "bytes"}]}},
     "destinations": [{"id": "jsonl", "plugin": "file", "params": {"path": f"{OUT}/j", "format": "jsonl",
                                                                   "mode": "append"}},
                      {"id": "pq", "plugin": "file", "params": {"path": f"{OUT}/p", "format": "parquet"}}],
     "settings": {"consistency": "all_or_nothing"}},
    # Validated only (a run would reach for a server): the widest option sets.
    {"name": "mysql", "source": {"plugin": "mysql", "params": {
        "host": "127.0.0.1", "port": 3306, "user": "etl", "password_env": "PW", "database": "shop",
        "table": "orders", "columns": ["id", "amount"], "where": "id > 0", "split_pk": "id", "split_factor": 5,
        "estimate": "stats", "zero_dates": "keep"}},
     "destinations": [{"id": "rpt", "plugin": "mysql", "params": {
         "host": "127.0.0.1", "user": "etl", "password": "pw", "database": "rpt", "table": "orders",
         "write_mode": "upsert", "load": "staging", "method": "insert", "batch_size": 100, "retries": 2,
         "pre_sql": ["SELECT 1"], "post_sql": ["SELECT 1"]}},
         {"id": "hive", "plugin": "hive", "params": {"table": "dw.orders", "mode": "overwrite"}}],
     "settings": {"engine": "spark"}},
]
RUNNABLE = BASES[:2]

INTERESTING: list[Any] = [
    None, True, False, 0, -1, 1, 2, 7, 4096, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**30, 0.5, -0.0, 1e300,
    -1e300, 3.5e-320, "", " ", "\t", "x", "id", "csv", "insert", "overwrite", "append", "force", "local", "spark",
    "auto", "é☃𝄞", "\x00", "a" * 3000, "CSV", "Id", "t", [], [1], ["id"], [[]], {}, {"a": 1}, {"name": "id"},
    {"name": "x", "type": "int"},
]

PLUGINS = ["stream", "file", "sqlite", "mysql", "hive", "nosuch", "FILE", ""]


def _containers(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, (dict, list)):
        yield path, node
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            yield from _containers(child, (*path, key))


def _deep(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def mutate_tree(rng: random.Random, spec: dict[str, Any]) -> Any:
    doc: Any = copy.deepcopy(spec)
    for _ in range(rng.randint(1, 3)):
        containers = list(_containers(doc))
        if not containers:
            return doc
        _path, node = rng.choice(containers)
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        action = rng.randrange(9)
        if action == 0 and keys:  # drop a key or an item
            del node[rng.choice(keys)]
        elif action in (1, 2, 3) and keys:  # a surprising value
            node[rng.choice(keys)] = copy.deepcopy(rng.choice(INTERESTING))
        elif action == 4 and isinstance(node, dict):  # an unknown key
            node[rng.choice(["extra", "Path", "passwd", "id", "params", "settings"])] = rng.choice(INTERESTING)
        elif action == 5 and keys:  # nesting, sometimes past the limit
            node[rng.choice(keys)] = _deep(rng.choice([3, 30, 70, 400]))
        elif action == 6 and isinstance(node, dict) and "plugin" in node:
            node["plugin"] = rng.choice(PLUGINS)
        elif action == 7 and isinstance(node, list) and node:  # duplicate an item (two destinations alike)
            node.append(copy.deepcopy(rng.choice(node)))
        elif action == 8 and isinstance(node, dict) and "id" in node and isinstance(node["id"], str):
            node["id"] = node["id"].upper()
        if rng.random() < 0.02:
            doc = rng.choice([[], "text", 42, None, [doc]])
    return doc


def mutate_text(rng: random.Random, text: str) -> bytes:
    data = bytearray(text.encode("utf-8"))
    action = rng.randrange(6)
    pos = rng.randrange(len(data) + 1)
    if action == 0:
        del data[pos:]
    elif action == 1:
        data[pos:pos] = bytes([rng.choice([0xFF, 0xC3, 0x80, 0xED, 0x00])])
    elif action == 2:
        data[pos:pos] = rng.choice([b"NaN", b"-Infinity", b"\\ud800", b'"\\uDC00"', b"1e999", b"9" * 5000])
    elif action == 3:
        data[pos:pos] = b"[" * rng.choice([10, 65, 5000])
    elif action == 4:
        data = bytearray(b"\xef\xbb\xbf") + data  # a BOM: accepted
    elif data:
        data[min(pos, len(data) - 1)] = rng.randrange(256)
    return bytes(data)


def cases(count: int, bases: list[dict[str, Any]], seed: int) -> Iterator[tuple[int, bytes]]:
    rng = random.Random(seed)
    for i in range(count):
        doc = mutate_tree(rng, rng.choice(bases))
        text = json.dumps(doc, ensure_ascii=rng.random() < 0.5)
        yield i, mutate_text(rng, text) if rng.random() < 0.25 else text.encode("utf-8")


def _is_valid(data: bytes) -> bool:
    try:
        TaskSpec.from_json(data)
    except InvalidTaskConfig:
        return False
    return True


def _check_clean(result: Any, case: int, data: bytes) -> None:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, f"case {case}: {data[:300]!r}\n{output[-3000:]}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"case {case} raised {result.exception!r}: {data[:300]!r}") from result.exception


def test_validate_never_crashes_on_mutated_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    codes: dict[int, int] = {}
    for case, data in cases(VALIDATE_SPECS, BASES, SEED):
        path = tmp_path / "spec.json"
        path.write_bytes(data)
        result = runner.invoke(cli, ["--log-format", "json", "validate", str(path)])
        _check_clean(result, case, data)
        assert result.exit_code in (0, 204), f"case {case}: exit {result.exit_code}\n{result.output}"
        codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]  # validate writes nothing
    # The generator must exercise both outcomes, or the test proves little.
    print("validate outcomes", codes)
    assert codes.get(0, 0) >= VALIDATE_SPECS // 50 and codes.get(204, 0) >= VALIDATE_SPECS // 2, codes


def _too_heavy(data: bytes) -> bool:
    """A valid mutant that would run for long (many rows, slow sinks): validated, not run."""
    doc = json.loads(data.decode("utf-8-sig"))
    params = doc["source"]["params"]
    if doc["source"]["plugin"] != "stream" or params.get("rows", 0) > 5000 or params.get("splits", 1) > 64:
        return True
    speed = (doc.get("settings") or {}).get("speed") or {}
    if speed.get("record") is not None or speed.get("byte") is not None:  # a speed limit: as slow as it says
        return True
    return any((d.get("params") or {}).get("delay_ms", 0) > 5 for d in doc["destinations"])


def test_runs_of_mutated_specs_end_with_a_documented_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "engine.toml").write_text("[monitor]\ninterval_s = 0.02\n[timeouts]\nshutdown_s = 2.0\n")
    outcomes: dict[str, int] = {}
    for case, data in cases(RUN_SPECS, RUNNABLE, SEED + 1):
        work = tmp_path / f"case-{case}"
        work.mkdir()
        monkeypatch.chdir(work)
        (work / "spec.json").write_bytes(data)
        valid = _is_valid(data)
        if valid and _too_heavy(data):
            outcomes["skipped_heavy"] = outcomes.get("skipped_heavy", 0) + 1
            continue
        db = f"sqlite:///{work}/var/tasks.db"
        if case % 2 == 0:  # the one-step run
            result = runner.invoke(cli, ["--log-format", "json", "--conf", str(conf), "--task-db", db, "run",
                                         "spec.json"])
            _check_clean(result, case, data)
            if not valid:
                assert result.exit_code == 204, f"case {case}: exit {result.exit_code}\n{result.output}"
                assert sorted(p.name for p in work.iterdir()) == ["spec.json"], f"case {case} left output"
                outcomes["invalid_run"] = outcomes.get("invalid_run", 0) + 1
                continue
        else:  # an upstream INSERT of the raw bytes, then `wormhole --task-id`
            assert runner.invoke(cli, ["--task-db", db, "db", "init"]).exit_code == 0
            conn = sqlite3.connect(work / "var" / "tasks.db")
            with conn:
                conn.execute("INSERT INTO wormhole_task (name, spec) VALUES ('fuzz', ?)", (data,))
            conn.close()
            result = runner.invoke(cli, ["--log-format", "json", "--conf", str(conf), "--task-db", db,
                                         "--task-id", "1"])
            _check_clean(result, case, data)
            conn = sqlite3.connect(work / "var" / "tasks.db")
            status = conn.execute("SELECT status FROM wormhole_task WHERE id = 1").fetchone()[0]
            conn.close()
            assert status != "running", f"case {case}: row left running"
            if not valid:
                assert (result.exit_code, status) == (204, "failed"), f"case {case}: {result.output}"
                assert not (work / OUT).exists(), f"case {case}: an invalid spec created output"
                outcomes["invalid_row"] = outcomes.get("invalid_row", 0) + 1
                continue
        assert result.exit_code in (0, 201, 202, 203), f"case {case}: exit {result.exit_code}\n{result.output}"
        outcomes[f"exit_{result.exit_code}"] = outcomes.get(f"exit_{result.exit_code}", 0) + 1
    print("run outcomes", outcomes)
    ran = sum(v for k, v in outcomes.items() if k.startswith("exit_"))
    assert ran >= RUN_SPECS // 10 and outcomes.get("invalid_run", 0) and outcomes.get("invalid_row", 0), outcomes

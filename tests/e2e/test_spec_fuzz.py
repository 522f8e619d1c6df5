"""Fuzz: thousands of shape-mutated task specs through validation, `wormhole validate` and real runs.

Seeded and repeatable (``WORMHOLE_FUZZ_SEED``, ``WORMHOLE_FUZZ_SPECS`` to widen a local run). The bases
cover every store's options and every transform operator; a mutant has keys deleted, written twice or
renamed with control characters, arrays and objects in place of objects and scalars, NUL and control
characters in strings, huge numbers, deep nesting, or broken bytes. What must hold for every case:

- validation, called in process (12,000 specs in seconds), accepts the spec or lists problems, and never
  trips over it ("cannot be validated ... please report this as a wormhole bug");
- no traceback, ever, on stdout or stderr; ``validate`` exits 0 or 204, nothing else;
- an invalid spec run through ``wormhole run`` exits 204, records nothing, creates no output;
- a spec inserted into the task table as an upstream system would, then run with ``--task-id``,
  never leaves its row ``running``, and an invalid one ends ``failed`` with exit 204;
- a valid spec's run ends with a run's exit code (0, 201, 202, 203), never 204: whatever validation
  could know, it checked.
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
from wormhole.config import EngineConf
from wormhole.errors import InvalidTaskConfig
from wormhole.planning.channels import speed_limits
from wormhole.task_spec import TaskSpec

pytestmark = pytest.mark.e2e

SEED = int(os.environ.get("WORMHOLE_FUZZ_SEED", "20261123"))
VALIDATE_SPECS = int(os.environ.get("WORMHOLE_FUZZ_SPECS", "12000"))
CLI_SPECS = max(1, VALIDATE_SPECS // 40)
RUN_SPECS = max(1, VALIDATE_SPECS // 48)

OUT = "out"
"""Every path a base spec names lies under this directory of the case's working directory."""

EVERY_OPERATOR: list[dict[str, Any]] = [
    {"filter": "id > 1 AND name IS NOT NULL"}, {"project": {"drop": ["day"]}}, {"rename": {"name": "who"}},
    {"cast": {"amount": "decimal", "id": "string"}}, {"derive": {"n": "length(who) + 1", "up": "upper(who)"}},
    {"mask": {"columns": ["who"], "method": "partial", "keep": 2}},
    {"mask": {"columns": ["up"], "method": "redact", "with": "#"}}, {"project": {"keep": ["id", "who", "n"]}},
]
"""Every operator and every mask method, valid over the stream source's default columns."""

BASES: list[dict[str, Any]] = [
    {"name": "fan-out", "source": {"plugin": "stream", "params": {"rows": 300, "splits": 3, "seed": 7,
                                                                  "dirty_every": 100}},
     "transforms": EVERY_OPERATOR[:3],
     "destinations": [
         {"id": "csv", "plugin": "file", "params": {"path": f"{OUT}/csv", "format": "csv"},
          "error_limit": {"record": 5}},
         {"id": "db", "plugin": "sqlite", "params": {"path": f"{OUT}/t.db", "table": "t", "write_mode": "upsert",
                                                      "key": ["id"]}, "concurrency": 1,
          "transforms": [{"mask": {"columns": ["who"], "method": "partial", "keep": 2}}]},
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
    # Validated only (a run would reach for a server or a file): the widest option sets of every store.
    {"name": "every-operator", "source": {"plugin": "stream", "params": {"rows": 10}},
     "transforms": EVERY_OPERATOR,
     "destinations": [{"id": "s", "plugin": "stream", "params": {}, "transforms": [
         {"filter": "n BETWEEN 1 AND 9 OR who LIKE 'a%' OR id IN (1, 2)"}, {"cast": {"n": "float"}},
         {"derive": {"c": "CASE WHEN n > 1 THEN coalesce(who, 'x') ELSE substr(up, 1, 2) END"}},
         {"mask": {"columns": ["who"], "method": "hash", "salt_env": "PATH"}}]}],
     "settings": {"pushup": "adaptive"}},
    {"name": "files", "source": {"plugin": "file", "params": {
        "path": "in/*.csv", "format": "csv", "header": False, "delimiter": ";", "null": "\\N",
        "columns": [{"name": "id", "type": "int"}, {"name": "v", "type": "string"}]}},
     "transforms": [{"filter": "v != 'x'"}],
     "destinations": [{"id": "f", "plugin": "file", "params": {
         "path": f"{OUT}/f", "format": "csv", "mode": "overwrite", "overwrite": "force", "header": False,
         "delimiter": "|", "null": "NULL"}},
         {"id": "lite", "plugin": "sqlite", "params": {"path": f"{OUT}/l.db", "table": "t", "columns": ["id", "v"],
                                                        "write_mode": "insert", "create": False}}]},
    {"name": "mysql", "source": {"plugin": "mysql", "params": {
        "host": "127.0.0.1", "port": 3306, "user": "etl", "password_env": "PW", "database": "shop",
        "table": "orders", "columns": ["id", "amount"], "where": "id > 0", "split_pk": "id", "split_factor": 5,
        "estimate": "stats", "count_timeout_s": 5, "zero_dates": "keep", "connect_timeout_s": 2.5,
        "connect_retries": 2}},
     "transforms": [{"filter": "amount > 1"}],
     "destinations": [{"id": "rpt", "plugin": "mysql", "params": {
         "host": "127.0.0.1", "user": "etl", "password": "pw", "database": "rpt", "table": "orders",
         "columns": ["id", "amount"], "write_mode": "upsert", "load": "staging", "method": "insert",
         "batch_size": 100, "pre_sql": ["SELECT 1"], "post_sql": ["SELECT 1"], "rollback_sql": ["SELECT 2"],
         "staging_table": "orders_stage", "strict": True}},
         {"id": "hive", "plugin": "hive", "params": {"table": "dw.orders", "mode": "overwrite",
                                                     "partition": {"dt": "2026-01-01", "h": 3}, "create": True}}],
     "settings": {"engine": "spark"}},
    {"name": "shards", "source": {"plugin": "mysql", "params": {
        "user": "etl", "password": "pw", "query": "SELECT id FROM t", "connections": [
            {"host": "h1", "port": 3307, "database": "a", "user": "u", "password_env": "PW1"},
            {"host": "h2", "database": "b", "password": "x"}]}},
     "destinations": [{"id": "m", "plugin": "mysql", "params": {
         "user": "etl", "database": "d", "table": "t", "write_mode": "insert", "load": "truncate",
         "method": "load_data", "verify": "count"}}]},
    {"name": "lake", "source": {"plugin": "hive", "params": {"table": "dw.src", "columns": ["id", "v"],
                                                             "where": "id > 0"}},
     "destinations": [{"id": "lite", "plugin": "sqlite", "params": {"path": f"{OUT}/x.db", "table": "t"}}],
     "settings": {"engine": "auto", "speed": {"byte": 1000, "record": 10, "channel_byte": 100,
                                              "channel_record": 5}}},
    {"name": "sqlite", "source": {"plugin": "sqlite", "params": {"path": "in.db", "table": "t",
                                                                 "columns": ["id", "v"], "where": "id > 0"}},
     "transforms": [{"filter": "id > 1"}, {"project": ["id"]}],
     "destinations": [{"id": "p", "plugin": "file", "params": {"path": f"{OUT}/p", "format": "parquet"}}],
     "settings": {"pushup": "off"}},
]
RUNNABLE = BASES[:2]

HUGE = [2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 10**400, 1e308, -1e308, 5e-324, 1.7976931348623157e308]
CONTROL = ["\x00", "\x01", "\x1b", "\x7f", "\n", "\r", "\t", "\u2028", "\ufeff", "\x85"]

INTERESTING: list[Any] = [
    None, True, False, 0, -1, 1, 2, 7, 4096, 2**31, 2**63 - 1, 0.5, -0.0, 3.5e-320, *HUGE, "", " ", "\t", "x",
    "id", "csv", "insert", "overwrite", "append", "force", "local", "spark", "auto", "int", "string", "partial",
    "é☃𝄞", "\x00", "a\x00b", "out/\x00x", "a" * 3000, f"id > {'9' * 5000}", "id > 1e999", "id IN (" * 70, "CSV",
    "Id", "t", [], [1], ["id"], [[]], [{}], [None], {}, {"a": 1}, {"name": "id"}, {"name": "x", "type": "int"},
    {"": []},
]

PLUGINS = ["stream", "file", "sqlite", "mysql", "hive", "nosuch", "FILE", ""]


class Pairs:
    """A JSON object written with its keys as given, duplicates included (a dict cannot hold them)."""

    def __init__(self, items: list[tuple[str, Any]]) -> None:
        self.items = items


def _containers(doc: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """Every object and array of ``doc`` with its path (iterative: mutants nest 400 deep)."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, (dict, list)):
            out.append((path, node))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(((*path, key), child) for key, child in items)
    return out


def _deep(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _reshape(rng: random.Random, value: Any) -> Any:
    """The value in another JSON shape: a list for an object or a scalar, an object for a scalar, ..."""
    choice = rng.randrange(7)
    if choice == 0:
        return [value]
    if choice == 1:
        return {"k": value} if not isinstance(value, dict) else list(value.values())
    if choice == 2:
        return list(value.items()) if isinstance(value, dict) else [value, copy.deepcopy(value)]
    if choice == 3 and isinstance(value, str):
        at = rng.randrange(len(value) + 1)
        return value[:at] + rng.choice(CONTROL) + value[at:]
    if choice == 4:
        return rng.choice(HUGE)
    if choice == 5:
        return str(value) if not isinstance(value, str) else (int(value) if value.isdigit() else value * 2)
    return {} if isinstance(value, list) else []


def mutate_tree(rng: random.Random, spec: dict[str, Any]) -> Any:
    doc: Any = json.loads(json.dumps(spec))  # a deep copy, faster than copy.deepcopy
    for _ in range(rng.randint(1, 3)):
        containers = _containers(doc)
        if not containers:
            return doc
        _path, node = rng.choice(containers)
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        action = rng.randrange(12)
        if action == 0 and keys:  # drop a key or an item
            del node[rng.choice(keys)]
        elif action in (1, 2) and keys:  # a surprising value
            node[rng.choice(keys)] = copy.deepcopy(rng.choice(INTERESTING))
        elif action in (3, 4) and keys:  # the same value in another shape, or with a control character
            key = rng.choice(keys)
            node[key] = _reshape(rng, node[key])
        elif action == 5 and isinstance(node, dict):  # an unknown key
            node[rng.choice(["extra", "Path", "passwd", "id", "params", "settings"])] = copy.deepcopy(
                rng.choice(INTERESTING))
        elif action == 6 and keys:  # nesting, sometimes past the limit
            node[rng.choice(keys)] = _deep(rng.choice([3, 30, 70, 400]))
        elif action == 7 and isinstance(node, dict) and "plugin" in node:
            node["plugin"] = rng.choice(PLUGINS)
        elif action == 8 and isinstance(node, list) and node:  # duplicate an item (two destinations alike)
            node.append(copy.deepcopy(rng.choice(node)))
        elif action == 9 and isinstance(node, dict) and "id" in node and isinstance(node["id"], str):
            node["id"] = node["id"].upper()
        elif action == 10 and isinstance(node, dict) and keys:  # a key written twice in one object
            key = rng.choice(keys)
            pairs = Pairs(list(node.items()))
            pairs.items.insert(rng.randrange(len(keys) + 1), (key, copy.deepcopy(rng.choice(INTERESTING))))
            if _path:
                _set(doc, _path, pairs)
            else:
                doc = pairs
            return doc
        elif action == 11 and isinstance(node, dict):  # a key with a control character or an odd spelling
            key = rng.choice([*keys, "k"]) if keys else "k"
            node[f"{key}{rng.choice(CONTROL)}"] = node.pop(key, 1)
        if rng.random() < 0.02:
            doc = rng.choice([[], "text", 42, None, [doc]])
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def dumps(doc: Any, ascii_only: bool) -> str:
    """JSON text of ``doc``; its :class:`Pairs` (one at most) becomes an object with its keys as given."""
    found: list[Pairs] = []

    def hide(node: Any) -> str:
        found.append(node)
        return MARK

    text = json.dumps(doc, ensure_ascii=ascii_only, default=hide)
    for pairs in found:
        inner = ", ".join(f"{json.dumps(k, ensure_ascii=ascii_only)}: {json.dumps(v, ensure_ascii=ascii_only)}"
                          for k, v in pairs.items)
        text = text.replace(json.dumps(MARK), "{" + inner + "}", 1)
    return text


MARK = "<pairs-7f3a>"


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
        text = dumps(doc, rng.random() < 0.5)
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


def validate(data: bytes) -> list[str]:
    """What ``wormhole validate`` checks, in process: the problems it would list ([] for a valid spec)."""
    try:
        spec = TaskSpec.from_json(data)
        speed_limits(spec.settings.speed, EngineConf())
    except InvalidTaskConfig as exc:
        return exc.problems
    return []


def test_validation_has_no_internal_error_on_shape_mutated_specs(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store's options and every operator, mutated in shape (keys deleted and written twice, lists and
    objects for scalars and objects, NUL and control characters, huge numbers, deep nesting) or as bytes:
    each spec is valid or refused with problems that name their key path, never an internal error."""
    monkeypatch.chdir(tmp_path)
    valid = internal = 0
    for case, data in cases(VALIDATE_SPECS, BASES, SEED):
        try:
            problems = validate(data)
        except Exception as exc:  # any escape is the failure this test looks for
            raise AssertionError(f"case {case} raised {exc!r}: {data[:300]!r}") from exc
        bugs = [p for p in problems if "wormhole bug" in p]
        if bugs:
            internal += 1
            print(f"case {case}: {bugs[0][:300]}\n  {data[:400]!r}")
        valid += not problems
    print(f"validated {VALIDATE_SPECS} specs: {valid} valid, {internal} internal errors")
    assert internal == 0
    assert list(tmp_path.iterdir()) == []  # validation writes nothing
    # The generator must exercise both outcomes, or the test proves little.
    assert VALIDATE_SPECS // 50 <= valid <= VALIDATE_SPECS // 2


def test_validate_command_never_crashes_on_mutated_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command around the same validation: exit 0 or 204, never a traceback."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    codes: dict[int, int] = {}
    for case, data in cases(CLI_SPECS, BASES, SEED + 2):
        path = tmp_path / "spec.json"
        path.write_bytes(data)
        result = runner.invoke(cli, ["--log-format", "json", "validate", str(path)])
        _check_clean(result, case, data)
        assert result.exit_code in (0, 204), f"case {case}: exit {result.exit_code}\n{result.output}"
        assert "wormhole bug" not in result.output, f"case {case}: {result.output}"
        codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]  # validate writes nothing
    assert codes.get(0) and codes.get(204), codes


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
    assert ran >= RUN_SPECS // 15 and outcomes.get("invalid_run", 0) and outcomes.get("invalid_row", 0), outcomes


def _spec_text(transforms: list[Any] | None = None, **dest_params: Any) -> str:
    dest = {"id": "f", "plugin": "file", "params": {"path": f"{OUT}/f", "format": "csv", **dest_params}}
    return json.dumps({"source": {"plugin": "stream", "params": {"rows": 5}}, "transforms": transforms or [],
                       "destinations": [dest]})


@pytest.mark.parametrize(("text", "problem"), [
    (_spec_text(path="out/\x00x"), "destinations[0].params.path: must not contain a NUL character"),
    (_spec_text(null="\x00"), "destinations[0].params.null: must not contain a NUL character"),
    (_spec_text([{"cast": {"id": []}}]), "transforms[0].cast.id: unknown type []"),
    (_spec_text([{"cast": {"id": {"to": "int"}}}]), "transforms[0].cast.id: unknown type {'to': 'int'}"),
    (_spec_text([{"filter": f"id > {'9' * 5000}"}]), "transforms[0].filter: number 99999999999999999999... has more"),
    (_spec_text([{"rename": {"name": "a\x00"}}]), "transforms[0].rename.name: must be the new column name"),
    (_spec_text([{"mask": {"columns": ["name"], "method": ["redact"]}}]),
     "transforms[0].mask.method: must be one of hash, redact, partial, not ['redact']"),
    (_spec_text([{"mask": {"columns": ["name"], "method": "redact", "salt_env": {}}}]),
     "transforms[0].mask.salt_env: must name an environment variable"),
    (_spec_text().replace('"path": ', '"path": "out/a", "path": '),
     "destinations[0].params.path: is given more than once in one object"),
])
def test_a_wrong_shape_is_refused_with_its_key_path(text: str, problem: str) -> None:
    """The fuzzer's findings, each by name: a NUL in a path (the OS refuses it), a list or an object where a
    type name belongs (unhashable), a key written twice (which one was meant is a guess)."""
    problems = validate(text.encode())
    assert any(p.startswith(problem) for p in problems), problems
    assert not [p for p in problems if "wormhole bug" in p], problems

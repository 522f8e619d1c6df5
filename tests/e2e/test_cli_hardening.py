"""The CLI under bad input and a newcomer's habits: every outcome is a documented exit code and a
message, never a traceback; read-only commands create nothing; secrets are never printed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace

pytestmark = pytest.mark.e2e


def _spec(**dest_params: Any) -> dict[str, Any]:
    return {"name": "small", "source": {"plugin": "stream", "params": {"rows": 50}},
            "destinations": [{"id": "n", "plugin": "stream", "params": dest_params}]}


def _no_traceback(proc: Any) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# -- item 4: a spec that is not JSON text --------------------------------------------------------------


@pytest.mark.parametrize(("content", "message"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested 100000 levels deep; a task spec nests at most 64"),
    (b'{"name": "caf\xe9"}', "not UTF-8 text: byte 0xe9 at offset 13"),
    (b'{"source": {"plugin": "stream", "params": {"rows": NaN}}}', "NaN is not a JSON number"),
    (b"", "the spec is empty"),
    (b"1" * 5000, "malformed JSON"),
])
def test_a_spec_file_that_is_not_json_exits_204_with_a_message(ws: Workspace, tmp_path: Path, content: bytes,
                                                               message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    for args in (("validate", str(path)), ("task", "submit", str(path)), ("run", str(path))):
        proc = ws.run(*args)
        assert proc.returncode == 204, (args, proc.stderr)
        assert message in proc.stderr
        _no_traceback(proc)
    assert ws.run("task", "list", check=True).stdout.strip().count("\n") == 0  # nothing was recorded


@pytest.mark.parametrize("spec", [
    "[" * 5000 + "]" * 5000,
    '{"name": "\\ud800 lone surrogate", "source": 1}',
    "null",
    '{"source": {"plugin": "stream", "params": {"rows": 1e400}}}',
])
def test_a_task_row_with_a_broken_spec_ends_failed_not_running(ws: Workspace, spec: str) -> None:
    """An upstream INSERT of any text: the run exits 204 and the row is failed with the reason."""
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 204, proc.stderr
    _no_traceback(proc)
    task = ws.show(task_id)
    assert task["status"] == "failed"
    assert task["error"].startswith("invalid task")
    assert [e["event"] for e in log_events(proc.stderr)][-1] == "task.invalid"


def test_a_task_row_with_invalid_utf8_bytes_ends_failed(ws: Workspace) -> None:
    conn = sqlite3.connect(ws.root / "var" / "wormhole.db")
    with conn:
        task_id = conn.execute("INSERT INTO wormhole_task (name, spec) VALUES (?, ?)",
                               ("bytes", b'{"name": "\xff\xfe"}')).lastrowid
    conn.close()
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 204, proc.stderr
    _no_traceback(proc)
    assert ws.show(int(task_id))["status"] == "failed"


# -- item 5: values that used to validate and then fail at run time -------------------------------------


def test_values_that_would_fail_at_run_time_are_validation_errors(ws: Workspace, tmp_path: Path) -> None:
    spec = _spec(delay_ms=1e300)
    spec["destinations"] += [
        {"id": "Lake", "plugin": "stream"},
        {"id": "lake", "plugin": "stream"},
        {"id": "db", "plugin": "mysql", "params": {"host": " ", "user": "u", "database": "d", "table": "t"}},
    ]
    spec["source"]["params"]["seed"] = 2**70
    spec["settings"] = {"speed": {"channel": 5000}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(spec))
    proc = ws.run("validate", str(path))
    assert proc.returncode == 204
    assert "destinations[0].params.delay_ms: must be <= 3600000.0" in proc.stderr
    assert "destinations[2].id: duplicate id 'lake' (also destinations[1]; ids differing only in case" in proc.stderr
    assert "destinations[3].params.host: must not be empty or blank" in proc.stderr
    assert "source.params.seed: 1180591620717411303424 is out of range (a 64-bit integer)" in proc.stderr
    assert "settings.speed.channel: must be <= 1024, got 5000" in proc.stderr


_CSV_COLUMNS = [{"name": "id", "type": "int"}, {"name": "amount", "type": "float"}, {"name": "who", "type": "string"}]


@pytest.mark.parametrize(("source", "transforms", "problem"), [
    ({"plugin": "stream", "params": {"rows": 50}}, [{"filter": "amout > 1"}],
     "transforms[0].filter: unknown column 'amout' (columns: id, name, amount, day)"),
    # csv with declared columns: known without opening the file (which does not even exist)
    ({"plugin": "file", "params": {"path": "in.csv", "format": "csv", "columns": _CSV_COLUMNS}},
     [{"derive": {"x": "who + 1"}}], "transforms[0].derive.x: '+' needs numbers, not a string and a int"),
])
def test_transforms_over_a_schema_known_without_connecting_are_checked_at_validation(
        ws: Workspace, tmp_path: Path, source: dict[str, Any], transforms: list[Any], problem: str) -> None:
    """validate refuses them, and run refuses them before anything is recorded in the task db."""
    spec = _spec()
    spec["source"] = source
    spec["destinations"][0]["transforms"] = [{"filter": "id > 1"}]
    spec["transforms"] = transforms
    path = tmp_path / "t.json"
    path.write_text(json.dumps(spec))
    for args in (("validate", str(path)), ("run", str(path))):
        proc = ws.run(*args)
        assert proc.returncode == 204, (args, proc.stderr)
        assert problem in proc.stderr, (args, proc.stderr)
        _no_traceback(proc)
    assert ws.run("task", "list", check=True).stdout.strip().count("\n") == 0  # nothing was recorded
    spec["transforms"] = []
    path.write_text(json.dumps(spec))
    assert ws.run("validate", str(path)).returncode == 0


# -- item 6: exit codes follow the table ----------------------------------------------------------------


def test_a_missing_spec_file_exits_204(ws: Workspace) -> None:
    for args in (("validate", "missing.json"), ("task", "submit", "missing.json"), ("run", "missing.json")):
        proc = ws.run(*args)
        assert proc.returncode == 204, args
        assert "cannot read the task file missing.json: No such file or directory" in proc.stderr


def test_task_subcommands_with_an_unreachable_task_db_exit_203(ws: Workspace, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_spec()))
    ws.task_db = "mysql://root:s3cret@127.0.0.1:1/nope?connect_timeout=1"
    for args in (("task", "list"), ("task", "show", "1"), ("task", "retry", "1"), ("db", "init"),
                 ("task", "submit", str(good))):
        proc = ws.run(*args, timeout=60)
        assert proc.returncode == 203, (args, proc.stderr)
        assert "cannot connect to 127.0.0.1:1" in proc.stderr and "s3cret" not in proc.stderr
        _no_traceback(proc)


def test_a_task_id_out_of_the_id_range_exits_204_naming_the_parameter(ws: Workspace) -> None:
    """No OverflowError traceback (exit 1, in no table): a number no task can have is "no such task id"."""
    huge = "99999999999999999999999"
    runs = [(("--task-id", huge), "'--task-id'"), (("plan", "--task-id", huge), "'--task-id'"),
            (("task", "show", huge), "'TASK_ID'"), (("task", "retry", huge), "'TASK_ID'"),
            (("task", "clean", huge), "'TASK_ID'")]
    runs += [(("task", "show", "--", n), "'TASK_ID'") for n in ("9223372036854775808", "-9223372036854775809")]
    runs += [(("--task-id", "9" * 5000), "'--task-id'")]  # past Python's 4300-digit int() limit too
    for args, hint in runs:
        proc = ws.run(*args)
        assert proc.returncode == 204, (args, proc.stderr)
        assert f"Invalid value for {hint}: " in proc.stderr, (args, proc.stderr)
        assert "is out of range: a task id is a 64-bit integer, from -9223372036854775808 to 9223372036854775807" \
            in proc.stderr
        assert len(proc.stderr) < 1000
        _no_traceback(proc)
    assert ws.run("task", "show", "9223372036854775807").returncode == 204  # in range, but no such task
    assert ws.run("task", "show", "twelve").returncode == 2  # not a number: bad usage, as before


# -- item 7: read-only commands create nothing -----------------------------------------------------------


def test_read_only_commands_in_an_empty_directory_create_no_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    ws = Workspace(root=empty, task_db="sqlite:///var/wormhole.db")
    ws.write_conf(monitor={"interval_s": 0.05})
    for args in (("task", "list"), ("task", "show", "1"), ("task", "retry", "1"), ("--task-id", "1")):
        proc = ws.run(*args)
        assert proc.returncode == 203, (args, proc.stderr)
        assert "var/wormhole.db does not exist; `wormhole db init` creates it" in proc.stderr
    assert [p.name for p in empty.iterdir()] == ["conf"]


# -- items 8 and 9: secrets ------------------------------------------------------------------------------


SECRET_KEYS = ("pwd", "passphrase", "auth", "authentication_string", "pasword", "dbPassword", "privateKey",
               "x-api-key", "accessToken", "client_secret", "credentials")
"""Keys whose values `task show` hides: words of the key, not a list of keys (README, Secrets)."""
PLAIN_KEYS = ("author", "key_column", "primary_key", "keys", "password_env", "auth_plugin", "bypass", "user")
"""Keys that only share letters with a secret word, or name where a secret is: shown as they are."""


def test_task_show_redacts_every_secret_in_the_spec(ws: Workspace) -> None:
    extra: dict[str, Any] = {k: f"hunter2-{i}" for i, k in enumerate(SECRET_KEYS)}
    extra |= {k: f"plain-{i}" for i, k in enumerate(PLAIN_KEYS)}
    spec = {"source": {"plugin": "mysql", "params": {
        "user": "etl", "password": "hunter2-src", "database": "d", "table": "t",
        "connections": [{"host": "h", "database": "d", "password": "hunter2-shard"}]}},
        "destinations": [{"id": "n", "plugin": "stream", "params": {"api_key": "hunter2-key"}}],
        "settings": {"token": "hunter2-token", "extra": extra}}
    task_id = ws.submit(json.dumps(spec))
    proc = ws.run("task", "show", str(task_id), check=True)
    assert "hunter2" not in proc.stdout
    shown = json.loads(proc.stdout)["spec"]
    assert shown["source"]["params"]["password"] == "***"
    assert shown["source"]["params"]["connections"][0]["password"] == "***"
    assert shown["source"]["params"]["user"] == "etl"  # only secrets are hidden
    assert shown["settings"]["extra"] == {**dict.fromkeys(SECRET_KEYS, "***"),
                                          **{k: f"plain-{i}" for i, k in enumerate(PLAIN_KEYS)}}
    # Not JSON: redacted as text, by the same rule (a number, an array and an escaped key too).
    broken = ws.submit('{"source": {"password": "hunter2-broken", "pwd": 12345, "auth": ["hunter2-arr"], '
                       '"pa\\u0073sword": "hunter2-esc", "author": "plain-a", "x": ')
    out = ws.run("task", "show", str(broken), check=True).stdout
    assert "hunter2" not in out and "12345" not in out and '\\"password\\": \\"***\\"' in out
    assert '\\"auth\\": \\"***\\"' in out and "plain-a" in out


UNREADABLE_PASSWORD = "Tk#p@ss:w/rd?x=1"
"""Unencoded, it cuts the URL in pieces: '#' starts a fragment, '/' a path, '?' a query, '@' and ':' as ever."""


@pytest.mark.parametrize("url", [
    f"mysql://user:{UNREADABLE_PASSWORD}@host/db",
    f"mysql://user:{UNREADABLE_PASSWORD}@127.0.0.1:1/db?connect_timeout=1",
    f"mysql://{UNREADABLE_PASSWORD}@host/db",  # the password where the user goes
    f"{UNREADABLE_PASSWORD}@host/db",  # no scheme at all
])
def test_a_task_db_url_with_an_unencoded_password_shows_no_piece_of_it(ws: Workspace, url: str) -> None:
    """No three consecutive characters of the password in anything printed, whatever the command."""
    pieces = {UNREADABLE_PASSWORD[i:i + 3] for i in range(len(UNREADABLE_PASSWORD) - 2)}
    ws.task_db = url  # through WORMHOLE_TASK_DB, as a daemon's children get it
    for args in (("db", "init"), ("--task-id", "1"), ("task", "show", "1"),
                 ("task", "list", "--task-db", url)):
        proc = ws.run(*args, timeout=60)
        assert proc.returncode == 203, (args, proc.stderr)
        assert "invalid task database URL" in proc.stderr, (args, proc.stderr)
        _no_traceback(proc)
        printed = proc.stdout + proc.stderr
        assert not [p for p in pieces if p in printed], (args, printed)


def test_validation_never_echoes_a_secret_and_cuts_long_values(ws: Workspace, tmp_path: Path) -> None:
    spec = {"source": {"plugin": "mysql", "params": {"user": "etl", "password": ["hunter2-in-a-list"],
                                                     "database": "d", "table": "t", "estimate": "x" * 5000}},
            "destinations": [{"id": "n", "plugin": "stream"}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(spec))
    proc = ws.run("validate", str(path))
    assert proc.returncode == 204
    assert "source.params.password: expected a string, got array ***" in proc.stderr
    assert "hunter2" not in proc.stderr
    assert "(5002 characters)" in proc.stderr and len(proc.stderr) < 1000


# -- item 14: global options after the subcommand ---------------------------------------------------------


def test_global_options_are_accepted_after_the_subcommand(tmp_path: Path) -> None:
    ws = Workspace(root=tmp_path, task_db="sqlite:///var/unused.db")
    ws.write_conf(monitor={"interval_s": 0.05})
    url = f"sqlite:///{tmp_path}/elsewhere/tasks.db"
    assert ws.run("db", "init", "--task-db", url, check=True).stdout.strip() == f"task database ready: {url}"
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps(_spec()))
    task_id = ws.run("task", "submit", str(spec), "--task-db", url, check=True).stdout.strip()
    shown = json.loads(ws.run("task", "show", task_id, "--task-db", url, check=True).stdout)
    assert shown["status"] == "pending"
    assert not (tmp_path / "var").exists()  # the environment's URL was overridden, never opened
    proc = ws.run("run", str(spec), "--task-db", url, "--log-format", "json", "--log-level", "warning")
    assert proc.returncode == 0, proc.stderr
    assert log_events(proc.stderr) == []  # warning level: the info events are filtered


# -- item 15: one-step run ---------------------------------------------------------------------------------


def test_run_file_records_runs_and_exits_with_the_task_code(tmp_path: Path) -> None:
    """`wormhole run FILE` in a fresh directory: embedded task DB created, task recorded and run."""
    ws = Workspace(root=tmp_path, task_db="sqlite:///var/wormhole.db")
    ws.write_conf(monitor={"interval_s": 0.05})
    spec = {"name": "one step", "source": {"plugin": "stream", "params": {"rows": 1000}},
            "destinations": [{"id": "out", "plugin": "sqlite", "params": {"path": "out/t.db", "table": "t"}},
                             {"id": "bad", "plugin": "stream", "params": {"fail_after": 10}}]}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    proc = ws.run("run", str(path))
    assert proc.returncode == 202, proc.stderr
    events = log_events(proc.stderr)
    submitted = next(e for e in events if e["event"] == "task.submitted")
    task = ws.show(submitted["task_id"])
    assert task["name"] == "one step" and task["status"] == "partial"
    assert task["result"]["destinations"]["out"]["rows_written"] == 1000
    conn = sqlite3.connect(tmp_path / "out" / "t.db")
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1000
    conn.close()


# -- item 16: a store's parameters from its options dataclasses -------------------------------------------


def test_plugins_name_prints_parameters_from_the_options(ws: Workspace) -> None:
    out = ws.run("plugins", "mysql", check=True).stdout
    assert "source parameters (source.params):" in out and "destination parameters" in out
    assert 'load               "append" | "truncate" | "staging"  default "append"' in out
    assert "connections[].host" in out
    proc = ws.run("plugins", "nosuch")
    assert proc.returncode == 204 and "unknown plugin 'nosuch'" in proc.stderr


def test_workspace_helper_still_initialises(tmp_path: Path) -> None:
    # make_workspace runs `db init`, which must go on creating the embedded file.
    ws = make_workspace(tmp_path)
    assert (ws.root / "var" / "wormhole.db").is_file()

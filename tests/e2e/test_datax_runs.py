"""``wormhole import datax`` end to end: DataX job files (tests/data/datax/, the shapes of DataX's
documentation) are converted, validated and run with ``wormhole run`` against real MariaDB databases,
and the destinations hold what DataX would have written.

The job files carry ``{{PLACEHOLDERS}}`` for the server and the uuid-named databases each test makes.
"""

from __future__ import annotations

import csv
import json
import socket
import subprocess
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MYSQL_URL, Workspace, log_events, wormhole_command
from tests.mysql_helpers import Databases, Server, create_table, execute, insert_rows, q, table_rows

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

DATA = Path(__file__).resolve().parent.parent / "data" / "datax"
SERVER = Server.from_url(MYSQL_URL)
ORDERS_DDL = ("id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NULL, amount DECIMAL(10,2) NOT NULL, "
              "created DATETIME NOT NULL")
COLUMNS = ("id", "name", "amount", "created")
START = datetime(2024, 1, 1)


def order(i: int) -> tuple[Any, ...]:
    return (i, None if i % 97 == 0 else f"order-{i}", Decimal(i % 97) + Decimal("0.25"), START + timedelta(minutes=i))


def orders_db(dbs: Databases, table: str = "orders", ids: range = range(1, 1001)) -> str:
    db = dbs.create("dxsrc")
    create_table(dbs.admin, db, table, ORDERS_DDL)
    insert_rows(dbs.admin, db, table, COLUMNS, [order(i) for i in ids])
    return db


def render(ws: Workspace, name: str, user: str = SERVER.user, password: str = SERVER.password,
           **dbs: str) -> str:
    """Copy a job file into the workspace with the placeholders filled in; returns its file name."""
    text = (DATA / name).read_text(encoding="utf-8")
    values = {"USER": user, "PASSWORD": password, "HOST": SERVER.host, "PORT": str(SERVER.port),
              **{k.upper(): v for k, v in dbs.items()}}
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", json.dumps(value)[1:-1])
    assert "{{" not in text, f"{name} has a placeholder the test did not fill"
    (ws.root / name).write_text(text, encoding="utf-8")
    return name


def wormhole(ws: Workspace, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*wormhole_command(), *args], cwd=ws.root, env={**ws.env(), **(env or {})},
                          capture_output=True, text=True, timeout=240)


def import_jobs(ws: Workspace, job: str, *merged: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Convert and validate: the task written and the import's log events."""
    merge_args = [arg for m in merged for arg in ("--merge", m)]
    proc = wormhole(ws, "import", "datax", job, *merge_args, "-o", "task.json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "task written to task.json"
    task = json.loads((ws.root / "task.json").read_text())
    checked = wormhole(ws, "validate", "task.json", env=passwords(task))  # validate checks every password_env
    assert checked.returncode == 0, checked.stderr
    return task, log_events(proc.stderr)


def run(ws: Workspace, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """``wormhole run task.json`` with the password variables set: (exit code, the task's result)."""
    code, result, _proc = run_proc(ws, env)
    return code, result


def run_proc(ws: Workspace, env: dict[str, str]) -> tuple[int, dict[str, Any], subprocess.CompletedProcess[str]]:
    proc = wormhole(ws, "run", "task.json", env=env)
    task_id = next(e["task_id"] for e in log_events(proc.stderr) if e["event"] == "task.finished")
    shown = json.loads(wormhole(ws, "task", "show", str(task_id)).stdout)
    return proc.returncode, shown["result"], proc


def untranslated(events: list[dict[str, Any]]) -> dict[str, str]:
    return {e["key"]: e["reason"] for e in events if e["event"] == "datax.untranslated"}


def passwords(task: dict[str, Any], password: str = SERVER.password) -> dict[str, str]:
    """Every password_env the task names, set to the server's password."""
    names = [task["source"]["params"].get("password_env")]
    names += [d["params"].get("password_env") for d in task["destinations"]]
    return {name: password for name in names if name}


def csv_rows(directory: Path, delimiter: str = ",") -> list[list[str]]:
    """The header once (every part starts with it: one part per split), then every part's rows."""
    rows: list[list[str]] = []
    for part in sorted(directory.glob("part-*.csv")):
        with part.open(newline="", encoding="utf-8") as fh:
            lines = list(csv.reader(fh, delimiter=delimiter))
        rows.extend(lines if not rows else lines[1:] if lines and lines[0] == rows[0] else lines)
    return rows


def as_text(row: tuple[Any, ...], null: str) -> list[str]:
    return [null if v is None else str(v) for v in row]


def test_mysql_to_mysql_table_split_pk_where_pre_post_sql(ws: Workspace, dbs: Databases) -> None:
    src = orders_db(dbs)
    dst = dbs.create("dxdst")
    create_table(dbs.admin, dst, "orders_copy", ORDERS_DDL)
    insert_rows(dbs.admin, dst, "orders_copy", COLUMNS, [order(i) for i in range(5000, 5010)])  # preSql clears it
    create_table(dbs.admin, dst, "load_audit", "tbl VARCHAR(64) NOT NULL, n INT NOT NULL")
    # A user with a real password: the task must name a variable, never hold the literal.
    secret = "dx-Secret-7f3"
    user = dbs.create_user(secret)
    for db in (src, dst):
        execute(dbs.admin, f"GRANT ALL ON {q(db)}.* TO %s@'%%'", (user,))
    job = render(ws, "mysql_to_mysql.json", user=user, password=secret, src_db=src, dst_db=dst)

    task, events = import_jobs(ws, job)

    assert secret not in (ws.root / "task.json").read_text()
    source = task["source"]["params"]
    assert (source["table"], source["split_pk"], source["where"]) == ("orders", "id", "id <= 800")
    assert task["settings"] == {"speed": {"channel": 3}, "error_limit": {"record": 0, "percentage": 0.02}}
    notes = untranslated(events)
    assert "session" in notes["job.content[0].writer.parameter.session"]
    assert "useUnicode" in notes["job.content[0].reader.parameter.connection[0].jdbcUrl"]
    assert "DATAX_READER_PASSWORD" in notes["job.content[0].reader.parameter.password"]

    code, result = run(ws, passwords(task, secret))

    assert code == 0, result
    expected = execute(dbs.admin, f"SELECT {', '.join(COLUMNS)} FROM {q(src)}.orders WHERE id <= 800 ORDER BY id")
    assert table_rows(dbs.admin, dst, "orders_copy", COLUMNS) == expected
    assert execute(dbs.admin, f"SELECT tbl, n FROM {q(dst)}.load_audit") == [("orders_copy", 800)]
    assert result["source"]["rows_read"] == 800


def test_mysql_query_to_txtfile_csv(ws: Workspace, dbs: Databases) -> None:
    src = orders_db(dbs)
    task, events = import_jobs(ws, render(ws, "mysql_query_to_txtfile.json", src_db=src))
    assert task["source"]["params"]["query"].startswith("select id, name, amount from orders")
    dest = task["destinations"][0]
    assert dest["params"] == {"path": "out/big_orders", "format": "csv", "mode": "overwrite", "delimiter": "|",
                              "null": "\\N", "header": False}
    assert "job.content[0].writer.parameter.dateFormat" in untranslated(events)

    code, _result = run(ws, passwords(task))

    assert code == 0
    expected = execute(dbs.admin, f"SELECT id, name, amount FROM {q(src)}.orders WHERE amount >= 5 ORDER BY id")
    assert sorted(csv_rows(ws.root / "out/big_orders", "|"), key=lambda r: int(r[0])) == [
        as_text(r, "\\N") for r in expected]
    assert (ws.root / "out/big_orders/_SUCCESS").exists()


def test_sharded_mysqlreader_to_mysql_replace(ws: Workspace, dbs: Databases) -> None:
    shard1, shard2 = dbs.create("dxs1"), dbs.create("dxs2")
    for n, db in enumerate((shard1, shard1, shard2, shard2)):
        table = f"orders_{n}"
        create_table(dbs.admin, db, table, ORDERS_DDL)
        insert_rows(dbs.admin, db, table, COLUMNS, [order(i) for i in range(n * 250 + 1, n * 250 + 251)])
    dst = dbs.create("dxdst")
    create_table(dbs.admin, dst, "orders_all", ORDERS_DDL)
    stale = [(i, "stale", Decimal("0.00"), START) for i in range(1, 11)]
    insert_rows(dbs.admin, dst, "orders_all", COLUMNS, stale)
    task, _events = import_jobs(ws, render(ws, "sharded_to_mysql_replace.json", shard1_db=shard1, shard2_db=shard2,
                                           dst_db=dst))
    conns = task["source"]["params"]["connections"]
    assert [(c["database"], c["tables"]) for c in conns] == [(shard1, ["orders_0", "orders_1"]),
                                                              (shard2, ["orders_2", "orders_3"])]
    assert task["destinations"][0]["params"]["write_mode"] == "replace"

    code, result = run(ws, passwords(task))

    assert code == 0, result
    # REPLACE INTO: the ten stale rows are replaced by the shards' rows of the same keys.
    assert table_rows(dbs.admin, dst, "orders_all", COLUMNS) == [order(i) for i in range(1, 1001)]


def test_streamreader_to_streamwriter_speed_and_error_limit(ws: Workspace) -> None:
    task, events = import_jobs(ws, render(ws, "stream_to_stream.json"))
    # DataX: byte 3 MiB / 1 MiB per channel = 3, record 50000 / 10000 = 5 -> 3 channels, each making
    # sliceRecordCount rows; speed.channel is ignored when a limit is set. The limits are carried as
    # limits (wormhole enforces them), with their per-channel rates.
    assert task["source"]["params"]["rows"] == 3000
    assert task["settings"] == {
        "speed": {"byte": 3145728, "record": 50000, "channel_byte": 1048576, "channel_record": 10000},
        "error_limit": {"record": 0, "percentage": 0.02}}
    reported = set(untranslated(events))
    assert {"job.setting.speed.channel", "job.content[0].reader.parameter.column[0].value"} <= reported
    assert not {"job.setting.speed.byte", "job.setting.speed.record"} & reported

    code, result = run(ws, {})

    assert code == 0
    assert result["source"]["rows_read"] == 3000
    assert result["destinations"]["stream"]["rows_written"] == 3000
    speed = result["speed"]
    assert (speed["record_limit"], speed["byte_limit"], speed["rows"]) == (50000, 3145728, 3000)
    assert speed["rows_per_s"] <= 50000 * 1.0001 and speed["bytes_per_s"] <= 3145728 * 1.0001


def test_mysql_to_txtfile_append_with_header(ws: Workspace, dbs: Databases) -> None:
    src = orders_db(dbs)
    task, _events = import_jobs(ws, render(ws, "mysql_to_txtfile_append.json", src_db=src))
    assert task["destinations"][0]["params"]["mode"] == "append"
    env = passwords(task)

    assert run(ws, env)[0] == 0
    assert run(ws, env)[0] == 0  # append: the second run adds its files beside the first run's

    parts = sorted((ws.root / "out/orders_log").glob("part-*.csv"))
    assert len(parts) >= 2
    assert all(p.read_text().splitlines()[0] == "id,name,amount" for p in parts)
    expected = execute(dbs.admin, f"SELECT id, name, amount FROM {q(src)}.orders WHERE id % 10 = 0 ORDER BY id")
    data = [r for r in csv_rows(ws.root / "out/orders_log") if r != ["id", "name", "amount"]]
    assert sorted(data, key=lambda r: int(r[0])) == sorted([as_text(r, "") for r in expected] * 2,
                                                           key=lambda r: int(r[0]))


def test_merge_two_jobs_reading_one_source(ws: Workspace, dbs: Databases) -> None:
    src = orders_db(dbs)
    dst = dbs.create("dxdst")
    create_table(dbs.admin, dst, "orders", ORDERS_DDL)
    a = render(ws, "merge_to_mysql.json", src_db=src, dst_db=dst)
    b = render(ws, "merge_to_txtfile.json", src_db=src)
    task, _events = import_jobs(ws, a, b)
    assert [(d["id"], d["error_limit"]) for d in task["destinations"]] == [
        ("mysql_dst_orders".replace("dst", dst), {"record": 0}), ("file_cheap_orders", {"record": 5})]
    assert task["destinations"][0]["params"]["write_mode"] == "upsert"

    code, result = run(ws, passwords(task))

    assert code == 0, result
    expected = execute(dbs.admin, f"SELECT {', '.join(COLUMNS)} FROM {q(src)}.orders WHERE amount < 50 ORDER BY id")
    assert result["source"]["rows_read"] == len(expected)  # read once for both destinations
    assert table_rows(dbs.admin, dst, "orders", COLUMNS) == expected
    rows = csv_rows(ws.root / "out/cheap_orders")
    assert rows[0] == list(COLUMNS)
    assert sorted(rows[1:], key=lambda r: int(r[0])) == [as_text(r, "\\N") for r in expected]


def test_merge_of_jobs_with_different_sources_is_refused(ws: Workspace) -> None:
    placeholders = {"src_db": "wh_unused", "dst_db": "wh_unused"}
    a = render(ws, "merge_to_mysql.json", **placeholders)
    b = render(ws, "merge_other_source.json", **placeholders)
    proc = wormhole(ws, "import", "datax", a, "--merge", b, "-o", "task.json")
    assert proc.returncode == 204
    assert "merge_to_mysql.json and merge_other_source.json (differs in where)" in proc.stderr
    assert not (ws.root / "task.json").exists()


def test_a_translation_that_does_not_validate_exits_204(ws: Workspace) -> None:
    job = {"job": {"setting": {"speed": {"channel": 1}}, "content": [{
        "reader": {"name": "streamreader", "parameter": {"column": [{"type": "long", "value": 1}],
                                                         "sliceRecordCount": 10}},
        "writer": {"name": "txtfilewriter", "parameter": {"path": "out/x", "fileName": "x", "writeMode": "append",
                                                          "fieldDelimiter": "||"}}}]}}
    (ws.root / "job.json").write_text(json.dumps(job))
    proc = wormhole(ws, "import", "datax", "job.json", "-o", "task.json")
    assert proc.returncode == 204
    assert "delimiter" in proc.stderr and "task translated from the DataX job" in proc.stderr
    assert not (ws.root / "task.json").exists()
    job["job"]["content"][0]["reader"]["name"] = "oraclereader"
    (ws.root / "job.json").write_text(json.dumps(job))
    proc = wormhole(ws, "import", "datax", "job.json")
    assert proc.returncode == 204 and "'oraclereader' is not supported" in proc.stderr


# ---------------------------------------------------------------------------------------------
# DataX's mysqlreader documentation examples, as written (the password is the test server's, empty)

DOC_CONSTANTS = ["id", "name", "1", "'bazhen.csy'", "null"]
"""The constant columns of the documentation's ``column`` description."""


@pytest.mark.parametrize("column", [None, DOC_CONSTANTS], ids=["as_documented", "constant_columns"])
def test_documented_table_example_prints_its_rows_split_by_its_split_pk(
        ws: Workspace, dbs: Databases, column: list[str] | None) -> None:
    db = dbs.create("dxdoc")
    create_table(dbs.admin, db, "table", "id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NULL, db_id INT NOT NULL")
    rows = [(i, None if i % 50 == 0 else "tab\there" if i == 7 else f"n-{i}", 1000 - i) for i in range(1, 301)]
    insert_rows(dbs.admin, db, "table", ("id", "name", "db_id"), rows)
    job = render(ws, "doc_mysqlreader_table.json", src_db=db)
    if column is not None:
        doc = json.loads((ws.root / job).read_text())
        doc["job"]["content"][0]["reader"]["parameter"]["column"] = column
        (ws.root / job).write_text(json.dumps(doc))

    task, events = import_jobs(ws, job)

    source = task["source"]["params"]
    assert (source["table"], source["split_pk"], source["columns"]) == ("table", "db_id", ["id", "name"])
    assert "password_env" not in source  # DataX's empty password: nothing to export
    assert not any(k.endswith(".splitPk") for k in untranslated(events))

    code, result, proc = run_proc(ws, {})

    assert code == 0, proc.stderr
    assert result["source"]["splits"] > 1  # split on db_id as DataX would
    constants = "\t1\tbazhen.csy\tnull" if column else ""
    expected = [f"{i}\t{'null' if name is None else name.replace(chr(9), chr(92) + 't')}{constants}"
                for i, name, _ in rows]
    assert sorted(proc.stdout.splitlines()) == sorted(expected)  # stdout holds the rows, nothing else


def refused_address() -> str:
    """A loopback address where nothing answers on the server's port (DataX's ``bad_ip``), never a remote one."""
    for address in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
        with socket.socket() as probe:
            probe.settimeout(1)
            if probe.connect_ex((address, SERVER.port)) != 0:
                return address
    raise AssertionError("every loopback address answers on the server's port: no bad ip to test with")


def closed_port() -> int:
    """A port on the server's host where nothing listens (DataX's ``bad_port``)."""
    with socket.socket() as sock:
        sock.bind((SERVER.host, 0))
        return int(sock.getsockname()[1])


def test_documented_query_example_fails_over_to_the_good_url(ws: Workspace, dbs: Databases) -> None:
    db = dbs.create("dxdoc")
    create_table(dbs.admin, db, "db_info", "db_id INT NOT NULL PRIMARY KEY, on_line_flag TINYINT NOT NULL")
    insert_rows(dbs.admin, db, "db_info", ("db_id", "on_line_flag"), [(i, i % 2) for i in range(1, 31)])
    bad_ip, bad_port = refused_address(), closed_port()
    job = render(ws, "doc_mysqlreader_query.json", src_db=db, bad_ip=bad_ip, bad_port=str(bad_port))

    task, _events = import_jobs(ws, job)

    source = task["source"]["params"]
    assert (source["host"], source["port"]) == (bad_ip, SERVER.port)
    good = f"{SERVER.host}:{SERVER.port}"
    assert source["failover_hosts"] == [f"{SERVER.host}:{bad_port}", good]

    code, result, proc = run_proc(ws, {})

    assert code == 0, proc.stderr
    assert result["destinations"]["stream"]["rows_written"] == 9
    assert proc.stdout == ""  # print: false
    chosen = [e for e in log_events(proc.stderr) if e["event"] == "connection.server_chosen"]
    assert [e["server"] for e in chosen] == [good]  # chosen once, then used first
    failed = chosen[0]["failed"]
    assert [f.split(": ")[0] for f in failed] == [f"{bad_ip}:{SERVER.port}", f"{SERVER.host}:{bad_port}"]
    assert all("(2003)" in f for f in failed)
    assert chosen[0]["level"] == "warning"

    doc = json.loads((ws.root / job).read_text())  # the same job printing: the rows themselves
    doc["job"]["content"][0]["writer"]["parameter"]["print"] = True
    (ws.root / job).write_text(json.dumps(doc))
    import_jobs(ws, job)
    code, _result, proc = run_proc(ws, {})
    assert code == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{i}\t{i % 2}" for i in range(1, 10)]

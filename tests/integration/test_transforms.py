"""Transforms end to end through the CLI: task-level and destination-level operators on sqlite and
MySQL sources, push-down (plan, the server's query log, equal output on and off), adaptive push-up
moving a filter into the source mid-run, and bad transforms refused with exit 204."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events, make_workspace
from tests.mysql_helpers import Databases, execute, fill_from_sequence, general_log, logged_like
from tests.transform_helpers import (
    EVEN_TRANSFORMS,
    HASH_TRANSFORMS,
    SALT,
    SALT_ENV,
    SHORT_NAMES,
    expected_all,
    expected_even,
    expected_hashes,
    source_rows,
    task,
)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv(SALT_ENV, SALT)
    return make_workspace(tmp_path)


def sqlite_source(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE src (id INTEGER PRIMARY KEY, name TEXT, amount REAL, status TEXT, grp INTEGER)")
    conn.executemany("INSERT INTO src VALUES (?, ?, ?, ?, ?)", source_rows())
    conn.commit()
    conn.close()
    return {"plugin": "sqlite", "params": {"path": str(path), "table": "src"}}


def jsonl_rows(directory: Path) -> list[tuple[Any, ...]]:
    out = []
    for part in sorted(directory.glob("*.jsonl")):
        out += [tuple(json.loads(line).values()) for line in part.read_text().splitlines()]
    return sorted(out)


def sqlite_rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute(f"SELECT * FROM {table}").fetchall())
    finally:
        conn.close()


def three_destinations(root: Path) -> list[dict[str, Any]]:
    return [{"id": "all", "plugin": "file", "params": {"path": str(root / "all"), "format": "jsonl"}},
            {"id": "even", "plugin": "sqlite", "params": {"path": str(root / "even.db"), "table": "even"},
             "transforms": EVEN_TRANSFORMS},
            {"id": "hashes", "plugin": "file", "params": {"path": str(root / "hashes"), "format": "jsonl"},
             "transforms": HASH_TRANSFORMS}]


def check_three(root: Path) -> None:
    rows = source_rows()
    assert jsonl_rows(root / "all") == sorted(expected_all(rows))
    assert sqlite_rows(root / "even.db", "even") == sorted(expected_even(rows))
    assert jsonl_rows(root / "hashes") == sorted(expected_hashes(rows))


@pytest.mark.parametrize("pushup", ["static", "off", "adaptive"])
def test_three_destinations_with_their_own_transforms_from_sqlite(ws: Workspace, pushup: str) -> None:
    spec = task(sqlite_source(ws.root / "src.db"), three_destinations(ws.root), pushup=pushup)
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_three(ws.root)
    result = ws.show(task_id)["result"]
    assert result["destinations"]["even"]["rows_filtered"] > 0
    assert result["destinations"]["all"]["rows_filtered"] == 0
    pushed = result["transforms"]["placements"][result["transforms"]["splits"]["sqlite:src"]]
    assert (len(pushed) == 3) == (pushup == "static")  # two filters and the projection in the query
    expected_read = len(expected_all(source_rows())) if pushup == "static" else len(source_rows())
    assert result["source"]["rows_read"] == expected_read


def test_plan_shows_the_push_down(ws: Workspace) -> None:
    path = ws.root / "task.json"
    path.write_text(json.dumps(task(sqlite_source(ws.root / "src.db"), three_destinations(ws.root))))
    proc = ws.run("plan", str(path), "--json", check=True)
    t = json.loads(proc.stdout)["transforms"]
    assert [o["path"] for o in t["source_chain"]["operators"]] == \
        ["transforms[0].filter", "transforms[1].filter", "transforms[2].project"]
    assert t["source_query"]["where"] == '("status" <> ?) AND ("amount" >= ?)'
    assert t["source_query"]["columns"] == ["id", "name", "amount", "grp"]
    assert {c["placement"] for c in t["chains"]} == {"task", "destination:even", "destination:hashes"}
    text = ws.run("plan", str(path), check=True).stdout
    assert "in the source query: filter" in text


def test_plan_shows_where_each_operator_runs(ws: Workspace) -> None:
    """Every operator runs on Arrow compute but a hash mask (SHA-256 per value) and an expression with no
    exact Arrow form (a cast from text to a number), which run in their Python form."""
    spec = task(sqlite_source(ws.root / "src.db"), three_destinations(ws.root), pushup="off")
    spec["transforms"] = [*spec["transforms"], {"derive": {"n": "CAST(name AS int)", "cents": "amount * 100"}}]
    path = ws.root / "task.json"
    path.write_text(json.dumps(spec))
    chains = json.loads(ws.run("plan", str(path), "--json", check=True).stdout)["transforms"]["chains"]
    runs_on = {c["placement"]: [(o["kind"], o["runs_on"]) for o in c["operators"]] for c in chains}
    assert runs_on == {
        "task": [("filter", "arrow"), ("filter", "arrow"), ("project", "arrow"), ("derive", "arrow"),
                 ("derive", "python")],
        "destination:even": [("filter", "arrow"), ("rename", "arrow"), ("mask", "arrow")],
        "destination:hashes": [("project", "arrow"), ("mask", "python"), ("filter", "arrow"), ("cast", "arrow")]}
    text = ws.run("plan", str(path), check=True).stdout
    assert "derive" in text and "on python" in text and "on arrow" in text


def test_an_integer_beyond_64_bits_reaches_each_destination_as_before(ws: Workspace) -> None:
    """A derived int no Arrow column holds goes on exact (the batch leaves the chain as tuples): a jsonl
    file writes it, sqlite refuses that row with its reason, as the row path did."""
    spec = {"source": sqlite_source(ws.root / "src.db"),
            "transforms": [{"filter": "id <= 4"}, {"derive": {"big": "id * 4611686018427387904"}},
                           {"project": ["id", "big"]}],
            "destinations": [
                {"id": "file", "plugin": "file", "params": {"path": str(ws.root / "out"), "format": "jsonl"}},
                {"id": "db", "plugin": "sqlite", "params": {"path": str(ws.root / "out.db"), "table": "t"}}],
            "settings": {"pushup": "off", "error_limit": {"record": 10}}}
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 201, proc.stderr[-3000:]  # done, with rejected rows
    assert jsonl_rows(ws.root / "out") == [(i, i * 2**62) for i in range(1, 5)]
    assert sqlite_rows(ws.root / "out.db", "t") == [(1, 2**62)]
    assert ws.show(task_id)["result"]["destinations"]["db"]["rows_rejected"] == 3


@pytest.mark.parametrize(("transforms", "where", "message"), [
    ([{"filter": "amount >>= 3"}], "transforms[0].filter", "unexpected"),
    ([{"filter": "amount > 3; DROP TABLE src"}], "transforms[0].filter", "unexpected character"),
    ([{"filter": "amout > 3"}, {"derive": {"x": "name + 1"}}], "transforms[0].filter", "unknown column 'amout'"),
    ([{"derive": {"x": "name + 1"}}], "transforms[0].derive.x", "needs numbers"),
    ([{"filter": "`id; DROP TABLE src` = 1"}], "transforms[0].filter", "unknown column"),
])
def test_bad_transforms_exit_204_naming_the_path_and_write_nothing(ws: Workspace, transforms: list[Any],
                                                                    where: str, message: str) -> None:
    spec = task(sqlite_source(ws.root / "src.db"), three_destinations(ws.root))
    spec["transforms"] = transforms
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 204, proc.stderr[-2000:]
    shown = ws.show(task_id)
    assert shown["status"] == "failed"
    assert where in shown["error"] and message in shown["error"], shown["error"]
    assert not (ws.root / "all").exists() and not (ws.root / "even.db").exists()
    assert sqlite_rows(ws.root / "src.db", "src")  # the source table is still there


def test_every_problem_of_every_transform_is_listed(ws: Workspace) -> None:
    spec = task(sqlite_source(ws.root / "src.db"), three_destinations(ws.root))
    spec["transforms"] = [{"filter": "nope = 1"}]
    spec["destinations"][1]["transforms"] = [{"derive": {"x": "upper(1)"}}]
    proc = ws.run("--task-id", str(ws.submit(spec)))
    assert proc.returncode == 204
    invalid = next(e for e in log_events(proc.stderr) if e["event"] == "task.invalid")
    assert any(p.startswith("transforms[0].filter: unknown column 'nope'") for p in invalid["problems"])


def test_a_quote_in_a_literal_is_data_not_sql(ws: Workspace) -> None:
    spec = task(sqlite_source(ws.root / "src.db"), three_destinations(ws.root)[:1])
    spec["transforms"] = [{"filter": "name = 'x'' OR 1=1 --'"}]
    proc = ws.run("--task-id", str(ws.submit(spec)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert jsonl_rows(ws.root / "all") == []


# -- MySQL --------------------------------------------------------------------------------------


def mysql_source(dbs: Databases, rows: int = 3000, **params: Any) -> tuple[dict[str, Any], str]:
    db = dbs.create("tsrc")
    conn = dbs.server.connect(db)
    execute(conn, "CREATE TABLE src (id BIGINT PRIMARY KEY, name VARCHAR(40), amount DOUBLE, status VARCHAR(8), "
                  "grp INT)")
    fill_from_sequence(conn, db, "src", rows, {
        "id": "seq", "name": "IF(seq % 7 = 0, NULL, CONCAT('user', seq))", "amount": "seq * 0.5",
        "status": "IF(seq % 10 = 0, 'test', 'ok')", "grp": "seq % 5"})
    for i, name in SHORT_NAMES.items():  # source_rows()'s short names
        execute(conn, "UPDATE src SET name = %s WHERE id = %s", (name, i))
    conn.close()
    return {"plugin": "mysql", "params": dbs.server.params(db, table="src", split_pk="id", **params)}, db


@pytest.mark.mysql
@pytest.mark.parametrize("pushup", ["static", "off"])
def test_three_destinations_from_mysql_and_the_pushed_query_in_the_server_log(
        ws: Workspace, dbs: Databases, pushup: str) -> None:
    source, db = mysql_source(dbs)
    with general_log(dbs.server) as entries:
        proc = ws.run("--task-id", str(ws.submit(task(source, three_destinations(ws.root), pushup=pushup))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_three(ws.root)
    logged = [(text,) for text in logged_like(entries, ("Query",), f"%{db}%wh_push%")]
    if pushup == "static":
        assert logged, "no pushed query reached the server"
        assert all("WHERE (CAST(CONVERT(`status` USING utf8mb4) AS BINARY) <> CAST(CONVERT('test'" in r[0]
                   for r in logged), logged[0][0]
    else:
        assert not logged


ADAPTIVE_ROWS = 60_000


def _adaptive_task(ws: Workspace, dbs: Databases, out: str) -> dict[str, Any]:
    """A MySQL table of ADAPTIVE_ROWS rows in many small splits, filtered on ``grp = 3`` (a fifth of them)
    under adaptive push-up, into the jsonl directory ``out`` of the workspace."""
    source, _ = mysql_source(dbs, rows=ADAPTIVE_ROWS, split_factor=40)
    return {"source": source, "transforms": [{"filter": "grp = 3"}],
            "destinations": [{"id": "out", "plugin": "file", "params": {"path": str(ws.root / out),
                                                                       "format": "jsonl"}}],
            "settings": {"pushup": "adaptive", "speed": {"channel": 2}}}


@pytest.mark.mysql
def test_adaptive_push_up_moves_a_selective_filter_into_an_idle_source_mid_run(
        ws: Workspace, dbs: Databases) -> None:
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, pushup={"interval_s": 0.05, "min_rows": 2000})
    rows = ADAPTIVE_ROWS
    spec = _adaptive_task(ws, dbs, "adaptive")
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = ws.show(task_id)["result"]["transforms"]
    assert result["moves"], "the filter never moved into the source"
    plans = set(result["splits"].values())
    assert "none" in plans and len(plans) == 2, result["splits"]  # some splits before the move, some after
    moved = next(e for e in log_events(proc.stderr) if e["event"] == "pushup.moved")
    assert moved["stats"][moved["pushed"][0]]["selectivity"] == pytest.approx(5.0, rel=0.05)
    off = dict(spec, settings={"pushup": "off"})
    off["destinations"] = [{"id": "out", "plugin": "file", "params": {"path": str(ws.root / "off"), "format": "jsonl"}}]
    assert ws.run("--task-id", str(ws.submit(off))).returncode == 0
    got, want = jsonl_rows(ws.root / "adaptive"), jsonl_rows(ws.root / "off")
    assert got == want and len(got) == rows // 5


def _sleep(conn: Any) -> None:
    with contextlib.suppress(Exception):  # killed at the end of the test
        execute(conn, "SELECT SLEEP(60)")


@pytest.mark.mysql
def test_adaptive_push_up_leaves_a_busy_source_alone(ws: Workspace, dbs: Databases) -> None:
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20},
                  pushup={"interval_s": 0.05, "min_rows": 2000, "busy_threads": 2})
    rows = ADAPTIVE_ROWS
    spec = _adaptive_task(ws, dbs, "busy")
    sleepers = [dbs.server.connect() for _ in range(5)]  # five statements running on the server all along
    threads = [threading.Thread(target=_sleep, args=(c,), daemon=True) for c in sleepers]
    for t in threads:
        t.start()
    admin = dbs.server.connect()
    try:
        task_id = ws.submit(spec)
        proc = ws.run("--task-id", str(task_id))
    finally:
        for c in sleepers:
            execute(admin, f"KILL {c.thread_id()}")
        admin.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = ws.show(task_id)["result"]["transforms"]
    assert result["moves"] == [] and set(result["splits"].values()) == {"none"}
    held = next(e for e in log_events(proc.stderr) if e["event"] == "pushup.held")
    assert held["busy_threads"] > held["limit"] == 2
    assert len(jsonl_rows(ws.root / "busy")) == rows // 5


@pytest.mark.mysql
def test_spark_reads_literals_mean_what_bound_parameters_mean(dbs: Databases) -> None:
    """Spark's JDBC predicates take no parameters: the pushed SQL's arguments are written in as literals,
    which must select exactly what the same SQL with bound parameters selects (and no text can end one)."""
    import datetime as dt
    from decimal import Decimal

    from wormhole.plugins.base import PushedQuery
    from wormhole.plugins.mysql.spark import literal as mysql_literal
    from wormhole.plugins.sql.spark import inline_where

    values = ["", "it's", 'a"b', "back\\slash", "100%", "x'; DROP TABLE t; --", "ünï €𝄞", "tab\there",
              0, -7, 2**62, 0.5, 1e-05, -2.5e300, Decimal("12345.678901234567890123"), Decimal("-0.001"),
              dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 23, 59, 58, 123456)]
    conn = dbs.server.connect()
    try:
        for value in values:
            pushed = PushedQuery(keep=(0,), where="\x00 = \x00 AND CAST(\x00 AS CHAR) = CAST(\x00 AS CHAR)",
                                 args=(value,) * 4, plan="p")
            bound = execute(conn, "SELECT %s = %s AND CAST(%s AS CHAR) = CAST(%s AS CHAR), CAST(%s AS CHAR)",
                            (value,) * 5)
            inline = inline_where(pushed, mysql_literal)
            assert inline is not None
            literal = inline.split(" = ")[0]
            written = execute(conn, f"SELECT {inline}, CAST({literal} AS CHAR)")
            assert written == bound == [(1, written[0][1])], (value, inline, written, bound)
    finally:
        conn.close()

"""``wormhole diff`` (issue 39, item 5) on the real stores: a MySQL table copied by wormhole into PostgreSQL,
sqlite and parquet compares equal with each copy; then each kind of damage done to a copy (a value changed,
a row deleted, a row duplicated, NULL made '' and '' made NULL, a timestamp's microseconds cut, a float's
last bit flipped) is found and located to its key, with both values shown. Bad sides and options are
refused naming what is wrong (204), an unreadable side is 203."""

from __future__ import annotations

import json
import math
import signal
import sqlite3
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests.conftest import MYSQL_URL, Workspace, mysql_or_skip, run_task, wormhole_command
from tests.mysql_helpers import Databases, Server, execute, q
from tests.pg_helpers import PgServer, fresh_schemas, pg_execute, qi
from wormhole.cli import cli
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext
from wormhole.verify.by_plan import OUTSIDE
from wormhole.verify.diff import Side, _Rejections, compare, parse_side

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

SERVER = Server.from_url(MYSQL_URL)
PG = PgServer.from_url()
ROWS = 500


def flipped(value: float) -> float:
    """``value`` with the last bit of its mantissa changed: the nearest other double."""
    (bits,) = struct.unpack("<q", struct.pack("<d", value))
    return float(struct.unpack("<d", struct.pack("<q", bits ^ 1))[0])


@pytest.fixture
def copies(ws: Workspace, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A MySQL table and wormhole's copies of it in PostgreSQL, sqlite and parquet."""
    mysql_or_skip().close()
    db = f"wh_diff_{uuid.uuid4().hex[:8]}"
    admin = SERVER.connect()
    execute(admin, f"CREATE DATABASE {q(db)} CHARACTER SET utf8mb4")
    try:
        execute(admin, f"CREATE TABLE {q(db)}.src (id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NULL, "
                       "amount DECIMAL(12,2) NULL, ratio DOUBLE NULL, at DATETIME(6) NULL)")
        execute(admin, f"INSERT INTO {q(db)}.src SELECT seq, IF(seq % 10 = 0, NULL, IF(seq % 10 = 1, '', "
                       "CONCAT('naïve ✓ ', seq))), seq * 1.25, seq / 3, TIMESTAMP('2026-01-02 03:04:05.123456') + "
                       f"INTERVAL seq SECOND FROM {q(db)}.seq_1_to_{ROWS}")
        for schemas in fresh_schemas():
            pg = schemas.create("diff")
            lite, lake = str(tmp_path / "copy.db"), str(tmp_path / "lake")
            spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="src", split_pk="id")},
                    "destinations": [
                        {"id": "pg", "plugin": "postgres", "params": PG.params(pg, table="copy", create_table=True)},
                        {"id": "lite", "plugin": "sqlite", "params": {"path": lite, "table": "copy"}},
                        {"id": "lake", "plugin": "file", "params": {"path": lake, "format": "parquet"}}]}
            code, task, stderr = run_task(ws, spec)
            assert code == 0, (task.get("error"), stderr[-2000:])
            yield {"db": db, "pg": pg, "lite": lite, "lake": lake, "task_id": task["id"], "spec": spec,
                   "source": {"plugin": "mysql", "params": SERVER.params(db, table="src", split_pk="id")},
                   "pg_side": {"plugin": "postgres", "params": PG.params(pg, table="copy")},
                   "lite_side": {"plugin": "sqlite", "params": {"path": lite, "table": "copy"}},
                   "lake_side": {"plugin": "file", "params": {"path": lake, "format": "parquet"}}}
    finally:
        execute(admin, f"DROP DATABASE IF EXISTS {q(db)}")
        admin.close()


def diff(left: dict[str, Any] | str, right: dict[str, Any] | str, *args: str) -> tuple[int, dict[str, Any] | str]:
    """``wormhole diff`` in this process: (exit code, the JSON it printed, or its error text)."""
    sides = [s if isinstance(s, str) else json.dumps(s) for s in (left, right)]
    result = CliRunner().invoke(cli, ["--log-level", "warning", "diff", *sides, "--json", *args])
    if result.exit_code in (0, 1):
        return result.exit_code, json.loads(result.stdout)
    return result.exit_code, result.stderr


def by_kind(found: dict[str, Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for sample in found["samples"]:
        out.setdefault(sample["kind"], []).append(sample["key"]["id"])
    return {k: sorted(v) for k, v in out.items()}


def test_every_copy_compares_equal_with_the_source(copies: dict[str, Any]) -> None:
    for side in ("pg_side", "lite_side", "lake_side"):
        code, found = diff(copies["source"], copies[side])
        assert code == 0, json.dumps(found)[-3000:]
        assert isinstance(found, dict)
        assert found["equal"] and found["key"] == ["id"]  # the source table's primary key, found by itself
        assert found["left"]["rows"] == found["right"]["rows"] == ROWS
        assert found["left"]["digest"] == found["right"]["digest"], side


def damage_pg(copies: dict[str, Any]) -> None:
    """Every kind of damage done to the PostgreSQL copy: ids 3, 6, 7, 20, 21 different (a value, microseconds
    cut, a float's last bit, NULL -> '', '' -> NULL), 4 missing, 9999 extra."""
    pg, conn = copies["pg"], PG.connect()
    try:
        table = f"{qi(pg)}.{qi('copy')}"
        ratio = float(pg_execute(conn, f"SELECT ratio FROM {table} WHERE id = 7")[0][0])
        for sql, args in ((f"UPDATE {table} SET amount = 99.99 WHERE id = 3", None),
                          (f"DELETE FROM {table} WHERE id = 4", None),
                          (f"UPDATE {table} SET name = '' WHERE id = 20", None),  # NULL -> ''
                          (f"UPDATE {table} SET name = NULL WHERE id = 21", None),  # '' -> NULL
                          (f"UPDATE {table} SET at = date_trunc('second', at) WHERE id = 6", None),
                          (f"UPDATE {table} SET ratio = %s WHERE id = 7", (flipped(ratio),)),
                          (f"INSERT INTO {table} (id, name) VALUES (9999, 'stray')", None)):
            pg_execute(conn, sql, args)
        conn.commit()
    finally:
        conn.close()


def test_each_kind_of_damage_is_found_to_its_key_with_both_values(copies: dict[str, Any]) -> None:
    damage_pg(copies)
    code, found = diff(copies["source"], copies["pg_side"])
    assert code == 1 and isinstance(found, dict)
    assert found["differences"] == {"missing": 1, "extra": 1, "different": 5, "duplicate": 0}
    assert by_kind(found) == {"missing": [4], "extra": [9999], "different": [3, 6, 7, 20, 21]}
    shown = {s["key"]["id"]: s for s in found["samples"] if s["kind"] == "different"}
    assert shown[3]["columns"] == ["amount"]
    assert (shown[3]["left"][0]["amount"], shown[3]["right"][0]["amount"]) == ("3.75", "99.99")
    assert (shown[20]["left"][0]["name"], shown[20]["right"][0]["name"]) == (None, "")
    assert (shown[21]["left"][0]["name"], shown[21]["right"][0]["name"]) == ("", None)
    assert shown[6]["columns"] == ["at"] and shown[6]["left"][0]["at"].endswith(".123456")
    assert shown[7]["columns"] == ["ratio"] and shown[7]["left"][0]["ratio"] != shown[7]["right"][0]["ratio"]
    assert math.isclose(shown[7]["left"][0]["ratio"], shown[7]["right"][0]["ratio"])


def test_a_duplicated_row_in_a_table_without_a_key_and_a_changed_parquet_file(copies: dict[str, Any]) -> None:
    lite = sqlite3.connect(copies["lite"])
    with lite:
        lite.execute("INSERT INTO copy SELECT * FROM copy WHERE id = 5")
    lite.close()
    code, found = diff(copies["source"], copies["lite_side"], "--key", "id")
    assert code == 1 and isinstance(found, dict)
    assert found["differences"]["duplicate"] == 1 and by_kind(found) == {"duplicate": [5]}
    (dup,) = found["samples"]
    assert len(dup["left"]) == 1 and len(dup["right"]) == 2
    code, found = diff(copies["source"], copies["lite_side"], "--key", "")  # rows as a multiset
    assert code == 1 and isinstance(found, dict) and found["differences"] == {"missing": 0, "extra": 1}

    lake = Path(copies["lake"])
    part = sorted(lake.glob("*.parquet"))[0]
    data = pq.read_table(part)
    ids = data.column("id").to_pylist()
    amounts = data.column("amount").to_pylist()
    amounts[0] = amounts[0] + Decimal("0.01")
    data = data.set_column(data.schema.get_field_index("amount"), "amount", pa.array(amounts, data.schema.field(
        "amount").type))
    pq.write_table(data, part)
    code, found = diff(copies["source"], copies["lake_side"], "--key", "id")
    assert code == 1 and isinstance(found, dict)
    assert found["differences"]["different"] == 1 and by_kind(found) == {"different": [ids[0]]}


def test_bad_sides_and_options_are_refused_naming_them(copies: dict[str, Any], tmp_path: Path) -> None:
    code, error = diff({"plugin": "nope", "params": {}}, copies["pg_side"])
    assert code == 204 and "left.plugin" in str(error) and "'nope'" in str(error)
    code, error = diff(copies["source"], {"plugin": "postgres", "params": {"table": "copy", "bogus": 1}})
    assert code == 204 and "right.params" in str(error) and "bogus" in str(error)
    code, error = diff(copies["source"], copies["pg_side"], "--key", "nid")
    assert code == 204 and "--key: nid is not a column of the left side" in str(error)
    code, error = diff(str(tmp_path / "missing.json"), copies["pg_side"])
    assert code == 204 and "left: cannot read" in str(error)
    gone = {"plugin": "postgres", "params": PG.params(copies["pg"], table="no_such_table")}
    code, error = diff(copies["source"], gone)
    assert code == 203 and "cannot compare" in str(error) and "no_such_table" in str(error)


def verify(ws: Workspace, *args: str) -> tuple[int, Any]:
    proc = ws.run_here("--log-level", "warning", "verify", *args)
    return proc.returncode, json.loads(proc.stdout) if proc.returncode in (0, 1) else proc.stderr


def test_verify_compares_a_tasks_source_with_each_destination_read_back(ws: Workspace,
                                                                         copies: dict[str, Any]) -> None:
    code, found = verify(ws, "--task-id", str(copies["task_id"]), "--json")
    assert code == 0, found
    assert sorted(found) == ["lake", "lite", "pg"]
    assert {name: (c["equal"], c["right"]["rows"]) for name, c in found.items()} == {
        "lake": (True, ROWS), "lite": (True, ROWS), "pg": (True, ROWS)}
    conn = PG.connect()
    try:
        pg_execute(conn, f"DELETE FROM {qi(copies['pg'])}.{qi('copy')} WHERE id IN (11, 12)")
        conn.commit()
    finally:
        conn.close()
    code, found = verify(ws, "--task-id", str(copies["task_id"]), "--json")
    assert code == 1
    assert not found["pg"]["equal"] and found["pg"]["differences"]["missing"] == 2
    # The source is read by the task's last plan: the one split holding ids 11 and 12 is named, no other.
    plan = found["pg"]["splits"]
    assert plan["read"] > 1 and list(plan["differing"].values()) == [{"missing": 2}], plan
    assert found["lite"]["splits"] == {"read": plan["read"], "outside": {"rows": 0}, "differing": {}}
    assert found["lite"]["equal"] and found["lake"]["equal"]  # one damaged copy blames no other
    code, found = verify(ws, "--task-id", str(copies["task_id"]), "--destination", "lite", "--json")
    assert code == 0 and list(found) == ["lite"]
    code, error = verify(ws, "--task-id", str(copies["task_id"]), "--destination", "nope")
    assert code == 204 and "--destination: nope is none of the task's (lake, lite, pg)" in error
    transformed = dict(copies["spec"], transforms=[{"filter": "id > 3"}])
    code, error = verify(ws, "--task-id", str(ws.submit(transformed)))
    assert code == 204 and "transforms: the task's transforms change its rows" in error


def test_verify_reads_the_rows_the_source_gained_outside_the_last_plans_key_ranges(ws: Workspace,
                                                                                   copies: dict[str, Any]) -> None:
    """The task's last plan cut ids 1..500 into ranges bounded by their MIN and MAX then: rows inserted since
    below the MIN and above the MAX are read by none of its splits. Verify reads them too, beside the plan's
    splits: each copy lacks them (exit 1), counted outside the run's splits with a sample key; --repair copies
    them (by key, and the parquet copy whole), and verify passes."""
    gained = [0, 501, 502, 100_000]
    admin = SERVER.connect()
    try:
        execute(admin, f"INSERT INTO {q(copies['db'])}.src (id, name, amount) VALUES (0, 'below', 1.50), "
                       "(501, 'above', 2.00), (502, NULL, NULL), (100000, 'far above', 3.25)")
    finally:
        admin.close()
    code, found = verify(ws, "--task-id", str(copies["task_id"]), "--json")
    assert code == 1, found
    for name in ("pg", "lite", "lake"):
        one = found[name]
        assert not one["equal"] and one["differences"]["missing"] == len(gained), (name, one["differences"])
        assert one["left"]["rows"] == ROWS + len(gained) and one["right"]["rows"] == ROWS
        assert by_kind(one) == {"missing": gained}, name
        splits = one["splits"]
        assert splits["read"] > 1 and splits["differing"] == {OUTSIDE: {"missing": len(gained)}}, (name, splits)
        assert splits["outside"]["rows"] == len(gained)
        sample = splits["outside"]["sample"]
        assert sample["kind"] == "missing" and sample["key"]["id"] in gained and sample["right"] == [], sample
    text = ws.run_here("--log-level", "warning", "verify", "--task-id", str(copies["task_id"]), "--destination", "pg")
    assert text.returncode == 1
    assert "(and 4 row(s) outside them), 0 differ" in text.stdout, text.stdout
    assert "outside the run's splits: 4 missing (rows the source holds now that no split of the plan reads; " \
           "e.g. missing id=" in text.stdout, text.stdout

    code, found = verify(ws, "--task-id", str(copies["task_id"]), "--repair", "--json")
    assert code == 0, found
    assert {n: (c["repair"]["method"], c["repair"]["written"], c["repair"]["equal"]) for n, c in found.items()} == {
        "pg": ("keys", 4, True), "lite": ("keys", 4, True), "lake": ("whole", ROWS + 4, True)}
    code, again = verify(ws, "--task-id", str(copies["task_id"]), "--json")
    assert code == 0, again
    for one in again.values():
        assert one["equal"] and one["right"]["rows"] == ROWS + len(gained)
        assert one["splits"]["outside"] == {"rows": len(gained)} and one["splits"]["differing"] == {}


def _split_rows(side: Side, store: str, conn: Any, predicate: str) -> int:
    """The rows of the side's table for which a split's ``predicate`` holds, counted by its server."""
    table = f"{qi(side.params['schema'])}.{qi('t')}" if store == "postgres" else f"{q(side.params['database'])}.t"
    run = pg_execute if store == "postgres" else execute
    return int(run(conn, f"SELECT COUNT(*) FROM {table} WHERE {predicate}")[0][0])


@pytest.mark.parametrize("store", ["mysql", "postgres"])
def test_the_rows_outside_a_plans_splits_are_read_once_below_above_between_and_null(dbs: Databases,
                                                                                    store: str) -> None:
    """A plan cut when the key ran 1..300, its middle split and its IS NULL split left out (a gap between
    ranges, and a plan cut before the key took NULLs); rows added since below and above, with a NULL key, and
    the rows of the gap are read by the outside splits, each once, and the task's ``where`` (a literal ``%``
    in it) still holds there (1007 and 1008 are not read; 1009, inside a range, once): compared with the table
    read whole, every row once, nothing differs."""
    schemas = fresh_schemas() if store == "postgres" else None
    try:
        if schemas is not None:
            pg_schemas = next(schemas)
            conn, where = pg_schemas.conn, pg_schemas.create("vout")
            run = pg_execute
            table = f"{qi(where)}.{qi('t')}"
            params = PG.params(where, table="t")
        else:
            conn, where = dbs.admin, dbs.create("vout")
            run = execute
            table = f"{q(where)}.t"
            params = SERVER.params(where, table="t")
        run(conn, f"CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, k INT NULL, name VARCHAR(20) NOT NULL)")
        values = ", ".join(f"({i}, {i}, '{'skip me' if i % 50 == 0 else f'50% off {i}'}')" for i in range(1, 301))
        run(conn, f"INSERT INTO {table} (id, k, name) VALUES {values}")
        # The where's literal %s: a postgres split's statement doubles them, its predicate does not.
        filtered = {**params, "where": "name NOT LIKE 'skip%' AND name <> 'odd %% name'"}
        source = parse_side({"plugin": store, "params": {**filtered, "split_pk": "k"}}, "source")
        whole = parse_side({"plugin": store, "params": filtered}, "whole")
        ctx = ReadContext(task_id=0, run_id=0, batch_rows=1000, dirty=_Rejections(), plugin=store)
        cut = registry.source(store).splitter(source.source.options, ctx).split(4)
        ranges = [s for s in cut if not s.id.endswith("#null")]
        assert len(ranges) > 3 and len(cut) == len(ranges) + 1, [s.id for s in cut]
        plan = [s for s in ranges if s is not ranges[len(ranges) // 2]]
        run(conn, f"INSERT INTO {table} (id, k, name) VALUES (1001, -7, 'below'), (1002, 0, 'below'), "
                  "(1003, 301, 'above'), (1004, 100000, 'far above'), (1005, NULL, 'no key'), "
                  "(1006, NULL, 'no key'), (1007, 5000, 'skip me above'), (1008, NULL, 'odd %% name'), "
                  "(1009, 10, 'odd % name')")

        found = compare(source, whole, key=("id",), left_splits=plan, readers=2)
        held = _split_rows(source, store, conn, "name NOT LIKE 'skip%' AND name <> 'odd %% name'")
        in_plan = sum(_split_rows(source, store, conn, s.params["predicate"]) for s in plan)
        assert found.equal, (found.counts, found.splits)
        assert found.left_rows == found.right_rows == held == 300 - 6 + 7
        assert found.splits is not None and found.splits["read"] == len(plan)
        assert found.splits["outside"] == {"rows": held - in_plan}, (held, in_plan)
        assert held - in_plan >= 2 + 4  # the NULL keys and the gap's rows, at least (below the first range:
        # postgres's first split is open below, mysql's is not)
    finally:
        if schemas is not None:
            schemas.close()


def test_verify_of_a_file_source_reads_the_files_added_since_its_last_plan(ws: Workspace, copies: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    """A task copying a parquet directory (one split a file) into sqlite; a file added to the directory since
    is read by no split of the last plan: verify reads it too and names its rows missing, outside the run's
    splits; a query source's plan (one split, the whole query) leaves nothing outside."""
    lite = str(tmp_path / "from_lake.db")
    spec = {"source": copies["lake_side"],
            "destinations": [{"id": "lite", "plugin": "sqlite", "params": {"path": lite, "table": "copy"}}]}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, (task.get("error"), stderr[-2000:])
    part = sorted(Path(copies["lake"]).glob("*.parquet"))[0]
    added = pq.read_table(part).slice(0, 3)
    added = added.set_column(0, "id", pa.array([7001, 7002, 7003], added.schema.field("id").type))
    pq.write_table(added, Path(copies["lake"]) / "zz-added.parquet")
    code, found = verify(ws, "--task-id", str(task["id"]), "--json", "--key", "id")
    assert code == 1, found
    one = found["lite"]
    assert by_kind(one) == {"missing": [7001, 7002, 7003]} and one["left"]["rows"] == ROWS + 3, one
    assert one["splits"]["differing"] == {OUTSIDE: {"missing": 3}} and one["splits"]["outside"]["rows"] == 3

    query = {"plugin": "mysql", "params": SERVER.params(copies["db"], query="SELECT * FROM src WHERE id <= 100")}
    spec = {"source": query,
            "destinations": [{"id": "lite", "plugin": "sqlite", "params": {"path": lite, "table": "q"}}]}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, (task.get("error"), stderr[-2000:])
    code, found = verify(ws, "--task-id", str(task["id"]), "--json", "--key", "id")
    assert code == 0 and found["lite"]["splits"] == {"read": 1, "outside": {"rows": 0}, "differing": {}}, found


def test_verify_repair_mends_every_kind_of_damage_in_each_store(ws: Workspace, copies: dict[str, Any]) -> None:
    """Each damage verify finds is repaired in the copy it is in: PostgreSQL and sqlite (tables without a primary
    key: sqlite's holds a row twice) by key (the differing keys deleted, the source's rows of them written again
    by a recorded repair task), parquet written again whole; the copies then equal the source, and a second
    verify finds nothing."""
    damage_pg(copies)
    lite = sqlite3.connect(copies["lite"])
    with lite:
        lite.execute("INSERT INTO copy SELECT * FROM copy WHERE id = 5")  # a duplicated row (no key there)
        lite.execute("DELETE FROM copy WHERE id = 8")
        lite.execute("UPDATE copy SET name = 'changed' WHERE id = 12")
    lite.close()
    part = sorted(Path(copies["lake"]).glob("*.parquet"))[0]
    data = pq.read_table(part)
    pq.write_table(data.slice(1), part)  # its first row gone

    code, found = verify(ws, "--task-id", str(copies["task_id"]), "--repair", "--json")
    assert code == 0, found
    repairs = {name: c["repair"] for name, c in found.items()}
    assert repairs["pg"]["method"] == "keys" and repairs["pg"]["equal"], repairs["pg"]
    assert repairs["pg"]["deleted"] == 6 and repairs["pg"]["written"] == 6  # 5 different + 1 extra; 5 + 1 missing
    assert repairs["lite"]["method"] == "keys" and repairs["lite"]["equal"], repairs["lite"]
    assert repairs["lite"]["deleted"] == 3 and repairs["lite"]["written"] == 3  # 5 (twice) and 12; 5, 8, 12
    assert repairs["lake"]["method"] == "whole" and repairs["lake"]["equal"], repairs["lake"]
    tasks = [t for r in repairs.values() for t in r["tasks"]]
    assert len(tasks) == 3 and all(ws.show(t)["status"] == "success" for t in tasks)  # recorded, each succeeded
    code, again = verify(ws, "--task-id", str(copies["task_id"]), "--json")
    assert code == 0 and all(c["equal"] and "repair" not in c for c in again.values()), again


def test_verify_repair_in_mysql_csv_and_jsonl(ws: Workspace, copies: dict[str, Any], tmp_path: Path) -> None:
    db = copies["db"]
    admin = SERVER.connect()
    try:
        execute(admin, f"CREATE TABLE {q(db)}.mine LIKE {q(db)}.src")
    finally:
        admin.close()
    spec = {"source": copies["source"],
            "destinations": [
                {"id": "my", "plugin": "mysql", "params": SERVER.params(db, table="mine")},
                {"id": "csv", "plugin": "file", "params": {"path": str(tmp_path / "csv"), "format": "csv"}},
                {"id": "jl", "plugin": "file", "params": {"path": str(tmp_path / "jl"), "format": "jsonl"}}]}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, (task.get("error"), stderr[-2000:])
    admin = SERVER.connect()
    try:
        execute(admin, f"UPDATE {q(db)}.mine SET name = NULL WHERE id = 2")
        execute(admin, f"DELETE FROM {q(db)}.mine WHERE id = 9")
    finally:
        admin.close()
    for name in ("csv", "jl"):
        part = sorted((tmp_path / name).glob("part-*"))[0]
        lines = part.read_text().splitlines(keepends=True)
        part.write_text("".join(lines[:-1]))  # its last row gone
    code, found = verify(ws, "--task-id", str(task["id"]), "--repair", "--json")
    assert code == 0, found
    assert {n: (c["repair"]["method"], c["repair"]["equal"]) for n, c in found.items()} == {
        "my": ("upsert", True), "csv": ("whole", True), "jl": ("whole", True)}
    assert found["my"]["repair"]["deleted"] == 0 and found["my"]["repair"]["written"] == 2  # 2 replaced, 9 added


def test_verify_repair_of_an_upsert_destination(ws: Workspace, copies: dict[str, Any]) -> None:
    """A destination loaded by upsert is repaired too, by upsert on its primary key."""
    pg, conn = copies["pg"], PG.connect()
    try:
        pg_execute(conn, f"CREATE TABLE {qi(pg)}.{qi('ups')} (LIKE {qi(pg)}.{qi('copy')} INCLUDING ALL)")
        pg_execute(conn, f"ALTER TABLE {qi(pg)}.{qi('ups')} ADD PRIMARY KEY (id)")
        conn.commit()
    finally:
        conn.close()
    spec = {"source": copies["source"], "destinations": [
        {"id": "ups", "plugin": "postgres",
         "params": PG.params(pg, table="ups", write_mode="upsert", upsert_key=["id"])}]}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, (task.get("error"), stderr[-2000:])
    conn = PG.connect()
    try:
        pg_execute(conn, f"DELETE FROM {qi(pg)}.{qi('ups')} WHERE id IN (30, 31)")
        conn.commit()
    finally:
        conn.close()
    code, found = verify(ws, "--task-id", str(task["id"]), "--repair", "--json")
    assert code == 0 and found["ups"]["repair"]["equal"], found
    assert found["ups"]["repair"]["method"] == "upsert"
    assert found["ups"]["repair"]["written"] == 2 and found["ups"]["repair"]["deleted"] == 0


def test_verify_repair_of_a_sqlite_table_with_a_primary_key(ws: Workspace, copies: dict[str, Any],
                                                             tmp_path: Path) -> None:
    """A sqlite table with a primary key is repaired by upsert on it (``key``): the extra row deleted, the
    changed and the missing one written over."""
    path = str(tmp_path / "keyed.db")
    lite = sqlite3.connect(path)
    with lite:
        lite.execute("CREATE TABLE keyed (id INTEGER PRIMARY KEY, name TEXT, amount NUMERIC, ratio REAL, at TEXT)")
    lite.close()
    spec = {"source": copies["source"],
            "destinations": [{"id": "keyed", "plugin": "sqlite", "params": {"path": path, "table": "keyed"}}]}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, (task.get("error"), stderr[-2000:])
    lite = sqlite3.connect(path)
    with lite:
        lite.execute("UPDATE keyed SET name = 'changed' WHERE id = 12")
        lite.execute("DELETE FROM keyed WHERE id = 8")
        lite.execute("INSERT INTO keyed (id, name) VALUES (9999, 'stray')")
    lite.close()
    code, found = verify(ws, "--task-id", str(task["id"]), "--repair", "--json")
    assert code == 0, found
    repair = found["keyed"]["repair"]
    assert (repair["method"], repair["equal"], repair["deleted"], repair["written"]) == ("upsert", True, 1, 2), repair


def test_a_failed_repair_by_upsert_leaves_no_key_missing(ws: Workspace, copies: dict[str, Any]) -> None:
    """A PostgreSQL copy with a primary key is repaired by upsert. Its repair task's write fails (a trigger
    refuses the missing row 4, in the split of the different ones): the split rolls back, so every key the copy
    held is still there, as it was (deleted first, as the route for copies without a key does, they would be
    gone); only the extra key was removed. Once the trigger is dropped, a second --repair mends it all."""
    pg, table = copies["pg"], f"{qi(copies['pg'])}.{qi('copy')}"
    conn = PG.connect()
    pg_execute(conn, f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
    conn.commit()
    damage_pg(copies)
    try:
        pg_execute(conn, f"CREATE FUNCTION {qi(pg)}.refuse_4() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                         "IF NEW.id = 4 THEN RAISE EXCEPTION 'row 4 refused'; END IF; RETURN NEW; END $$")
        pg_execute(conn, f"CREATE TRIGGER refuse_4 BEFORE INSERT ON {table} FOR EACH ROW "
                         f"EXECUTE FUNCTION {qi(pg)}.refuse_4()")
        conn.commit()
        code, found = verify(ws, "--task-id", str(copies["task_id"]), "--repair", "--json")
        repair = found["pg"]["repair"]
        assert code == 1 and repair["method"] == "upsert" and repair["equal"] is False, found["pg"]
        assert "exit code" in repair["reason"] and repair["deleted"] == 1, repair
        held = {r[0]: r[1] for r in pg_execute(conn, f"SELECT id, amount FROM {table} WHERE id IN (3, 4, 6, 7, 20, "
                                                     "21, 9999)")}
        assert sorted(held) == [3, 6, 7, 20, 21] and held[3] == Decimal("99.99"), held  # as they were

        pg_execute(conn, f"DROP TRIGGER refuse_4 ON {table}")
        conn.commit()
    finally:
        conn.close()
    code, found = verify(ws, "--task-id", str(copies["task_id"]), "--repair", "--json")
    assert code == 0 and found["pg"]["repair"]["equal"] and found["pg"]["repair"]["written"] == 6, found["pg"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_verify_stops_promptly_on_a_signal_saying_so(ws: Workspace, dbs: Databases, sig: signal.Signals) -> None:
    """A signal while verify reads ends it within a batch or so of the read, with a message naming the signal
    and exit 203 (not a kill without a word, not a 1 that would say the copies differ)."""
    db = dbs.create("vsig")
    # A view over MariaDB's sequence engine: the source grows to 2M rows below without inserting one (and a
    # view, which the catalog does not list, is a side verify reads as it reads a table).
    view = f"CREATE OR REPLACE VIEW {q(db)}.src AS SELECT seq AS id, CONCAT('row ', seq) AS v FROM {q(db)}.seq_1_to_%s"
    execute(dbs.admin, view % 10)
    # No split_pk: the plan is one split, the whole table, so verify reads every row the table holds then.
    spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="src")},
            "destinations": [{"id": "lite", "plugin": "sqlite", "params": {"path": "copy.db", "table": "copy"}}]}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, stderr[-2000:]
    # The source grows after the copy: reading it back takes a while (about 10 s on one reader here).
    execute(dbs.admin, view % 2_000_000)
    proc = subprocess.Popen([*wormhole_command(), "--log-level", "warning", "verify", "--task-id", str(task["id"]),
                             "--readers", "1"], cwd=ws.root, env=ws.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not execute(dbs.admin, "SELECT id FROM information_schema.processlist WHERE db = %s AND "
                                     "info LIKE 'SELECT%%src%%' AND id <> CONNECTION_ID()", (db,)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "verify never started reading the source"
            time.sleep(0.05)
        time.sleep(0.5)  # well into the read
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 203, (proc.returncode, err[-2000:])
    assert f"error: interrupted by {sig.name}: the comparison stopped before it ended; nothing is reported" in err
    assert "Traceback" not in err and out == ""  # no partial comparison printed as if it were one
    assert took < 3, took  # within a batch or so, not the ~10 s the read would take

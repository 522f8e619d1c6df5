"""``wormhole verify --task-id N`` of an incremental task (issue 39, item 3) on the real MariaDB server: each
destination is compared with the source within the range of the cursor column the task's runs delivered to
it (its own range when it missed a window), rows the source has gained since are not blamed on it, a row
deleted from one copy is named, a row updated after its window was copied (an update-time cursor) is not a
difference, and a destination the task delivered nothing to says so instead of passing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace
from tests.e2e import test_database_incremental as dbinc
from tests.e2e.test_incremental import append_setup, insert, run_tick, workspace
from tests.mysql_helpers import Databases, create_table, execute, q
from tests.pg_helpers import pg_execute, qi

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

source_db, pg_schema = dbinc.source_db, dbinc.pg_schema  # its fixtures: a database of tables a-d, a schema


def verify(ws: Workspace, *args: str) -> tuple[int, Any]:
    proc = ws.run_here("--log-level", "warning", "verify", *args)
    return proc.returncode, json.loads(proc.stdout) if proc.returncode in (0, 1) else proc.stderr


def recurring(ws: Workspace, spec: dict[str, Any]) -> int:
    """``spec`` submitted as a recurring task (never due by itself: each run is a tick :func:`run_tick` claims)."""
    spec["settings"]["schedule"] = "0 0 1 1 *"
    (ws.root / "task.json").write_text(json.dumps(spec), encoding="utf-8")
    return int(ws.run("task", "submit", "task.json", check=True).stdout.strip())


def run_ids(ws: Workspace, task_id: int) -> list[int]:
    return sorted(r["id"] for r in ws.show(task_id)["runs"])


def test_an_incremental_task_run_twice_verifies_within_its_windows_and_a_deleted_row_is_named(
        dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "vinc")
    task_id = recurring(ws, spec)
    insert(dbs, db, range(1, 301))
    assert run_tick(ws, task_id, 1)["status"] == "success"
    insert(dbs, db, range(301, 501))  # between the runs
    assert run_tick(ws, task_id, 2)["incremental"]["to"] == "500"
    insert(dbs, db, range(501, 551))  # after the last run: no destination has been sent them yet

    code, found = verify(ws, "--task-id", str(task_id), "--json")
    assert code == 0, found
    # The source's read is narrowed to the window by its server (the 50 rows above it are not even sent).
    window = {"column": "id", "from": None, "from_inclusive": False, "to": "500", "to_inclusive": True,
              "runs": run_ids(ws, task_id), "moved_later": 0, "source_where": "`id` <= 500"}
    for dest in ("my", "lite", "js"):
        assert found[dest]["equal"], found[dest]
        assert found[dest]["window"] == window
        assert found[dest]["left"]["rows"] == found[dest]["right"]["rows"] == 500  # the source's 50 new rows: not
        assert found[dest]["key"] == ["id"]                                         # compared, not blamed

    execute(dbs.admin, f"DELETE FROM {q(db)}.dst WHERE id = 42")
    code, found = verify(ws, "--task-id", str(task_id), "--json")
    assert code == 1
    assert found["my"]["differences"]["missing"] == 1 and not found["my"]["equal"]
    assert [(s["kind"], s["key"]) for s in found["my"]["samples"]] == [("missing", {"id": 42})]
    assert found["lite"]["equal"] and found["js"]["equal"]  # one damaged copy blames no other
    text = ws.run_here("--log-level", "warning", "verify", "--task-id", str(task_id), "--destination", "my")
    assert text.returncode == 1
    assert "window: id from the first row to 500 (inclusive), delivered by run(s)" in text.stdout
    assert "missing id=42" in text.stdout

    code, found = verify(ws, "--task-id", str(task_id), "--destination", "my", "--repair", "--json")
    assert code == 0, found
    assert found["my"]["repair"]["method"] == "keys" and found["my"]["repair"]["equal"]
    assert [int(r[0]) for r in execute(dbs.admin, f"SELECT id FROM {q(db)}.dst ORDER BY id")] == list(range(1, 501))
    # The repair task read the key it mends, not a window of its own: the job's watermarks are the run's.
    assert {w["value"] for w in ws.show(task_id)["watermarks"]["destinations"].values()} == {"500"}


def test_a_destination_that_missed_a_window_is_compared_with_its_own_and_one_sent_nothing_is_not_compared(
        dbs: Databases, tmp_path: Path) -> None:
    db, ws, spec = append_setup(dbs, tmp_path, "vincmiss")
    spec["destinations"] = [d for d in spec["destinations"] if d["id"] != "lite"]
    task_id = recurring(ws, spec)
    insert(dbs, db, range(1, 101))
    assert run_tick(ws, task_id, 1)["status"] == "success"
    insert(dbs, db, range(101, 201))
    execute(dbs.admin, f"RENAME TABLE {q(db)}.dst TO {q(db)}.dst_away")  # run 2 cannot write `my`
    second = run_tick(ws, task_id, 2)
    assert second["destinations"]["my"]["status"] == "failed" and second["incremental"]["to"] == "200"
    execute(dbs.admin, f"RENAME TABLE {q(db)}.dst_away TO {q(db)}.dst")

    code, found = verify(ws, "--task-id", str(task_id), "--json")
    assert code == 0, found
    first, _ = run_ids(ws, task_id)
    assert (found["my"]["window"]["to"], found["my"]["window"]["runs"]) == ("100", [first])
    assert found["my"]["left"]["rows"] == found["my"]["right"]["rows"] == 100
    assert (found["js"]["window"]["to"], found["js"]["left"]["rows"], found["js"]["right"]["rows"]) == ("200", 200, 200)

    # A task whose runs never committed `my` (its table is missing): `my` is not compared, and that is no pass.
    create_table(dbs.admin, db, "src2", "id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL")
    execute(dbs.admin, f"INSERT INTO {q(db)}.src2 SELECT id, v FROM {q(db)}.src")
    other = json.loads(json.dumps(spec))
    other["name"] = "events_sync_2"
    other["source"]["params"]["table"] = "src2"
    other["destinations"][0]["params"]["table"] = "nowhere"
    other["destinations"][1]["params"]["path"] = "out2"
    broken = recurring(ws, other)
    assert run_tick(ws, broken, 1)["destinations"]["my"]["status"] == "failed"
    code, found = verify(ws, "--task-id", str(broken), "--json")
    assert code == 1, found
    assert found["my"] == {"equal": False, "compared": False,
                           "reason": "nothing delivered to compare: no run of the task committed my"}
    assert found["js"]["equal"] and found["js"]["right"]["rows"] == 200
    text = ws.run_here("--log-level", "warning", "verify", "--task-id", str(broken))
    assert text.returncode == 1
    assert "[my]\nnot compared: nothing delivered to compare: no run of the task committed my" in text.stdout
    # A task that never ran: nothing delivered anywhere.
    fresh = recurring(ws, dict(other, name="events_sync_3"))
    code, found = verify(ws, "--task-id", str(fresh), "--json")
    assert code == 1 and {d: c["compared"] for d, c in found.items()} == {"my": False, "js": False}


def test_a_row_updated_after_its_window_was_copied_has_moved_to_the_next_window_not_differed(
        dbs: Databases, tmp_path: Path) -> None:
    """lastmodified on an update time: a row changed after its window was copied is past the window now; the
    copies hold its old version, which is what they were sent, so it is counted as moved, not as extra."""
    db = dbs.create("vinclm")
    for table in ("src", "dst"):
        create_table(dbs.admin, db, table, "id INT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL, "
                                           "updated_at DATETIME(6) NOT NULL")
    execute(dbs.admin, f"INSERT INTO {q(db)}.src SELECT seq, CONCAT('a', seq), NOW(6) - INTERVAL 1 HOUR + "
                       f"INTERVAL seq SECOND FROM {q(db)}.seq_1_to_200")
    ws = workspace(tmp_path)
    spec = {"name": "orders_sync",
            "source": {"plugin": "mysql", "params": dbs.server.params(db, table="src", split_pk="id"),
                       "incremental": {"column": "updated_at", "mode": "lastmodified", "lag_s": 1}},
            "destinations": [
                {"id": "my", "plugin": "mysql", "params": dbs.server.params(db, table="dst", write_mode="upsert")},
                {"id": "lite", "plugin": "sqlite", "params": {"path": "dw.db", "table": "t", "write_mode": "upsert",
                                                              "key": ["id"]}}],
            "settings": {"speed": {"channel": 2}}}
    task_id = recurring(ws, spec)
    assert run_tick(ws, task_id, 1)["status"] == "success"
    lite = sqlite3.connect(ws.root / "dw.db")
    assert lite.execute("SELECT typeof(updated_at) FROM t LIMIT 1").fetchone() == ("text",)  # read as a time
    lite.close()

    execute(dbs.admin, f"UPDATE {q(db)}.src SET v = 'changed', updated_at = NOW(6) WHERE id IN (5, 6)")
    code, found = verify(ws, "--task-id", str(task_id), "--json")
    assert code == 0, found
    for dest in ("my", "lite"):
        assert found[dest]["equal"] and found[dest]["window"]["moved_later"] == 2, found[dest]
        assert found[dest]["left"]["rows"] == 198 and found[dest]["right"]["rows"] == 200
        assert found[dest]["window"]["column"] == "updated_at" and found[dest]["window"]["to_inclusive"] is False
        # A time's bound is widened by a day on the server (a zone may shift it); the mask keeps the window's.
        assert found[dest]["window"]["source_where"].startswith("`updated_at` <= '"), found[dest]["window"]

    # A change that kept its update time is no move: the copy holds another value than the source's.
    execute(dbs.admin, f"UPDATE {q(db)}.dst SET v = 'damaged' WHERE id = 7")
    code, found = verify(ws, "--task-id", str(task_id), "--destination", "my", "--json")
    assert code == 1
    assert found["my"]["differences"]["different"] == 1 and found["my"]["samples"][0]["key"] == {"id": 7}
    text = ws.run_here("--log-level", "warning", "verify", "--task-id", str(task_id), "--destination", "lite")
    assert text.returncode == 0 and "2 key(s) it holds have moved past the window in the source since" in text.stdout


def test_an_incremental_database_task_is_verified_table_by_table_within_each_tables_window(
        ws: Workspace, source_db: str, tmp_path: Path, pg_schema: str) -> None:
    lite = str(tmp_path / "copy.db")
    task_id = ws.submit(dbinc.spec(source_db, lite, pg_schema, ["a", "b"]))
    assert ws.run_here("--task-id", str(task_id)).returncode == 0
    dbinc.add(source_db, "a", range(31, 36))  # not sent yet: not compared
    code, found = verify(ws, "--task-id", str(task_id), "--json")
    assert code == 0, found
    assert sorted(found) == [f"{d}/{source_db}.{t}" for d in ("lite", "pg") for t in ("a", "b")]
    for name, comparison in found.items():
        table = name[-1]
        assert comparison["equal"], comparison
        assert comparison["left"]["rows"] == comparison["right"]["rows"] == {"a": 30, "b": 20}[table]
        assert (comparison["window"]["column"], comparison["window"]["to"], comparison["window"]["source_where"]) == \
            ({"a": "n", "b": "N"}[table], {"a": "300", "b": "200"}[table],
             {"a": "`n` <= 300", "b": "`N` <= 200"}[table])  # b's column is `N`
    conn = dbinc.PG.connect()
    try:
        pg_execute(conn, f"DELETE FROM {qi(pg_schema)}.{qi('b')} WHERE id = 3")
        conn.commit()
    finally:
        conn.close()
    code, found = verify(ws, "--task-id", str(task_id), "--json")
    assert code == 1
    assert {name for name, c in found.items() if not c["equal"]} == {f"pg/{source_db}.b"}
    assert found[f"pg/{source_db}.b"]["samples"][0]["key"] == {"id": 3}

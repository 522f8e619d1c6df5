"""``settings.verify`` (issue 39, items 1 and 2) on the real stores: one MySQL table fanned out to MySQL
(truncate and append into a table holding rows), PostgreSQL, sqlite, parquet, csv and jsonl, each read back
after its commit and compared with what it was sent. A destination whose server changes rows as they
arrive (a trigger, as a misconfigured target or a collation would) fails its verification alone, naming the
key that differs, with its rows left committed (exit 202); the other destinations verify. ``count`` counts;
a store that cannot be read back is not verified, never passed; a target its own post_sql moves away after
the commit fails its verification alone; a resumed run verifies the splits it held from the crashed run by
the digests recorded for them before each split's commit."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MYSQL_URL, Workspace, log_events, mysql_or_skip, run_task
from tests.e2e.test_resume import resume, start
from tests.mysql_helpers import Server, execute, q
from tests.pg_helpers import PgServer, fresh_schemas, pg_execute, qi
from wormhole.verify.by_plan import OUTSIDE

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

SERVER = Server.from_url(MYSQL_URL)
PG = PgServer.from_url()
ROWS = 3000


@pytest.fixture
def source_db() -> Iterator[str]:
    mysql_or_skip().close()
    db = f"wh_vrun_{uuid.uuid4().hex[:8]}"
    admin = SERVER.connect()
    execute(admin, f"CREATE DATABASE {q(db)} CHARACTER SET utf8mb4")
    try:
        execute(admin, f"CREATE TABLE {q(db)}.src (id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NULL, "
                       "amount DECIMAL(12,2) NULL, ratio DOUBLE NULL, at DATETIME(6) NULL, doc JSON NULL)")
        execute(admin, f"INSERT INTO {q(db)}.src SELECT seq, IF(seq % 10 = 0, NULL, IF(seq % 10 = 1, '', "
                       "CONCAT('naïve ✓ ', seq))), seq * 1.25, seq / 3, TIMESTAMP('2026-01-02 03:04:05.123456') + "
                       "INTERVAL seq SECOND, IF(seq % 7 = 0, NULL, JSON_OBJECT('n', seq, 'x', 1.50)) "
                       f"FROM {q(db)}.seq_1_to_{ROWS}")
        execute(admin, f"CREATE TABLE {q(db)}.kept LIKE {q(db)}.src")
        execute(admin, f"INSERT INTO {q(db)}.kept (id, name) VALUES (-1, 'there before'), (-2, NULL)")
        execute(admin, f"CREATE TABLE {q(db)}.changed LIKE {q(db)}.src")
        # The server changes one row as it arrives: what it holds is not what it was sent.
        execute(admin, f"CREATE TRIGGER {q(db)}.bend BEFORE INSERT ON {q(db)}.changed FOR EACH ROW "
                       "SET NEW.amount = IF(NEW.id = 42, NEW.amount + 0.01, NEW.amount)")
        yield db
    finally:
        execute(admin, f"DROP DATABASE IF EXISTS {q(db)}")
        admin.close()


def mysql_dest(db: str, table: str, **more: Any) -> dict[str, Any]:
    return SERVER.params(db, table=table, **more)


def test_every_destination_is_read_back_and_one_that_bends_a_row_fails_alone(
        ws: Workspace, tmp_path: Path, source_db: str) -> None:
    db = source_db
    for schemas in fresh_schemas():
        pg = schemas.create("vrun")
        spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="src", split_pk="id")},
                "settings": {"verify": "checksum"},
                "destinations": [
                    {"id": "copy", "plugin": "mysql", "params": mysql_dest(db, "kept", load="truncate")},
                    {"id": "pg", "plugin": "postgres", "params": PG.params(pg, table="copy", create_table=True)},
                    {"id": "lite", "plugin": "sqlite", "params": {"path": str(tmp_path / "c.db"), "table": "copy"}},
                    {"id": "lake", "plugin": "file", "params": {"path": str(tmp_path / "lake"), "format": "parquet"}},
                    {"id": "csv", "plugin": "file", "params": {"path": str(tmp_path / "csv"), "format": "csv"}},
                    {"id": "jsonl", "plugin": "file", "params": {"path": str(tmp_path / "jl"), "format": "jsonl"}},
                    {"id": "bent", "plugin": "mysql", "params": mysql_dest(db, "changed")}]}
        code, task, stderr = run_task(ws, spec)
        result = task["result"] if isinstance(task.get("result"), dict) else json.loads(task["result"])
        states = {k: d.get("verify", {}) for k, d in result["destinations"].items()}
        assert code == 202, (json.dumps(states, indent=1), stderr[-3000:])
        for name in ("copy", "pg", "lite", "lake", "csv", "jsonl"):
            found = states[name]
            assert found["state"] == "verified", (name, found)
            assert found["rows_found"] == ROWS and found["digest_found"] == found["digest_expected"], name
        assert {d["status"] for d in result["destinations"].values()} == {"success"}  # every row committed
        bent = states["bent"]
        assert bent["state"] == "mismatch" and bent["rows_found"] == ROWS
        assert bent["digest_found"] != bent["digest_expected"]
        assert "bent: verify checksum mismatch (its rows stay committed)" in result["error"]
        finished = [e for e in log_events(stderr) if e.get("event") == "task.finished"]
        assert finished and finished[-1]["verify"] == "verified 6/7 destinations; failed: bent"


def test_an_append_is_compared_with_what_the_target_held_before_and_count_counts(
        ws: Workspace, tmp_path: Path, source_db: str) -> None:
    db = source_db
    spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="src", split_pk="id")},
            "settings": {"verify": "count"},
            "destinations": [{"id": "kept", "plugin": "mysql", "params": mysql_dest(db, "kept")},
                             {"id": "null", "plugin": "stream", "params": {}}]}
    code, task, stderr = run_task(ws, spec)
    result = task["result"] if isinstance(task.get("result"), dict) else json.loads(task["result"])
    kept, null = (result["destinations"][k]["verify"] for k in ("kept", "null"))
    assert code == 0, (kept, null, stderr[-2000:])
    assert kept == {"mode": "count", "state": "verified", "rows_expected": ROWS + 2, "rows_found": ROWS + 2,
                    "splits": kept["splits"]}
    assert null["state"] == "not_verified" and "stream store" in null["reason"]  # never a pass
    # The same append verified by checksum, after a row of the target changed behind the run's back:
    # the comparison is of what it held before plus what was sent.
    spec["settings"] = {"verify": "checksum"}
    spec["destinations"] = spec["destinations"][:1]
    conn = SERVER.connect()
    try:
        execute(conn, f"DELETE FROM {q(db)}.kept WHERE id > 0")
    finally:
        conn.close()
    code, task, stderr = run_task(ws, spec)
    result = task["result"] if isinstance(task.get("result"), dict) else json.loads(task["result"])
    assert code == 0 and result["destinations"]["kept"]["verify"]["state"] == "verified", stderr[-2000:]


def test_a_destination_changed_during_the_run_is_found_by_the_key(ws: Workspace, tmp_path: Path,
                                                                    source_db: str) -> None:
    """A PostgreSQL destination whose trigger bends one row: the mismatch names the key and both values."""
    for schemas in fresh_schemas():
        pg = schemas.create("vbend")
        conn = PG.connect()
        try:
            pg_execute(conn, f"CREATE TABLE {qi(pg)}.copy (id int PRIMARY KEY, name varchar(40), "
                             "amount numeric(12,2), ratio double precision, at timestamp(6), doc jsonb)")
            pg_execute(conn, f"CREATE FUNCTION {qi(pg)}.bend() RETURNS trigger AS $$ BEGIN "
                             "IF NEW.id = 77 THEN NEW.name := 'bent'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql")
            pg_execute(conn, f"CREATE TRIGGER bend BEFORE INSERT ON {qi(pg)}.copy FOR EACH ROW "
                             f"EXECUTE FUNCTION {qi(pg)}.bend()")
            conn.commit()
        finally:
            conn.close()
        spec = {"source": {"plugin": "mysql", "params": SERVER.params(source_db, table="src", split_pk="id")},
                "settings": {"verify": "checksum"},
                "destinations": [{"id": "pg", "plugin": "postgres",
                                  "params": PG.params(pg, table="copy", load="truncate")}]}
        code, task, stderr = run_task(ws, spec)
        result = task["result"] if isinstance(task.get("result"), dict) else json.loads(task["result"])
        found = result["destinations"]["pg"]["verify"]
        assert code == 202 and result["destinations"]["pg"]["status"] == "success", (found, stderr[-2000:])
        assert found["state"] == "mismatch" and found["differences"]["different"] == 1, found
        assert len(found["differing_splits"]) == 1 and len(found["differing_splits"][0]) > 0, found  # the one split
        (sample,) = found["samples"]
        assert sample["key"] == {"id": 77} and sample["columns"] == ["name"]
        assert sample["left"][0]["name"] == "naïve ✓ 77" and sample["right"][0]["name"] == "bent"


@pytest.mark.parametrize("crash", ["before_seal:stg:5", "after_seal:lake:5"])
def test_a_resumed_run_verifies_the_splits_it_holds_by_their_recorded_digests(
        ws: Workspace, tmp_path: Path, source_db: str, crash: str) -> None:
    """Killed after four of eight splits were made durable in a staging load and a parquet directory; the
    takeover writes only the rest, and still verifies each whole target: the held splits count by the digests
    recorded for them (a resumed append cannot be verified, and says so). Each split's digest is in the task
    database before its destination commits it: killed right after the parquet directory committed its fifth
    split, before anything else was recorded of it (``after_seal``), that split is held and has its digest."""
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 40}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.5, "stale_s": 2.0}, recovery={"retry_wait_s": 0.2})
    conn = SERVER.connect()
    try:
        execute(conn, f"CREATE TABLE {q(source_db)}.appended LIKE {q(source_db)}.src")
    finally:
        conn.close()
    spec = {"source": {"plugin": "mysql", "params": SERVER.params(source_db, table="src", split_pk="id")},
            "settings": {"verify": "checksum", "speed": {"channel": 1}},
            "destinations": [
                {"id": "stg", "plugin": "mysql", "concurrency": 1,
                 "params": mysql_dest(source_db, "kept", load="staging")},
                {"id": "lake", "plugin": "file", "params": {"path": str(tmp_path / "lake"), "format": "parquet"}},
                {"id": "app", "plugin": "mysql", "concurrency": 1, "params": mysql_dest(source_db, "appended")}]}
    task_id = ws.submit(spec)
    code, task, events = resume(ws, task_id, start(ws, task_id, crash=crash))
    result = task["result"]
    found = {k: d["verify"] for k, d in result["destinations"].items()}
    assert code == 0, (found, events[-5:])
    killed_in = crash.split(":")[1]
    held = result["destinations"][killed_in]["splits_resumed"]
    assert held >= (4 if crash.startswith("before_seal") else 5), result["destinations"][killed_in]
    for name in ("stg", "lake"):
        assert found[name]["state"] == "verified", (name, found[name])
        assert found[name]["rows_found"] == ROWS and found[name]["splits"] == result["source"]["splits"], found[name]
    assert found["app"]["state"] == "not_verified" and "resumed run" in found["app"]["reason"]


def test_a_database_task_verifies_every_table_in_every_destination(ws: Workspace, tmp_path: Path,
                                                                   source_db: str) -> None:
    """Each (table, destination) pair read back after its commit; the trigger-bent table fails its pair
    alone: the task is partial (202) and names the pair."""
    for schemas in fresh_schemas():
        pg = schemas.create("vdb")
        spec = {"source": {"plugin": "mysql", "params": {**SERVER.params(source_db), "tables": ["src", "changed"]}},
                "settings": {"verify": "checksum"},
                "destinations": [
                    {"id": "pg", "plugin": "postgres", "params": PG.params(pg, table="{table}", create_table=True)},
                    {"id": "lite", "plugin": "sqlite", "params": {"path": str(tmp_path / "db.sqlite"),
                                                                   "table": "{table}"}},
                    {"id": "back", "plugin": "mysql",
                     "params": {**SERVER.params(source_db), "table": "{table}_copy", "create_table": True}}]}
        conn = SERVER.connect()
        try:  # the bending trigger on one copy: changed_copy alters id 42 on its way in
            execute(conn, f"CREATE TABLE {q(source_db)}.changed_copy LIKE {q(source_db)}.changed")
            execute(conn, f"CREATE TRIGGER {q(source_db)}.bend2 BEFORE INSERT ON {q(source_db)}.changed_copy "
                          "FOR EACH ROW SET NEW.name = IF(NEW.id = 42, 'bent', NEW.name)")
            execute(conn, f"INSERT INTO {q(source_db)}.changed SELECT * FROM {q(source_db)}.src WHERE id <= 100")
        finally:
            conn.close()
        code, task, stderr = run_task(ws, spec)
        result = task["result"]
        states = {k: (d.get("verify") or {}).get("state") for k, d in result["destinations"].items()}
        reasons = {k: (d.get("verify") or {}).get("reason") or d["error"] for k, d in result["destinations"].items()}
        assert code == 202, (states, stderr[-3000:])
        bad = {k for k, s in states.items() if s != "verified"}
        bent = next(k for k in states if k.startswith("back/") and k.endswith(".changed"))
        assert len(states) == 6 and bad == {bent}, reasons
        assert task["verify"].startswith("verified 5/6 destinations; failed: back/")


def test_a_source_changed_since_the_run_is_said_instead_of_blaming_the_destination(
        ws: Workspace, source_db: str) -> None:
    """The destination's trigger changes row 42 and the same value in the source, as a writer of the source would
    have between the read and the check: the copy now equals the source, not what was sent; the result says the
    source changed since the run."""
    db = source_db
    conn = SERVER.connect()
    try:
        execute(conn, f"CREATE TABLE {q(db)}.moved LIKE {q(db)}.src")
        execute(conn, f"CREATE TRIGGER {q(db)}.move BEFORE INSERT ON {q(db)}.moved FOR EACH ROW BEGIN "
                      "IF NEW.id = 42 THEN SET NEW.ratio = -1; "
                      f"UPDATE {q(db)}.src SET ratio = -1 WHERE id = 42; END IF; END")
    finally:
        conn.close()
    spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="src", split_pk="id")},
            "settings": {"verify": "checksum"},
            "destinations": [{"id": "moved", "plugin": "mysql", "params": mysql_dest(db, "moved", load="truncate")}]}
    code, task, stderr = run_task(ws, spec)
    found = task["result"]["destinations"]["moved"]["verify"]
    assert code == 202 and found["state"] == "mismatch", (found, stderr[-2000:])
    assert "the source changed since the run" in found["reason"], found
    assert found["differences"] == {"missing": 0, "extra": 0, "different": 0, "duplicate": 0}, found


def test_a_mismatch_located_names_the_rows_the_source_gained_outside_the_runs_splits(
        ws: Workspace, source_db: str) -> None:
    """The destination's trigger bends row 42 and adds a row to the source above the key's MAX, as a writer of
    the source would after the run's plan was cut: the located mismatch reads the source's rows outside the
    run's splits too, so it names the new row missing (outside the run's splits) beside the bent one, and says
    the source changed since the run."""
    db = source_db
    execute_admin(f"CREATE TABLE {q(db)}.grown LIKE {q(db)}.src")
    execute_admin(f"CREATE TRIGGER {q(db)}.grow BEFORE INSERT ON {q(db)}.grown FOR EACH ROW BEGIN "
                  "IF NEW.id = 42 THEN SET NEW.ratio = -1; "
                  f"INSERT INTO {q(db)}.src (id, name) VALUES ({ROWS + 1000}, 'gained'); END IF; END")
    spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="src", split_pk="id")},
            "settings": {"verify": "checksum"},
            "destinations": [{"id": "grown", "plugin": "mysql", "params": mysql_dest(db, "grown", load="truncate")}]}
    code, task, stderr = run_task(ws, spec)
    found = task["result"]["destinations"]["grown"]["verify"]
    assert code == 202 and found["state"] == "mismatch", (found, stderr[-2000:])
    assert found["differences"] == {"missing": 1, "extra": 0, "different": 1, "duplicate": 0}, found
    assert {(s["kind"], s["key"]["id"]) for s in found["samples"]} == {("different", 42), ("missing", ROWS + 1000)}
    assert OUTSIDE in found["differing_splits"] and len(found["differing_splits"]) == 2, found
    assert "the source changed since the run" in found["reason"], found


@pytest.mark.parametrize("mode", ["checksum", "count"])
def test_a_target_gone_after_its_commit_fails_its_verification_alone(
        ws: Workspace, tmp_path: Path, source_db: str, mode: str) -> None:
    """A destination whose own post_sql moves its table away after the commit (an archive step, say) cannot be
    read back: its verification fails (``failed``, never a pass), its rows stay committed where post_sql put
    them, the task is partial (202) naming it, and the other destinations verify."""
    db = source_db
    execute_admin(f"CREATE TABLE {q(db)}.moved LIKE {q(db)}.src")
    spec = {"source": {"plugin": "mysql", "params": SERVER.params(db, table="src", split_pk="id")},
            "settings": {"verify": mode},
            "destinations": [
                {"id": "copy", "plugin": "mysql", "params": mysql_dest(db, "kept", load="truncate")},
                {"id": "lite", "plugin": "sqlite", "params": {"path": str(tmp_path / "c.db"), "table": "copy"}},
                {"id": "gone", "plugin": "mysql", "params": mysql_dest(
                    db, "moved", post_sql=[f"RENAME TABLE {q(db)}.moved TO {q(db)}.moved_archive"])}]}
    code, task, stderr = run_task(ws, spec)
    result = task["result"] if isinstance(task.get("result"), dict) else json.loads(task["result"])
    states = {k: d.get("verify", {}) for k, d in result["destinations"].items()}
    assert code == 202, (json.dumps(states, indent=1), stderr[-3000:])
    assert task["status"] == result["status"] == "partial"
    gone = states["gone"]
    assert gone["state"] == "failed" and gone["mode"] == mode and gone["rows_expected"] == ROWS, gone
    assert "rows_found" not in gone and "digest_found" not in gone
    assert gone["reason"].startswith("the destination could not be read back: ") and "moved" in gone["reason"]
    assert f"gone: verify {mode} failed (its rows stay committed): the destination could not be read back" \
        in result["error"]
    assert {k: s["state"] for k, s in states.items()} == {"copy": "verified", "lite": "verified", "gone": "failed"}
    assert {k: d["status"] for k, d in result["destinations"].items()} == \
        {"copy": "success", "lite": "success", "gone": "success"}  # every destination committed its rows
    conn = SERVER.connect()
    try:
        assert execute(conn, f"SELECT COUNT(*) FROM {q(db)}.moved_archive")[0][0] == ROWS
    finally:
        conn.close()
    finished = [e for e in log_events(stderr) if e.get("event") == "task.finished"]
    assert finished and finished[-1]["verify"] == "verified 2/3 destinations; failed: gone"


def execute_admin(sql: str) -> None:
    conn = SERVER.connect()
    try:
        execute(conn, sql)
    finally:
        conn.close()

"""The mysql store end to end: ``wormhole --task-id N`` as a subprocess against the real MariaDB server.

A sharded source, fan-out to several MySQL destinations, a destination whose connection is KILLed
or whose privilege is revoked mid-run, a staging load watched by a concurrent reader, rejected rows
and bad parameters. Every test makes its own uuid-named databases (and users) and drops them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest

from tests import conftest
from tests.conftest import MYSQL_URL, Workspace, log_events, wormhole_command
from tests.mysql_helpers import (
    NO_SUCH_TABLE,
    Connection,
    Databases,
    Server,
    assert_json_lines,
    connection_ids,
    count,
    create_table,
    execute,
    fill_from_sequence,
    fingerprint,
    global_max_allowed_packet,
    insert_rows,
    kill,
    polling,
    q,
    scalar,
    staged_rows,
    table_rows,
    tables,
    user_tables,
)
from wormhole.plugins.mysql.dialect import MYSQL

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

SERVER = Server.from_url(MYSQL_URL)

ROWS = 200_000
"""Rows of the fan-out source: with BATCH rows per transaction, hundreds of commits to act between."""
BATCH = 500

FANOUT_DDL = ("id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NULL, amount DECIMAL(12,2) NULL, "
              "tag VARCHAR(8) NOT NULL")
FANOUT_COLUMNS = ("id", "name", "amount", "tag")
FANOUT_FILL = {"id": "seq", "name": "IF(seq % 97 = 0, NULL, CONCAT('row-', seq))",
               "amount": "IF(seq % 89 = 0, NULL, seq / 100)", "tag": "'new'"}

LOST_CONNECTION = re.compile(r"lost connection|gone away|connection was killed|\b(2013|2006|1927)\b", re.I)
"""How a client hears of a KILLed session (MariaDB may answer 1927 instead of dropping the socket)."""


def mysql_source(db: str, table: str = "src", **params: Any) -> dict[str, Any]:
    return {"plugin": "mysql", "params": SERVER.params(db, table=table, split_pk="id") | params}


def mysql_dest(dest_id: str, db: str, *, table: str = "t", error_limit: dict[str, Any] | None = None,
               **params: Any) -> dict[str, Any]:
    dest: dict[str, Any] = {"id": dest_id, "plugin": "mysql", "params": SERVER.params(db, table=table) | params}
    if error_limit is not None:
        dest["error_limit"] = error_limit
    return dest


def file_dest(dest_id: str, path: str) -> dict[str, Any]:
    return {"id": dest_id, "plugin": "file", "params": {"path": path, "format": "jsonl"}}


def run_task(ws: Workspace, spec: dict[str, Any], timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    return conftest.run_task(ws, spec, timeout)


def run_while(ws: Workspace, spec: dict[str, Any], step: Callable[[Connection], bool],
              interval: float = 0.005) -> tuple[int, dict[str, Any], str]:
    """:func:`run_task` while ``step(watcher)`` is polled (until it returns True) on a connection of its own."""
    watcher = SERVER.connect()
    try:
        with polling(lambda: step(watcher), interval):
            return run_task(ws, spec)
    finally:
        watcher.close()


class KillOnce:
    """A :func:`run_while` step: once ``measure(watcher)`` is above 0, KILL the connections
    ``sessions(watcher)`` names. ``killed`` lists them, ``measured`` the measure when they were killed."""

    def __init__(self, measure: Callable[[Connection], int], sessions: Callable[[Connection], list[int]]) -> None:
        self.measure, self.sessions = measure, sessions
        self.killed: list[int] = []
        self.measured: list[int] = []

    def __call__(self, watcher: Connection) -> bool:
        seen = self.measure(watcher)
        if seen == 0:
            return False
        self.killed.extend(kill(watcher, self.sessions(watcher)))
        if self.killed:
            self.measured.append(seen)
        return bool(self.killed)


def fanout_source(dbs: Databases, rows: int = ROWS) -> str:
    db = dbs.create("src")
    create_table(dbs.admin, db, "src", FANOUT_DDL)
    fill_from_sequence(dbs.admin, db, "src", rows, FANOUT_FILL)
    return db


def target(dbs: Databases, label: str, ddl: str = FANOUT_DDL, old_rows: int = 0) -> str:
    """A database holding table ``t`` (optionally with ``old_rows`` rows tagged 'old')."""
    db = dbs.create(label)
    create_table(dbs.admin, db, "t", ddl)
    if old_rows:
        fill_from_sequence(dbs.admin, db, "t", old_rows, FANOUT_FILL | {"tag": "'old'"})
    return db


def staging_leftovers(conn: Connection, db: str) -> list[str]:
    """Staging tables (``t__wh<task>_<run>_<task database id>``) still present in ``db``."""
    return [name for name in tables(conn, db) if name.startswith("t__wh")]


def file_leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.wormhole-*")]


# --- 1. sharded source ---------------------------------------------------------------------------

SHARD_DDL = ("id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NULL, amount DECIMAL(12,2) NULL, day DATE NULL, "
             "ts DATETIME NULL")
SHARD_COLUMNS = ("id", "name", "amount", "day", "ts")
SHARD_TABLES = ("orders_a", "orders_b", "orders_c")
SHARD_ROWS = ((500, 1200, 3000), (2500, 800, 1500), (900, 3000, 600))
"""Rows per (database, table): uneven on purpose, so a split that loses or repeats a range shows."""
CENT = Decimal("0.01")


def shard_rows(first_id: int, n: int) -> list[tuple[Any, ...]]:
    """Deterministic rows with a few NULLs in every nullable column and non-ASCII text."""
    return [(rid,
             None if rid % 97 == 0 else f"näme-{rid}-名",
             None if rid % 89 == 0 else Decimal(rid % 100_000) / 100,
             None if rid % 101 == 0 else date(2020, 1, 1) + timedelta(days=rid % 1500),
             None if rid % 103 == 0 else datetime(2021, 1, 1) + timedelta(seconds=rid * 37))
            for rid in range(first_id, first_id + n)]


def _iso(value: Any) -> str:
    return value if isinstance(value, str) else value.isoformat()


def canon(row: Sequence[Any]) -> tuple[Any, ...]:
    """One comparable form for a row from MySQL (Decimal, date) or from JSON (text, maybe a float)."""
    rid, name, amount, day, ts = row
    return (int(rid), name,
            None if amount is None else Decimal(str(amount)).quantize(CENT),
            None if day is None else _iso(day),
            None if ts is None else _iso(ts).replace(" ", "T"))


def by_id(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    # Sorting on the id alone: whole-tuple sorting would compare None with values.
    return sorted(rows, key=lambda r: r[0])


def read_jsonl(directory: Path, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    rows = []
    for part in sorted(directory.glob("*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            rows.append(canon(tuple(obj[c] for c in columns)))
    return rows


def test_sharded_source_to_staging_truncate_and_jsonl(ws: Workspace, dbs: Databases) -> None:
    """3 databases x 3 tables read with split_pk into staging, truncate and jsonl: each holds exactly the union."""
    admin = dbs.admin
    shards = [dbs.create(f"shard{i}") for i in range(3)]
    expected: list[tuple[Any, ...]] = []
    for s, db in enumerate(shards):
        for t, (table, n) in enumerate(zip(SHARD_TABLES, SHARD_ROWS[s])):
            create_table(admin, db, table, SHARD_DDL)
            rows = shard_rows(1 + (3 * s + t) * 10_000, n)  # ids unique across every shard
            insert_rows(admin, db, table, SHARD_COLUMNS, rows)
            expected.extend(canon(r) for r in rows)
    staged_db, truncated_db = dbs.create("stg"), dbs.create("trunc")
    for db in (staged_db, truncated_db):
        create_table(admin, db, "t", SHARD_DDL)
        # Rows that must not survive: staging swaps in a fresh table, truncate empties the target first.
        insert_rows(admin, db, "t", SHARD_COLUMNS, shard_rows(900_000, 50))
    source = {"plugin": "mysql", "params": SERVER.params(split_pk="id", connections=[
        {"host": SERVER.host, "port": SERVER.port, "database": db, "tables": list(SHARD_TABLES)} for db in shards])}
    spec = {"name": "sharded", "source": source, "settings": {"speed": {"channel": 3}},
            "destinations": [mysql_dest("stg", staged_db, load="staging", batch_size=1000),
                             mysql_dest("trunc", truncated_db, load="truncate", batch_size=1000),
                             file_dest("files", "out/sharded")]}

    code, task, stderr = run_task(ws, spec)

    assert code == 0, stderr[-3000:]
    total = sum(map(sum, SHARD_ROWS))
    assert task["status"] == "success"
    assert task["result"]["source"]["rows_read"] == total
    for dest_id in ("stg", "trunc", "files"):
        dest = task["result"]["destinations"][dest_id]
        assert (dest["status"], dest["rows_written"], dest["rows_rejected"]) == ("success", total, 0), dest
    want = by_id(expected)
    assert by_id(canon(r) for r in table_rows(admin, staged_db, "t", SHARD_COLUMNS)) == want
    assert by_id(canon(r) for r in table_rows(admin, truncated_db, "t", SHARD_COLUMNS)) == want
    assert by_id(read_jsonl(ws.root / "out/sharded", SHARD_COLUMNS)) == want
    assert staging_leftovers(admin, staged_db) == []
    assert file_leftovers(ws.root) == []


# --- 2-4. a destination that breaks mid-run --------------------------------------------------------

class TestMidRunFailures:
    def test_killed_connection_without_retries_fails_only_that_destination(self, ws: Workspace,
                                                                           dbs: Databases) -> None:
        """KILL the victim's connection once rows are staged (retries 0): exit 202, it alone is rolled back."""
        admin = dbs.admin
        src = fanout_source(dbs)
        good_staged, good_truncated = target(dbs, "a"), target(dbs, "b")
        victim = target(dbs, "victim", old_rows=10)
        before = fingerprint(admin, victim, "t", FANOUT_COLUMNS)
        # Once rows are staged, KILL the victim's connections.
        killer = KillOnce(lambda w: staged_rows(w, victim, "t"), lambda w: connection_ids(w, victim))

        # A KILLed connection loses the split's transaction: with no split retry, the victim fails.
        ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                      recovery={"split_retries": 0})
        spec = {"source": mysql_source(src),
                "destinations": [mysql_dest("a", good_staged, load="staging", batch_size=BATCH),
                                 mysql_dest("b", good_truncated, load="truncate", batch_size=BATCH),
                                 mysql_dest("victim", victim, load="staging", batch_size=BATCH, retries=0)]}
        code, task, stderr = run_while(ws, spec, killer)
        killed, staged_at_kill = killer.killed, killer.measured

        assert killed, f"no rows were ever staged for the victim while it ran: nothing was killed\n{stderr[-3000:]}"
        assert staged_at_kill[-1] < ROWS  # mid-run, not once everything was staged
        assert code == 202, stderr[-3000:]
        assert_json_lines(stderr)
        assert task["status"] == "partial"
        dests = task["result"]["destinations"]
        assert dests["a"]["status"] == dests["b"]["status"] == "success"
        hit = dests["victim"]
        assert hit["status"] == "failed" and hit["rolled_back"] is True and hit["rollback_error"] is None, hit
        # What was committed before the kill, then undone (the whole result in the message if not). When
        # the KILL lands between a COMMIT and its answer, that piece is unconfirmed and rightly not counted:
        # at most one piece per writer thread (3) can be missing then.
        unconfirmed = 3 * BATCH if "is unknown" in (hit["error"] or "") else 0
        assert hit["rows_written"] >= staged_at_kill[-1] - unconfirmed, json.dumps(hit)
        assert LOST_CONNECTION.search(hit["error"] or ""), hit["error"]
        assert "victim" in task["error"] and LOST_CONNECTION.search(task["result"]["error"]), task["error"]
        want = fingerprint(admin, src, "src", FANOUT_COLUMNS)
        assert fingerprint(admin, good_staged, "t", FANOUT_COLUMNS) == want
        assert fingerprint(admin, good_truncated, "t", FANOUT_COLUMNS) == want
        assert user_tables(admin, victim) == ["t"]  # the staging table is dropped, no split marker left
        assert fingerprint(admin, victim, "t", FANOUT_COLUMNS) == before
        victim_events = {e["event"] for e in log_events(stderr) if e.get("destination") == "victim"}
        assert {"destination.failed", "destination.rolled_back"} <= victim_events

    def test_revoked_privilege_fails_only_that_destination(self, ws: Workspace, dbs: Databases) -> None:
        """REVOKE INSERT from the victim's user mid-run: it fails with the denial, rollback_sql empties it."""
        admin = dbs.admin
        src = fanout_source(dbs)
        good_staged, good_appended, victim = target(dbs, "a"), target(dbs, "b"), target(dbs, "victim")
        password = uuid.uuid4().hex
        user = dbs.create_user(password)
        # Table-level grants: a change to them reaches open sessions at their next statement.
        execute(admin, f"GRANT SELECT, INSERT, DELETE ON {q(victim)}.`t` TO %s@'%%'", (user,))
        # The split markers' table, created once by an admin (the user may not CREATE), as the README says.
        execute(admin, MYSQL.markers_ddl.format(table=f"{q(victim)}.`wormhole_splits`"))
        execute(admin, f"GRANT SELECT, INSERT, DELETE ON {q(victim)}.`wormhole_splits` TO %s@'%%'", (user,))
        revoked: list[int] = []

        def revoke_once_rows_arrive(watcher: Connection) -> bool:
            rows = count(watcher, victim, "t")
            if rows == 0:
                return False
            execute(watcher, f"REVOKE INSERT ON {q(victim)}.`t` FROM %s@'%%'", (user,))
            revoked.append(rows)
            return True

        spec = {"source": mysql_source(src),
                "destinations": [
                    mysql_dest("a", good_staged, load="staging", batch_size=BATCH),
                    mysql_dest("b", good_appended, load="append", batch_size=BATCH),
                    mysql_dest("victim", victim, user=user, password=password, load="append", batch_size=BATCH,
                               rollback_sql=["DELETE FROM t"])]}
        code, task, stderr = run_while(ws, spec, revoke_once_rows_arrive)

        assert revoked, f"the victim never committed a batch while it ran: nothing was revoked\n{stderr[-3000:]}"
        assert revoked[0] < ROWS  # mid-run
        assert code == 202, stderr[-3000:]
        dests = task["result"]["destinations"]
        assert dests["a"]["status"] == dests["b"]["status"] == "success"
        hit = dests["victim"]
        assert hit["status"] == "failed" and hit["rolled_back"] is True and hit["rollback_error"] is None, hit
        assert "INSERT command denied" in (hit["error"] or ""), hit["error"]
        assert user in hit["error"]
        assert count(admin, victim, "t") == 0  # rollback_sql ran
        want = fingerprint(admin, src, "src", FANOUT_COLUMNS)
        assert fingerprint(admin, good_staged, "t", FANOUT_COLUMNS) == want
        assert fingerprint(admin, good_appended, "t", FANOUT_COLUMNS) == want

    def test_one_killed_connection_is_survived_with_default_retries(self, ws: Workspace, dbs: Databases) -> None:
        """One KILL with retries 3: every row exactly once, or (KILL during COMMIT) failed, rolled back, said so."""
        admin = dbs.admin
        src = fanout_source(dbs)
        # No key on the target: a batch sent twice would show up as extra rows instead of being refused.
        victim = target(dbs, "victim", ddl=FANOUT_DDL.replace(" PRIMARY KEY", ""))
        # Once rows arrive, KILL only a session busy loading a piece: a KILL landing on its COMMIT is the rare
        # other outcome, and picking the moment keeps it rare (the first visible rows mean a COMMIT just ran).
        killer = KillOnce(lambda w: count(w, victim, "t"),
                          lambda w: connection_ids(w, victim, running=r"^\s*(LOAD DATA|INSERT)")[:1])

        spec = {"source": mysql_source(src),
                "destinations": [mysql_dest("victim", victim, load="append", batch_size=BATCH,
                                            rollback_sql=["DELETE FROM t"])]}
        code, task, stderr = run_while(ws, spec, killer)
        killed, rows_at_kill = killer.killed, killer.measured

        assert len(killed) == 1, f"expected one writer connection killed mid-run, got {killed}\n{stderr[-3000:]}"
        # The writer's connection died mid-statement with rows still to come: whatever was written
        # after that went through a new connection, so the success branch below is a real retry.
        assert rows_at_kill[-1] < ROWS
        assert_json_lines(stderr)
        hit = task["result"]["destinations"]["victim"]
        # The KILL lost the split's transaction (or, landing on a COMMIT, the marker row says whether it
        # committed): the split is written again, alone, and every row is there exactly once.
        assert code == 0, stderr[-3000:]
        assert (hit["status"], hit["rows_written"], hit["rows_rejected"]) == ("success", ROWS, 0), hit
        assert fingerprint(admin, victim, "t", FANOUT_COLUMNS) == fingerprint(admin, src, "src", FANOUT_COLUMNS)
        events = log_events(stderr)
        lost = [e for e in events if e.get("event") == "writer.split_discarded"]
        retried = [e for e in events if e.get("event") == "coordinator.split_retry"]
        assert len(lost) == len(retried) <= 1, (lost, retried)  # ops see the split lost and read again
        assert all(e["destination"] == "victim" for e in lost) and task["result"]["source"]["splits_retried"] == len(
            retried)


# --- 5. staging seen by a concurrent reader ---------------------------------------------------------

def test_staging_load_is_all_or_nothing_for_a_concurrent_reader(ws: Workspace, dbs: Databases) -> None:
    """A reader polling the target sees the complete old table until the swap, then the complete new one."""
    admin = dbs.admin
    src = fanout_source(dbs)
    db = target(dbs, "stg", old_rows=1000)
    old, new = (1000, "old", "old"), (ROWS, "new", "new")
    # (rows staged just before, what the target showed); the staged count is read first, so a pair
    # (> 0, old) proves the reader saw the old table while the new rows were already loaded.
    observations: list[tuple[int, tuple[Any, ...]]] = []

    def observe(reader: Connection) -> bool:
        staged = staged_rows(reader, db, "t")
        try:
            seen = execute(reader, f"SELECT COUNT(*), MIN(tag), MAX(tag) FROM {q(db)}.`t`")[0]
        except pymysql.err.ProgrammingError as exc:
            if exc.args[0] != NO_SUCH_TABLE:
                raise
            seen = ("no table", None, None)  # a non-atomic swap: recorded so the assertion shows it
        observations.append((staged, tuple(seen)))
        return False

    spec = {"source": mysql_source(src),
            "destinations": [mysql_dest("stg", db, load="staging", batch_size=BATCH)]}
    code, task, stderr = run_while(ws, spec, observe, interval=0.002)

    assert code == 0, stderr[-3000:]
    assert task["result"]["destinations"]["stg"]["rows_written"] == ROWS
    odd = [o for o in observations if o[1] not in (old, new)]
    assert odd == [], f"{len(odd)} of {len(observations)} reads saw neither the old nor the new table: {odd[:5]}"
    assert any(staged > 0 and seen == old for staged, seen in observations), \
        f"no read saw the old table while rows were staged ({len(observations)} reads)"
    assert tuple(execute(admin, f"SELECT COUNT(*), MIN(tag), MAX(tag) FROM {q(db)}.`t`")[0]) == new
    assert fingerprint(admin, db, "t", FANOUT_COLUMNS) == fingerprint(admin, src, "src", FANOUT_COLUMNS)
    assert staging_leftovers(admin, db) == []


# --- 5b. staging names wormhole does not own -----------------------------------------------------------

def table_comment(conn: Connection, db: str, table: str) -> str | None:
    return scalar(conn, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                        "AND TABLE_NAME = %s", (db, table))


def test_staging_table_naming_a_user_table_fails_only_that_destination(ws: Workspace, dbs: Databases) -> None:
    """A user table as staging_table, or by the default staging name: that destination fails at prepare
    naming it, the table keeps every row, the other destination commits (202), stderr stays JSON lines."""
    admin = dbs.admin
    src = fanout_source(dbs, rows=5000)
    named, defaulted, good = target(dbs, "named", old_rows=10), target(dbs, "dflt", old_rows=10), target(dbs, "ok")
    for db in (named, defaulted):
        create_table(admin, db, "mine", FANOUT_DDL)
        fill_from_sequence(admin, db, "mine", 300, FANOUT_FILL | {"tag": "'mine'"})
    spec = {"source": mysql_source(src),
            "destinations": [mysql_dest("named", named, load="staging", staging_table="mine"),
                             mysql_dest("defaulted", defaulted, load="staging"),
                             mysql_dest("ok", good, load="staging")]}
    task_id = ws.submit(spec)
    # The default staging name is `t__wh<task>_<run>_<task database id>`: a fresh workspace's first run is run 1.
    staging = f"t__wh{task_id}_1_{ws.taskdb_id()}"
    execute(admin, f"RENAME TABLE {q(defaulted)}.`mine` TO {q(defaulted)}.{q(staging)}")
    kept = {(named, "mine"): fingerprint(admin, named, "mine", FANOUT_COLUMNS),
            (defaulted, staging): fingerprint(admin, defaulted, staging, FANOUT_COLUMNS),
            (named, "t"): fingerprint(admin, named, "t", FANOUT_COLUMNS),
            (defaulted, "t"): fingerprint(admin, defaulted, "t", FANOUT_COLUMNS)}

    proc = ws.run("--task-id", str(task_id))
    code, task, stderr = proc.returncode, ws.show(task_id), proc.stderr

    assert code == 202, stderr[-3000:]
    dests = task["result"]["destinations"]
    assert dests["ok"]["status"] == "success"
    assert fingerprint(admin, good, "t", FANOUT_COLUMNS) == fingerprint(admin, src, "src", FANOUT_COLUMNS)
    for dest_id, table in (("named", "mine"), ("defaulted", staging)):
        hit = dests[dest_id]
        assert hit["status"] == "failed" and hit["rows_written"] == 0, hit
        assert f"`{table}`" in hit["error"] and "already exists" in hit["error"], hit["error"]
        assert "left untouched" in hit["error"], hit["error"]
    assert "params.staging_table of destination 'named'" in dests["named"]["error"]
    for (db, table), want in kept.items():
        assert fingerprint(admin, db, table, FANOUT_COLUMNS) == want, (db, table)
    assert sorted(user_tables(admin, named)) == ["mine", "t"]
    assert sorted(user_tables(admin, defaulted)) == ["t", staging]
    assert_json_lines(stderr)


def test_staging_table_of_a_killed_run_is_adopted_by_the_retried_run(ws: Workspace, dbs: Databases) -> None:
    """A run SIGKILLed mid-load leaves its marked staging table with the splits it committed; after
    `task retry --force` the next run resumes it: it adopts that table, writes only the splits it lacks,
    and the swap leaves the target exact, with its own comment, and nothing else behind."""
    admin = dbs.admin
    src = fanout_source(dbs)
    db = target(dbs, "stg", old_rows=10)
    execute(admin, f"ALTER TABLE {q(db)}.`t` COMMENT = 'owned by the shop team'")
    spec = {"source": mysql_source(src, split_factor=4), "settings": {"speed": {"channel": 2}},
            "destinations": [mysql_dest("stg", db, load="staging", staging_table="t_stage", batch_size=BATCH)]}
    # `task retry --force` resets a running task only once its heartbeat is stale: keep that short.
    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                  claim={"heartbeat_s": 0.2, "stale_s": 1.0})
    task_id = ws.submit(spec)
    proc = ws.popen("--task-id", str(task_id))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if "t_stage" in tables(admin, db) and count(admin, db, "t_stage") > 0:  # a split committed
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before anything was staged"
        proc.kill()  # no rollback, no commit: the staging table stays behind
    finally:
        proc.communicate(timeout=30)
    assert table_comment(admin, db, "t_stage") == f"wormhole:db={ws.taskdb_id()},task={task_id},run=1,dest=stg"
    staged = count(admin, db, "t_stage")
    assert 0 < staged < ROWS

    deadline = time.monotonic() + 30
    while (retry := ws.run("task", "retry", "--force", str(task_id))).returncode == 205:  # heartbeat still fresh
        assert time.monotonic() < deadline, retry.stderr
        time.sleep(0.2)
    assert retry.returncode == 0, retry.stderr
    code, task, stderr = (p := ws.run("--task-id", str(task_id))).returncode, ws.show(task_id), p.stderr

    assert code == 0, stderr[-3000:]
    result = task["result"]
    assert result["resumed_from_run"] == 1 and [r["status"] for r in task["runs"]] == ["crashed", "success"]
    stg = result["destinations"]["stg"]
    assert stg["rows_resumed"] == staged and stg["rows_written"] == ROWS - staged, stg
    assert result["source"]["rows_read"] == ROWS - staged
    assert fingerprint(admin, db, "t", FANOUT_COLUMNS) == fingerprint(admin, src, "src", FANOUT_COLUMNS)
    assert user_tables(admin, db) == ["t"]
    assert table_comment(admin, db, "t") == "owned by the shop team"
    assert not [e for e in log_events(stderr) if e.get("event") == "writer.staging_reclaimed"]
    assert_json_lines(stderr)


# --- 5c. the read side killed or interrupted: stderr stays JSON lines --------------------------------

def test_killed_reader_connection_is_read_again_and_the_task_succeeds(ws: Workspace, dbs: Databases) -> None:
    """KILL one reader's streaming connection mid-split: the coordinator hands the split back, it is read
    again (its partial rows discarded in every destination), the task succeeds with every row exactly
    once, and stderr holds JSON log events only (no pymysql clean-up tracebacks)."""
    admin = dbs.admin
    src, db = dbs.create("src"), dbs.create("wide")
    for name in (src, db):
        create_table(admin, name, "t", "id INT NOT NULL PRIMARY KEY, pad VARCHAR(1000) NOT NULL")
    create_table(admin, db, "a", "id INT NOT NULL, pad VARCHAR(1000) NOT NULL")  # no key: a row twice shows
    # ~40 MB in two splits, read at 10,000 rows/s: the server is still sending each split (its
    # statement in the process list) when the watcher KILLs one reader's connection.
    fill_from_sequence(admin, src, "t", 40_000, {"id": "seq", "pad": "REPEAT(CHAR(65 + seq % 26), 1000)"})
    killed: list[int] = []

    def kill_one_of_two_readers(watcher: Connection) -> bool:
        reading = connection_ids(watcher, src, running=r"^SELECT `id`, `pad`")
        if len(reading) < 2:
            return False
        killed.extend(kill(watcher, reading[:1]))  # the other reader goes on
        return bool(killed)

    ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                  exchange={"batch_rows": 1024, "spill_rows": 1024, "queue_rows": 4096},
                  recovery={"retry_wait_s": 0.1})
    spec = {"source": mysql_source(src, table="t", split_factor=1),
            "settings": {"speed": {"record": 10_000, "channel_record": 5_000}},
            "destinations": [mysql_dest("stg", db, load="staging", batch_size=BATCH),
                             mysql_dest("app", db, table="a", batch_size=BATCH),
                             file_dest("js", str(ws.root / "js"))]}
    code, task, stderr = run_while(ws, spec, kill_one_of_two_readers)

    assert killed, f"two readers were never seen reading at once\n{stderr[-3000:]}"
    assert code == 0, stderr[-3000:]
    want = fingerprint(admin, src, "t", ("id", "pad"))
    assert fingerprint(admin, db, "t", ("id", "pad")) == want and fingerprint(admin, db, "a", ("id", "pad")) == want
    lines = [json.loads(x) for p in sorted((ws.root / "js").glob("part-*")) for x in p.read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == list(range(1, 40_001))
    source = task["result"]["source"]
    assert source["splits_retried"] == 1 and 0 < source["rows_reread"] <= 20_001, source  # one split, read whole again
    failed = [e for e in log_events(stderr) if e.get("event") == "reader.split_failed"]
    assert len(failed) == 1 and LOST_CONNECTION.search(failed[0]["error"]), failed
    assert sorted(tables(admin, db)) == ["a", "t"] + (["wormhole_splits"] if "wormhole_splits" in tables(admin, db)
                                                      else [])
    assert_json_lines(stderr)


def test_sigterm_mid_read_rolls_back_with_json_lines_only(ws: Workspace, dbs: Databases) -> None:
    """SIGTERM while the reader streams: exit 203, rolled back, stderr holds JSON log events only."""
    admin = dbs.admin
    src = fanout_source(dbs)
    db = target(dbs, "stg", old_rows=10)
    before = fingerprint(admin, db, "t", FANOUT_COLUMNS)
    # Eight splits: the first ones commit in the staging table while the reader streams the rest.
    spec = {"source": mysql_source(src, split_factor=8), "settings": {"speed": {"channel": 1}},
            "destinations": [mysql_dest("stg", db, load="staging", batch_size=BATCH)]}
    task_id = ws.submit(spec)
    proc = ws.popen("--task-id", str(task_id))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and staged_rows(admin, db, "t") == 0:
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before anything was staged"
        proc.send_signal(signal.SIGTERM)
    finally:
        _, stderr = proc.communicate(timeout=30)

    assert proc.returncode == 203, stderr[-3000:]
    events = [e["event"] for e in log_events(stderr)]
    assert "reader.finished" not in events, "the read had finished: SIGTERM did not land mid-read"
    task = ws.show(task_id)
    assert task["runs"][-1]["status"] == "interrupted"
    assert task["result"]["destinations"]["stg"]["rolled_back"] is True
    assert fingerprint(admin, db, "t", FANOUT_COLUMNS) == before and staging_leftovers(admin, db) == []
    assert_json_lines(stderr)


# --- 6. rejected rows --------------------------------------------------------------------------------

TOO_LONG = {7, 123, 256, 640, 999}
"""Source ids whose code does not fit the destination's VARCHAR(5)."""
TAKEN = {10, 300, 301, 777}
"""Source ids the destination already holds (insert mode: a duplicate key)."""


@pytest.mark.parametrize("method", ["insert", "load_data"])
def test_rejected_rows_go_to_the_dirty_file(ws: Workspace, dbs: Databases, method: str) -> None:
    """Too-long values and duplicate keys are rejected with MySQL's text; the rest of each batch is written."""
    admin = dbs.admin
    src = dbs.create("src")
    create_table(admin, src, "src", "id INT NOT NULL PRIMARY KEY, code VARCHAR(20) NOT NULL")
    source_rows = [(i, f"too-long-{i}" if i in TOO_LONG else f"c{i}") for i in range(1, 1001)]
    insert_rows(admin, src, "src", ("id", "code"), source_rows)
    db = dbs.create("dst")
    create_table(admin, db, "t", "id INT NOT NULL PRIMARY KEY, code VARCHAR(5) NOT NULL")
    insert_rows(admin, db, "t", ("id", "code"), [(i, "pre") for i in sorted(TAKEN)])
    bad = len(TOO_LONG) + len(TAKEN)
    spec = {"source": mysql_source(src),
            "destinations": [mysql_dest("d", db, load="append", write_mode="insert", method=method, batch_size=100,
                                        strict=True, error_limit={"record": bad})]}

    code, task, stderr = run_task(ws, spec)

    assert code == 201, stderr[-3000:]
    assert task["status"] == "success"
    dest = task["result"]["destinations"]["d"]
    assert (dest["status"], dest["rows_written"], dest["rows_rejected"]) == ("success", 1000 - bad, bad), dest
    expected = {i: "pre" for i in TAKEN} | {i: c for i, c in source_rows if i not in TOO_LONG | TAKEN}
    assert dict(table_rows(admin, db, "t", ("id", "code"))) == expected
    lines = [json.loads(line) for line in (ws.root / task["result"]["dirty_file"]).read_text().splitlines()]
    reasons = {line["row"][0]: line["reason"] for line in lines}
    assert len(lines) == bad and set(reasons) == TOO_LONG | TAKEN, lines
    assert {line["origin"] for line in lines} == {"d"}
    for line in lines:
        assert line["row"] == [line["row"][0], dict(source_rows)[line["row"][0]]]
    for i in TOO_LONG:
        assert "Data too long" in reasons[i], reasons[i]
    for i in TAKEN:
        assert "Duplicate entry" in reasons[i], reasons[i]


# --- 6b. wide rows --------------------------------------------------------------------------------------

def run_measured(ws: Workspace, *args: str) -> tuple[int, str, float]:
    """``wormhole ARGS`` as a subprocess: (exit code, stderr, its peak RSS in MiB: the kernel's high-water
    mark of that very process, as wait4 reports it)."""
    err_path = ws.root / "measured.stderr"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([*wormhole_command(), *args], cwd=ws.root, env=ws.env(), stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return proc.returncode, err_path.read_text(), usage.ru_maxrss / 1024


WIDE = 16 << 20
"""Rows of 16 MiB: each read in two packets, and far over ``exchange.batch_bytes`` and the queue's share."""
WIDE_DDL = "id INT NOT NULL PRIMARY KEY, b LONGBLOB NOT NULL, s VARCHAR(10) NULL"


def test_rows_of_16_mib_stay_within_the_memory_the_queue_settings_allow(ws: Workspace, dbs: Databases) -> None:
    """4 channels, an 8 MiB queue, rows of 16 MiB into MySQL: the process's peak RSS stays under 768 MiB (it
    went over 1.2 GiB while a byte index of 8 bytes per byte cut each row into columns), every row exact."""
    src, db = dbs.create("src"), dbs.create("dst")
    with global_max_allowed_packet(dbs.admin, 64 << 20):
        conn = dbs.server.connect(src)  # a session opened after the change takes the new limit
        try:
            create_table(conn, src, "src", WIDE_DDL)
            create_table(conn, db, "t", WIDE_DDL)
            execute(conn, f"INSERT INTO src SELECT seq, REPEAT(CHAR(96 + seq), {WIDE}), 'x' FROM seq_1_to_8")
        finally:
            conn.close()
        ws.write_conf(monitor={"interval_s": 0.05, "report_every": 20}, timeouts={"shutdown_s": 5.0},
                      exchange={"queue_bytes": 8 << 20})
        spec = {"source": mysql_source(src), "destinations": [mysql_dest("d", db)],
                "settings": {"speed": {"channel": 4}}}
        code, stderr, peak_mib = run_measured(ws, "--task-id", str(ws.submit(spec)))

    assert code == 0, stderr[-3000:]
    assert peak_mib <= 768, f"peak RSS {peak_mib:.0f} MiB"
    digest = "SELECT COUNT(*), SUM(CRC32(b)), SUM(LENGTH(b)) FROM {}.{}"
    assert scalar_row(dbs.admin, digest.format(q(db), "t")) == scalar_row(dbs.admin, digest.format(q(src), "src"))


def scalar_row(conn: Connection, sql: str) -> tuple[Any, ...]:
    return tuple(execute(conn, sql)[0])


WIDER_THAN_PACKET = {5, 14}
"""Source ids whose value (2 MiB) no INSERT within the destination's max_allowed_packet (1 MiB) can hold."""
TOO_LONG_CODE = 6
"""A source id whose code does not fit the destination's VARCHAR(5): its piece (ids 1-8) is written row by row."""


@pytest.mark.parametrize(("method", "rejected"), [("insert", {5, 6, 14}), ("load_data", {5, 6})])
def test_a_row_over_the_destinations_max_allowed_packet_is_rejected_naming_it(
        ws: Workspace, dbs: Databases, method: str, rejected: set[int]) -> None:
    """A row no INSERT of the destination can hold is rejected with a reason naming max_allowed_packet and its
    value, under the error limit, and the rows that fit arrive (the destination failed with "(1153) Got a packet
    bigger than 'max_allowed_packet' bytes", or "(2006) MySQL server has gone away" after 4 reads of the split).
    LOAD DATA streams its rows, so a wide row loads (id 14); only a piece replayed row by row (a bad row in it)
    meets the limit."""
    src, db = dbs.create("src"), dbs.create("dst")
    create_table(dbs.admin, src, "src", "id INT NOT NULL PRIMARY KEY, b LONGTEXT NOT NULL, c VARCHAR(20) NOT NULL")
    create_table(dbs.admin, db, "t", "id INT NOT NULL PRIMARY KEY, b LONGTEXT NOT NULL, c VARCHAR(5) NOT NULL")
    wide = ", ".join(map(str, WIDER_THAN_PACKET))

    def fill() -> None:  # a new session, under the server's own max_allowed_packet: REPEAT makes 2 MiB values
        conn = SERVER.connect()
        try:
            execute(conn, f"INSERT INTO {q(src)}.src SELECT seq, IF(seq IN ({wide}), REPEAT('w', {2 << 20}), "
                          f"CONCAT('small-', seq)), IF(seq = {TOO_LONG_CODE}, 'too-long', 'ok') "
                          f"FROM {q(src)}.seq_1_to_20")
        finally:
            conn.close()

    spec = {"source": {"plugin": "mysql", "params": SERVER.params(src, table="src")},  # one split, one batch
            "destinations": [mysql_dest("d", db, method=method, batch_size=8, strict=True,
                                        error_limit={"record": len(rejected)})]}
    with global_max_allowed_packet(dbs.admin, 1 << 20, prepare=fill):
        code, task, stderr = run_task(ws, spec)

    assert code == 201, stderr[-3000:]
    dest = task["result"]["destinations"]["d"]
    assert (dest["status"], dest["rows_written"], dest["rows_rejected"]) == ("success", 20 - len(rejected),
                                                                             len(rejected)), dest
    expected = [(i, "w" * (2 << 20) if i in WIDER_THAN_PACKET else f"small-{i}", "ok") for i in range(1, 21)
                if i not in rejected]
    assert table_rows(dbs.admin, db, "t", ("id", "b", "c")) == expected
    lines = [json.loads(line) for line in (ws.root / task["result"]["dirty_file"]).read_text().splitlines()]
    reasons = {line["row"][0]: line["reason"] for line in lines}
    assert set(reasons) == rejected
    assert "Data too long" in reasons.pop(TOO_LONG_CODE)
    for reason in reasons.values():
        assert "is 2.0 MiB, over the destination's max_allowed_packet of 1.0 MiB (1048576 bytes)" in reason, reason


# --- 7. bad parameters --------------------------------------------------------------------------------

class TestBadParameters:
    @pytest.mark.parametrize(("params", "name"), [
        # 127.0.0.2 is loopback too (refused at once on port 1) but, unlike the real server's
        # 127.0.0.1, can only be in the error because the error names the bad host.
        ({"host": "127.0.0.2", "port": 1, "connect_retries": 1}, "127.0.0.2"),
        ({"table": "no_such_table"}, "no_such_table"),
        ({"columns": ["id", "no_such_column"]}, "no_such_column"),
        ({"split_pk": "no_such_key"}, "no_such_key"),
    ], ids=["unreachable-host", "missing-table", "unknown-column", "split-pk-not-in-table"])
    def test_bad_source_fails_the_task_and_writes_nothing(self, ws: Workspace, dbs: Databases,
                                                          params: dict[str, Any], name: str) -> None:
        """A bad source parameter fails the task naming it; no destination keeps anything."""
        admin = dbs.admin
        src = fanout_source(dbs, rows=2000)
        staged, appended = target(dbs, "stg"), target(dbs, "app")
        spec = {"source": mysql_source(src, **params),
                "destinations": [mysql_dest("stg", staged, load="staging"),
                                 mysql_dest("app", appended, load="append"), file_dest("files", "out/files")]}

        started = time.monotonic()
        code, task, stderr = run_task(ws, spec, timeout=60)
        elapsed = time.monotonic() - started

        assert code == 203, stderr[-3000:]  # the read side fails: the task is valid, the source is not
        assert task["status"] == "failed"
        assert name in (task["error"] or ""), task["error"]
        assert elapsed < 30, f"took {elapsed:.1f} s to give up"  # connect_retries 1 must fail fast
        for db in (staged, appended):
            assert tables(admin, db) == ["t"] and count(admin, db, "t") == 0
        assert not (ws.root / "out/files").exists()
        assert file_leftovers(ws.root) == []

    @pytest.mark.parametrize("with_good", [True, False], ids=["beside-a-good-one", "alone"])
    def test_missing_destination_table_fails_that_destination(self, ws: Workspace, dbs: Databases,
                                                              with_good: bool) -> None:
        """A destination table that does not exist fails in prepare, naming it: 202 beside a good one, else 203."""
        admin = dbs.admin
        src = fanout_source(dbs, rows=2000)
        missing = dbs.create("missing")
        good = target(dbs, "good")
        dests = [mysql_dest("bad", missing, table="no_such_target", load="staging")]
        if with_good:
            dests.append(mysql_dest("good", good, load="staging"))

        code, task, stderr = run_task(ws, {"source": mysql_source(src), "destinations": dests})

        assert code == (202 if with_good else 203), stderr[-3000:]
        bad = task["result"]["destinations"]["bad"]
        assert bad["status"] == "failed" and "no_such_target" in (bad["error"] or ""), bad
        assert "no_such_target" in task["error"]
        assert tables(admin, missing) == []  # neither the table nor a staging copy was created
        if with_good:
            assert task["result"]["destinations"]["good"]["status"] == "success"
            assert fingerprint(admin, good, "t", FANOUT_COLUMNS) == fingerprint(admin, src, "src", FANOUT_COLUMNS)
        else:
            assert count(admin, good, "t") == 0


def test_sqlite_dynamic_values_into_mysql_are_kept_as_they_are_or_rejected_naming_them(ws: Workspace,
                                                                                         dbs: Databases) -> None:
    """Issue 35 item 4: SQLite keeps each value's own type whatever the column declares. An integer or a real
    in a column with no declared type goes as its text (the real's exact shortest text), a BOOLEAN holding 2
    or a blob in a string column rejects its row with a reason naming column and value; none changes."""
    import sqlite3

    src = ws.root / "dyn.db"
    conn = sqlite3.connect(src)
    with conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, b BOOLEAN, x)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [
            (1, 1, 1), (2, 0, "a"), (3, None, 2.5), (4, 2, "two"), (5, "true", 0.1 + 0.2), (6, 1, b"\x00\xff")])
    conn.close()
    db = dbs.create("dyn")
    create_table(dbs.admin, db, "t", "id INT PRIMARY KEY, b BOOLEAN NULL, x TEXT NULL")
    spec = {"source": {"plugin": "sqlite", "params": {"path": str(src), "table": "t"}},
            "destinations": [mysql_dest("m", db, load="append")], "settings": {"error_limit": {"record": 2}}}
    code, task, stderr = run_task(ws, spec)
    assert code == 201, stderr[-3000:]
    assert table_rows(dbs.admin, db, "t", ("id", "b", "x")) == [
        (1, 1, "1"), (2, 0, "a"), (3, None, "2.5"), (5, 1, "0.30000000000000004")]
    lines = [json.loads(line) for line in (ws.root / task["result"]["dirty_file"]).read_text().splitlines()]
    reasons = {line["row"][0]: line["reason"] for line in lines}
    assert set(reasons) == {4, 6}, lines
    assert "column b: the integer 2 is no boolean" in reasons[4], reasons[4]
    assert "column x: the blob b'\\x00\\xff' is no text" in reasons[6], reasons[6]
    assert "AttributeError" not in stderr

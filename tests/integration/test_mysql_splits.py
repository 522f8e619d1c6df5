"""The mysql destination's splits against the real MariaDB: each split durable with its marker, resume
after a crash (append, truncate, staging), commits lost in flight, lost transactions, leftovers.

A "crash" closes the writer's sockets without a word to the server (its open transactions roll back)
and drops the objects; the resumed run is a new periphery with ``origin_run_id`` = the crashed run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pymysql
import pytest
from structlog.testing import capture_logs

from tests.answer_dropper import AnswerDropper
from tests.integration.test_mysql_store import connect, rows_of, run_sql, writer_options
from wormhole.errors import CommitError, PrepareError, SplitLost
from wormhole.plugins import registry
from wormhole.plugins.base import Column, DurablePeriphery, LeftoverPeriphery, Schema, SplitWriter, WriteContext
from wormhole.plugins.mysql.connection import abandon

pytestmark = pytest.mark.mysql

PLUGIN = registry.get("mysql")
SCHEMA = Schema((Column("id", "int"), Column("name", "string")))
SPLITS = {"A": [(i, f"a{i}") for i in range(1, 6)],
          "B": [(i, f"b{i}") for i in range(10, 13)],
          "C": [(i, f"c{i}") for i in range(20, 24)]}


def ctx(run_id: int, origin: int | None = None, task_id: int = 7) -> WriteContext:
    return WriteContext(task_id=task_id, run_id=run_id, origin_run_id=origin, destination="out", schema=SCHEMA,
                        batch_rows=1000, concurrency=1)


def start(options: Any, context: WriteContext) -> tuple[Any, Any]:
    assert PLUGIN.sink is not None
    periphery = PLUGIN.sink.periphery(options, context)
    periphery.prepare()
    writer = PLUGIN.sink.writer(options, context, periphery, 0)
    writer.open()
    assert isinstance(writer, SplitWriter) and isinstance(periphery, DurablePeriphery)
    return periphery, writer


def write_whole(writer: Any, split_id: str) -> None:
    rows = SPLITS[split_id]
    for i in range(0, len(rows), 2):  # several batches per split
        assert writer.write_split(split_id, rows[i:i + 2]).written == len(rows[i:i + 2])
    writer.end_split(split_id, len(rows))


def crash(writer: Any) -> None:
    """The process dies: every socket closed without COMMIT (the server rolls the open splits back)."""
    for conn in [*writer._splits.values(), *writer._free, writer.conn]:
        if conn is not None:
            abandon(conn)


def user_rows(url: str, table: str = "t") -> list[tuple[Any, ...]]:
    return rows_of(url, table, order="id, name")


def markers(url: str) -> list[tuple[Any, ...]]:
    return run_sql(url, "SELECT task_id, state_run, destination, split_id, `rows` FROM wormhole_splits "
                        "ORDER BY task_id, state_run, split_id")


def tables(url: str) -> list[str]:
    return sorted(r[0] for r in run_sql(url, "SHOW TABLES"))


def expected(*split_ids: str) -> list[tuple[Any, ...]]:
    return sorted(row for s in split_ids for row in SPLITS[s])


@pytest.fixture(name="target")
def fixture_target(mysql_db: str) -> Iterator[str]:
    # No primary key: a row written twice would simply be there twice.
    run_sql(mysql_db, "CREATE TABLE t (id INT, name VARCHAR(20))", "INSERT INTO t VALUES (99, 'old')")
    yield mysql_db


@pytest.mark.parametrize("load", ["append", "truncate", "staging"])
@pytest.mark.parametrize("method", ["insert", "load_data"])
def test_a_crashed_run_resumes_exactly(target: str, load: str, method: str) -> None:
    options = writer_options(target, table="t", load=load, method=method, verify="count", batch_size=1)
    old = [(99, "old")] if load == "append" else []
    periphery, writer = start(options, ctx(1))
    writer.write_split("A", SPLITS["A"][:2])
    writer.write_split("C", SPLITS["C"][:2])  # C stays open: interleaved with A and B
    writer.write_split("A", SPLITS["A"][2:])
    writer.end_split("A", 5)
    write_whole(writer, "B")
    writer.write_split("C", SPLITS["C"][2:])
    crash(writer)
    del periphery, writer
    seen = user_rows(target)
    assert seen == (sorted(old + expected("A", "B")) if load != "staging" else [(99, "old")])
    assert [m[3] for m in markers(target)] == ["", "A", "B"]  # prepare's record, then the splits

    periphery, writer = start(options, ctx(2, origin=1))
    assert periphery.durable_splits() == {"A": 5, "B": 3}
    if load == "staging":
        assert tables(target) == ["t", "t__wh7_1", "wormhole_splits"]  # adopted, not reclaimed
        assert user_rows(target, "t__wh7_1") == expected("A", "B")
    else:
        assert user_rows(target) == sorted(old + expected("A", "B"))  # not truncated again
    write_whole(writer, "C")
    writer.close()
    periphery.commit()  # verify count: A and B of run 1 counted with C of run 2
    assert user_rows(target) == sorted(old + expected("A", "B", "C"))
    assert tables(target) == ["t", "wormhole_splits"]
    # The markers stay through the commit, which they record: a crash before the task's outcome is
    # recorded is resumed as committed, and nothing is written twice.
    assert phase(target) == "committed" and [m[3] for m in markers(target)] == ["", "A", "B", "C"]
    del periphery, writer
    periphery, _ = start(options, ctx(3, origin=1))
    assert periphery.durable_splits() == {"A": 5, "B": 3, "C": 4}
    periphery.commit()
    assert user_rows(target) == sorted(old + expected("A", "B", "C")) and tables(target) == ["t", "wormhole_splits"]
    periphery.release()  # the outcome is recorded
    assert markers(target) == []


class _Crash(BaseException):
    """The process dies here (nothing after it runs, not even the commit's error handling)."""


@pytest.mark.parametrize("after", ["alter", "rename", "swapped"])
def test_a_staging_commit_killed_around_its_swap_is_finished_by_the_resumed_run(target: str, after: str,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap's steps: phase 'swapping', ALTER the comment, RENAME, phase 'swapped', post_sql, 'committed'.
    Killed after any of them, the resumed run finishes the commit: the target holds the load once, the
    previous table is gone and post_sql ran."""
    from wormhole.plugins.mysql.staging import MysqlStaging as Staging
    from wormhole.plugins.sql.markers import SplitMarkers
    from wormhole.plugins.sql.target import TargetSql

    run_sql(target, "CREATE TABLE log (n INT)")
    options = writer_options(target, table="t", load="staging", post_sql=["INSERT INTO log VALUES (1)"])
    periphery, writer = start(options, ctx(1))
    write_whole(writer, "A")
    write_whole(writer, "B")
    writer.close()
    real_run, real_set = TargetSql.run, SplitMarkers.set_phase

    def run(self: Any, conn: Any, statement: str, what: str, error: Any) -> None:
        real_run(self, conn, statement, what, error)
        if (after == "alter" and statement.startswith("ALTER TABLE") and "`t__wh7_1` COMMENT" in statement) or \
                (after == "rename" and statement.startswith("RENAME TABLE")):
            raise _Crash

    def set_phase(self: Any, conn: Any, value: str) -> None:
        real_set(self, conn, value)
        if after == "swapped" and value == "swapped":
            raise _Crash

    monkeypatch.setattr(TargetSql, "run", run)
    monkeypatch.setattr(SplitMarkers, "set_phase", set_phase)
    with pytest.raises(_Crash):
        periphery.commit()
    monkeypatch.undo()
    swapped = after != "alter"
    assert user_rows(target) == (expected("A", "B") if swapped else [(99, "old")])

    periphery, writer = start(options, ctx(2, origin=1))
    assert periphery.durable_splits() == {"A": 5, "B": 3}
    assert isinstance(periphery.staging, Staging) and periphery.staging.swapped is swapped
    writer.close()
    periphery.commit()
    assert user_rows(target) == expected("A", "B") and run_sql(target, "SELECT n FROM log") == [(1,)]
    assert tables(target) == ["log", "t", "wormhole_splits"] and phase(target) == "committed"
    comment = run_sql(target, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
                              "AND TABLE_NAME = 't'")
    assert comment == [("",)]  # the target's own comment, not the staging marker
    periphery.release()
    assert markers(target) == []


def phase(url: str) -> str:
    return str(run_sql(url, "SELECT phase FROM wormhole_splits WHERE split_id = ''")[0][0])


def test_pre_sql_is_not_run_again_on_resume(target: str) -> None:
    options = writer_options(target, table="t", pre_sql=["DELETE FROM t WHERE id < 50"])
    periphery, writer = start(options, ctx(1))
    write_whole(writer, "A")
    crash(writer)
    periphery, writer = start(options, ctx(2, origin=1))
    write_whole(writer, "B")
    periphery.commit()
    assert user_rows(target) == sorted([(99, "old"), *expected("A", "B")])


def test_a_resumed_staging_run_whose_staging_table_is_gone_writes_everything_again(target: str) -> None:
    options = writer_options(target, table="t", load="staging")
    periphery, writer = start(options, ctx(1))
    write_whole(writer, "A")
    crash(writer)
    run_sql(target, "DROP TABLE t__wh7_1")
    periphery, writer = start(options, ctx(2, origin=1))
    assert periphery.durable_splits() == {}  # its markers named rows that are gone
    write_whole(writer, "A")
    periphery.commit()
    assert user_rows(target) == expected("A")


def _killing_commit(conn: Any, url: str, *, commit_first: bool) -> None:
    """Make ``conn.commit`` lose its connection: KILLed from another session before COMMIT is sent, or
    right after the server committed (the answer never arrives); either way the writer sees 2013."""
    real = conn.commit

    def commit() -> None:
        if commit_first:
            real()
        run_sql(url, f"KILL CONNECTION {conn.thread_id()}")
        raise pymysql.err.OperationalError(2013, "Lost connection to server during query")

    conn.commit = commit


@pytest.mark.parametrize("commit_first", [True, False], ids=["after_commit", "before_commit"])
def test_a_commit_lost_in_flight_is_settled_by_the_marker(target: str, commit_first: bool) -> None:
    options = writer_options(target, table="t")
    periphery, writer = start(options, ctx(1))
    write_whole(writer, "A")
    writer.write_split("B", SPLITS["B"])
    _killing_commit(writer._splits["B"], target, commit_first=commit_first)
    if commit_first:
        writer.end_split("B", 3)  # it did commit: durable, nothing to write again
    else:
        with pytest.raises(SplitLost) as lost:
            writer.end_split("B", 3)
        assert lost.value.split_id == "B" and lost.value.code == "SPLIT_LOST"
        assert [m[3] for m in markers(target)] == ["", "A"]
        assert user_rows(target) == sorted([(99, "old"), *expected("A")])
        writer.abort_split("B")  # what the engine does: then B is delivered again
        write_whole(writer, "B")
    writer.close()
    periphery.commit()
    assert user_rows(target) == sorted([(99, "old"), *expected("A", "B")])


@pytest.mark.parametrize("reached", [True, False], ids=["renamed", "never_sent"])
def test_a_swap_whose_answer_is_lost_is_settled_and_rolled_back_exactly(target: str, reached: bool) -> None:
    """The staging swap's RENAME loses its connection: whether or not the server ran it, the rollback that
    follows the failed commit finds out (once the server has ended that session) and leaves the target as
    it was, with no staging or old table left."""
    with AnswerDropper("127.0.0.1", urlparse(target).port or 3306, b"RENAME TABLE", forward=reached) as proxy:
        options = writer_options(target, table="t", load="staging", port=proxy.port)
        periphery, writer = start(options, ctx(1))
        write_whole(writer, "A")
        writer.close()
        proxy.armed.set()
        with pytest.raises(CommitError, match="swapping in the staging table failed"):
            periphery.commit()
        assert proxy.fired.is_set()
        with capture_logs() as logs:
            periphery.rollback()
    assert user_rows(target) == [(99, "old")]
    assert tables(target) == ["t", "wormhole_splits"] and markers(target) == []
    assert [e["swapped"] for e in logs if e["event"] == "writer.swap_settled"] == [reached]


def test_a_lost_connection_mid_split_loses_the_split_not_the_destination(target: str) -> None:
    options = writer_options(target, table="t", batch_size=2)
    periphery, writer = start(options, ctx(1))
    writer.write_split("A", SPLITS["A"][:3])
    write_whole(writer, "B")
    run_sql(target, f"KILL CONNECTION {writer._splits['A'].thread_id()}")
    with pytest.raises(SplitLost, match="split 'A' lost its transaction"):
        writer.write_split("A", SPLITS["A"][3:])
    assert user_rows(target) == sorted([(99, "old"), *expected("B")])  # nothing of A
    writer.abort_split("A")
    write_whole(writer, "A")
    writer.close()
    periphery.commit()
    assert user_rows(target) == sorted([(99, "old"), *expected("A", "B")])


def test_a_deadlock_mid_split_raises_split_lost_and_leaves_nothing_of_it(mysql_db: str) -> None:
    run_sql(mysql_db, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))")
    options = writer_options(mysql_db, table="t", method="insert")
    periphery, writer = start(options, ctx(1))
    writer.write_split("A", [(1, "a1")])  # the split's transaction locks key 1
    other = connect(mysql_db)
    other.begin()
    with other.cursor() as cur:  # a heavier transaction holding key 2: InnoDB picks the split as victim
        cur.executemany("INSERT INTO t VALUES (%s, 'x')", [(i,) for i in range(1000, 1500)] + [(2,)])
    waiter_done = threading.Event()

    def wait_for_key_1() -> None:
        try:
            with other.cursor() as cur:
                cur.execute("INSERT INTO t VALUES (1, 'other')")  # waits on the split's lock
        finally:
            waiter_done.set()

    thread = threading.Thread(target=wait_for_key_1, daemon=True)
    try:
        thread.start()
        deadline = time.monotonic() + 10
        while not run_sql(mysql_db, "SELECT 1 FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"):
            assert time.monotonic() < deadline, "the other session never waited on the split's lock"
            time.sleep(0.02)
        with pytest.raises(SplitLost, match=r"\(1213\)"):
            writer.write_split("A", [(2, "a2")])
        assert waiter_done.wait(10)
    finally:
        other.rollback()
        other.close()
        writer.close()
    assert run_sql(mysql_db, "SELECT COUNT(*) FROM t") == [(0,)]
    writer.abort_split("A")
    writer.write_split("A", [(1, "a1"), (2, "a2")])
    writer.end_split("A", 2)
    writer.close()
    periphery.commit()
    assert rows_of(mysql_db, "t") == [(1, "a1"), (2, "a2")]


def test_an_empty_split_and_bad_rows_inside_a_split(mysql_db: str) -> None:
    run_sql(mysql_db, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(3))")
    options = writer_options(mysql_db, table="t", batch_size=2)
    periphery, writer = start(options, ctx(1))
    result = writer.write_split("A", [(1, "ok"), (2, "too long"), (3, "ok"), (1, "dup")])
    assert result.written == 2 and sorted(r.row[0] for r in result.rejected) == [1, 2]
    assert any("(1406)" in r.reason for r in result.rejected) and any("(1062)" in r.reason for r in result.rejected)
    writer.end_split("A", 2)
    writer.end_split("E", 0)  # no row for this destination: still recorded as durable
    assert [m[3:] for m in markers(mysql_db)] == [("", None), ("A", 2), ("E", 0)]
    writer.close()
    periphery.commit()
    periphery.release()
    assert rows_of(mysql_db, "t") == [(1, "ok"), (3, "ok")] and markers(mysql_db) == []


def test_a_split_another_attempt_made_durable_lands_once(target: str) -> None:
    """Two attempts at one split (a Spark task run again after its first attempt committed, or a process
    whose claim was taken over finishing it too): the second finds the marker and rolls its rows back."""
    options = writer_options(target, table="t", verify="count")
    periphery, first = start(options, ctx(1))
    second = PLUGIN.sink.writer(options, ctx(1), periphery, 1)  # type: ignore[union-attr]
    second.open()
    second.write_split("A", SPLITS["A"])  # its transaction is open while the first one commits the split
    write_whole(first, "A")
    second.end_split("A", 5)  # waits for the marker's lock, finds it there, and rolls back
    for writer in (first, second):
        writer.close()
    periphery.commit()  # verify count: the split's rows once
    assert user_rows(target) == sorted([(99, "old"), *expected("A")])


def test_abort_split_discards_its_rows(target: str) -> None:
    options = writer_options(target, table="t", load="truncate")
    periphery, writer = start(options, ctx(1))
    writer.write_split("A", SPLITS["A"])
    writer.abort_split("A")
    writer.abort_split("never-seen")  # a no-op
    write_whole(writer, "B")
    writer.close()
    periphery.commit()
    assert user_rows(target) == expected("B")


def test_leftovers_of_this_task_are_found_and_cleaned_others_untouched(target: str) -> None:
    options = writer_options(target, table="t", load="staging")
    _periphery, writer = start(options, ctx(1))
    write_whole(writer, "A")
    crash(writer)
    like = "(id INT, name VARCHAR(20))"
    run_sql(target, f"CREATE TABLE t__wh8_1 {like} COMMENT 'wormhole:task=8,run=1,dest=out'",
            f"CREATE TABLE t__wh7_5 {like}",  # our name pattern, no marker: a user's table
            f"CREATE TABLE notes {like} COMMENT 'wormhole:task=7,run=4,dest=out'",  # marker, not our name
            "INSERT INTO wormhole_splits (task_id, state_run, destination, split_id, `rows`) VALUES "
            "(8, 1, 'out', 'X', 1), (7, 2, 'elsewhere', 'Y', 1)")
    assert PLUGIN.sink is not None
    fresh = PLUGIN.sink.periphery(options, ctx(3))  # not prepared: `wormhole task clean`
    assert isinstance(fresh, LeftoverPeriphery)
    db = target.rsplit("/", 1)[1]
    found = [f"table `{db}`.`t__wh7_1` (staging of run 1)", f"1 split marker(s) of run 1 in `{db}`.`wormhole_splits`"]
    assert fresh.leftovers(None) == found
    assert fresh.leftovers(1) == []  # run 1 may still be resumed
    assert fresh.clean_leftovers(None) == found
    assert fresh.leftovers(None) == []
    assert tables(target) == ["notes", "t", "t__wh7_5", "t__wh8_1", "wormhole_splits"]
    assert [m[:4] for m in markers(target)] == [(7, 2, "elsewhere", "Y"), (8, 1, "out", "X")]


@pytest.mark.parametrize("resumed", [False, True])
def test_a_run_removes_what_other_runs_of_its_task_left(target: str, resumed: bool) -> None:
    """Runs 1 and 2 crash, each leaving a staging table and markers. A fresh run 3 removes both; a run
    resuming run 2 removes run 1's and adopts run 2's. Another task's are never touched."""
    options = writer_options(target, table="t", load="staging")
    for run in (1, 2):
        _periphery, writer = start(options, ctx(run))
        write_whole(writer, "A")
        crash(writer)
    run_sql(target, "CREATE TABLE t__wh8_1 (id INT, name VARCHAR(20)) COMMENT 'wormhole:task=8,run=1,dest=out'")
    periphery, _ = start(options, ctx(3, origin=2 if resumed else None))
    assert periphery.durable_splits() == ({"A": 5} if resumed else {})
    kept = ["t__wh7_2"] if resumed else ["t__wh7_3"]
    assert tables(target) == ["t", *kept, "t__wh8_1", "wormhole_splits"]
    assert {m[1] for m in markers(target)} == ({2} if resumed else {3})


def test_the_markers_table_needs_create_and_says_so(mysql_db: str) -> None:
    run_sql(mysql_db, "CREATE TABLE t (id INT, name VARCHAR(20))")
    db = mysql_db.rsplit("/", 1)[1]
    user = f"wh_nc_{db[-8:]}"
    run_sql(mysql_db, f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{db}`.* TO '{user}'@'%'")
    try:
        options = writer_options(mysql_db, table="t", user=user, password="pw")
        assert PLUGIN.sink is not None
        periphery = PLUGIN.sink.periphery(options, ctx(1))
        with pytest.raises(PrepareError, match=r"split markers table `.*`\.`wormhole_splits` cannot be created .* "
                                               r"needs the CREATE privilege"):
            periphery.prepare()
        periphery.rollback()
    finally:
        run_sql(mysql_db, f"DROP USER '{user}'@'%'")

"""Spark mode writes every destination in one job when each is written by row writers in the executors
and the source is a native read (issue 37, item 6): the source is read once, neither persisted nor counted
apart, and a destination whose writer fails still fails alone, after Spark retried its tasks. By default the
job's tasks read their splits with the store's own reader (``[spark] direct_read``), else over JDBC."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, count, create_table, execute, fill_from_sequence, fingerprint
from tests.spark_helpers import dirty_lines, run_task
from wormhole.config import EngineConf
from wormhole.plugins.mysql.dialect import MYSQL

pytestmark = [pytest.mark.spark, pytest.mark.mysql]

# The DATETIME travels as its exact text, so the parquet destination is written by its row writers too.
DDL = "id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2), ts DATETIME(3)"
FILL = {"id": "seq", "name": "CONCAT('row-', seq, '\\t''é')", "amount": "seq / 100",
        "ts": "TIMESTAMP('1000-01-01') + INTERVAL seq * 7919 SECOND"}
NAMES = ("id", "name", "amount", "ts")
ROWS = 20_000


def reading(conf: EngineConf, direct: bool) -> EngineConf:
    return dataclasses.replace(conf, spark=dataclasses.replace(conf.spark, direct_read=direct))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "jdbc"])
def test_one_job_writes_every_destination_and_a_failing_one_fails_alone(
        spark_conf: EngineConf, spark_session: Any, dbs: Databases, server: Server, tmp_path: Path,
        direct: bool) -> None:
    db = dbs.create("onejob")
    admin = server.connect()
    for table in ("src", "good", "bad"):
        create_table(admin, db, table, DDL)
    fill_from_sequence(admin, db, "src", ROWS, FILL)
    execute(admin, f"INSERT INTO `{db}`.good (id, name) VALUES (-1, 'stale')")  # load truncate removes it
    execute(admin, f"CREATE TRIGGER `{db}`.refuse BEFORE INSERT ON `{db}`.bad FOR EACH ROW "
                   "IF NEW.id = 777 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no 777 here'; END IF")
    result, events = run_task(reading(spark_conf, direct), {
        "source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
        "destinations": [
            {"id": "pq", "plugin": "file", "params": {"path": str(tmp_path / "pq"), "format": "parquet"}},
            {"id": "good", "plugin": "mysql", "params": server.params(db, table="good", load="truncate")},
            {"id": "bad", "plugin": "mysql", "params": server.params(db, table="bad")},
        ],
        "settings": {"engine": "spark", "speed": {"channel": 2}},
    })
    assert [e for e in events if e["event"] == "spark.source_streamed"], "the source was persisted"
    planned = next(e for e in events if e["event"] == "spark.source_planned")
    assert planned["read"] == ("direct" if direct else "native"), planned
    # Read in the tasks, the reader's own batches reach the writers: the mysql ones load its wire text.
    loads = {e["load"] for e in events if e["event"] == "writer.load_method"}
    assert loads == {"LOAD DATA from wire text" if direct else "LOAD DATA from Arrow"}, loads
    dests = result.result["destinations"]
    assert result.exit_code == 202 and result.status == "partial", result.result
    assert result.result["source"]["rows_read"] == ROWS
    assert dests["pq"]["status"] == dests["good"]["status"] == "success"
    assert dests["pq"]["rows_written"] == dests["good"]["rows_written"] == ROWS
    assert dests["bad"]["status"] == "failed" and "no 777 here" in dests["bad"]["error"], dests["bad"]
    # Spark ran the failing task three times (local[2,3]); every retry wrote its split once.
    assert count(admin, db, "good") == ROWS
    assert fingerprint(admin, db, "good", NAMES) == fingerprint(admin, db, "src", NAMES)
    table = pq.read_table(tmp_path / "pq")
    assert table.num_rows == ROWS and sorted(table.column("id").to_pylist()) == list(range(1, ROWS + 1))
    source = {r[0]: r[1:] for r in execute(admin, f"SELECT id, name, amount, ts FROM `{db}`.src")}
    assert {r["id"]: (r["name"], r["amount"], r["ts"]) for r in table.to_pylist()} == source
    # Appended split by split: the splits made durable stay (a later run resumes them), the refused one is not there.
    assert count(admin, db, "bad") < ROWS
    assert execute(admin, f"SELECT COUNT(*) FROM `{db}`.bad WHERE id = 777") == [(0,)]
    admin.close()


@pytest.mark.timeout(600)
def test_a_task_run_again_skips_the_split_an_earlier_attempt_made_durable(
        spark_conf: EngineConf, spark_session: Any, dbs: Databases, server: Server) -> None:
    """A task seals its lanes one after another: when a later lane's split cannot be made durable, the task
    fails after an earlier lane's split was; Spark runs it again, and that run must read the markers again
    (not prepare's reading) and leave the durable split alone, neither writing it twice nor failing on it."""
    db = dbs.create("onejob_again")
    admin = server.connect()
    for table in ("src", "good", "bad"):
        create_table(admin, db, table, DDL)
    fill_from_sequence(admin, db, "src", ROWS, FILL)
    execute(admin, MYSQL.markers_ddl.format(table=f"`{db}`.wormhole_splits"))
    execute(admin, f"CREATE TRIGGER `{db}`.no_marker BEFORE INSERT ON `{db}`.wormhole_splits FOR EACH ROW "
                   "IF NEW.destination = 'bad' AND NEW.split_id <> '' THEN "
                   "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no marker for bad'; END IF")
    result, _ = run_task(spark_conf, {
        "source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
        "destinations": [
            {"id": "good", "plugin": "mysql", "params": server.params(db, table="good")},
            {"id": "bad", "plugin": "mysql", "params": server.params(db, table="bad")},
        ],
        "settings": {"engine": "spark", "speed": {"channel": 2}},
    })
    dests = result.result["destinations"]
    assert result.exit_code == 202, result.result
    assert dests["bad"]["status"] == "failed" and "no marker for bad" in dests["bad"]["error"], dests["bad"]
    assert dests["good"]["status"] == "success" and dests["good"]["rows_written"] == ROWS, dests["good"]
    assert count(admin, db, "good") == ROWS
    assert fingerprint(admin, db, "good", NAMES) == fingerprint(admin, db, "src", NAMES)
    assert count(admin, db, "bad") == 0  # rolled back


@pytest.mark.timeout(600)
def test_rows_the_direct_read_rejects_at_the_source_are_reported_as_in_local_mode(
        spark_conf: EngineConf, spark_session: Any, dbs: Databases, server: Server, tmp_path: Path) -> None:
    """The write job's tasks read the source themselves: a row the reader rejects (a zero date under
    ``zero_dates: reject``) reaches no destination and the dirty file once, origin ``source``, as in local mode."""
    db = dbs.create("onejob_rejects")
    admin = server.connect()
    create_table(admin, db, "src", DDL)
    fill_from_sequence(admin, db, "src", ROWS, FILL)
    execute(admin, "SET SESSION sql_mode = ''")
    execute(admin, f"UPDATE `{db}`.src SET ts = '0000-00-00 00:00:00' WHERE id IN (5, 15000)")
    results = {}
    for engine in ("local", "spark"):
        create_table(admin, db, f"dst_{engine}", DDL)
        result, events = run_task(spark_conf, {
            "source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id",
                                                                  zero_dates="reject")},
            "destinations": [
                {"id": "db", "plugin": "mysql", "params": server.params(db, table=f"dst_{engine}")},
                {"id": "lines", "plugin": "file", "params": {"path": str(tmp_path / engine), "format": "jsonl"}},
            ],
            "settings": {"engine": engine, "speed": {"channel": 2}, "error_limit": {"record": 10}},
        })
        results[engine] = result
        assert result.exit_code == 201, (engine, result.result)
        if engine == "spark":
            planned = next(e for e in events if e["event"] == "spark.source_planned")
            assert planned["read"] == "direct", planned
        lines = [json.loads(line) for line in dirty_lines(spark_conf, result)]
        assert sorted((d["origin"], d["row"][0]) for d in lines) == [("source", 5), ("source", 15000)], lines
        assert count(admin, db, f"dst_{engine}") == ROWS - 2
        assert result.result["destinations"]["db"]["rows_written"] == ROWS - 2
    local, spark = (results[e].result["source"] for e in ("local", "spark"))
    assert (spark["rows_read"], spark["rows_rejected"]) == (local["rows_read"], local["rows_rejected"]), (local, spark)
    assert fingerprint(admin, db, "dst_spark", NAMES) == fingerprint(admin, db, "dst_local", NAMES)
    admin.close()

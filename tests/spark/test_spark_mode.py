"""Spark execution mode on the run's one local SparkSession, against the real MariaDB and Hive catalog."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, count, create_table, execute, fingerprint, insert_rows, table_rows
from tests.spark_helpers import dirty_lines, run_task
from wormhole.config import EngineConf, SparkConf
from wormhole.errors import InvalidTaskConfig
from wormhole.task_spec import TaskSpec

pytestmark = [pytest.mark.spark, pytest.mark.mysql]

COLUMNS = [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}, {"name": "price", "type": "decimal"},
           {"name": "ratio", "type": "float"}, {"name": "day", "type": "date"}, {"name": "ts", "type": "datetime"},
           {"name": "flag", "type": "bool"}, {"name": "doc", "type": "json"}]
NAMES = [c["name"] for c in COLUMNS]
MYSQL_DDL = ("id BIGINT NOT NULL, name VARCHAR(64), price DECIMAL(38,18), ratio DOUBLE, day DATE, ts DATETIME(6), "
             "flag TINYINT(1), doc JSON")


def stream(rows: int, splits: int = 4, **extra: Any) -> dict[str, Any]:
    return {"plugin": "stream", "params": {"rows": rows, "splits": splits, "columns": COLUMNS, **extra}}


def hive_table(label: str) -> str:
    return f"wh_test.{label}_{uuid.uuid4().hex[:8]}"


def read_parquet(path: Path) -> Any:
    return pq.read_table(str(path)).sort_by("id")


def assert_same_parquet(a: Path, b: Path, rows: int) -> None:
    ta, tb = read_parquet(a), read_parquet(b)
    assert ta.num_rows == tb.num_rows == rows
    assert ta.column_names == tb.column_names == NAMES
    for name in NAMES:  # by value, column by column, vectorised
        ca, cb = ta.column(name).combine_chunks(), tb.column(name).combine_chunks()
        assert ca.type == cb.type, name
        assert ca.equals(cb), name


@pytest.mark.timeout(900)
def test_fanout_gives_the_same_contents_in_local_and_spark_mode(spark_conf: EngineConf, spark_session: Any,
                                                                 dbs: Databases, server: Server,
                                                                 tmp_path: Path) -> None:
    """50,000 generated rows in 4 splits (each several 4096-row batches) -> Parquet + MySQL + Hive, once per
    engine: equal by value."""
    rows = 50_000
    # A progress line every check: the Spark run may take less than the usual 40 checks (2 s).
    spark_conf = dataclasses.replace(spark_conf, monitor=dataclasses.replace(spark_conf.monitor, report_every=1))
    db = dbs.create("fan")
    admin = server.connect()
    outputs = {}
    for engine in ("local", "spark"):
        create_table(admin, db, engine, MYSQL_DDL)
        table = hive_table(engine)
        outputs[engine] = (tmp_path / engine, table)
        result, events = run_task(spark_conf, {
            "source": stream(rows),
            "destinations": [
                {"id": "files", "plugin": "file", "params": {"path": str(tmp_path / engine), "format": "parquet"}},
                {"id": "db", "plugin": "mysql", "params": server.params(db, table=engine, load="staging")},
                {"id": "warehouse", "plugin": "hive", "params": {"table": table, "create": True, "mode": "overwrite"}},
            ],
            "settings": {"engine": engine},
        })
        assert result.exit_code == 0, result.result
        assert result.result["engine"] == engine
        for dest in result.result["destinations"].values():
            assert (dest["status"], dest["rows_written"], dest["rows_rejected"]) == ("success", rows, 0)
        assert any(e["event"] == "engine.chosen" and e["engine"] == engine for e in events)
    progress = [e for e in events if e["event"] == "monitor.progress"]
    assert any("tasks" in d for e in progress for d in e["destinations"].values()), progress
    spark_info = result.result["spark"]
    assert spark_info["master"] == "local[2,3]" and spark_info["partitions"] == 4
    assert_same_parquet(outputs["local"][0], outputs["spark"][0], rows)
    assert count(admin, db, "local") == count(admin, db, "spark") == rows
    assert fingerprint(admin, db, "local", NAMES) == fingerprint(admin, db, "spark", NAMES)
    local, spark = (spark_session.table(outputs[e][1]) for e in ("local", "spark"))
    assert local.count() == spark.count() == rows
    assert local.exceptAll(spark).count() == 0 and spark.exceptAll(local).count() == 0
    # The Hive copy holds the generator's values, not only the same values twice.
    first = spark.where("id = 7").collect()[0]
    parquet_row = read_parquet(outputs["spark"][0]).slice(7, 1).to_pylist()[0]
    assert first["name"] == parquet_row["name"] and first["price"] == parquet_row["price"]
    admin.close()


def test_row_writers_give_the_same_files_and_tables_in_both_modes(spark_conf: EngineConf, tmp_path: Path) -> None:
    """csv and jsonl (row writers in the executors) and sqlite (written from the driver) hold the same
    text and rows whichever engine ran: JSON stays a value, bytes stay bytes, decimals keep their scale."""
    import sqlite3

    columns = [*COLUMNS, {"name": "blob", "type": "bytes"}]
    for engine in ("local", "spark"):
        out = tmp_path / engine
        result, events = run_task(spark_conf, {
            "source": {"plugin": "stream", "params": {"rows": 20_000, "splits": 3, "columns": columns}},
            "destinations": [
                {"id": "csv", "plugin": "file", "params": {"path": str(out / "csv"), "format": "csv"}},
                {"id": "jsonl", "plugin": "file", "params": {"path": str(out / "jsonl"), "format": "jsonl"}},
                {"id": "db", "plugin": "sqlite", "params": {"path": str(out / "t.db"), "table": "t"}}],
            "settings": {"engine": engine}})
        assert result.exit_code == 0, result.result
    ways = {e["destination"]: e["write"] for e in events if e["event"] == "spark.destination_written"}
    assert ways == {"csv": "partitions", "jsonl": "partitions", "db": "driver"}

    def lines(path: Path, header: bool) -> list[str]:
        out = []
        for part in sorted(path.glob("part-*")):
            text = part.read_text().splitlines()
            out += text[1:] if header else text
        return sorted(out)

    for fmt, header in (("csv", True), ("jsonl", False)):
        a, b = lines(tmp_path / "local" / fmt, header), lines(tmp_path / "spark" / fmt, header)
        assert len(a) == 20_000 and a == b, fmt
    assert '"doc":{"k":' in lines(tmp_path / "spark" / "jsonl", False)[1]

    def table(engine: str) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(tmp_path / engine / "t.db")
        try:
            return conn.execute("SELECT * FROM t ORDER BY id").fetchall()
        finally:
            conn.close()

    assert table("local") == table("spark") and len(table("spark")) == 20_000


def test_sharded_mysql_source_to_hive_and_mysql(spark_conf: EngineConf, spark_session: Any, dbs: Databases,
                                                server: Server) -> None:
    admin = server.connect()
    ddl = "id BIGINT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2), created DATETIME(3), n INT NULL"
    names = ["id", "name", "amount", "created", "n"]
    shards = [dbs.create("shard"), dbs.create("shard")]
    expected = []
    for index, db in enumerate(shards):
        create_table(admin, db, "t", ddl)
        rows = [(index * 10_000 + i, f"it's \\ naïve {i} ✓", Decimal(i * 7) / 4, f"2026-01-0{1 + i % 9} 10:11:12.345",
                 None if i % 5 == 0 else i * 3) for i in range(3000 + index * 2000)]
        insert_rows(admin, db, "t", names, rows)
        expected += table_rows(admin, db, "t", names)
    target = dbs.create("target")
    create_table(admin, target, "t", ddl)
    table = hive_table("shards")
    connections: list[dict[str, Any]] = [
        {"host": server.host, "port": server.port, "database": db, "tables": ["t"]} for db in shards]
    # The first shard's server fails over from a closed port: Spark's JDBC read must use the one that answered.
    with socket.socket() as closed:
        closed.bind((server.host, 0))
        connections[0].update(port=closed.getsockname()[1], failover_hosts=[f"{server.host}:{server.port}"])
    source = {"plugin": "mysql", "params": {"user": server.user, "split_pk": "id", "connections": connections}}
    result, events = run_task(spark_conf, {
        "source": source,
        "destinations": [
            {"id": "warehouse", "plugin": "hive", "params": {"table": table, "create": True}},
            {"id": "copy", "plugin": "mysql", "params": server.params(target, table="t", load="staging")},
        ],
        "settings": {"engine": "spark", "speed": {"channel": 4}},
    })
    assert result.exit_code == 0, result.result
    assert result.result["source"]["rows_read"] == len(expected) == 8000
    assert any(e["event"] == "spark.source_planned" and e["read"] == "native" for e in events)
    # The plan is made and recorded as in local mode: both databases' splits, dealt round-robin.
    plan = result.result["plan"]
    assert (plan["engine"], plan["engine_reason"]) == ("spark", "settings.engine is 'spark'")
    assert plan["channels"] == min(4, len(plan["splits"])) and len(plan["splits"]) >= 4
    marks = [s["resource_mark"] for s in plan["splits"]]
    first_of_group = [g["splits"][:2] for g in plan["task_groups"]]
    assert len(set(marks)) == 2 and len({s.split("/")[1] for s in first_of_group[0]}) == 2
    # hive: Spark's native write; mysql: its row writers in the executors, a split per partition, each
    # durable with its marker row (a resumed run writes only what the destination lacks).
    # The plan names the write the run uses: the DATETIME travels as its exact text (zero dates kept),
    # which hive's native write declines, so its parquet row writer runs on the driver.
    assert [d["method"] for d in plan["destinations"]] == [
        "one row writer on the Spark driver; mode=append",
        "spark partitions, a row writer each; load=staging, write_mode=insert, method=auto"]
    written = {e["destination"]: e["write"] for e in events if e["event"] == "spark.destination_written"}
    assert written == {"warehouse": "driver", "copy": "partitions"}
    assert next(e for e in events if e["event"] == "plan.made")["task_groups"] == plan["task_groups"]
    assert sorted(table_rows(admin, target, "t", names)) == sorted(expected)
    hive_rows = sorted(tuple(r) for r in spark_session.table(table).select(*names).collect())
    assert hive_rows == sorted(expected)
    admin.close()


def test_a_destination_failing_inside_its_spark_job_rolls_back_alone(spark_conf: EngineConf, dbs: Databases,
                                                                     server: Server, tmp_path: Path) -> None:
    rows = 50_000
    admin = server.connect()
    db = dbs.create("fail")
    create_table(admin, db, "good", MYSQL_DDL)
    create_table(admin, db, "narrow", MYSQL_DDL.replace("name VARCHAR(64)", "name VARCHAR(5)"))
    insert_rows(admin, db, "narrow", ["id", "name"], [(-1, "old")])
    result, _ = run_task(spark_conf, {
        "source": stream(rows),
        "destinations": [
            {"id": "files", "plugin": "file", "params": {"path": str(tmp_path / "out"), "format": "parquet"}},
            {"id": "good", "plugin": "mysql", "params": server.params(db, table="good", load="staging")},
            {"id": "narrow", "plugin": "mysql", "params": server.params(db, table="narrow", load="staging")},
            {"id": "null", "plugin": "stream", "params": {"fail_after": 1000}},
        ],
        "settings": {"engine": "spark"},
    })
    dests = result.result["destinations"]
    assert result.exit_code == 202 and result.status == "partial"
    assert dests["files"]["status"] == dests["good"]["status"] == "success"
    assert dests["narrow"]["status"] == "failed" and dests["narrow"]["rolled_back"] is True
    # Its row writers (in the executors) reject the rows that do not fit, with MySQL's reason, and the
    # record limit (0) fails it.
    assert "rejected rows exceed the record limit of 0" in dests["narrow"]["error"], dests["narrow"]
    assert "Data too long for column" in Path(result.result["dirty_file"]).read_text(encoding="utf-8")
    assert dests["null"]["status"] == "failed" and "fail after 1000 rows" in dests["null"]["error"]
    assert count(admin, db, "good") == rows and read_parquet(tmp_path / "out").num_rows == rows
    # The failed load never reached its target, and its staging table is gone.
    assert table_rows(admin, db, "narrow", ["id", "name"]) == [(-1, "old")]
    assert execute(admin, f"SHOW TABLES FROM `{db}`") == [("good",), ("narrow",), ("wormhole_splits",)]
    assert execute(admin, f"SELECT COUNT(*) FROM `{db}`.wormhole_splits") == [(0,)]  # no split marker left
    admin.close()


def test_a_partition_killed_once_is_retried_without_duplicates(spark_conf: EngineConf, dbs: Databases,
                                                               server: Server) -> None:
    """KILL one partition writer's connection mid-split: Spark retries that partition (split); its first
    attempt's transaction is gone with the connection, so the table holds every row exactly once."""
    rows = 200_000  # two splits of 100,000: the kill lands mid-split
    admin = server.connect()
    db = dbs.create("retry")
    for table in ("victim", "control"):  # no primary key: a duplicate would go unnoticed by MySQL
        create_table(admin, db, table, MYSQL_DDL)
    killed: list[int] = []
    done = threading.Event()

    def killer() -> None:
        watcher = server.connect()
        while not done.is_set() and not killed:
            for (conn_id,) in execute(watcher, "SELECT id FROM information_schema.processlist WHERE db = %s "
                                               "AND (info LIKE 'INSERT INTO%%victim%%' "
                                               "OR info LIKE 'LOAD DATA%%victim%%')", (db,)):
                execute(watcher, f"KILL CONNECTION {int(conn_id)}")
                killed.append(conn_id)
                break
            time.sleep(0.02)
        watcher.close()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        result, _ = run_task(spark_conf, {
            "source": stream(rows, splits=2),
            "destinations": [
                {"id": "victim", "plugin": "mysql", "params": server.params(db, table="victim", batch_size=2000)},
                {"id": "control", "plugin": "mysql", "params": server.params(db, table="control")},
            ],
            "settings": {"engine": "spark"},
        })
    finally:
        done.set()
        thread.join()
    assert killed, "the writer's connection was never caught inserting"
    assert result.exit_code == 0, result.result
    assert result.result["destinations"]["victim"]["rows_written"] == rows
    assert count(admin, db, "victim") == rows
    assert fingerprint(admin, db, "victim", NAMES) == fingerprint(admin, db, "control", NAMES)
    admin.close()


def test_rows_a_partition_writer_rejects_reach_the_dirty_file_as_in_local_mode(spark_conf: EngineConf,
                                                                              dbs: Databases, server: Server) -> None:
    """mysql upsert runs its row writer inside the executors: the rows MySQL refuses are rejected one by
    one, counted through accumulators and written to the run's dirty file, exactly as in local mode."""
    admin = server.connect()
    db = dbs.create("rej")
    outcomes = {}
    for engine in ("local", "spark"):
        create_table(admin, db, engine, MYSQL_DDL.replace("id BIGINT NOT NULL", "id BIGINT PRIMARY KEY")
                     .replace("name VARCHAR(64)", "name VARCHAR(13)"))
        result, _ = run_task(spark_conf, {
            "source": stream(20_000),
            "destinations": [{"id": "db", "plugin": "mysql",
                              "params": server.params(db, table=engine, write_mode="upsert")}],
            "settings": {"engine": engine, "error_limit": {"percentage": 1.0}}})
        assert result.exit_code == 201, result.result
        lines = dirty_lines(spark_conf, result)
        outcomes[engine] = (result.result["destinations"]["db"]["rows_written"],
                            result.result["destinations"]["db"]["rows_rejected"], len(lines))
        assert all("Data too long for column 'name'" in line for line in lines)
    written, rejected, lines = outcomes["spark"]
    assert outcomes["local"] == outcomes["spark"] and rejected == lines > 1000 and written + rejected == 20_000
    assert fingerprint(admin, db, "local", NAMES) == fingerprint(admin, db, "spark", NAMES)
    admin.close()


def test_auto_chooses_the_engine_and_says_why(spark_conf: EngineConf, tmp_path: Path) -> None:
    small = {"source": stream(2000), "destinations": [{"id": "null", "plugin": "stream"}],
             "settings": {"engine": "auto"}}
    result, events = run_task(spark_conf, small)
    assert result.exit_code == 0
    assert result.result["engine"] == "local" and "spark" not in result.result
    assert result.result["engine_reason"] == "estimated 2000 rows <= spark.auto_rows 20000000"
    assert [e["engine"] for e in events if e["event"] == "engine.chosen"] == ["local"]

    low = dataclasses.replace(spark_conf, spark=dataclasses.replace(spark_conf.spark, auto_rows=1000))
    result, _ = run_task(low, small)
    assert result.exit_code == 0 and result.result["engine"] == "spark"
    assert result.result["engine_reason"] == "estimated 2000 rows > spark.auto_rows 1000"
    assert result.result["destinations"]["null"]["rows_written"] == 2000

    table = hive_table("auto")
    result, _ = run_task(spark_conf, {**small, "destinations": [
        {"id": "warehouse", "plugin": "hive", "params": {"table": table, "create": True}}]})
    assert result.exit_code == 0 and result.result["engine"] == "spark"
    assert result.result["engine_reason"] == "destination 'warehouse' (hive) needs Spark"


def test_hive_static_partition_overwrite_replaces_only_that_partition(spark_conf: EngineConf, spark_session: Any,
                                                                       tmp_path: Path) -> None:
    table = hive_table("parts")

    def load(rows: int, dt: str, mode: str, engine: str = "spark") -> None:
        result, _ = run_task(spark_conf, {
            "source": stream(rows, splits=2),
            "destinations": [{"id": "warehouse", "plugin": "hive",
                              "params": {"table": table, "create": True, "partition": {"dt": dt}, "mode": mode}}],
            "settings": {"engine": engine}})
        assert result.exit_code == 0, result.result

    def counts() -> dict[str, int]:
        return {r["dt"]: r["n"] for r in spark_session.sql(f"SELECT dt, count(*) AS n FROM {table} GROUP BY dt")
                .collect()}

    load(100, "2026-11-20", "overwrite")
    load(50, "2026-11-21", "append", engine="local")
    assert counts() == {"2026-11-20": 100, "2026-11-21": 50}
    load(30, "2026-11-20", "overwrite")
    assert counts() == {"2026-11-20": 30, "2026-11-21": 50}
    load(20, "2026-11-21", "append")
    assert counts() == {"2026-11-20": 30, "2026-11-21": 70}

    # And read back through the hive source, pruned to one partition.
    result, _ = run_task(spark_conf, {
        "source": {"plugin": "hive", "params": {"table": table, "where": "dt = '2026-11-20'"}},
        "destinations": [{"id": "files", "plugin": "file",
                          "params": {"path": str(tmp_path / "p"), "format": "parquet"}}],
        "settings": {"engine": "auto"}})
    assert result.exit_code == 0 and result.result["engine_reason"] == "source 'hive' needs Spark"
    back = read_parquet(tmp_path / "p")
    assert back.num_rows == 30 and back.column("id").to_pylist() == list(range(30))
    assert set(back.column("dt").to_pylist()) == {"2026-11-20"}


def test_a_partition_missing_or_wrong_fails_the_hive_destination_at_prepare(spark_conf: EngineConf,
                                                                             tmp_path: Path) -> None:
    table = hive_table("strict")
    result, _ = run_task(spark_conf, {
        "source": stream(10), "destinations": [
            {"id": "made", "plugin": "hive", "params": {"table": table, "create": True, "partition": {"dt": "x"}}}],
        "settings": {"engine": "spark"}})
    assert result.exit_code == 0
    result, _ = run_task(spark_conf, {
        "source": stream(10), "destinations": [
            {"id": "files", "plugin": "file", "params": {"path": str(tmp_path / "ok"), "format": "jsonl"}},
            {"id": "nospec", "plugin": "hive", "params": {"table": table}},
            {"id": "missing", "plugin": "hive", "params": {"table": "wh_test.no_such_table"}}],
        "settings": {"engine": "spark"}})
    dests = result.result["destinations"]
    assert result.exit_code == 202 and dests["files"]["status"] == "success"
    assert "is partitioned by (dt): partition must give a value for each" in dests["nospec"]["error"]
    assert "hive table wh_test.no_such_table does not exist" in dests["missing"]["error"]


def test_rows_spark_cannot_carry_are_rejected_at_the_source(spark_conf: EngineConf, tmp_path: Path) -> None:
    result, _ = run_task(spark_conf, {
        "source": stream(10_000, dirty_every=1000),
        "destinations": [{"id": "files", "plugin": "file", "params": {"path": str(tmp_path / "o"), "format": "jsonl"}}],
        "settings": {"engine": "spark", "error_limit": {"record": 10}}})
    assert result.exit_code == 201, result.result
    assert result.result["source"]["rows_rejected"] == 10 and result.result["source"]["rows_read"] == 9990
    assert result.result["destinations"]["files"]["rows_written"] == 9990
    lines = dirty_lines(spark_conf, result)
    assert len(lines) == 10 and all('"origin": "source"' in ln and "column name" in ln for ln in lines)


def test_a_stop_cancels_the_spark_jobs_and_rolls_every_destination_back(spark_conf: EngineConf,
                                                                       tmp_path: Path) -> None:
    """What SIGTERM does (the CLI's handler calls Engine.stop): jobs cancelled, nothing committed."""
    import structlog

    from wormhole.engine import Engine

    spec = TaskSpec.from_mapping({
        "source": stream(400_000),
        "destinations": [
            {"id": "files", "plugin": "file", "params": {"path": str(tmp_path / "out"), "format": "jsonl"}},
            {"id": "slow", "plugin": "stream", "params": {"delay_ms": 200}}],
        "settings": {"engine": "spark"}})
    engine = Engine(spark_conf, spec, task_id=8, run_id=1, log=structlog.get_logger())
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(engine.run()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not (engine._run and engine._run.counters.writers) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the destinations' Spark jobs are running
    time.sleep(1.0)
    stopped = time.monotonic()
    engine.stop("interrupted by SIGTERM")
    thread.join(60)
    assert outcome and time.monotonic() - stopped < 30
    result = outcome[0]
    assert (result.exit_code, result.run_status) == (203, "interrupted")
    for dest in result.result["destinations"].values():
        assert dest["status"] == "rolled_back" and dest["error"] == "rolled back: interrupted by SIGTERM"
    assert not (tmp_path / "out").exists()


def test_a_hive_source_needs_spark() -> None:
    with pytest.raises(InvalidTaskConfig) as info:
        TaskSpec.from_mapping({"source": {"plugin": "hive", "params": {"table": "a.b"}},
                               "destinations": [{"id": "n", "plugin": "stream"}], "settings": {"engine": "local"}})
    assert "settings.engine: source plugin 'hive' is read by Spark only" in str(info.value)


def test_spark_settings_are_validated() -> None:
    from wormhole.options import Problems, parse_options

    problems = Problems()
    parse_options(SparkConf, {"conf": {"sql.shuffle": 1}}, "spark", problems)
    parse_options(SparkConf, {"auto_rows": -1}, "spark", problems)
    assert problems.items == ["spark.conf.sql.shuffle: Spark settings start with 'spark.'",
                              "spark.auto_rows: must be >= 0, got -1"]

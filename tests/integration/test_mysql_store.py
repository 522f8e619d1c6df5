"""The mysql store against the real MariaDB: type round trip, splits, the wire parser, loads and rollbacks."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import urlparse

import pymysql
import pymysql.cursors
import pytest
from structlog.testing import capture_logs

from tests.conftest import Workspace
from tests.mysql_helpers import global_max_allowed_packet
from tests.plugin_helpers import ListDirtySink, parse, read_ctx, tuples_of, write_ctx
from wormhole.errors import CommitError, RollbackError, SplitError, WriteError
from wormhole.plugins import registry
from wormhole.plugins.base import Column, Schema
from wormhole.plugins.batch import Batch, as_batch
from wormhole.plugins.mysql.connection import ENCODERS
from wormhole.plugins.mysql.options import MysqlReaderOptions, MysqlWriterOptions
from wormhole.plugins.mysql.protocol import ColumnStream, column_batches

pytestmark = pytest.mark.mysql

PLUGIN = registry.get("mysql")


# ---------------------------------------------------------------------------------------------
# helpers


def db_name(url: str) -> str:
    return urlparse(url).path.lstrip("/")


def connect(url: str, **kw: Any) -> pymysql.Connection:
    u = urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root", password=u.password or "",
                           database=db_name(url), autocommit=True, charset="utf8mb4", **kw)


def run_sql(url: str, *statements: str, args: Any = None) -> list[Any]:
    conn = connect(url)
    try:
        out: list[Any] = []
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s, args)
                out = list(cur.fetchall())
        return out
    finally:
        conn.close()


def rows_of(url: str, table: str, order: str = "id") -> list[tuple[Any, ...]]:
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(f"SELECT * FROM `{table}` ORDER BY {order}")
            return list(cur.fetchall())
    finally:
        conn.close()


def user_tables(url: str) -> list[str]:
    """The database's tables but wormhole's split markers table, which must hold no row once a load is over."""
    names = [r[0] for r in run_sql(url, "SHOW TABLES")]
    if "wormhole_splits" in names:
        assert run_sql(url, "SELECT COUNT(*) FROM wormhole_splits") == [(0,)]
    return [name for name in names if name != "wormhole_splits"]


def source_params(url: str, **extra: Any) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": urlparse(url).port or 3306, "user": "root", "database": db_name(url), **extra}


def reader_options(url: str, **extra: Any) -> MysqlReaderOptions:
    options, problems = parse(MysqlReaderOptions, source_params(url, **extra))
    assert not problems, problems.items
    return options


def writer_options(url: str, **extra: Any) -> MysqlWriterOptions:
    options, problems = parse(MysqlWriterOptions, source_params(url, **extra))
    assert not problems, problems.items
    return options


def read_splits(options: MysqlReaderOptions, advice: int = 4,
                sink: ListDirtySink | None = None) -> tuple[list[Any], list[tuple[Any, ...]]]:
    assert PLUGIN.source is not None
    ctx = read_ctx(sink, batch_rows=7)  # tiny batches: many batches per split
    reader = PLUGIN.source.reader(options, ctx)
    reader.schema()
    splits = PLUGIN.source.splitter(options, ctx).split(advice)
    rows = [row for split in splits for batch in reader.read(split) for row in tuples_of(batch)]
    return splits, rows


# ---------------------------------------------------------------------------------------------
# every type, edge values included, through the real CLI (load_data and insert side by side)

from tests.mysql_types_table import TYPE_ROWS, TYPES_DDL, fill_types_table  # noqa: E402  (shared with tests/spark)


def test_every_type_round_trips_value_by_value(ws: Workspace, mysql_db: str) -> None:
    run_sql(mysql_db, TYPES_DDL.format(name="src"), TYPES_DDL.format(name="by_load"),
            TYPES_DDL.format(name="by_insert"), "INSERT INTO by_insert (id, vc) VALUES (99, 'old row')")
    conn = connect(mysql_db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES'")
        marks = ", ".join(["%s"] * 33)
        cur.executemany(f"INSERT INTO src VALUES ({marks})", TYPE_ROWS)
        # FLOAT values the text protocol's 6 digits would change (16777216 read as 16777200): issue 23
        cur.execute("UPDATE src SET fl = CASE id WHEN 1 THEN 16777216 WHEN 2 THEN 123456.7890625 "
                    "WHEN 4 THEN 3.4028234663852886e38 END")
    conn.close()
    spec = {
        "source": {"plugin": "mysql", "params": source_params(mysql_db, table="src", split_pk="id")},
        "destinations": [
            {"id": "by_load", "plugin": "mysql",
             "params": source_params(mysql_db, table="by_load", method="load_data", load="staging", verify="count")},
            {"id": "by_insert", "plugin": "mysql",
             "params": source_params(mysql_db, table="by_insert", method="insert", load="truncate", batch_size=2)},
        ],
    }
    proc = ws.run("--task-id", str(ws.submit(spec)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    source = rows_of(mysql_db, "src")
    assert len(source) == 4 and source[0][10] == 18446744073709551615  # the data went in as meant
    assert source[0][11] == Decimal(TYPE_ROWS[0][11]) and source[0][16] == TYPE_ROWS[0][16]
    for table in ("by_load", "by_insert"):
        copy = rows_of(mysql_db, table)
        assert len(copy) == len(source), table
        for want, got in zip(source, copy, strict=True):
            for index, (a, b) in enumerate(zip(want, got, strict=True)):
                if index == 28 and a is not None:  # JSON: equal as JSON (the text is re-serialised)
                    assert json.loads(a) == json.loads(b), (table, want[0], index)
                else:
                    assert a == b and type(a) is type(b), (table, want[0], index, a, b)
    exact_floats = {t: run_sql(mysql_db, f"SELECT id, CAST(CAST(fl AS DOUBLE) AS CHAR) FROM {t} ORDER BY id")
                    for t in ("src", "by_load", "by_insert")}
    assert exact_floats["src"][0] == (1, "16777216") and exact_floats["src"][1] == (2, "123456.7890625")
    assert exact_floats["by_load"] == exact_floats["src"] and exact_floats["by_insert"] == exact_floats["src"]
    result = ws.show(1)["result"]
    assert result["destinations"]["by_load"]["rows_written"] == 4
    assert result["source"]["splits"] >= 2


def test_reader_maps_types_and_zero_date_policies(mysql_db: str) -> None:
    fill_types_table(mysql_db)
    assert PLUGIN.source is not None
    schema = PLUGIN.source.reader(reader_options(mysql_db, table="src"), read_ctx()).schema()
    types = dict(zip(schema.names, (c.type for c in schema.columns), strict=True))
    assert types["bu"] == "int" and types["bt"] == "int" and types["yr"] == "int"
    assert types["dec65"] == "decimal" and types["fl"] == "float" and types["js"] == "json"
    assert types["bl"] == "bytes" and types["tm"] == "string" and types["st"] == "string"
    assert types["dtm"] == "datetime" and types["ts"] == "datetime" and types["dt"] == "date"
    _, rows = read_splits(reader_options(mysql_db, table="src"))
    by_id = {r[0]: r for r in rows}
    assert by_id[1][10] == 18446744073709551615 and by_id[1][31] == 1023
    assert by_id[1][28] == {"a": [1, 2.5, "x😀", 12345678901234567890], "b": None, "c": {"d": True}}
    assert by_id[1][11] == Decimal("99999999999999999999999999999999999.999999999999999999999999999999")
    assert by_id[4][22] == "0000-00-00"  # zero_dates 'keep'
    sink = ListDirtySink()
    _, rows = read_splits(reader_options(mysql_db, table="src", zero_dates="null"))
    assert {r[0]: r for r in rows}[4][22:25] == (None, None, None)
    _, rows = read_splits(reader_options(mysql_db, table="src", zero_dates="reject"), sink=sink)
    assert sorted(r[0] for r in rows) == [1, 2, 3]
    assert [r.row[0] for r in sink.rows] == [4] and "zero date 0000-00-00" in sink.rows[0].reason


def test_wire_parser_matches_pymysql(mysql_db: str) -> None:
    run_sql(mysql_db, TYPES_DDL.format(name="src"))
    conn = connect(mysql_db)
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO src VALUES ({', '.join(['%s'] * 33)})", TYPE_ROWS)
        cur.execute("INSERT INTO src (id, vc, mt) SELECT seq + 10, CONCAT('v', seq), REPEAT('y', seq * 300) "
                    "FROM seq_1_to_300")
    conn.close()
    raw = connect(mysql_db, conv=ENCODERS, use_unicode=False)
    cur = raw.cursor(pymysql.cursors.SSCursor)
    cur.execute("SELECT * FROM src ORDER BY id")
    expected = list(cur.fetchall())
    cur.execute("SELECT * FROM src ORDER BY id")
    assert ColumnStream.usable(cur)
    got: list[tuple[Any, ...]] = []
    for count, columns in column_batches(cur, 13):
        assert all(len(c) == count for c in columns)
        got.extend(zip(*(c.to_pylist() for c in columns), strict=True))
    assert got == expected and len(got) == 304
    cur.execute("SELECT COUNT(*) FROM src")  # the connection is in a clean state afterwards
    assert list(cur.fetchall()) == [(b"304",)]
    with pytest.raises(pymysql.err.MySQLError):
        # "Subquery returns more than 1 row" only once the stream is past id 100
        cur.execute("SELECT id, IF(id > 100, (SELECT 1 UNION SELECT 2), 1) FROM src ORDER BY id")
        for _ in column_batches(cur, 10):
            pass
    raw.close()


# ---------------------------------------------------------------------------------------------
# splits


@pytest.fixture(name="keyed")
def fixture_keyed(mysql_db: str) -> str:
    run_sql(mysql_db, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, k BIGINT NULL, u BIGINT UNSIGNED, "
                      "s VARCHAR(20) NULL, ts DATETIME, KEY (k), KEY (s)) COLLATE utf8mb4_general_ci")
    keys = [-5, -5, 1, 2, 3, 1000, 1001, 50_000, 10**12, None, None, 7, 7, 7]
    strings = ["apple", "Apple", "APPLE", "banana", "Zebra", "zoo", "ÄÖü", "😀", "", " lead", None, "~tilde", "a",
               "Z"]
    conn = connect(mysql_db)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO t (k, u, s, ts) VALUES (%s, %s, %s, NOW())",
                        [(k, 2**64 - 1 - i if i % 2 else i, s) for i, (k, s) in enumerate(zip(keys, strings))])
    conn.close()
    return mysql_db


@pytest.mark.parametrize("split_pk", ["k", "s", "u", "id"])
def test_splits_cover_the_table_exactly_once(keyed: str, split_pk: str) -> None:
    splits, rows = read_splits(reader_options(keyed, table="t", split_pk=split_pk))
    ids = Counter(r[0] for r in rows)
    assert ids == Counter(range(1, 15)), ids  # every row, none twice
    assert len(splits) > 3  # really split (4 channels x factor 5, fewer where keys run out)
    assert len({s.id for s in splits}) == len(splits)
    assert {s.resource_mark for s in splits} == {f"127.0.0.1:3306/{db_name(keyed)}"}
    for s in splits:
        if "#" in s.id and not s.id.endswith("#null") and s.params["args"] and len(s.params["args"]) == 2:
            assert f"ORDER BY `{split_pk}`" in s.params["sql"] and "LIMIT" not in s.params["sql"]
    if split_pk in ("k", "s"):  # nullable: a split of its own reads the NULL keys
        assert any(s.id.endswith("#null") for s in splits)


def test_splits_with_where_and_edge_tables(keyed: str) -> None:
    _, rows = read_splits(reader_options(keyed, table="t", split_pk="k", where="k > 2 AND s LIKE '%e%'"))
    assert sorted(r[0] for r in rows) == [r[0] for r in run_sql(keyed, "SELECT id FROM t WHERE k > 2 AND s LIKE '%e%' "
                                                                         "ORDER BY id")]
    run_sql(keyed, "CREATE TABLE empty_t (id INT PRIMARY KEY)", "CREATE TABLE one (id INT PRIMARY KEY)",
            "INSERT INTO one VALUES (42)", "CREATE TABLE nulls (k INT NULL)", "INSERT INTO nulls VALUES (NULL), (NULL)")
    splits, rows = read_splits(reader_options(keyed, table="empty_t", split_pk="id"))
    assert rows == [] and len(splits) == 1
    splits, rows = read_splits(reader_options(keyed, table="one", split_pk="id"))
    assert rows == [(42,)]
    _, rows = read_splits(reader_options(keyed, table="nulls", split_pk="k"))
    assert rows == [(None,), (None,)]


@pytest.mark.parametrize(("params", "message"), [
    ({"table": "t", "split_pk": "ts"}, "only integer and string keys can be split"),
    ({"table": "t", "split_pk": "nope"}, "split_pk nope is not a column of `t`"),
    ({"table": "t", "columns": ["id", "ghost"]}, "has no column ghost"),
    ({"table": "missing"}, "table `missing` does not exist"),
])
def test_bad_split_parameters_are_named(keyed: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(SplitError, match=message):
        read_splits(reader_options(keyed, **params))


def test_query_source_reads_without_splitting(keyed: str) -> None:
    splits, rows = read_splits(reader_options(keyed, query="SELECT id, k * 2 AS k2, s FROM t WHERE id <= 3"))
    assert len(splits) == 1 and sorted(rows) == [(1, -10, "apple"), (2, -10, "Apple"), (3, 2, "APPLE")]


# ---------------------------------------------------------------------------------------------
# writer: modes, rejected rows, verify, staging, rollback, transient errors

WSCHEMA = Schema((Column("id", "int"), Column("name", "string"), Column("amount", "decimal")))


@pytest.fixture(name="target")
def fixture_target(mysql_db: str) -> Iterator[str]:
    run_sql(mysql_db, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(5), amount DECIMAL(8,2))")
    yield mysql_db


def lifecycle(options: MysqlWriterOptions, parts: list[list[tuple[Any, ...]]], commit: bool = True) -> list[Any]:
    assert PLUGIN.sink is not None
    ctx = write_ctx(WSCHEMA, concurrency=len(parts))
    periphery = PLUGIN.sink.periphery(options, ctx)
    periphery.prepare()
    results = []
    for worker, rows in enumerate(parts):
        writer = PLUGIN.sink.writer(options, ctx, periphery, worker)
        writer.open()
        try:
            results.append(writer.write(as_batch(rows)))
        finally:
            writer.close()
    if commit:
        periphery.commit()
        periphery.release()  # as once the task's outcome is recorded
    else:
        periphery.rollback()
    return results


def open_writer(options: MysqlWriterOptions, schema: Schema = WSCHEMA) -> tuple[Any, Any]:
    """A prepared destination and one open writer on it (the test then writes, closes, commits)."""
    assert PLUGIN.sink is not None
    ctx = write_ctx(schema, concurrency=1)
    periphery = PLUGIN.sink.periphery(options, ctx)
    periphery.prepare()
    writer = PLUGIN.sink.writer(options, ctx, periphery, 0)
    writer.open()
    return periphery, writer


@pytest.mark.parametrize("method", ["load_data", "insert"])
def test_bad_rows_are_rejected_with_the_mysql_error_and_the_rest_written(target: str, method: str) -> None:
    run_sql(target, "INSERT INTO t VALUES (3, 'old', 1)")
    rows = [(i, f"n{i}", Decimal(i)) for i in range(1, 11)]
    rows[4] = (5, "far too long", Decimal(5))
    results = lifecycle(writer_options(target, table="t", method=method, batch_size=4), [rows])
    reasons = {r.row[0]: r.reason for r in results[0].rejected}
    assert set(reasons) == {3, 5}
    assert reasons[3].startswith("(1062) Duplicate entry '3'") and reasons[5].startswith("(1406) Data too long")
    assert results[0].written == 8
    assert [r[0] for r in rows_of(target, "t")] == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert rows_of(target, "t")[2] == (3, "old", Decimal("1.00"))


@pytest.mark.parametrize("method", ["load_data", "insert"])
def test_replace_and_upsert(target: str, method: str) -> None:
    run_sql(target, "INSERT INTO t VALUES (1, 'old', 1), (2, 'old', 2)")
    lifecycle(writer_options(target, table="t", write_mode="replace", method=method),
              [[(1, "new", None), (3, "new", Decimal("3.5"))]])
    assert rows_of(target, "t") == [(1, "new", None), (2, "old", Decimal("2.00")), (3, "new", Decimal("3.50"))]
    if method == "insert":
        lifecycle(writer_options(target, table="t", write_mode="upsert", method=method),
                  [[(2, "up", Decimal(9)), (4, "ins", None)]])
        assert rows_of(target, "t")[1:] == [(2, "up", Decimal("9.00")), (3, "new", Decimal("3.50")), (4, "ins", None)]


def test_unencodable_values_are_rejected_not_fatal(target: str) -> None:
    rows = [(1, "ok", Decimal(1)), (2, "bad\udcff", Decimal(2)), (3, "ok", Decimal("NaN")), (4, "ok", None)]
    results = lifecycle(writer_options(target, table="t"), [rows])
    assert sorted(r.row[0] for r in results[0].rejected) == [2, 3]
    assert [r[0] for r in rows_of(target, "t")] == [1, 4]


def test_staging_swaps_on_commit_and_leaves_the_target_on_rollback(target: str) -> None:
    run_sql(target, "INSERT INTO t VALUES (100, 'old', 1)")
    lifecycle(writer_options(target, table="t", load="staging"), [[(1, "a", None)], [(2, "b", None)]], commit=False)
    assert rows_of(target, "t") == [(100, "old", Decimal("1.00"))]
    assert user_tables(target) == ["t"]
    lifecycle(writer_options(target, table="t", load="staging", verify="count"), [[(1, "a", None)], [(2, "b", None)]])
    assert [r[0] for r in rows_of(target, "t")] == [1, 2]
    assert user_tables(target) == ["t"]


def test_staging_post_sql_failure_swaps_back(target: str) -> None:
    assert PLUGIN.sink is not None
    run_sql(target, "INSERT INTO t VALUES (100, 'old', 1)")
    options = writer_options(target, table="t", load="staging", post_sql=["INSERT INTO nowhere VALUES (1)"])
    periphery, writer = open_writer(options)
    writer.write(Batch.of_rows([(1, "a", None)]))
    writer.close()
    with pytest.raises(CommitError, match="post_sql failed"):
        periphery.commit()
    periphery.rollback()  # what the engine does after a failed commit: the old table is back, nothing left
    assert rows_of(target, "t") == [(100, "old", Decimal("1.00"))]
    assert user_tables(target) == ["t"]


def test_staging_keeps_grants_and_refuses_a_target_with_triggers(target: str) -> None:
    """Grants are by table name, so the swapped-in table has them; triggers belong to the table object the
    swap replaces, so a target with any is refused at prepare, before pre_sql or a staging table."""
    from wormhole.errors import PrepareError

    assert PLUGIN.sink is not None
    reader = f"wh_r_{uuid.uuid4().hex[:8]}"
    run_sql(target, "INSERT INTO t VALUES (100, 'old', 1)", f"CREATE USER '{reader}'@'%'",
            f"GRANT SELECT ON `{db_name(target)}`.`t` TO '{reader}'@'%'",
            f"GRANT UPDATE (name) ON `{db_name(target)}`.`t` TO '{reader}'@'%'")
    try:
        grants = run_sql(target, f"SHOW GRANTS FOR '{reader}'@'%'")
        lifecycle(writer_options(target, table="t", load="staging"), [[(1, "a", None)]])
        assert run_sql(target, f"SHOW GRANTS FOR '{reader}'@'%'") == grants
        as_reader = pymysql.connect(host="127.0.0.1", port=urlparse(target).port or 3306, user=reader,
                                    database=db_name(target))
        try:
            with as_reader.cursor() as cur:
                cur.execute("SELECT id FROM t")
                assert list(cur.fetchall()) == [(1,)]  # the reporting user reads the swapped-in table
        finally:
            as_reader.close()
    finally:
        run_sql(target, f"DROP USER '{reader}'@'%'")
    run_sql(target, "CREATE TABLE audit (id INT)",
            "CREATE TRIGGER t_audit AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (NEW.id)")
    options = writer_options(target, table="t", load="staging", pre_sql=["DELETE FROM t"])
    periphery = PLUGIN.sink.periphery(options, write_ctx(WSCHEMA))
    with pytest.raises(PrepareError, match=r"load 'staging' cannot keep the trigger t_audit of `.*`\.`t`: MySQL "
                                           r"triggers and foreign keys belong to the table the swap replaces, so "
                                           r"nothing was loaded"):
        periphery.prepare()
    periphery.rollback()
    assert rows_of(target, "t") == [(1, "a", None)] and user_tables(target) == ["audit", "t"]  # pre_sql did not run
    assert run_sql(target, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = "
                           "DATABASE()") == [("t_audit",)]
    run_sql(target, "DROP TRIGGER t_audit", "CREATE TABLE parent (id INT PRIMARY KEY)", "INSERT INTO parent VALUES (1)",
            "ALTER TABLE t ADD CONSTRAINT t_parent FOREIGN KEY (id) REFERENCES parent (id)",
            "CREATE TABLE child (id INT PRIMARY KEY, tid INT, CONSTRAINT child_t FOREIGN KEY (tid) REFERENCES t (id))")
    periphery = PLUGIN.sink.periphery(options, write_ctx(WSCHEMA))
    with pytest.raises(PrepareError, match=r"cannot keep the foreign key t_parent, foreign key child_t of table child "
                                           r"of `.*`\.`t`"):
        periphery.prepare()
    periphery.rollback()
    assert rows_of(target, "t") == [(1, "a", None)]


def _comments(url: str) -> dict[str, str]:
    return {name: comment for name, comment in run_sql(
        url, "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
        if name != "wormhole_splits"}


def test_staging_never_drops_a_table_wormhole_did_not_create(target: str) -> None:
    """A table by the staging name (or the swap's old-table name) that is not this task and destination's
    leftover fails prepare, naming it; it keeps its rows, and the rollback that follows leaves it too."""
    from wormhole.errors import PrepareError

    assert PLUGIN.sink is not None
    like = "(id INT PRIMARY KEY, name VARCHAR(5), amount DECIMAL(8,2))"
    run_sql(target, "INSERT INTO t VALUES (100, 'old', 1)",
            f"CREATE TABLE mine {like} COMMENT 'user notes'", "INSERT INTO mine VALUES (1, 'keep', 1)",
            # write_ctx is task 7, run 1, destination 'out': the default staging and old-table names
            f"CREATE TABLE t__wh7_1 {like}", "INSERT INTO t__wh7_1 VALUES (2, 'keep', 2)",
            f"CREATE TABLE other_task {like} COMMENT 'wormhole:task=8,run=3,dest=out'",
            "INSERT INTO other_task VALUES (3, 'keep', 3)",
            f"CREATE TABLE other_dest {like} COMMENT 'wormhole:task=7,run=3,dest=elsewhere'",
            "INSERT INTO other_dest VALUES (4, 'keep', 4)")
    cases = [({"staging_table": "mine"}, r"`mine` \(params.staging_table of destination 'out'\) already exists "
                                         r".* carries no wormhole staging marker; it is left untouched"),
             ({}, r"`t__wh7_1` \(the default staging name of destination 'out'.*\) already exists"),
             ({"staging_table": "other_task"}, r"`other_task` .* is the staging table of task 8, destination 'out'"),
             ({"staging_table": "other_dest"}, r"`other_dest` .* is the staging table of task 7, destination "
                                               r"'elsewhere'")]
    for params, message in cases:
        periphery = PLUGIN.sink.periphery(writer_options(target, table="t", load="staging", **params),
                                          write_ctx(WSCHEMA))
        with pytest.raises(PrepareError, match=message):
            periphery.prepare()
        periphery.rollback()  # what the engine does next: it must not drop what it did not create
    assert [r[0] for r in rows_of(target, "t__wh7_1")] == [2]
    run_sql(target, "DROP TABLE t__wh7_1", f"CREATE TABLE t__whold7_1 {like}",
            "INSERT INTO t__whold7_1 VALUES (5, 'keep', 5)")
    periphery = PLUGIN.sink.periphery(writer_options(target, table="t", load="staging"), write_ctx(WSCHEMA))
    with pytest.raises(PrepareError, match=r"`t__whold7_1` already exists .* left untouched"):
        periphery.prepare()
    periphery.rollback()
    for table, key in [("mine", 1), ("other_task", 3), ("other_dest", 4), ("t__whold7_1", 5), ("t", 100)]:
        assert [r[0] for r in rows_of(target, table)] == [key], table
    assert sorted(_comments(target)) == ["mine", "other_dest", "other_task", "t", "t__whold7_1"]


def test_staging_table_is_marked_a_leftover_reclaimed_and_the_target_keeps_its_comment(target: str) -> None:
    assert PLUGIN.sink is not None
    run_sql(target, "ALTER TABLE t COMMENT = 'user notes'", "INSERT INTO t VALUES (100, 'old', 1)")
    options = writer_options(target, table="t", load="staging", staging_table="stage")
    crashed = PLUGIN.sink.periphery(options, write_ctx(WSCHEMA, run_id=1))
    crashed.prepare()
    writer = PLUGIN.sink.writer(options, write_ctx(WSCHEMA, run_id=1), crashed, 0)
    writer.open()
    writer.write(Batch.of_rows([(1, "a", None)]))
    writer.close()  # ...and the process dies: neither commit nor rollback
    assert _comments(target)["stage"] == "wormhole:task=7,run=1,dest=out"
    lifecycle_ctx = write_ctx(WSCHEMA, run_id=2)
    periphery = PLUGIN.sink.periphery(options, lifecycle_ctx)
    periphery.prepare()  # the leftover carries this task and destination's marker: reclaimed
    assert _comments(target)["stage"] == "wormhole:task=7,run=2,dest=out"
    assert rows_of(target, "stage") == []
    writer = PLUGIN.sink.writer(options, lifecycle_ctx, periphery, 0)
    writer.open()
    writer.write(Batch.of_rows([(2, "b", None)]))
    writer.close()
    periphery.commit()
    assert [r[0] for r in rows_of(target, "t")] == [2]
    assert _comments(target) == {"t": "user notes"}  # the marker does not stick to the user's table


def test_verify_count_catches_a_difference(target: str) -> None:
    options = writer_options(target, table="t", verify="count")
    periphery, writer = open_writer(options)
    writer.write(Batch.of_rows([(1, "a", None), (2, "b", None)]))
    writer.close()
    run_sql(target, "INSERT INTO t VALUES (77, 'other', NULL)")  # someone else wrote meanwhile
    with pytest.raises(CommitError, match=r"verify count: .* holds 3 rows, expected 2"):
        periphery.commit()


def test_append_rollback_runs_rollback_sql_or_says_rows_stay(target: str) -> None:
    with pytest.raises(RollbackError, match=r"not rolled back: load is .append. without rollback_sql: 2 rows "
                                            r"committed to .* stay there"):
        lifecycle(writer_options(target, table="t"), [[(1, "a", None), (2, "b", None)]], commit=False)
    assert len(rows_of(target, "t")) == 2
    lifecycle(writer_options(target, table="t", rollback_sql=["DELETE FROM t WHERE id >= 10"]),
              [[(10, "a", None), (11, "b", None)]], commit=False)
    assert [r[0] for r in rows_of(target, "t")] == [1, 2]


def _kill(url: str, thread_id: int) -> None:
    run_sql(url, f"KILL {thread_id}")


def test_a_killed_connection_is_retried_and_loses_nothing(target: str) -> None:
    options = writer_options(target, table="t", retry_wait_s=0.05)
    periphery, writer = open_writer(options)
    writer.write(Batch.of_rows([(1, "a", None)]))
    _kill(target, writer.conn.thread_id())
    assert writer.write(Batch.of_rows([(2, "b", None), (3, "c", None)])).written == 2
    writer.close()
    periphery.commit()
    assert [r[0] for r in rows_of(target, "t")] == [1, 2, 3]


def test_without_retries_a_killed_connection_fails_the_destination(target: str) -> None:
    options = writer_options(target, table="t", load="staging", retries=0)
    periphery, writer = open_writer(options)
    writer.write(Batch.of_rows([(1, "a", None)]))
    _kill(target, writer.conn.thread_id())
    with pytest.raises(WriteError, match=r"failed after 1 attempt\(s\): \((2013|2006|1927)\)"):
        writer.write(Batch.of_rows([(2, "b", None)]))
    writer.close()
    with pytest.raises(CommitError, match="cannot commit"):
        periphery.commit()
    periphery.rollback()
    assert rows_of(target, "t") == [] and user_tables(target) == ["t"]


def test_a_stop_ends_the_retry_wait_of_a_transiently_failing_piece_at_once(target: str) -> None:
    """A piece that keeps failing transiently (a row lock another connection holds) with a 30 s wait
    between attempts: setting the task's stop signal fails the destination at once, not after the wait."""
    options = writer_options(target, table="t", method="insert", retries=10, retry_wait_s=30.0)
    with capture_logs() as logs:
        periphery, writer = open_writer(options)
        with writer.conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 1")  # each attempt fails after 1 s with 1205
        holder = connect(target)
        holder.begin()
        with holder.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (1, 'held', NULL)")  # uncommitted: key 1 stays locked
        failures: list[BaseException] = []

        def write() -> None:
            try:
                writer.write(Batch.of_rows([(1, "a", None)]))
            except WriteError as exc:
                failures.append(exc)

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not any(e["event"] == "writer.retry" for e in logs) and time.monotonic() < deadline:
            time.sleep(0.05)
        retries = [e for e in logs if e["event"] == "writer.retry"]
        assert retries and retries[0]["wait_s"] == 30.0 and retries[0]["destination"] == "out", logs
        stopped_at = time.monotonic()
        writer.ctx.stop.set()
        thread.join(20)
        elapsed = time.monotonic() - stopped_at
    holder.rollback()
    holder.close()
    assert not thread.is_alive() and elapsed < 5, f"the stop took {elapsed:.1f} s to end the retry wait"
    assert len(failures) == 1 and "(1205)" in str(failures[0]) and "stopping" in str(failures[0]), failures
    writer.close()
    with pytest.raises(CommitError, match="cannot commit"):
        periphery.commit()
    periphery.rollback()
    assert rows_of(target, "t") == []


def test_missing_target_and_unknown_columns_fail_prepare(target: str) -> None:
    from wormhole.errors import PrepareError

    assert PLUGIN.sink is not None
    for params, message in [({"table": "nope"}, "table `.*`.`nope` does not exist"),
                            ({"table": "t", "columns": ["id", "name", "ghost"]}, "has no column ghost")]:
        periphery = PLUGIN.sink.periphery(writer_options(target, **params), write_ctx(WSCHEMA))
        with pytest.raises(PrepareError, match=message):
            periphery.prepare()


def test_options_reject_contradictions() -> None:
    _, problems = parse(MysqlWriterOptions, {"user": "u", "database": "d", "table": "t", "verify": "count",
                                             "write_mode": "upsert", "method": "load_data",
                                             "rollback_sql": ["x"], "load": "staging"})
    text = "\n".join(problems.items)
    assert "verify: count needs write_mode 'insert'" in text
    assert "method: load_data cannot upsert" in text
    assert "rollback_sql: not with load 'staging'" in text
    _, problems = parse(MysqlReaderOptions, {"user": "u", "database": "d", "table": "t", "query": "SELECT 1",
                                             "connections": [{"host": "h", "database": "x",
                                                              "failover_hosts": ["h2:0", "[::1]x"]}]})
    text = "\n".join(problems.items)
    assert "database: not with connections" in text and "table: not with query" in text
    assert "connections[0].failover_hosts[0]: 'h2:0' is not host" in text
    assert "connections[0].failover_hosts[1]: '[::1]x' is not host" in text


# ---------------------------------------------------------------------------------------------
# failover_hosts: the first server that answers is used (DataX's jdbcUrl lists)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_failover_hosts_source_and_destination_use_the_first_that_answers(target: str) -> None:
    port = urlparse(target).port or 3306
    run_sql(target, "INSERT INTO t VALUES (1, 'a', 1.5), (2, NULL, 2.5)")
    run_sql(target, "CREATE TABLE t2 LIKE t")
    dead = f"127.0.0.1:{_closed_port()}"
    failover = {"host": "127.0.0.1", "port": _closed_port(), "failover_hosts": [dead, f"127.0.0.1:{port}"],
                "connect_timeout_s": 1.0}
    with capture_logs() as logs:
        _splits, rows = read_splits(reader_options(target, table="t", **failover))
        lifecycle(writer_options(target, table="t2", **failover), [rows])
    assert sorted(rows) == [(1, "a", Decimal("1.50")), (2, None, Decimal("2.50"))]
    assert rows_of(target, "t2") == sorted(rows)
    chosen = [e for e in logs if e["event"] == "connection.server_chosen"]
    assert chosen and {e["server"] for e in chosen} == {f"127.0.0.1:{port}"}
    assert len(chosen[0]["failed"]) == 2 and chosen[0]["log_level"] == "warning"


def test_failover_hosts_none_answering_names_every_reason(mysql_db: str) -> None:
    first, second = _closed_port(), _closed_port()
    options = reader_options(mysql_db, table="t", port=first, failover_hosts=[f"127.0.0.2:{second}"],
                             connect_retries=1, connect_timeout_s=1.0)
    with pytest.raises(SplitError) as info:
        read_splits(options)
    message = str(info.value)
    assert "tried 2 of 2 servers in order" in message
    assert f"127.0.0.1:{first}: (2003)" in message and f"127.0.0.2:{second}: (2003)" in message


def test_a_server_that_answers_and_refuses_ends_the_failover(mysql_db: str) -> None:
    port = urlparse(mysql_db).port or 3306
    options = reader_options(mysql_db, table="t", user="wh_no_such_user", port=_closed_port(),
                             failover_hosts=[f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"], connect_retries=3)
    started = time.monotonic()
    with pytest.raises(SplitError, match=r"tried 2 of 3 servers in order.*Access denied"):
        read_splits(options)
    assert time.monotonic() - started < 0.5  # bad credentials are not retried


def test_rollback_sql_does_not_run_when_prepare_failed(target: str) -> None:
    from wormhole.errors import PrepareError

    assert PLUGIN.sink is not None
    run_sql(target, "INSERT INTO t VALUES (1, 'keep', NULL)")
    options = writer_options(target, table="t", columns=["id", "name", "ghost"], rollback_sql=["DELETE FROM t"])
    periphery = PLUGIN.sink.periphery(options, write_ctx(WSCHEMA))
    with pytest.raises(PrepareError):
        periphery.prepare()
    periphery.rollback()  # the engine rolls back every failed destination: nothing was loaded, nothing undone
    assert rows_of(target, "t") == [(1, "keep", None)]


@pytest.mark.parametrize("method", ["load_data", "insert"])
def test_odd_identifiers_are_quoted_everywhere(mysql_db: str, method: str) -> None:
    # A name with a backtick, a % (the driver's format character) and a space reads and writes as any other.
    run_sql(mysql_db, "CREATE TABLE `src%s ``x` (`k%d` INT PRIMARY KEY, `v``1` VARCHAR(10))",
            "CREATE TABLE `dst%s ``y` (`k%d` INT PRIMARY KEY, `v``1` VARCHAR(10))",
            "INSERT INTO `src%s ``x` SELECT seq, CONCAT('v', seq) FROM seq_1_to_50")
    _, rows = read_splits(reader_options(mysql_db, table="src%s `x", split_pk="k%d", where="`v``1` LIKE 'v%'"))
    assert sorted(rows) == [(i, f"v{i}") for i in range(1, 51)]
    schema = Schema((Column("k%d", "int"), Column("v`1", "string")))
    options = writer_options(mysql_db, table="dst%s `y", method=method, load="staging", verify="count")
    periphery, writer = open_writer(options, schema)
    assert writer.write(as_batch(rows)).written == 50
    writer.close()
    periphery.commit()
    assert sorted(rows_of(mysql_db, "dst%s ``y", order="`k%d`")) == sorted(rows)


def test_rows_over_16_mib_span_packets_and_still_parse(mysql_db: str) -> None:
    # A row of 16 MiB or more arrives in several packets; the server must allow such packets first.
    admin = connect(mysql_db)
    try:
        with global_max_allowed_packet(admin, 67108864):
            run_sql(mysql_db, "CREATE TABLE big (id INT PRIMARY KEY, b LONGBLOB, s VARCHAR(10))")
            conn = connect(mysql_db)  # a new connection sees the new limit
            with conn.cursor() as cur:
                cur.execute("INSERT INTO big VALUES (1, REPEAT('a', 17000000), 'x'), (2, 'small', NULL), "
                            "(3, REPEAT('b', 16777215 - 20), 'edge'), (4, REPEAT('c', 33554432 + 7), 'two')")
            conn.close()
            _, rows = read_splits(reader_options(mysql_db, table="big"))
    finally:
        admin.close()
    got = {r[0]: (len(r[1]), r[1][:1], r[2]) for r in rows}
    assert got == {1: (17000000, b"a", "x"), 2: (5, b"s", None), 3: (16777195, b"b", "edge"),
                   4: (33554439, b"c", "two")}


def test_connections_share_one_tls_context(mysql_db: str) -> None:
    # pymysql makes a TLS context per connection (its default: TLS when the server offers it), about
    # 40 ms of CPU each; the store makes one per process, with the same settings.
    from wormhole.plugins.mysql.connection import connect as store_connect

    endpoint = writer_options(mysql_db, table="t").endpoint
    first, second = store_connect(endpoint, WriteError), store_connect(endpoint, WriteError)
    try:
        assert first.ctx is not None and first.ctx is second.ctx
        assert first.ctx.verify_mode == ssl.CERT_NONE and not first.ctx.check_hostname
    finally:
        first.close()
        second.close()

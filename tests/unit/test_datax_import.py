"""The DataX job import as pure functions: every key's mapping, and the report of what is not translated."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.plugin_helpers import parse, run_destination
from wormhole.importers.datax import DataxImportError, Translation, log_report, translate
from wormhole.plugins import registry
from wormhole.task_spec import TaskSpec

DATA = Path(__file__).resolve().parent.parent / "data" / "datax"
URL = "jdbc:mysql://db1.example:3307/shop"


def rdbms_part(name: str, username: str, table: str, jdbc_url: str | list[str],
               parameter: dict[str, Any]) -> dict[str, Any]:
    """A DataX reader or writer of an RDBMS: columns id and name of one table (a reader's jdbcUrl is a list,
    a writer's a string), ``parameter`` overriding any of it."""
    base = {"username": username, "column": ["id", "name"], "connection": [{"table": [table], "jdbcUrl": jdbc_url}]}
    return {"name": name, "parameter": {**base, **parameter}}


def mysql_reader(**parameter: Any) -> dict[str, Any]:
    return rdbms_part("mysqlreader", "etl", "orders", [URL], parameter)


def mysql_writer(**parameter: Any) -> dict[str, Any]:
    return rdbms_part("mysqlwriter", "loader", "orders_copy", "jdbc:mysql://db2.example/dw", parameter)


PG_URL = "jdbc:postgresql://pg1.example:5433/shop"


def pg_reader(**parameter: Any) -> dict[str, Any]:
    return rdbms_part("postgresqlreader", "etl", "orders", [PG_URL], parameter)


def pg_writer(**parameter: Any) -> dict[str, Any]:
    return rdbms_part("postgresqlwriter", "loader", "orders_copy", "jdbc:postgresql://pg2.example/dw", parameter)


def txt_writer(**parameter: Any) -> dict[str, Any]:
    return {"name": "txtfilewriter", "parameter": {"path": "/data/out", "fileName": "orders",
                                                   "writeMode": "append", **parameter}}


def stream_reader(**parameter: Any) -> dict[str, Any]:
    base = {"column": [{"type": "long", "value": 1}], "sliceRecordCount": 10}
    return {"name": "streamreader", "parameter": {**base, **parameter}}


STREAM_WRITER = {"name": "streamwriter", "parameter": {"print": False}}


def job(reader: dict[str, Any] | None = None, writer: dict[str, Any] | None = None,
        setting: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"job": {"setting": {"speed": {"channel": 2}} if setting is None else setting,
                    "content": [{"reader": reader or mysql_reader(), "writer": writer or STREAM_WRITER}]}, **top}


def one(doc: dict[str, Any]) -> Translation:
    return translate([("job.json", doc)], name="t")


def source(doc: dict[str, Any]) -> dict[str, Any]:
    return one(doc).task["source"]["params"]


def dest(doc: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return one(doc).task["destinations"][index]


def notes(tr: Translation) -> dict[str, str]:
    return {item.path: item.reason for item in tr.untranslated}


R = "job.content[0].reader.parameter"
W = "job.content[0].writer.parameter"


# ---------------------------------------------------------------------------------------------
# mysqlreader


def test_mysqlreader_table_keys() -> None:
    doc = job(mysql_reader(column=["id", "`name`"], splitPk="`id`", where="id > 5", password="s3cret-pw"))
    tr = one(doc)
    assert tr.task["source"] == {"plugin": "mysql", "params": {
        "user": "etl", "password_env": "DATAX_READER_PASSWORD", "host": "db1.example", "port": 3307,
        "database": "shop", "table": "orders", "columns": ["id", "name"], "where": "id > 5", "split_pk": "id"}}
    assert "s3cret-pw" not in json.dumps(tr.task)
    assert "DATAX_READER_PASSWORD" in notes(tr)[f"{R}.password"]


def test_empty_password_needs_no_variable() -> None:
    # DataX connects with the empty password: the task must run without anything exported.
    tr = one(job(mysql_reader(password=""), mysql_writer(password="")))
    assert "password_env" not in tr.task["source"]["params"]
    assert "password_env" not in tr.task["destinations"][0]["params"]
    assert not any(i.path.endswith(".password") for i in tr.untranslated)


def test_mysqlreader_star_column_reads_every_column() -> None:
    assert "columns" not in source(job(mysql_reader(column=["*"])))


def test_mysqlreader_several_connections_are_a_sharded_source() -> None:
    conns = [{"table": ["orders_[00-02]"], "jdbcUrl": [URL]},
             {"table": ["a,b"], "jdbcUrl": ["jdbc:mysql://[::1]:3310/shop2"]}]
    params = source(job(mysql_reader(connection=conns, splitPk="id")))
    assert params["connections"] == [
        {"host": "db1.example", "port": 3307, "database": "shop", "tables": ["orders_00", "orders_01", "orders_02"]},
        {"host": "::1", "port": 3310, "database": "shop2", "tables": ["a", "b"]}]
    assert "table" not in params and params["split_pk"] == "id"


def test_mysqlreader_query_sql() -> None:
    doc = job(mysql_reader(where="x", splitPk="id",
                           connection=[{"querySql": ["select 1 as a"], "jdbcUrl": [URL], "table": ["t"]}]))
    tr = one(doc)
    params = tr.task["source"]["params"]
    assert params["query"] == "select 1 as a" and "table" not in params and "columns" not in params
    reported = notes(tr)
    assert {f"{R}.column", f"{R}.where", f"{R}.splitPk"} <= set(reported)
    assert "connection[0].table ignored" in reported[f"{R}.connection"]


def test_mysqlreader_query_sql_on_several_connections() -> None:
    conns = [{"querySql": "select 1", "jdbcUrl": [URL]}, {"querySql": ["select 1"], "jdbcUrl": [URL]}]
    params = source(job(mysql_reader(connection=conns)))
    assert params["query"] == "select 1"
    assert [set(c) for c in params["connections"]] == [{"host", "port", "database"}] * 2


@pytest.mark.parametrize("conns", [
    [{"querySql": ["select 1", "select 2"], "jdbcUrl": [URL]}],
    [{"querySql": ["select 1"], "jdbcUrl": [URL]}, {"querySql": ["select 2"], "jdbcUrl": [URL]}],
    [{"querySql": ["select 1"], "jdbcUrl": [URL]}, {"table": ["t"], "jdbcUrl": [URL]}],
])
def test_mysqlreader_queries_wormhole_cannot_run_as_one_are_refused(conns: list[dict[str, Any]]) -> None:
    with pytest.raises(DataxImportError, match="querySql"):
        one(job(mysql_reader(connection=conns)))


@pytest.mark.parametrize(("column", "columns", "transforms"), [
    # DataX's documentation example: the constants follow the columns
    (["id", "name", "1", "'bazhen.csy'", "null"], ["id", "name"],
     [{"derive": {"col3": "1", "col4": "'bazhen.csy'", "col5": "CAST(NULL AS string)"}}]),
    # a constant ahead of a column is put back in its place; a name taken by a column is not reused
    (["-2.5", "col1", "'it''s'", "TRUE", "+7"], ["col1"],
     [{"derive": {"col1_": "-2.5", "col3": "'it''s'", "col4": "TRUE", "col5": "7"}},
      {"project": {"keep": ["col1_", "col1", "col3", "col4", "col5"]}}]),
])
def test_mysqlreader_constant_columns_are_derived_and_keep_the_split(
        column: list[str], columns: list[str], transforms: list[dict[str, Any]]) -> None:
    tr = one(job(mysql_reader(column=column, splitPk="id", where="id > 1")))
    params = tr.task["source"]["params"]
    assert (params["table"], params["split_pk"], params["where"], params["columns"]) == (
        "orders", "id", "id > 1", columns)
    assert "query" not in params and tr.task["transforms"] == transforms
    assert f"{R}.splitPk" not in notes(tr)
    TaskSpec.from_mapping(tr.task)


@pytest.mark.parametrize("other", ["'a\\nb'", "1.5e3", "12345678901234567890", "\"x\""])
def test_mysqlreader_constants_mysql_reads_otherwise_become_a_query(other: str) -> None:
    # Backslash escapes, exponents, numbers beyond 64 bits, double quotes: MySQL's own reading is kept.
    assert "query" in source(job(mysql_reader(column=["id", other])))


def test_mysqlreader_expression_columns_become_a_query() -> None:
    tr = one(job(mysql_reader(column=["id", "upper(name)", "'x'"], where="id > 1", splitPk="id")))
    params = tr.task["source"]["params"]
    assert params["query"] == "SELECT id, upper(name), 'x' FROM `orders` WHERE id > 1"
    assert "split_pk" not in params and "table" not in params
    assert {f"{R}.column", f"{R}.splitPk"} <= set(notes(tr))


def test_jdbc_url_list_becomes_failover_hosts_and_properties_are_reported() -> None:
    # DataX tries a connection's URLs (and a URL's comma-separated hosts) in order: all of them are kept.
    conns = [{"table": ["t"], "jdbcUrl": ["jdbc:mysql://h1,h2:3306/db?useSSL=false&characterEncoding=utf8",
                                           "jdbc:mysql://h3/db", "jdbc:mysql://[::1]:3310/db", "jdbc:mysql://h2/db"]}]
    tr = one(job(mysql_reader(connection=conns)))
    params = tr.task["source"]["params"]
    assert (params["host"], params["port"], params["database"]) == ("h1", 3306, "db")
    assert params["failover_hosts"] == ["h2:3306", "h3:3306", "[::1]:3310"]
    assert "useSSL, characterEncoding" in notes(tr)[f"{R}.connection[0].jdbcUrl"]
    TaskSpec.from_mapping(tr.task)


def test_jdbc_url_list_on_shards_and_writer() -> None:
    conns = [{"table": ["a"], "jdbcUrl": [URL, "jdbc:mysql://db1b.example:3307/shop"]},
             {"table": ["b"], "jdbcUrl": ["jdbc:mysql://db2.example/shop2"]}]
    writer = mysql_writer(connection=[{"table": ["t"], "jdbcUrl": ["jdbc:mysql://w1/dw", "jdbc:mysql://w2:3307/dw"]}])
    tr = one(job(mysql_reader(connection=conns), writer))
    first, second = tr.task["source"]["params"]["connections"]
    assert first["failover_hosts"] == ["db1b.example:3307"] and "failover_hosts" not in second
    assert tr.task["destinations"][0]["params"]["failover_hosts"] == ["w2:3307"]
    TaskSpec.from_mapping(tr.task)


def test_jdbc_url_list_naming_different_databases_is_refused() -> None:
    conns = [{"table": ["t"], "jdbcUrl": [URL, "jdbc:mysql://h2/other"]}]
    with pytest.raises(DataxImportError, match="different databases"):
        one(job(mysql_reader(connection=conns)))


@pytest.mark.parametrize("url", ["jdbc:postgresql://h/db", "jdbc:mysql://h/", "jdbc:mysql://h:99999/db",
                                 "jdbc:mysql://u:p@h/db", "jdbc:mysql://u:Tk#p@ss:w/rd?x=1@h/db",
                                 "jdbc:mysql://h1,u:Tk#p@ss@h2/db", "jdbc:mysql://u:Tk#p@ss:w/"])
def test_bad_jdbc_urls_are_refused(url: str) -> None:
    with pytest.raises(DataxImportError, match=r"connection\[0\]\.jdbcUrl") as info:
        one(job(mysql_reader(connection=[{"table": ["t"], "jdbcUrl": [url]}])))
    assert "Tk#" not in str(info.value) and "@ss" not in str(info.value)  # no piece of a password shown


def test_mysqlreader_settings_without_equivalent_are_reported() -> None:
    tr = one(job(mysql_reader(session=["set x=1"], fetchSize=1024, somethingNew=1)))
    reported = notes(tr)
    assert "session" in reported[f"{R}.session"]
    assert "fetch size" in reported[f"{R}.fetchSize"]
    assert "no wormhole equivalent" in reported[f"{R}.somethingNew"]


# ---------------------------------------------------------------------------------------------
# mysqlwriter


@pytest.mark.parametrize(("mode", "expected"), [("insert", "insert"), ("replace", "replace"),
                                                ("update", "upsert"), ("UPDATE (id)", "upsert"),
                                                (None, "insert")])
def test_mysqlwriter_write_modes(mode: str | None, expected: str) -> None:
    assert dest(job(writer=mysql_writer(writeMode=mode)))["params"]["write_mode"] == expected


def test_mysqlwriter_ignore_is_insert_and_reported() -> None:
    tr = one(job(writer=mysql_writer(writeMode="ignore")))
    assert tr.task["destinations"][0]["params"]["write_mode"] == "insert"
    assert "INSERT IGNORE" in notes(tr)[f"{W}.writeMode"]


def test_mysqlwriter_unknown_write_mode_is_refused() -> None:
    with pytest.raises(DataxImportError, match="writeMode"):
        one(job(writer=mysql_writer(writeMode="merge")))


def test_mysqlwriter_keys() -> None:
    doc = job(writer=mysql_writer(password="pw-1", column=["`id`", "name"], batchSize=512, session=["set a=1"],
                                  preSql=["delete from @table", " "], postSql=["analyze table @table"]))
    tr = one(doc)
    d = tr.task["destinations"][0]
    assert d["id"] == "mysql_dw_orders_copy"
    assert d["params"] == {"user": "loader", "host": "db2.example", "port": 3306, "database": "dw",
                           "table": "orders_copy", "columns": ["id", "name"], "write_mode": "insert",
                           "pre_sql": ["delete from orders_copy"], "post_sql": ["analyze table orders_copy"],
                           "batch_size": 512, "password_env": "DATAX_MYSQL_DW_ORDERS_COPY_PASSWORD"}
    assert "pw-1" not in json.dumps(tr.task)
    reported = notes(tr)
    assert "DATAX_MYSQL_DW_ORDERS_COPY_PASSWORD" in reported[f"{W}.password"]
    assert "session" in reported[f"{W}.session"]
    assert sum(i.path == f"{W}.password" for i in tr.untranslated) == 1


def test_mysqlwriter_star_column_writes_the_source_names() -> None:
    assert "columns" not in dest(job(writer=mysql_writer(column=["*"])))["params"]


@pytest.mark.parametrize("conns", [
    [{"table": ["a", "b"], "jdbcUrl": "jdbc:mysql://h/db"}],
    [{"table": ["a"], "jdbcUrl": "jdbc:mysql://h/db"}, {"table": ["a"], "jdbcUrl": "jdbc:mysql://h2/db"}],
])
def test_mysqlwriter_several_tables_are_refused(conns: list[dict[str, Any]]) -> None:
    with pytest.raises(DataxImportError, match="one table"):
        one(job(writer=mysql_writer(connection=conns)))


# ---------------------------------------------------------------------------------------------
# postgresqlreader and postgresqlwriter


def test_postgresqlreader_table_keys_fold_names_as_postgresql_does() -> None:
    # DataX sends names unquoted into its SQL (folded to lower case); the store quotes them as written.
    doc = job(pg_reader(column=["ID", "Name", '"MixedCase"'], splitPk="Id", where="id > 5", password="pw-9",
                        fetchSize=2048, connection=[{"table": ["Sales.Orders"], "jdbcUrl": [PG_URL]}]))
    tr = one(doc)
    assert tr.task["source"] == {"plugin": "postgres", "params": {
        "user": "etl", "password_env": "DATAX_READER_PASSWORD", "host": "pg1.example", "port": 5433,
        "database": "shop", "schema": "sales", "table": "orders", "columns": ["id", "name", "MixedCase"],
        "where": "id > 5", "split_pk": "id"}}
    assert "pw-9" not in json.dumps(tr.task)
    assert "COPY" in notes(tr)[f"{R}.fetchSize"]
    TaskSpec.from_mapping(tr.task)


def test_postgresqlreader_url_current_schema_hosts_and_properties() -> None:
    conns = [{"table": ["orders", '"Other"."T"'],
              "jdbcUrl": ["jdbc:postgresql://h1,h2:5434/shop?currentSchema=Dw&ssl=true", "jdbc:postgresql://h3/shop"]}]
    tr = one(job(pg_reader(connection=conns)))
    params = tr.task["source"]["params"]
    # Tables in two schemas: a shard each, on the first host (the store connects to one server).
    assert params["connections"] == [
        {"host": "h1", "port": 5432, "database": "shop", "schema": "dw", "tables": ["orders"]},
        {"host": "h1", "port": 5432, "database": "shop", "schema": "Other", "tables": ["T"]}]
    jdbc = [i.reason for i in tr.untranslated if i.path == f"{R}.connection[0].jdbcUrl"]
    assert any("h2:5434/shop, h3:5432/shop" in r and "not used" in r for r in jdbc)
    assert any("properties ssl" in r for r in jdbc)


def test_postgresqlreader_query_sql_and_expression_columns() -> None:
    conns = [{"querySql": ["select 1 as a"], "jdbcUrl": [PG_URL + "?currentSchema=s"], "table": ["t"]}]
    tr = one(job(pg_reader(connection=conns, splitPk="id")))
    assert tr.task["source"]["params"] == {"user": "etl", "host": "pg1.example", "port": 5433, "database": "shop",
                                           "query": "select 1 as a"}
    assert "qualify" in notes(tr)[f"{R}.connection[0].jdbcUrl"]
    assert f"{R}.splitPk" in notes(tr)
    expr = one(job(pg_reader(column=["id", "'x'::varchar", "power(2,3)"], where="id > 1", splitPk="id",
                             connection=[{"table": ['s."Big T"'], "jdbcUrl": [PG_URL]}])))
    params = expr.task["source"]["params"]
    assert params["query"] == 'SELECT id, \'x\'::varchar, power(2,3) FROM "s"."Big T" WHERE id > 1'
    assert {"table", "schema", "split_pk"}.isdisjoint(params)
    TaskSpec.from_mapping(expr.task)


@pytest.mark.parametrize("url", ["jdbc:mysql://h/db", "jdbc:postgresql://h/", "jdbc:postgresql://h:99999/db",
                                 "jdbc:postgresql://u:Tk#p@ss@h/db", "jdbc:postgresql://h/db?user=u&password=Tk#p@ss"])
def test_postgresql_bad_jdbc_urls_are_refused(url: str) -> None:
    with pytest.raises(DataxImportError, match=r"connection\[0\]\.jdbcUrl") as info:
        one(job(pg_reader(connection=[{"table": ["t"], "jdbcUrl": [url]}])))
    assert "Tk#" not in str(info.value) and "@ss" not in str(info.value)


def test_postgresqlwriter_keys() -> None:
    doc = job(writer=pg_writer(password="pw-2", column=["ID", '"Name"'], batchSize=512, session=["set x=1"],
                               preSql=["delete from @table"], postSql=["analyze @table"],
                               connection=[{"table": ['Stage."Orders"'],
                                            "jdbcUrl": "jdbc:postgresql://pg2.example/dw"}]))
    tr = one(doc)
    d = tr.task["destinations"][0]
    assert d["id"] == "postgres_dw_Orders"
    assert d["params"] == {"user": "loader", "host": "pg2.example", "port": 5432, "database": "dw",
                           "schema": "stage", "table": "Orders", "columns": ["id", "Name"], "write_mode": "insert",
                           "pre_sql": ['delete from Stage."Orders"'], "post_sql": ['analyze Stage."Orders"'],
                           "batch_size": 512, "password_env": "DATAX_POSTGRES_DW_ORDERS_PASSWORD"}
    assert "pw-2" not in json.dumps(tr.task)
    assert "session" in notes(tr)[f"{W}.session"]
    TaskSpec.from_mapping(tr.task)


@pytest.mark.parametrize(("mode", "expected"), [
    (None, {"write_mode": "insert"}), ("INSERT", {"write_mode": "insert"}), ("copy", {"write_mode": "insert"}),
    ("update", {"write_mode": "upsert"}), ('update (ID, "Key")', {"write_mode": "upsert", "upsert_key": ["id", "Key"]}),
])
def test_postgresqlwriter_write_modes(mode: str | None, expected: dict[str, Any]) -> None:
    tr = one(job(writer=pg_writer(writeMode=mode)))
    params = tr.task["destinations"][0]["params"]
    assert {k: params[k] for k in ("write_mode", "upsert_key") if k in params} == expected
    assert (f"{W}.writeMode" in notes(tr)) is (mode not in (None, "INSERT"))


@pytest.mark.parametrize(("writer", "message"), [
    (pg_writer(writeMode="replace"), "writeMode"), (pg_writer(writeMode="update (1)"), "writeMode"),
    (pg_writer(column=["id", "now()"]), "column"),
    (pg_writer(connection=[{"table": ["a", "b"], "jdbcUrl": "jdbc:postgresql://h/db"}]), "one table"),
    (pg_writer(connection=[{"table": ["a.b.c"], "jdbcUrl": "jdbc:postgresql://h/db"}]), r"table\b.*schema\.table"),
])
def test_postgresqlwriter_refusals(writer: dict[str, Any], message: str) -> None:
    with pytest.raises(DataxImportError, match=message):
        one(job(writer=writer))


# ---------------------------------------------------------------------------------------------
# txtfilewriter and streamwriter


@pytest.mark.parametrize(("mode", "expected", "reported"), [("truncate", "overwrite", True),
                                                             ("append", "append", False),
                                                             ("nonConflict", "append", True)])
def test_txtfilewriter_write_modes(mode: str, expected: str, reported: bool) -> None:
    tr = one(job(writer=txt_writer(writeMode=mode, fileFormat="csv")))
    assert tr.task["destinations"][0]["params"]["mode"] == expected
    assert (f"{W}.writeMode" in notes(tr)) is reported


def test_txtfilewriter_keys() -> None:
    tr = one(job(writer=txt_writer(fieldDelimiter="\t", nullFormat="NULL", fileFormat="csv", encoding="UTF-8",
                                   header=["id", "name"], dateFormat="yyyy", compress="gzip")))
    d = tr.task["destinations"][0]
    assert d["id"] == "file_out"
    assert d["params"] == {"path": "/data/out", "format": "csv", "mode": "append", "delimiter": "\t",
                           "null": "NULL", "header": True}
    reported = notes(tr)
    assert f"{W}.header" not in reported  # the source's names are the header's
    assert f"{W}.encoding" not in reported
    assert {f"{W}.fileName", f"{W}.dateFormat", f"{W}.compress"} <= set(reported)


def test_txtfilewriter_defaults_and_approximations() -> None:
    tr = one(job(writer=txt_writer(header=["a", "b"], encoding="GBK")))
    params = tr.task["destinations"][0]["params"]
    assert (params["delimiter"], params["null"]) == (",", "\\N")  # DataX's defaults
    reported = notes(tr)
    assert "text is written as csv" in reported[f"{W}.fileFormat"]
    assert "(id, name)" in reported[f"{W}.header"]
    assert "GBK" in reported[f"{W}.encoding"]
    assert one(job(writer=txt_writer())).task["destinations"][0]["params"]["header"] is False


@pytest.mark.parametrize("bad", [{"writeMode": "overwrite"}, {"fileFormat": "orc"}, {"path": ""}])
def test_txtfilewriter_bad_values_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(DataxImportError):
        one(job(writer=txt_writer(**bad)))


@pytest.mark.parametrize(("parameter", "params"), [
    ({"print": True}, {"print": True}),
    ({}, {"print": True}),  # DataX prints unless print is false
    ({"print": False}, {}),
    ({"print": True, "fieldDelimiter": ",", "encoding": "UTF-8"}, {"print": True, "delimiter": ","}),
])
def test_streamwriter_print(parameter: dict[str, Any], params: dict[str, Any]) -> None:
    tr = one(job(writer={"name": "streamwriter", "parameter": parameter}))
    assert tr.task["destinations"] == [{"id": "stream", "plugin": "stream", "params": params}]
    assert f"{W}.print" not in notes(tr)
    TaskSpec.from_mapping(tr.task)


@pytest.mark.parametrize(("params", "lines"), [
    ({"print": True}, ["1\ta\\tb\\nc\\\\\ttrue\t2024-01-02 03:04:05\tnull", "2\tnull\tfalse\t2024-01-02\t1.50"]),
    ({"print": True, "delimiter": "|", "null": "\\N"}, ["1|a\\tb\\nc\\\\|true|2024-01-02 03:04:05|\\N",
                                                     "2|\\N|false|2024-01-02|1.50"]),
    ({}, []),
])
def test_stream_destination_prints_rows_on_stdout_only(
        capsys: pytest.CaptureFixture[str], params: dict[str, Any], lines: list[str]) -> None:
    stream = registry.get("stream").sink
    assert stream is not None
    options, problems = parse(stream.options, params)
    assert not problems
    rows = [[(1, "a\tb\nc\\", True, datetime(2024, 1, 2, 3, 4, 5), None)],
            [(2, None, False, date(2024, 1, 2), Decimal("1.50"))]]  # two writers, one row each
    run_destination(stream, options, rows)
    out, err = capsys.readouterr()
    assert sorted(out.splitlines()) == lines and err == ""


# ---------------------------------------------------------------------------------------------
# streamreader


def test_streamreader_rows_are_slice_count_times_channels() -> None:
    columns = [{"type": t, "value": "x"} for t in ("long", "double", "string", "date", "bool", "bytes")]
    tr = one(job(stream_reader(column=columns, sliceRecordCount=7), setting={"speed": {"channel": 4}}))
    params = tr.task["source"]["params"]
    assert (params["rows"], params["splits"]) == (28, 4)
    assert [c["type"] for c in params["columns"]] == ["int", "float", "string", "datetime", "bool", "bytes"]
    assert [c["name"] for c in params["columns"]] == [f"col{i}" for i in range(1, 7)]
    assert all(f"{R}.column[{i}].value" in notes(tr) for i in range(6))


@pytest.mark.parametrize("bad", [{"sliceRecordCount": None}, {"column": [{"type": "decimal"}]}, {"column": []}])
def test_streamreader_bad_values_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(DataxImportError):
        one(job(stream_reader(**bad)))


# ---------------------------------------------------------------------------------------------
# setting, core, job shape


def test_speed_channel() -> None:
    assert one(job(setting={"speed": {"channel": "3"}})).task["settings"]["speed"] == {"channel": 3}
    assert "speed" not in one(job(setting={})).task["settings"]


def test_speed_byte_and_record_are_carried_as_limits_with_their_per_channel_rates() -> None:
    core = {"transport": {"channel": {"speed": {"byte": 100, "record": 100}}}}
    tr = one(job(setting={"speed": {"byte": 500, "record": 1000, "channel": 1}}, core=core))
    # Enforced for the whole task; the engine derives the channel count from them, as DataX does.
    assert tr.task["settings"]["speed"] == {"byte": 500, "record": 1000, "channel_byte": 100, "channel_record": 100}
    reported = notes(tr)
    assert "job.setting.speed.byte" not in reported and "job.setting.speed.record" not in reported
    assert "ignored" in reported["job.setting.speed.channel"]
    assert not any(path.startswith("core.") for path in reported)
    TaskSpec.from_mapping(tr.task)
    only_record = one(job(setting={"speed": {"record": 10}}, core=core))
    assert only_record.task["settings"]["speed"] == {"record": 10, "channel_record": 100}
    assert "core.transport.channel.speed.byte" in notes(only_record)  # a per-channel rate alone: not carried


def test_streamreader_slices_follow_datax_channel_count_under_limits() -> None:
    core = {"transport": {"channel": {"speed": {"byte": 100, "record": 100}}}}
    tr = one(job(stream_reader(sliceRecordCount=7), setting={"speed": {"byte": 500, "record": 1000}}, core=core))
    assert (tr.task["source"]["params"]["rows"], tr.task["source"]["params"]["splits"]) == (35, 5)  # min(5, 10)


def test_speed_limit_without_per_channel_value_is_still_a_limit() -> None:
    tr = one(job(setting={"speed": {"byte": 1048576, "channel": 2}}))
    assert tr.task["settings"]["speed"] == {"byte": 1048576}  # engine.toml [speed] channel_byte sets the channels
    reported = notes(tr)
    assert "core.transport.channel.speed.byte" in reported["job.setting.speed.byte"]
    assert "ignored" in reported["job.setting.speed.channel"]
    # DataX's core.json default -1 means no per-channel rate, and no limit is no limit.
    core = {"transport": {"channel": {"speed": {"byte": -1, "record": -1}}}}
    assert one(job(setting={"speed": {"channel": 3, "byte": 0}}, core=core)).task["settings"]["speed"] == {
        "channel": 3}


def test_speed_channel_is_capped_at_wormholes_bound() -> None:
    tr = one(job(setting={"speed": {"channel": 5000}}))
    assert tr.task["settings"]["speed"] == {"channel": 1024}
    assert "1024" in notes(tr)["job.setting.speed.channel"]


def test_error_limit() -> None:
    settings = one(job(setting={"errorLimit": {"record": "10", "percentage": 0.5}})).task["settings"]
    assert settings["error_limit"] == {"record": 10, "percentage": 0.5}
    # DataX without errorLimit has no limit: an empty limit says so (wormhole's default is 0 rows).
    assert one(job(setting={})).task["settings"]["error_limit"] == {}


@pytest.mark.parametrize("bad", [{"record": -1}, {"percentage": 2}, {"record": "many"}, {"record": 1.5}])
def test_bad_error_limits_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(DataxImportError, match="errorLimit"):
        one(job(setting={"errorLimit": bad}))


def test_other_settings_are_reported_with_their_paths() -> None:
    doc = job(core={"transport": {"channel": {"capacity": 512, "speed": {"byte": 10}}}}, entry={"x": 1})
    doc["job"]["content"][0]["transformer"] = [{"name": "dx_substr"}]
    doc["job"]["content"].append(doc["job"]["content"][0])
    doc["job"]["setting"]["dirty"] = {"path": "/tmp"}
    reported = notes(one(doc))
    assert "core.transport.channel.capacity" in reported
    assert "not each channel's" in reported["core.transport.channel.speed.byte"]  # no job limit to carry it
    assert "entry" in reported
    assert "no transformers" in reported["job.content[0].transformer"]
    assert "runs the first only" in reported["job.content"]
    assert "job.setting.dirty" in reported


@pytest.mark.parametrize(("doc", "message"), [
    ({"content": []}, "not a DataX job"),
    (job(reader={"name": "oraclereader", "parameter": {}}), "'oraclereader' is not supported"),
    (job(writer={"name": "hdfswriter", "parameter": {}}), "'hdfswriter' is not supported.*postgresqlwriter"),
    (job(mysql_reader(username=None)), "username: is required"),
    ({"job": {"content": "x"}}, "content"),
])
def test_jobs_that_cannot_be_translated(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(DataxImportError, match=message):
        one(doc)


# ---------------------------------------------------------------------------------------------
# --merge


def test_merge_makes_one_fan_out_task() -> None:
    a = job(writer=mysql_writer(password="x"), setting={"speed": {"channel": 2}, "errorLimit": {"record": 0}})
    b = job(writer=mysql_writer(), setting={"speed": {"channel": 4}, "errorLimit": {"percentage": 0.1}})
    c = job(writer=txt_writer(), setting={})
    tr = translate([("a.json", a), ("b.json", b), ("c.json", c)], name="abc")
    task = tr.task
    assert [d["id"] for d in task["destinations"]] == ["mysql_dw_orders_copy", "mysql_dw_orders_copy_2", "file_out"]
    assert [d["error_limit"] for d in task["destinations"]] == [{"record": 0}, {"percentage": 0.1}, {}]
    assert task["destinations"][0]["params"]["password_env"] == "DATAX_MYSQL_DW_ORDERS_COPY_PASSWORD"
    assert "password_env" not in task["destinations"][1]["params"]
    assert task["settings"] == {"speed": {"channel": 4}}
    assert any(i.job == "a.json" and i.path == "job.setting.speed.channel" for i in tr.untranslated)
    TaskSpec.from_mapping(task)


def test_merge_takes_the_strictest_speed_limits() -> None:
    core = {"transport": {"channel": {"speed": {"record": 100}}}}
    a = job(writer=mysql_writer(), setting={"speed": {"record": 1000}}, core=core)
    b = job(writer=txt_writer(), setting={"speed": {"record": 400, "byte": 10_000}},
            core={"transport": {"channel": {"speed": {"record": 50}}}})
    c = job(writer=txt_writer(path="/data/other"), setting={"speed": {"channel": 8}})
    tr = translate([("a.json", a), ("b.json", b), ("c.json", c)], name="abc")
    assert tr.task["settings"]["speed"] == {"byte": 10_000, "record": 400, "channel_record": 50}
    paths = {(i.job, i.path) for i in tr.untranslated}
    assert ("a.json", "job.setting.speed.record") in paths
    assert ("c.json", "job.setting.speed.channel") in paths
    assert ("b.json", "job.setting.speed.record") not in paths
    TaskSpec.from_mapping(tr.task)


def test_merge_of_different_sources_names_the_jobs_and_keys() -> None:
    a, b = job(), job(mysql_reader(where="id > 1"))
    c = job(stream_reader())
    with pytest.raises(DataxImportError) as err:
        translate([("a.json", a), ("b.json", b), ("c.json", c)])
    assert "a.json and b.json (differs in where); c.json (differs in" in str(err.value)


def test_merge_with_another_split_pk_reads_once_as_the_first_job_splits() -> None:
    tr = translate([("a.json", job(mysql_reader(splitPk="id"))), ("b.json", job(mysql_reader(splitPk="name")))])
    assert tr.task["source"]["params"]["split_pk"] == "id"
    assert [(i.job, i.path) for i in tr.untranslated] == [("b.json", f"{R}.splitPk")]


# ---------------------------------------------------------------------------------------------
# the documented job shapes of tests/data/datax validate; the report is logged


def rendered(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    for key in ("USER", "PASSWORD", "HOST", "SRC_DB", "DST_DB", "SHARD1_DB", "SHARD2_DB"):
        text = text.replace("{{" + key + "}}", key.lower())
    return json.loads(text.replace("{{PORT}}", "3306").replace("{{BAD_IP}}", "127.0.0.2").replace("{{BAD_PORT}}", "1"))


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_every_job_file_translates_to_a_valid_task(path: Path) -> None:
    tr = translate([(path.name, rendered(path))], name=path.stem)
    spec = TaskSpec.from_mapping(tr.task)
    assert spec.name == path.stem
    assert "password" not in json.dumps(tr.task).replace("password_env", "")


def test_log_report_emits_one_event_per_untranslated_setting() -> None:
    tr = one(job(mysql_reader(session=["x"]), writer={"name": "streamwriter", "parameter": {"other": 1}}))
    with structlog.testing.capture_logs() as logs:
        log_report(tr, structlog.get_logger())
    events = [e for e in logs if e["event"] == "datax.untranslated"]
    assert {(e["job"], e["key"]) for e in events} == {("job.json", f"{R}.session"), ("job.json", f"{W}.other")}
    summary = next(e for e in logs if e["event"] == "datax.imported")
    assert summary["untranslated"] == 2 and summary["destinations"] == ["stream"]

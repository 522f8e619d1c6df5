"""The postgres source against a real PostgreSQL: every type read exactly, key, block and query splits,
sharded sources, push-down, option errors, an unreachable server, estimates, and a CLI run."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, run_task
from tests.pg_helpers import pg_or_skip
from tests.plugin_helpers import ListDirtySink, parse, read_all, read_ctx, tuples_of
from wormhole.errors import ReadError, SplitError
from wormhole.plugins.base import PushedQuery, Split
from wormhole.plugins.postgres import PLUGIN
from wormhole.plugins.postgres.options import PostgresReaderOptions

pytestmark = pytest.mark.postgres
SOURCE = PLUGIN.source
assert SOURCE is not None


@pytest.fixture(name="pg")
def fixture_pg() -> Iterator[Any]:
    """A connection to database ``test`` with a fresh uuid-named schema as its search path, dropped after."""
    conn = pg_or_skip()
    schema = f"wh_src_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE SCHEMA "{schema}"')
    conn.execute(f'SET search_path = "{schema}"')
    conn.schema = schema  # type: ignore[attr-defined]
    try:
        yield conn
    finally:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()


def options(pg: Any, **params: Any) -> Any:
    raw = {"user": "postgres", "database": "test", "schema": pg.schema, **params}
    opts, problems = parse(PostgresReaderOptions, raw)
    assert not problems, problems.items
    return opts


TYPES_TABLE = """CREATE TABLE t (
  id integer PRIMARY KEY, si smallint, bi bigint, r real, dp double precision, n numeric(12,3),
  nfree numeric, s text, vc varchar(10), ch char(3), u uuid, ip inet, iv interval, tm time,
  b bytea, flag boolean, d date, ts timestamp, tz timestamptz, j json, jb jsonb, arr integer[],
  mood mood)"""
TYPES_ROWS = [
    (1, -32768, 2**63 - 1, 1.5, 0.1, Decimal("-123456789.125"), Decimal("12345678901234567.000000000000000001"),
     "a\tb\n\"c\" ,\\", "", "ab", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "10.0.0.1/8", "1 day 02:03:04", "10:11:12",
     b"\x00\x01\xff,\n", True, date(1, 1, 1), datetime(2024, 2, 29, 23, 59, 59, 999999),
     datetime(2024, 1, 1, 12), '{"a": [1, 2.5, null]}', '{"b": "x"}', [1, None, 3], "happy"),
    (2, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None,
     None, None, None, None),
]
TYPES_WANT = [
    (1, -32768, 2**63 - 1, 1.5, 0.1, Decimal("-123456789.125"), Decimal("12345678901234567.000000000000000001"),
     "a\tb\n\"c\" ,\\", "", "ab ", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "10.0.0.1/8", "P1DT2H3M4S", "10:11:12",
     b"\x00\x01\xff,\n", True, date(1, 1, 1), datetime(2024, 2, 29, 23, 59, 59, 999999),
     datetime(2024, 1, 1, 12), {"a": [1, 2.5, None]}, {"b": "x"}, [1, None, 3], "happy"),
    (2, *[None] * 22),
]


def test_every_type_reads_exactly(pg: Any) -> None:
    pg.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    pg.execute(TYPES_TABLE)
    marks = ", ".join(["%s"] * 23)
    with pg.cursor() as cur:
        cur.execute("SET TimeZone = 'Europe/Berlin'")  # a writer's own zone: timestamptz still reads in UTC
        cur.executemany(f"INSERT INTO t VALUES ({marks})",
                        [tuple(v.replace(tzinfo=UTC) if i == 18 and v else v for i, v in enumerate(r))
                         for r in TYPES_ROWS])
    opts = options(pg, table="t")
    reader = SOURCE.reader(opts, read_ctx())
    types = {c.name: (c.type, c.precision, c.scale) for c in reader.schema().columns}
    assert types["n"] == ("decimal", 12, 3) and types["nfree"] == ("decimal", None, None)
    assert [types[k][0] for k in ("si", "r", "iv", "tm", "u", "b", "tz", "arr", "mood", "jb")] == [
        "int", "float", "string", "string", "string", "bytes", "datetime", "json", "string", "json"]
    sink = ListDirtySink()
    got = sorted(read_all(SOURCE, opts, sink), key=lambda r: r[0])
    assert got == TYPES_WANT
    assert sink.rows == []


def test_special_dates_reject_or_null(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id int, d date, ts timestamp, n numeric)")
    pg.execute("INSERT INTO t VALUES (1, '2024-01-01', '2024-01-01 10:00', 1.5), (2, 'infinity', NULL, NULL), "
               "(3, '0044-03-15 BC', '-infinity', NULL), (4, NULL, NULL, 'NaN'), (5, '2024-01-02', NULL, 1e30)")
    sink = ListDirtySink()
    got = read_all(SOURCE, options(pg, table="t"), sink)
    # an unconstrained numeric's NaN and 1e30 are values (its own text), not the dates' kind of misfit
    assert [(r[0], str(r[3])) for r in sorted(got)] == [(1, "1.5"), (4, "NaN"), (5, str(10**30))]
    reasons = {r.row[0]: r.reason for r in sink.rows}
    assert sorted(reasons) == ["2", "3"]
    assert "'infinity'" in reasons["2"] and "special_dates" in reasons["2"]
    got = sorted(read_all(SOURCE, options(pg, table="t", special_dates="null"), ListDirtySink()))
    assert [r[:3] for r in got[:3]] == [(1, date(2024, 1, 1), datetime(2024, 1, 1, 10)), (2, None, None),
                                        (3, None, None)]


def _ids(splits: list[Split], opts: Any) -> list[int]:
    """The first column of every row of ``splits``, read in batches of at most 7 rows."""
    reader = SOURCE.reader(opts, read_ctx(batch_rows=7))
    reader.schema()
    batches = [batch for split in splits for batch in reader.read(split)]
    assert max(len(b) for b in batches) <= 7
    return [row[0] for batch in batches for row in tuples_of(batch)]


def test_integer_key_splits_with_a_null_split_read_every_row_once(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id serial, k bigint, v text)")
    pg.execute("INSERT INTO t (k, v) SELECT CASE WHEN g % 10 = 0 THEN NULL ELSE g * 3 - 50 END, 'x' || g "
               "FROM generate_series(1, 200) g")
    opts = options(pg, table="t", split_pk="k", columns=["id", "v"], where="v LIKE 'x%'")
    splits = SOURCE.splitter(opts, read_ctx()).split(2)
    assert len(splits) == 11 and splits[-1].id.endswith("#null")
    ids = _ids(splits, opts)
    assert sorted(ids) == list(range(1, 201))


def test_date_key_splits_read_every_row_once(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id int, day date NOT NULL)")
    pg.execute("INSERT INTO t SELECT g, date '2020-01-01' + g FROM generate_series(1, 100) g")
    pg.execute("INSERT INTO t VALUES (101, 'infinity'), (102, '-infinity')")
    opts = options(pg, table="t", split_pk="day", special_dates="null")
    splits = SOURCE.splitter(opts, read_ctx()).split(1)
    assert len(splits) == 5 and not any(s.id.endswith("#null") for s in splits)
    assert sorted(_ids(splits, opts)) == list(range(1, 103))
    assert SOURCE.reader(opts, read_ctx()).schema().columns[1].nullable  # its infinities read as NULL


def test_ctid_splits_of_a_table_without_a_key_read_every_row_once(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id int, pad text)")
    pg.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g")  # ~600 pages
    opts = options(pg, table="t", columns=["id"])
    splits = SOURCE.splitter(opts, read_ctx()).split(2)
    assert len(splits) == 4 and "ctid" in splits[1].params["sql"]
    assert sorted(_ids(splits, opts)) == list(range(1, 20001))
    info = SOURCE.periphery(opts, read_ctx()).prepare()
    assert info.estimated_rows is None  # never analyzed: reltuples is -1
    pg.execute("ANALYZE t")
    assert SOURCE.periphery(opts, read_ctx()).prepare().estimated_rows == 20000
    # busy_threads counts the other active backends: one sleeping statement of another session is one.
    sleeper = pg_or_skip()
    thread = threading.Thread(target=lambda: sleeper.execute("SELECT pg_sleep(1.5)"))
    thread.start()
    try:
        deadline = time.monotonic() + 1.2
        busy = 0
        while busy < 1 and time.monotonic() < deadline:
            busy = SOURCE.periphery(opts, read_ctx()).busy_threads() or 0
        assert busy >= 1
    finally:
        thread.join()
        sleeper.close()
    counted = SOURCE.periphery(options(pg, table="t", estimate="count", where="id <= 10"), read_ctx()).prepare()
    assert counted.estimated_rows == 10


def test_a_read_stopped_early_leaves_no_session_behind(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id int, pad text)")
    pg.execute("INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 50000) g")
    opts = options(pg, table="t")
    split = SOURCE.splitter(opts, read_ctx()).split(1)[0]
    reader = SOURCE.reader(opts, read_ctx(batch_rows=100))
    reader.schema()
    batches = reader.read(split)
    assert len(next(batches)) == 100
    batches.close()  # type: ignore[attr-defined]  # a stopping task closes the split's generator
    for _ in range(30):  # the server ends the backend once it sees the connection closed
        left = pg.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'wormhole' "
                          "AND query LIKE %s", (f"COPY%{pg.schema}%",)).fetchone()[0]
        if not left:
            break
        time.sleep(0.1)
    assert left == 0


def test_query_source(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id int, n numeric(6,2), ts timestamptz)")
    pg.execute("INSERT INTO t VALUES (1, 2.5, '2024-01-01 00:00+02'), (2, NULL, NULL)")
    opts = options(pg, query=f'SELECT id, n * 2 AS n2, ts, \'50%\' AS pct FROM "{pg.schema}".t;')
    got = sorted(read_all(SOURCE, opts))
    assert got == [(1, Decimal("5.00"), datetime(2023, 12, 31, 22), "50%"), (2, None, None, "50%")]


def test_sharded_source_over_two_schemas(pg: Any) -> None:
    other = f"{pg.schema}_b"
    pg.execute(f'CREATE SCHEMA "{other}"')
    try:
        for schema, base in ((pg.schema, 0), (other, 100)):
            for table in ("a", "b"):
                pg.execute(f'CREATE TABLE "{schema}".{table} (id int, v text)')
                pg.execute(f'INSERT INTO "{schema}".{table} SELECT g + {base} + {100 if table == "b" else 0} * 2, '
                           f"'v' FROM generate_series(1, 5) g")
        conn = {"host": "127.0.0.1", "database": "test", "tables": ["a", "b"]}
        opts, problems = parse(PostgresReaderOptions, {
            "user": "postgres", "schema": pg.schema, "split_pk": "id",
            "connections": [conn, {**conn, "schema": other}]})
        assert not problems
        splits = SOURCE.splitter(opts, read_ctx()).split(4)
        assert {s.resource_mark for s in splits} == {"127.0.0.1:5432/test"}
        ids = _ids(splits, opts)
        assert sorted(ids) == sorted([g for g in range(1, 6)] + [g + 200 for g in range(1, 6)]
                                     + [g + 100 for g in range(1, 6)] + [g + 300 for g in range(1, 6)])
    finally:
        pg.execute(f'DROP SCHEMA "{other}" CASCADE')


def test_pushdown_of_a_filter_and_projection_gives_the_rows_of_the_read_without(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id int, s text, d date)")
    pg.execute("INSERT INTO t VALUES (1, 'a%', '2024-01-01'), (2, 'B', 'infinity'), (3, 'b', '2024-03-01'), "
               "(4, NULL, NULL)")
    opts = options(pg, table="t", special_dates="null")
    reader = SOURCE.reader(opts, read_ctx())
    reader.schema()
    (split,) = SOURCE.splitter(opts, read_ctx()).split(1)
    # WHERE s >= 'a' (codepoint order: 'B' < 'a' < 'b') AND d IS NULL OR id = 1, keep (s, id)
    pushed = PushedQuery(keep=(1, 0), where='(("s" COLLATE "C" >= CAST(\x00 AS text)) OR ("id" = \x00))',
                         args=("b", 1), plan="test")
    got = [row for batch in reader.read(replace(split, params={**split.params, "pushdown": pushed}))
           for row in tuples_of(batch)]
    assert sorted(got, key=lambda r: r[1]) == [("a%", 1), ("b", 3)]


def test_a_bad_option_names_its_key_path(pg: Any) -> None:
    _, problems = parse(PostgresReaderOptions, {"user": "postgres", "database": "test", "query": "SELECT 1",
                                                "split_pk": "id"})
    assert any(p.endswith("split_pk: not with query (the query says what to read)") for p in problems.items)
    _, problems = parse(PostgresReaderOptions, {"user": "postgres", "database": "test", "table": "t",
                                                "special_dates": "keep"})
    assert any("params.special_dates: expected one of 'reject', 'null'" in p for p in problems.items)
    _, problems = parse(PostgresReaderOptions, {"user": "postgres", "connections": [{"host": "h", "database": "d"}]})
    assert any("connections[0].tables" in p for p in problems.items)


def test_a_key_that_cannot_be_split_or_a_missing_table_is_a_split_error_naming_it(pg: Any) -> None:
    pg.execute("CREATE TABLE t (id int, s text)")
    with pytest.raises(SplitError, match=r"split_pk s of .*t.* is text; only integer, date and timestamp keys"):
        SOURCE.splitter(options(pg, table="t", split_pk="s"), read_ctx()).split(2)
    with pytest.raises(SplitError, match=r'table "\w+"\."nope" does not exist in 127\.0\.0\.1:5432/test'):
        SOURCE.splitter(options(pg, table="nope"), read_ctx()).split(2)


def test_an_unreachable_server_is_a_clear_read_error(pg: Any) -> None:
    opts = options(pg, table="t", port=1, connect_retries=1, connect_timeout_s=1)
    with pytest.raises(ReadError, match=r"cannot connect to postgres postgres@127\.0\.0\.1:1/test"):
        SOURCE.periphery(opts, read_ctx()).prepare()


def test_cli_runs_read_postgres_into_jsonl_incrementally_with_push_down(pg: Any, ws: Workspace) -> None:
    pg.execute("CREATE TABLE t (id bigint PRIMARY KEY, name text, amount numeric(8,2), at timestamptz)")
    pg.execute("INSERT INTO t SELECT g, 'n' || g, g * 1.25, timestamptz '2024-01-01 00:00+00' + g * interval '1h' "
               "FROM generate_series(1, 30) g")
    spec = {"source": {"plugin": "postgres", "params": {"user": "postgres", "database": "test", "schema": pg.schema,
                                                        "table": "t", "split_pk": "id"},
                       "incremental": {"column": "at", "mode": "append", "state_key": "pg-at"}},
            "transforms": [{"filter": "id > 10"}],
            "destinations": [{"id": "out", "plugin": "file",
                              "params": {"path": str(ws.root / "out"), "format": "jsonl", "mode": "append"}}]}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, stderr
    plan = task["result"]["plan"]
    assert '("id" > CAST(? AS bigint))' in plan["transforms"]["source_query"]["where"]  # pushed down
    assert any(s["range"] and '"id" <' in s["range"] for s in plan["splits"])
    rows = _jsonl(ws.root / "out")
    assert sorted(r["id"] for r in rows) == list(range(11, 31))
    first = min(rows, key=lambda r: r["id"])
    assert first["name"] == "n11" and Decimal(str(first["amount"])) == Decimal("13.75")
    assert first["at"].startswith("2024-01-01T11:00:00") or first["at"].startswith("2024-01-01 11:00:00")
    # Past the first window's end (the server's clock then, to the second) and before the next one's.
    pg.execute("INSERT INTO t VALUES (31, 'new', 1, now()), (32, 'inf', 1, 'infinity'), (33, 'null', 1, NULL), "
               "(34, 'late', 1, '2025-01-01 00:00+05')")
    time.sleep(1.1)
    code, task, stderr = run_task(ws, spec)
    assert code == 0, stderr
    # infinity is past every window's end, NULL in none, 34 was stamped before the first window's end
    assert task["result"]["source"]["rows_read"] == 1
    assert sorted(r["id"] for r in _jsonl(ws.root / "out")) == list(range(11, 32))


def _jsonl(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for part in sorted(directory.glob("*.jsonl")) for line in part.read_text().splitlines()]


EDGE_ROWS = [  # id, i, d, f, s, zd, zt
    "(1, 9223372036854775807, 0.000000000000000000000000000001, 0.5, 'a%', 'infinity', '2024-01-05 10:00')",
    "(2, -9223372036854775808, 123456789012345678901234567890.123456789012345678901234567891, 'NaN', 'B', "
    "'2024-01-05', '-infinity')",
    "(3, 0, -0, -2.25, 'b', '0044-03-15 BC', '2024-01-05 10:00')",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL)",
]
EDGE_CASES = [  # filter, pushed
    ("i + 1000 > 0", True), ("- i > 0", True), ("abs(i) > 0", True), ("i * 2 < 0", True),
    ("i % 0 IS NULL", True), ("i / 0 IS NULL", True), ("d * d > 0", True), ("d + 1 > 1", True),
    ("f = 0.5", False), ("NOT (f > 0)", False), ("s < 'b'", True), ("s LIKE 'a%'", True), ("s LIKE 'A%'", True),
    ("zd >= DATE '2000-01-01'", True), ("NOT (zd < DATE '2030-01-01')", True), ("year(zd) = 2024", True),
    ("cast(zd as string) IS NULL", True), ("coalesce(zt, TIMESTAMP '1999-01-01 00:00:00') < TIMESTAMP "
                                           "'2000-01-01 00:00:00'", True),
    ("zd = DATE '2024-01-05'", True), ("zt < TIMESTAMP '2030-01-01 00:00:00' AND zt >= TIMESTAMP '2000-01-01 00:00:00'",
                                      True),
]


def test_pushed_filters_keep_the_rows_wormhole_keeps_on_edge_values(pg: Any) -> None:
    """Each filter evaluated by wormhole on the values the reader gives (``special_dates: null``) and, where
    sqlgen pushes it, by PostgreSQL on the table: the same rows. A timestamp range (an incremental window)
    is read through the column's index."""
    from tests.pushdown_helpers import evaluated_and_pushed
    from wormhole.transform.sqlgen import compile_filter

    pg.execute("CREATE TABLE t (id int, i bigint, d numeric(65, 30), f double precision, s text, zd date, "
               "zt timestamp)")
    pg.execute(f"INSERT INTO t VALUES {', '.join(EDGE_ROWS)}")
    rows = sorted(read_all(SOURCE, options(pg, table="t", special_dates="null")), key=lambda r: r[0])
    names = ("id", "i", "d", "f", "s", "zd", "zt")
    schema = dict(zip(names, ("int", "int", "decimal", "float", "string", "date", "datetime"), strict=True))

    class Read:
        n = len(rows)

        def get(self, name: str) -> list[Any]:
            return [r[names.index(name)] for r in rows]

    for text, pushed in EDGE_CASES:
        values, sql = evaluated_and_pushed(text, schema, Read(), compile_filter, "postgres", pushed)
        want = [r[0] for r, v in zip(rows, values, strict=True) if v is True]
        if sql is None:
            continue
        kept = pg.execute(f"SELECT id FROM t WHERE {sql.render('%s', escape_percent=True)} ORDER BY id",
                          sql.args).fetchall()
        assert [r[0] for r in kept] == want, (text, sql.text)
    pg.execute("CREATE INDEX ON t (zt)")
    pg.execute("SET enable_seqscan = off")
    plan = pg.execute(f"EXPLAIN SELECT id FROM t WHERE {sql.render('%s', escape_percent=True)}", sql.args).fetchall()
    assert "Index" in " ".join(r[0] for r in plan), plan


STRING_CASES = [  # filter, the ids it keeps on the values the reader gives (c: 'a    ', 'ab   ', NULL)
    ("c = 'a'", []), ("c = 'a    '", [1]), ("length(c) = 1", []), ("length(c) = 5", [1, 2]),
    ("concat(c, '|') = 'a|'", []), ("concat(c, '|') = 'a    |'", [1]), ("rtrim(c) = 'a'", [1]),
    ("c LIKE '% '", [1, 2]), ("c < 'a '", []), ("c IS NULL", [3]), ("coalesce(c, 'z') = 'z'", [3]),
    ("u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", [1]), ("m = 'happy'", [1]), ("m > 'happy'", [2]),
    ("ip = '10.0.0.1'", [1]), ("ip LIKE '%/8'", [2]), ("v = 'x '", [1]),
]


def test_a_pushed_filter_on_char_n_and_other_string_types_keeps_the_rows_wormhole_keeps(pg: Any) -> None:
    """Issue 35 item 3: a string column means the text the reader gives in every placement. char(5) is read
    padded ('a    '), so ``c = 'a'`` keeps no row in wormhole and none in PostgreSQL either (which drops the
    padding to compare); uuid, an enum and inet are compared as their text (they have no COLLATE)."""
    from wormhole.task_spec import TaskSpec
    from wormhole.transform.plan import build_plan
    from wormhole.transform.pyfn import compile_py

    pg.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")  # declaration order: 'happy' > 'sad' there
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, c char(5), u uuid, m mood, ip inet, v varchar(4))")
    pg.execute("INSERT INTO t VALUES (1, 'a', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'happy', '10.0.0.1', 'x '), "
               "(2, 'ab', NULL, 'sad', '10.0.0.2/8', 'x'), (3, NULL, NULL, NULL, NULL, NULL)")
    opts = options(pg, table="t")
    reader = SOURCE.reader(opts, read_ctx())
    (split,) = SOURCE.splitter(opts, read_ctx()).split(1)
    as_read = sorted((r for batch in reader.read(split) for r in tuples_of(batch)), key=lambda r: r[0])
    assert [r[1] for r in as_read] == ["a    ", "ab   ", None]
    names = reader.schema().names

    class Read:
        n = len(as_read)

        def get(self, name: str) -> list[Any]:
            return [r[names.index(name)] for r in as_read]

    params = {"user": "postgres", "database": "test", "schema": pg.schema, "table": "t"}
    for text, ids in STRING_CASES:
        spec = TaskSpec.from_mapping({"source": {"plugin": "postgres", "params": params},
                                      "transforms": [{"filter": text}], "settings": {"pushup": "static"},
                                      "destinations": [{"id": "js", "plugin": "file",
                                                        "params": {"path": "/tmp/x", "format": "jsonl"}}]})
        plan = build_plan(spec, reader.schema(), "postgres")
        pushed = plan.pushed_query(plan.widest())
        assert pushed is not None, (text, plan.describe(()))
        ((_, tree),), typed = plan.task_ops[0].spec.exprs, plan.task_ops[0].typed[0]
        kept = compile_py(tree, typed)(Read())
        assert [r[0] for r, v in zip(as_read, kept, strict=True) if v is True] == ids, text  # off: wormhole's
        got = sorted(r[0] for batch in reader.read(replace(split, params={**split.params, "pushdown": pushed}))
                     for r in tuples_of(batch))
        assert got == ids, (text, pushed.where)


def test_a_char_n_filter_pushed_down_writes_the_rows_wormhole_keeps(pg: Any, ws: Workspace) -> None:
    """The engine's view of item 3: under ``pushup: static`` the destination gets the rows the filter keeps
    in wormhole (``off``, the test above) on the padded values."""
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, c char(5))")
    pg.execute("INSERT INTO t VALUES (1, 'a'), (2, 'ab'), (3, NULL)")
    spec = {"source": {"plugin": "postgres", "params": {"user": "postgres", "database": "test", "schema": pg.schema,
                                                        "table": "t"}},
            "transforms": [{"filter": "c = 'a    ' OR length(c) = 2 OR concat(c, '|') = 'ab|'"}],
            "destinations": [{"id": "out", "plugin": "file", "params": {"path": str(ws.root / "out"),
                                                                         "format": "jsonl"}}],
            "settings": {"pushup": "static"}}
    code, task, stderr = run_task(ws, spec)
    assert code == 0, stderr[-2000:]
    assert task["result"]["plan"]["transforms"]["source_query"]["where"] is not None
    assert sorted((r["id"], r["c"]) for r in _jsonl(ws.root / "out")) == [(1, "a    ")]

"""Tests of the sqlite store: options, the transactional writer (modes, dirty rows, disk full), the reader."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import tests.plugin_helpers as helpers
from tests.plugin_helpers import (
    DIRTY,
    NULL_ROW,
    SCHEMA,
    WIDE_ROW,
    ListDirtySink,
    call_phases,
    parse,
    read_ctx,
    tiny_tmpfs,
    write_ctx,
)
from wormhole.errors import PrepareError, ReadError, SplitError, WriteError
from wormhole.plugins import registry
from wormhole.plugins.base import Column, Row, Schema
from wormhole.plugins.batch import Batch, rows_of
from wormhole.plugins.sqlite import (
    PLUGIN,
    SqliteReader,
    SqliteReaderOptions,
    SqliteReaderPeriphery,
    SqliteSplitter,
    SqliteWriter,
    SqliteWriterOptions,
    SqliteWriterPeriphery,
)

ROWS: list[Row] = [
    WIDE_ROW,
    NULL_ROW,
    (3, -1e300, Decimal("-12345678901234567890.000000001"), 'a,b;"c"\nnext line', b"", False,
     dt.date(1, 1, 1), dt.datetime(2020, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))), [1, "x"]),
    (4, 5e-324, Decimal("0"), "", b"\x00bytes", True, dt.date(9999, 12, 31), dt.datetime(1970, 1, 1), "1"),
    (2**62, 3.0, Decimal("-0.5"), "𝄞 ∑ 🧪", b"\xff\xfe", False, dt.date(2000, 1, 1),
     dt.datetime(2000, 1, 1, 0, 0, 0, 1), 12.5),
]


def run_destination(options: Any, parts: Sequence[Sequence[Row]], **kwargs: Any) -> list[Any]:
    return helpers.run_destination(PLUGIN.sink, options, parts, **kwargs)


def read_all(options: Any, sink: ListDirtySink | None = None, batch_rows: int = 1000) -> list[Row]:
    return helpers.read_all(PLUGIN.source, options, sink, batch_rows)


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def make_db(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()
    return path


KV = Schema((Column("id", "int"), Column("name", "string")))

# ---------------------------------------------------------------------------------------------
# Plugin and options


def test_plugin_is_registered_with_a_single_writer_key(tmp_path: Path) -> None:
    assert registry.get("sqlite") is PLUGIN
    assert PLUGIN.sink is not None and PLUGIN.sink.single_writer_key is not None
    options = SqliteWriterOptions(path="rel/x.db", table="t")
    assert PLUGIN.sink.single_writer_key(options) == "sqlite file " + os.path.abspath("rel/x.db")


def test_writer_options_parse() -> None:
    opts, problems = parse(SqliteWriterOptions, {"path": "x.db", "table": "t", "columns": ["a", "b"],
                                                 "write_mode": "upsert", "key": ["a"], "create": False})
    assert not problems.items
    assert (opts.columns, opts.write_mode, opts.key, opts.create) == (("a", "b"), "upsert", ("a",), False)


@pytest.mark.parametrize(("cls", "raw", "expected"), [
    (SqliteWriterOptions, {"path": "x.db", "table": "t", "mode": "insert"}, "mode: unknown key"),
    (SqliteWriterOptions, {"path": "x.db", "table": "t", "create": "yes"}, "create: expected a boolean"),
    (SqliteWriterOptions, {"path": "x.db"}, "table: required key is missing"),
    (SqliteWriterOptions, {"path": "x.db", "table": "t", "write_mode": "merge"}, "write_mode: expected"),
    (SqliteWriterOptions, {"path": "x.db", "table": "t", "write_mode": "upsert"}, "key: is required"),
    (SqliteWriterOptions, {"path": "x.db", "table": "t", "columns": ["a"], "key": ["b"]}, "key: names"),
    (SqliteWriterOptions, {"path": "x.db", "table": "t", "columns": []}, "columns: needs at least 1"),
    (SqliteWriterOptions, {"path": "x.db", "table": "t", "columns": ["a", "A"]}, "columns: names must be"),
    (SqliteReaderOptions, {"path": "x.db", "table": "t", "columns": "a"}, "columns: expected an array"),
    (SqliteReaderOptions, {"path": "x.db", "table": ""}, "table: must not be empty"),
])
def test_option_problems_name_the_key(cls: type, raw: dict[str, Any], expected: str) -> None:
    _, problems = parse(cls, raw)
    assert any(p.startswith("destinations[0].params." + expected) for p in problems.items), problems.items


# ---------------------------------------------------------------------------------------------
# Writer


OLD_DDL = ('CREATE TABLE "all types" ("id" INTEGER, "f" REAL, "dec" DECIMAL TEXT, "s" TEXT, "raw" BLOB, '
           '"flag" BOOLEAN, "day" DATE TEXT, "ts" DATETIME TEXT, "doc" JSON TEXT, PRIMARY KEY ("id"))')
"""The declared types earlier versions of this store created."""

AS_STORED = ("SELECT " + ", ".join(f'typeof("{c}"), quote("{c}")' for c in SCHEMA.names)
             + ' FROM "all types" ORDER BY id')


def test_round_trip_every_logical_type(tmp_path: Path) -> None:
    db = tmp_path / "out.db"
    results = run_destination(SqliteWriterOptions(path=str(db), table="all types", key=("id",)),
                              [ROWS[:3], ROWS[3:]])
    assert [(r.written, r.rejected) for r in results] == [(3, ()), (2, ())]
    (ddl,) = query(db, "SELECT sql FROM sqlite_master WHERE name = 'all types'")[0]
    assert 'PRIMARY KEY ("id")' in ddl
    back = read_all(SqliteReaderOptions(path=str(db), table="all types"))
    # Declared TEXT, decimal and json columns read back as the exact text that was written.
    as_text = [(*r[:2], None if r[2] is None else str(r[2]), *r[3:8],
                None if r[8] is None else json.dumps(r[8], ensure_ascii=False)) for r in ROWS]
    assert sorted(back, key=lambda r: r[0]) == as_text
    schema = SqliteReader(SqliteReaderOptions(path=str(db), table="all types"), read_ctx()).schema()
    assert [c.type for c in schema.columns] == ["int", "float", "string", "string", "bytes", "bool", "date",
                                                "datetime", "string"]


def test_a_created_table_declares_plain_sqlite_types(tmp_path: Path) -> None:
    db = tmp_path / "out.db"
    schema = Schema((*SCHEMA.columns[:3], Column("s", "string", nullable=False), *SCHEMA.columns[4:]))
    run_destination(SqliteWriterOptions(path=str(db), table="all types", key=("id",)), [ROWS], schema=schema)
    info = query(db, "PRAGMA table_info('all types')")
    assert [(name, declared, notnull, pk) for _, name, declared, notnull, _, pk in info] == [
        ("id", "INTEGER", 0, 1), ("f", "REAL", 0, 0), ("dec", "TEXT", 0, 0), ("s", "TEXT", 1, 0),
        ("raw", "BLOB", 0, 0), ("flag", "BOOLEAN", 0, 0), ("day", "DATE", 0, 0), ("ts", "DATETIME", 0, 0),
        ("doc", "TEXT", 0, 0)]


def test_stored_values_are_those_of_the_earlier_declared_types(tmp_path: Path) -> None:
    """Only the declared type text changed: every value is stored with the same type and bytes as under
    the ``DECIMAL TEXT``-style types (decimals stay exact text, JSON numbers stay JSON text)."""
    new = tmp_path / "new.db"
    run_destination(SqliteWriterOptions(path=str(new), table="all types", key=("id",)), [ROWS])
    old = make_db(tmp_path / "old.db", OLD_DDL)
    run_destination(SqliteWriterOptions(path=str(old), table="all types", create=False), [ROWS])
    assert query(new, AS_STORED) == query(old, AS_STORED)
    assert query(new, 'SELECT typeof("dec"), "dec", typeof("doc"), "doc" FROM "all types" WHERE id = 3') == [
        ("text", "-12345678901234567890.000000001", "text", '[1, "x"]')]
    # Tables created by earlier versions still read back with their logical types.
    assert SqliteReader(SqliteReaderOptions(path=str(old), table="all types"), read_ctx()).schema() == SCHEMA
    assert sorted(read_all(SqliteReaderOptions(path=str(old), table="all types")), key=lambda r: r[0]) == ROWS


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    db = tmp_path / "a" / "b" / "c" / "out.db"
    run_destination(SqliteWriterOptions(path=str(db), table="t"), [[(1, "x")]], schema=KV)
    assert query(db, "SELECT * FROM t") == [(1, "x")]


def test_writers_share_the_connection_from_threads(tmp_path: Path) -> None:
    db = tmp_path / "out.db"
    options = SqliteWriterOptions(path=str(db), table="t")
    ctx = write_ctx(KV, concurrency=4)
    periphery = SqliteWriterPeriphery(options, ctx)
    periphery.prepare()

    def work(worker: int) -> int:
        writer = SqliteWriter(options, ctx, periphery, worker)
        writer.open()
        try:
            return sum(writer.write(Batch.of_rows([((worker * 20 + b) * 100 + i, f"w{worker}")
                                                   for i in range(100)])).written
                       for b in range(20))
        finally:
            writer.close()

    with ThreadPoolExecutor(4) as pool:
        written = list(pool.map(work, range(4)))  # re-raises a writer's error here
    periphery.commit()
    assert written == [2000] * 4
    assert query(db, "SELECT COUNT(*), COUNT(DISTINCT id) FROM t") == [(8000, 8000)]


def test_only_the_unencodable_row_is_rejected(tmp_path: Path) -> None:
    db = tmp_path / "out.db"
    rows = [(i, f"name {i}") for i in range(5)]
    rows[2] = (2, "bad " + DIRTY)
    (result,) = run_destination(SqliteWriterOptions(path=str(db), table="t"), [rows], schema=KV)
    assert result.written == 4
    assert [r.row for r in result.rejected] == [rows[2]]
    assert "surrogates not allowed" in result.rejected[0].reason
    assert query(db, "SELECT id, name FROM t ORDER BY id") == rows[:2] + rows[3:]


def test_a_zero_date_is_rejected_with_a_clean_reason(tmp_path: Path) -> None:
    """Issue 23 item 9: a mysql source's zero date kept as text (zero_dates: keep) was rejected with
    "AttributeError: 'str' object has no attribute 'isoformat'"."""
    db = tmp_path / "out.db"
    schema = Schema((Column("id", "int"), Column("d", "date"), Column("ts", "datetime")))
    rows = [(1, dt.date(2024, 1, 5), dt.datetime(2024, 1, 5, 10, 0)), (2, "0000-00-00", None),
            (3, None, "2024-00-10 10:00:00")]
    (result,) = run_destination(SqliteWriterOptions(path=str(db), table="t"), [rows], schema=schema)
    assert result.written == 1
    assert [(r.row[0], r.reason) for r in result.rejected] == [
        (2, "ValueError: the zero date '0000-00-00' has no SQLite value (a mysql source's zero_dates: null reads "
            "it as NULL)"),
        (3, "ValueError: the zero date '2024-00-10 10:00:00' has no SQLite value (a mysql source's zero_dates: "
            "null reads it as NULL)")]
    assert query(db, "SELECT id, d, ts FROM t") == [(1, "2024-01-05", "2024-01-05 10:00:00")]


def test_insert_rejects_a_duplicate_key_as_a_dirty_row(tmp_path: Path) -> None:
    db = make_db(tmp_path / "out.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)",
                 "INSERT INTO t VALUES (1, 'old')")
    (result,) = run_destination(SqliteWriterOptions(path=str(db), table="t"),
                                [[(0, "a"), (1, "dup"), (2, "b"), (2, "dup again")]], schema=KV)
    assert result.written == 2
    assert [r.row for r in result.rejected] == [(1, "dup"), (2, "dup again")]
    assert all("UNIQUE constraint failed: t.id" in r.reason for r in result.rejected)
    assert query(db, "SELECT id, name FROM t ORDER BY id") == [(0, "a"), (1, "old"), (2, "b")]


def test_replace_and_upsert_semantics(tmp_path: Path) -> None:
    create = "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, extra TEXT DEFAULT 'd')"
    seed = "INSERT INTO t VALUES (1, 'old', 'keep')"
    replaced = make_db(tmp_path / "replace.db", create, seed)
    run_destination(SqliteWriterOptions(path=str(replaced), table="t", write_mode="replace"),
                    [[(1, "new"), (2, "two")]], schema=KV)
    # REPLACE deletes the old row: the column it does not write falls back to its default.
    assert query(replaced, "SELECT * FROM t ORDER BY id") == [(1, "new", "d"), (2, "two", "d")]

    upserted = make_db(tmp_path / "upsert.db", create, seed)
    upsert = SqliteWriterOptions(path=str(upserted), table="t", write_mode="upsert", key=("id",))
    (result,) = run_destination(upsert,
                                [[(1, "new"), (2, "two"), (2, "two again")]], schema=KV)
    assert (result.written, result.rejected) == (3, ())
    # UPSERT updates the written columns in place: ``extra`` keeps its value.
    assert query(upserted, "SELECT * FROM t ORDER BY id") == [(1, "new", "keep"), (2, "two again", "d")]


def test_target_column_names_map_positionally(tmp_path: Path) -> None:
    db = make_db(tmp_path / "out.db",
                 'CREATE TABLE "odd ""name""" ("Key" INTEGER, "Val ue" TEXT, other TEXT)')
    options = SqliteWriterOptions(path=str(db), table='odd "name"', columns=("key", "Val ue"))
    run_destination(options, [[(1, "a'); DROP TABLE x; --")]], schema=KV)
    assert query(db, 'SELECT * FROM "odd ""name"""') == [(1, "a'); DROP TABLE x; --", None)]


def test_missing_table_without_create_is_a_prepare_error(tmp_path: Path) -> None:
    db = make_db(tmp_path / "out.db", "CREATE TABLE other (x INTEGER)")
    options = SqliteWriterOptions(path=str(db), table="t", create=False)
    periphery = SqliteWriterPeriphery(options, write_ctx(KV))
    with pytest.raises(PrepareError, match=f"table t does not exist in {re.escape(str(db))}"):
        periphery.prepare()
    periphery.rollback()
    assert query(db, "SELECT name FROM sqlite_master") == [("other",)]


@pytest.mark.parametrize(("options", "message"), [
    (SqliteWriterOptions(path="", table="t", columns=("id", "nope")), "has no column nope"),
    (SqliteWriterOptions(path="", table="t", columns=("id",)), "the source has 2"),
    (SqliteWriterOptions(path="", table="t", write_mode="upsert", key=("name",)), "ON CONFLICT clause"),
])
def test_prepare_checks_the_target(tmp_path: Path, options: SqliteWriterOptions, message: str) -> None:
    db = make_db(tmp_path / "out.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    options = SqliteWriterOptions(path=str(db), table=options.table, columns=options.columns,
                                  write_mode=options.write_mode, key=options.key)
    periphery = SqliteWriterPeriphery(options, write_ctx(KV))
    with pytest.raises(PrepareError, match=message):
        periphery.prepare()
    assert periphery.conn is None  # a failed prepare released the write lock
    make_db(db, "INSERT INTO t VALUES (1, 'lock is free')")


def test_rollback_drops_the_created_table_and_keeps_other_data(tmp_path: Path) -> None:
    db = make_db(tmp_path / "out.db", "CREATE TABLE kept (id INTEGER)", "INSERT INTO kept VALUES (42)")
    run_destination(SqliteWriterOptions(path=str(db), table="t"), [ROWS], commit=False)
    assert query(db, "SELECT name FROM sqlite_master") == [("kept",)]
    assert query(db, "SELECT * FROM kept") == [(42,)]


def test_rollback_leaves_existing_rows_untouched(tmp_path: Path) -> None:
    db = make_db(tmp_path / "out.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)",
                 "INSERT INTO t VALUES (1, 'old')")
    run_destination(SqliteWriterOptions(path=str(db), table="t", write_mode="replace"),
                    [[(1, "new"), (2, "two")]], schema=KV, commit=False)
    assert query(db, "SELECT * FROM t") == [(1, "old")]


def test_rollback_removes_a_database_file_the_run_created(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    run_destination(SqliteWriterOptions(path=str(db), table="t"), [ROWS], commit=False)
    assert os.listdir(tmp_path) == []


def test_rollback_is_idempotent_and_safe_without_prepare(tmp_path: Path) -> None:
    options = SqliteWriterOptions(path=str(tmp_path / "x.db"), table="t")
    # The last commit has nothing open: a no-op, never an autocommitted write.
    call_phases(SqliteWriterPeriphery(options, write_ctx(KV)), "rollback", "prepare", "rollback", "rollback", "commit")
    assert os.listdir(tmp_path) == []


def prepared_writer(path: Path | str) -> tuple[SqliteWriterPeriphery, SqliteWriter]:
    """A prepared destination on table ``t`` of ``path`` (one writer, the KV schema) and its writer."""
    options = SqliteWriterOptions(path=str(path), table="t")
    ctx = write_ctx(KV)
    periphery = SqliteWriterPeriphery(options, ctx)
    periphery.prepare()
    return periphery, SqliteWriter(options, ctx, periphery, 0)


def test_writing_after_commit_is_a_write_error(tmp_path: Path) -> None:
    periphery, writer = prepared_writer(tmp_path / "x.db")
    periphery.commit()
    with pytest.raises(WriteError, match="not prepared"):
        writer.write(Batch.of_rows([(1, "late")]))


def _write_until_full(db: Path) -> tuple[SqliteWriterPeriphery, SqliteWriter]:
    """Prepare a destination on ``db`` and write 300-byte rows until the disk is full (WriteError)."""
    options = SqliteWriterOptions(path=str(db), table="t")
    ctx = write_ctx(KV, concurrency=1)
    periphery = SqliteWriterPeriphery(options, ctx)
    periphery.prepare()
    writer = SqliteWriter(options, ctx, periphery, 0)
    writer.open()
    with pytest.raises(WriteError, match="full"):
        for b in range(1, 200):
            result = writer.write(Batch.of_rows([(b * 1000 + i, "x" * 300) for i in range(1000)]))
            assert result.rejected == ()  # a full disk is never a dirty row
    return periphery, writer


def test_a_full_disk_raises_write_error_and_rollback_keeps_the_old_state(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        db = make_db(mnt / "full.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)",
                     *(f"INSERT INTO t VALUES ({i}, 'before')" for i in range(10)))
        periphery, writer = _write_until_full(db)
        with pytest.raises(WriteError):
            writer.write(Batch.of_rows([(1, "after the failure")]))
        writer.close()
        periphery.rollback()
        assert query(db, "SELECT id, name FROM t ORDER BY id") == [(i, "before") for i in range(10)]


def test_a_full_disk_removes_the_database_file_the_run_created(tmp_path: Path) -> None:
    """The file did not exist before prepare: after a disk-full failure and rollback neither it nor its
    journal is left (SQLite's ROLLBACK alone leaves the pages written so far and a hot journal)."""
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        periphery, writer = _write_until_full(mnt / "sub" / "new.db")
        writer.close()
        periphery.rollback()
        assert os.listdir(mnt / "sub") == []


def test_rollback_keeps_an_empty_file_that_existed(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    run_destination(SqliteWriterOptions(path=str(db), table="t"), [[(1, "x")]], schema=KV, commit=False)
    assert db.exists() and db.stat().st_size == 0
    assert os.listdir(tmp_path) == ["empty.db"]


# ---------------------------------------------------------------------------------------------
# Reader


def test_reader_maps_declared_types(tmp_path: Path) -> None:
    db = make_db(tmp_path / "in.db",
                 "CREATE TABLE t (a BIGINT, b VARCHAR(10), c BLOB, d DOUBLE PRECISION, e DECIMAL(10,2), "
                 "f BOOLEAN, g TIMESTAMP, h DATE, i JSON, j, k GEOMETRY, l DATETIME)",
                 "INSERT INTO t VALUES (1, 'x', x'00', 1.5, 2.25, 1, '2024-01-01 10:00:00', '2024-01-02', "
                 "'{\"a\": 1}', 'free', 'POINT', '2024-01-03T04:05:06')")
    options = SqliteReaderOptions(path=str(db), table="t")
    schema = SqliteReader(options, read_ctx()).schema()
    assert [c.type for c in schema.columns] == ["int", "string", "bytes", "float", "decimal", "bool",
                                                "datetime", "date", "json", "string", "string", "datetime"]
    assert read_all(options) == [(1, "x", b"\x00", 1.5, Decimal("2.25"), True, dt.datetime(2024, 1, 1, 10),
                                  dt.date(2024, 1, 2), {"a": 1}, "free", "POINT",
                                  dt.datetime(2024, 1, 3, 4, 5, 6))]


def test_reader_columns_where_and_batches(tmp_path: Path) -> None:
    db = make_db(tmp_path / "in.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, junk BLOB)",
                 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) "
                 "INSERT INTO t SELECT i, 'n' || i, NULL FROM n")
    options = SqliteReaderOptions(path=str(db), table="t", columns=("NAME", "id"), where="id % 2 = 0")
    ctx = read_ctx(batch_rows=500)
    (split,) = SqliteSplitter(options, ctx).split(4)
    assert (split.id, split.resource_mark) == ("sqlite:t", f"sqlite:{db}")
    batches = list(SqliteReader(options, ctx).read(split))
    assert [len(b) for b in batches] == [500, 500, 250]
    assert rows_of(batches[0])[0] == ("n2", 2)
    assert SqliteReaderPeriphery(options, ctx).prepare().estimated_rows == 1250
    everything = SqliteReaderOptions(path=str(db), table="t")
    assert SqliteReaderPeriphery(everything, ctx).prepare().estimated_rows == 2500


def test_reader_estimate_falls_back_to_count_without_rowid(tmp_path: Path) -> None:
    db = make_db(tmp_path / "in.db", "CREATE TABLE t (k TEXT PRIMARY KEY) WITHOUT ROWID",
                 "INSERT INTO t VALUES ('a'), ('b'), ('c')")
    periphery = SqliteReaderPeriphery(SqliteReaderOptions(path=str(db), table="t"), read_ctx())
    assert periphery.prepare().estimated_rows == 3


def test_reader_sends_unconvertible_rows_to_the_dirty_sink(tmp_path: Path) -> None:
    db = make_db(tmp_path / "in.db", "CREATE TABLE t (id INTEGER, day DATE, doc JSON)",
                 "INSERT INTO t VALUES (1, '2024-01-01', '[1]'), (2, 'someday', '[2]'), (3, NULL, '{bad'), "
                 "(4, '2024-01-04', NULL)")
    sink = ListDirtySink()
    rows = read_all(SqliteReaderOptions(path=str(db), table="t"), sink)
    assert rows == [(1, dt.date(2024, 1, 1), [1]), (4, dt.date(2024, 1, 4), None)]
    assert [(origin, split_id) for origin, _, split_id in sink.calls] == [("source", "sqlite:t")]
    assert [r.row for r in sink.rows] == [(2, "someday", "[2]"), (3, None, "{bad")]
    assert "column day" in sink.rows[0].reason and "column doc" in sink.rows[1].reason


def test_reader_keeps_each_dynamic_value_as_it_is_or_rejects_it_naming_it(tmp_path: Path) -> None:
    """SQLite's values keep their own type whatever the column declares: one its column's type holds exactly
    is kept (an integer or real in a string column as its text, a text in a BLOB column as its bytes), any
    other rejects its row naming column and value; a batch whose values all fit stays on the Arrow path."""
    db = make_db(tmp_path / "in.db", "CREATE TABLE t (id INTEGER, i INTEGER, r REAL, s TEXT, x, raw BLOB, b BOOLEAN)",
                 "INSERT INTO t VALUES (1, 1, 1.5, 'a', 7, x'00', 1), (2, 'abc', 2.5, 3, 0.1, 'é', 0), "
                 "(3, 3, 'r', 4.25, 'x', NULL, NULL), (4, 4, 4.5, x'ff', 'x', NULL, 2), (5, 5, 1e300, 's', -9, 5, 't')")
    sink = ListDirtySink()
    rows = read_all(SqliteReaderOptions(path=str(db), table="t"), sink)
    assert rows == [(1, 1, 1.5, "a", "7", b"\x00", True)]
    reasons = {r.row[0]: r.reason.split(": ", 1)[1] for r in sink.rows}
    assert reasons == {2: "column i: the text 'abc' is no integer", 3: "column r: the text 'r' is no real",
                       4: "column s: the blob b'\\xff' is no text (a string column takes text, and integers and "
                          "reals as their text)",
                       5: "column raw: the integer 5 is no blob"}
    ok = make_db(tmp_path / "ok.db", "CREATE TABLE t (s TEXT, x, raw BLOB, b BOOLEAN)",
                 "INSERT INTO t VALUES (3, 0.1 + 0.2, 'é', 1), ('a', 1e300, NULL, 'f'), (NULL, -9, x'01', 0)")
    assert read_all(SqliteReaderOptions(path=str(ok), table="t")) == [
        ("3", "0.30000000000000004", "é".encode(), True), ("a", "1e+300", None, False), (None, "-9", b"\x01", False)]
    two = make_db(tmp_path / "two.db", "CREATE TABLE t (b BOOLEAN)", "INSERT INTO t VALUES (1), (2), (0)")
    sink = ListDirtySink()
    assert read_all(SqliteReaderOptions(path=str(two), table="t"), sink) == [(True,), (False,)]
    assert [r.reason.split(": ", 1)[1] for r in sink.rows] == [
        "column b: the integer 2 is no boolean (0 or 1, or true, false, t, f as text)"]


def test_a_filter_on_a_column_without_text_affinity_is_not_pushed(tmp_path: Path) -> None:
    """Such a column may hold numbers, which the reader gives as their text and SQLite compares as numbers
    (``1 = '1'`` is false there): a filter reading it runs in wormhole, on the values as read."""
    from wormhole.task_spec import TaskSpec
    from wormhole.transform.plan import build_plan

    db = make_db(tmp_path / "in.db", "CREATE TABLE t (s TEXT, x, n NUMBER)", "INSERT INTO t VALUES ('1', 1, 2.5)")
    schema = SqliteReader(SqliteReaderOptions(path=str(db), table="t"), read_ctx()).schema()
    for text, pushed in (("s = '1'", True), ("x = '1'", False), ("n = '2.5'", False), ("s = '1' AND x = '1'", False)):
        spec = TaskSpec.from_mapping({"source": {"plugin": "sqlite", "params": {"path": str(db), "table": "t"}},
                                      "transforms": [{"filter": text}], "settings": {"pushup": "static"},
                                      "destinations": [{"id": "js", "plugin": "file",
                                                        "params": {"path": str(tmp_path / "o"), "format": "jsonl"}}]})
        plan = build_plan(spec, schema, "sqlite")
        assert (plan.pushed_query(plan.widest()) is not None) == pushed, text
    assert read_all(SqliteReaderOptions(path=str(db), table="t")) == [("1", "1", "2.5")]


def test_reader_missing_file_table_or_column(tmp_path: Path) -> None:
    missing = SqliteReaderOptions(path=str(tmp_path / "nope.db"), table="t")
    with pytest.raises(SplitError, match=r"nope\.db"):
        SqliteSplitter(missing, read_ctx()).split(1)
    assert not (tmp_path / "nope.db").exists()  # read-only: never creates the file
    db = make_db(tmp_path / "in.db", "CREATE TABLE t (id INTEGER)")
    no_table = SqliteReaderOptions(path=str(db), table="ghost")
    with pytest.raises(SplitError, match="table ghost does not exist"):
        SqliteSplitter(no_table, read_ctx()).split(1)
    with pytest.raises(ReadError, match="table ghost does not exist"):
        SqliteReader(no_table, read_ctx()).schema()
    with pytest.raises(ReadError, match="has no column nope"):
        SqliteReader(SqliteReaderOptions(path=str(db), table="t", columns=("id", "nope")),
                     read_ctx()).schema()


# ---------------------------------------------------------------------------------------------
# Staging: splits durable before the commit, the target untouched until it


def test_a_key_written_twice_in_one_run_is_rejected_when_written(tmp_path: Path) -> None:
    db = make_db(tmp_path / "out.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    periphery, writer = prepared_writer(db)
    assert writer.write_split("a", Batch.of_rows([(1, "first"), (2, "two")])).written == 2
    writer.end_split("a", 2)
    result = writer.write_split("b", Batch.of_rows([(3, "three"), (1, "again")]))
    assert [r.row for r in result.rejected] == [(1, "again")]
    assert "UNIQUE constraint failed" in result.rejected[0].reason
    writer.end_split("b", 1)
    periphery.commit()
    assert query(db, "SELECT id, name FROM t ORDER BY id") == [(1, "first"), (2, "two"), (3, "three")]


def test_ended_splits_stay_out_of_the_target_and_rollback_removes_them(tmp_path: Path) -> None:
    db = make_db(tmp_path / "out.db", "CREATE TABLE kept (id INTEGER)")
    periphery, writer = prepared_writer(db)
    writer.write_split("a", Batch.of_rows([(1, "x")]))
    writer.end_split("a", 1)
    # Committed, but as staging and marker only: the table t is created by the final commit.
    assert query(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") == [
        ("_wh_splits",), ("_wh_stage_7_1_out",), ("kept",)]
    assert query(db, "SELECT split_id, rows FROM _wh_splits") == [("a", 1)]
    periphery.rollback()
    assert query(db, "SELECT name FROM sqlite_master") == [("kept",)]

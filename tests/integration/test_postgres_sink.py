"""The postgres destination against the real PostgreSQL: each load and write mode, awkward values, rejected
rows, staging swap and rollback, resume from markers, leftovers, a killed session, create_table, and one
whole CLI run.

Each test works in a schema of its own (``wh_<uuid>`` of the database ``test``), dropped afterwards; what
is checked is read back with plain psycopg, as a user would see it.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from structlog.testing import capture_logs

from tests.conftest import Workspace
from tests.pg_helpers import PgServer, fresh_schema, pg_execute, pg_tables, qi
from tests.plugin_helpers import SCHEMA, parse, run_destination
from wormhole.errors import CommitError, PrepareError, RollbackError, WriteError
from wormhole.plugins import registry
from wormhole.plugins.base import Batch, Column, DurablePeriphery, LeftoverPeriphery, Schema, SplitWriter, WriteContext
from wormhole.plugins.batch import arrow_schema, as_batch
from wormhole.plugins.postgres.connection import backend_pid
from wormhole.plugins.postgres.options import PostgresWriterOptions

pytestmark = pytest.mark.postgres

SINK = registry.get("postgres").sink
assert SINK is not None
TWO = Schema((Column("id", "int"), Column("name", "string")))


@pytest.fixture(name="pg")
def fixture_pg() -> Iterator[tuple[PgServer, Any, str]]:
    """(server, an autocommit connection, a fresh schema)."""
    yield from fresh_schema("sink")


def options(pg: tuple[PgServer, Any, str], **params: Any) -> PostgresWriterOptions:
    server, _, schema = pg
    parsed, problems = parse(PostgresWriterOptions, server.params(schema, **{"table": "t", **params}))
    assert not problems, problems.items
    return parsed


def ctx(run_id: int, origin: int | None = None, schema: Schema = TWO, task_id: int = 7) -> WriteContext:
    return WriteContext(task_id=task_id, run_id=run_id, origin_run_id=origin, destination="out", schema=schema,
                        batch_rows=1000, concurrency=1, taskdb_id="ab12")


def rows(pg: tuple[PgServer, Any, str], table: str = "t") -> list[tuple[Any, ...]]:
    _, conn, schema = pg
    return pg_execute(conn, f"SELECT * FROM {qi(schema)}.{qi(table)} ORDER BY 1")


def markers(pg: tuple[PgServer, Any, str]) -> list[tuple[Any, ...]]:
    _, conn, schema = pg
    if "wormhole_splits" not in pg_tables(conn, schema):
        return []
    return pg_execute(conn, f"SELECT task_id, state_run, split_id, rows, phase FROM {qi(schema)}.wormhole_splits "
                            f"ORDER BY 1, 2, 3")


def sql(pg: tuple[PgServer, Any, str], *statements: str) -> None:
    _, conn, schema = pg
    for statement in statements:
        conn.execute(statement.replace("{s}", qi(schema)))


def start(opts: PostgresWriterOptions, context: WriteContext) -> tuple[Any, Any]:
    periphery = SINK.periphery(opts, context)
    periphery.prepare()
    writer = SINK.writer(opts, context, periphery, 0)
    writer.open()
    assert isinstance(writer, SplitWriter) and isinstance(periphery, DurablePeriphery)
    return periphery, writer


def crash(writer: Any) -> None:
    """The process dies: every session ends without COMMIT (the server rolls the open splits back)."""
    for conn in [*writer._splits.values(), *writer._free, writer.conn]:
        if conn is not None:
            conn.pgconn.finish()


# -- options -------------------------------------------------------------------------------------


def test_options_are_checked_with_key_paths() -> None:
    _, problems = parse(PostgresWriterOptions, {
        "user": "u", "database": "d", "table": "t", "staging_table": "s", "rollback_sql": ["x"],
        "verify": "count", "write_mode": "upsert", "distributed_by": ["id"]})
    assert problems.items == [
        "destinations[0].params.staging_table: only with load 'staging'",
        "destinations[0].params.verify: count needs write_mode 'insert' (an upsert may rightly change fewer "
        "rows than it writes)",
        "destinations[0].params.distributed_by: only with create_table (it is part of the CREATE TABLE "
        "wormhole runs)"]
    _, problems = parse(PostgresWriterOptions, {"user": "u", "database": "d", "table": "t" * 64, "load": "staging",
                                                "rollback_sql": ["x"], "upsert_key": ["id"]})
    assert [p.split(":")[0] for p in problems.items] == [
        "destinations[0].params.table", "destinations[0].params.upsert_key", "destinations[0].params.rollback_sql"]
    staged, _ = parse(PostgresWriterOptions, {"user": "u", "database": "d", "table": "T", "load": "staging"})
    appended, _ = parse(PostgresWriterOptions, {"user": "u", "database": "d", "table": "T"})
    assert staged.single_writer_key() == "postgres table 127.0.0.1:5432/d.public.T"
    assert appended.single_writer_key() is None


# -- loads and write modes -----------------------------------------------------------------------


@pytest.mark.parametrize("write_mode", ["insert", "upsert"])
@pytest.mark.parametrize("load", ["append", "truncate", "staging"])
def test_each_load_and_write_mode(pg: Any, load: str, write_mode: str) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int PRIMARY KEY, name varchar(20))",
        "INSERT INTO {s}.t VALUES (1, 'old'), (99, 'x')")
    opts = options(pg, load=load, write_mode=write_mode, batch_size=2,
                   **({"verify": "count"} if write_mode == "insert" else {}))
    parts = [[(2, "b"), (3, "c"), (4, "d")], Batch.of_arrow(pa.RecordBatch.from_arrays(
        [pa.array([5, 1], pa.int64()), pa.array(["e", "new"])], schema=arrow_schema(TWO)))]
    results = run_destination(SINK, opts, parts, schema=TWO)
    kept = [] if load != "append" else [(99, "x")]
    if write_mode == "upsert":
        assert [r.written for r in results] == [3, 2]
        assert rows(pg) == sorted([(1, "new"), (2, "b"), (3, "c"), (4, "d"), (5, "e"), *kept])
    else:
        rejected = [r for result in results for r in result.rejected]
        if load == "append":  # key 1 is there already: that row alone is refused, with PostgreSQL's reason
            assert [r.row for r in rejected] == [(1, "new")] and "(23505)" in rejected[0].reason
        assert rows(pg) == sorted([*([(1, "old")] if load == "append" else [(1, "new")]), (2, "b"), (3, "c"),
                                   (4, "d"), (5, "e"), *kept])
    assert pg_tables(pg[1], pg[2]) == ["t", "wormhole_splits"] and markers(pg) == []


def test_upsert_needs_a_key_and_finds_the_primary_key(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int, name text)",
        "CREATE TABLE {s}.k (a int, b int, name text, PRIMARY KEY (b, a))")
    with pytest.raises(PrepareError, match=r"params.upsert_key: write_mode 'upsert' needs a key, and .* has no "
                                           r"primary key"):
        SINK.periphery(options(pg, write_mode="upsert"), ctx(1)).prepare()
    with pytest.raises(PrepareError, match=r"params.upsert_key: .* has no unique index on exactly \(name\)"):
        SINK.periphery(options(pg, write_mode="upsert", upsert_key=["name"]), ctx(1)).prepare()
    sql(pg, "CREATE UNIQUE INDEX ON {s}.t (id)", "INSERT INTO {s}.t VALUES (1, 'old')")
    run_destination(SINK, options(pg, write_mode="upsert", upsert_key=["ID"]), [[(1, "new"), (2, "two")]],
                    schema=TWO)
    assert rows(pg) == [(1, "new"), (2, "two")]
    three = Schema((Column("a", "int"), Column("b", "int"), Column("name", "string")))
    run_destination(SINK, options(pg, table="k", write_mode="upsert"), [[(1, 2, "x"), (1, 2, "y"), (2, 1, "z")]],
                    schema=three)  # one key twice in a batch: the later row wins
    assert rows(pg, "k") == [(1, 2, "y"), (2, 1, "z")]


def test_pre_sql_and_post_sql_run_around_the_load(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "CREATE TABLE {s}.log (what text, n bigint)")
    schema = pg[2]
    opts = options(pg, load="staging",
                   pre_sql=[f"INSERT INTO {qi(schema)}.log SELECT 'pre 50%', count(*) FROM {qi(schema)}.t"],
                   post_sql=[f"INSERT INTO {qi(schema)}.log SELECT 'post', count(*) FROM {qi(schema)}.t"])
    run_destination(SINK, opts, [[(1, "a"), (2, "b")]], schema=TWO)
    assert rows(pg, "log") == [("post", 2), ("pre 50%", 0)]  # post_sql sees the swapped-in table
    bad = options(pg, load="staging", post_sql=["SELECT 1/0"])
    with pytest.raises(Exception, match=r"post_sql failed .*\(22012\) division by zero"):
        run_destination(SINK, bad, [[(3, "c")]], schema=TWO)


# -- values ----------------------------------------------------------------------------------------

EVERY = [
    (1, 1.5, Decimal("12345678901234567890.123456789012345678"), "", b"", True, date(1, 1, 1),
     datetime(1, 1, 1, 0, 0), {"a": [1, "x\\y\"z"], "b": None}),
    (2, -0.0, Decimal("-0.000000000000000001"), "tab\there\nnew\r\\N back\\slash ünï 😀 'q'", bytes(range(256)),
     False, date(9999, 12, 31), datetime(9999, 12, 31, 23, 59, 59, 999999), [1, 2.5, "😀"]),
    (3, None, None, None, None, None, None, None, None),
    (4, 1e308, Decimal("99999999999999999999.999999999999999999"), "\\N", b"\\N\t\n\x00", True,
     date(2024, 2, 29), datetime(2024, 1, 2, 3, 4, 5, 6), "just a string"),
    (5, float("inf"), Decimal(0), " ", b"\xff", False, date(1970, 1, 1), datetime(1970, 1, 1), 12345678901234567890),
    (6, float("-inf"), Decimal("1.5"), "x" * 3000, b"\x00", True, date(2000, 1, 1), datetime(2000, 1, 1, 0, 0, 0, 1),
     None),
    (7, float("nan"), Decimal("-1"), "\\", b"\\", True, date(2000, 1, 1), datetime(2000, 1, 1), True),
]


@pytest.mark.parametrize("form", ["tuples", "arrow"])
def test_every_type_round_trips_into_a_created_table(pg: Any, form: str) -> None:
    schema = Schema(tuple(Column(c.name, c.type, precision=38 if c.type == "decimal" else None,
                                 scale=18 if c.type == "decimal" else None) for c in SCHEMA.columns))
    batch: Any = list(EVERY)
    if form == "arrow":
        batch = Batch.of_arrow(Batch.of_rows(EVERY, schema).arrow(schema))
    run_destination(SINK, options(pg, create_table=True, load="staging"), [batch], schema=schema)
    got = rows(pg)
    assert len(got) == len(EVERY)
    for want, have in zip(EVERY, got, strict=True):
        for index, (a, b) in enumerate(zip(want, have, strict=True)):
            if isinstance(a, float) and math.isnan(a):
                assert math.isnan(b)
            elif index == 8 and a is not None:  # jsonb: equal as JSON
                assert b == json.loads(json.dumps(a)), (want[0], a, b)
            else:
                assert a == b and type(a) is type(b), (want[0], index, a, b)
    assert str(got[1][1]) == "-0.0"  # the sign of zero kept


def test_big_unsigned_ints_and_free_scale_decimals(pg: Any) -> None:
    schema = Schema((Column("u", "int", unsigned=True), Column("d", "decimal")))
    values = [(18446744073709551615, Decimal("1.5")), (0, Decimal("123456789012345678901234567890")),
              (9223372036854775808, Decimal("-0.000001"))]
    run_destination(SINK, options(pg, create_table=True), [values], schema=schema)
    assert rows(pg) == sorted(values)
    assert pg_execute(pg[1], f"SELECT d::text FROM {qi(pg[2])}.t ORDER BY u") == [
        ("123456789012345678901234567890",), ("-0.000001",), ("1.5",)]  # each at its own scale, not 18


def test_bad_rows_are_rejected_with_reasons_and_the_rest_loaded(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int PRIMARY KEY, name varchar(5) NOT NULL)", "INSERT INTO {s}.t VALUES (9, 'old')")
    batch = [(1, "a"), (2, "toolong"), (3, None), (9, "dup"), (4, "x\x00y"), (5, "e"), (1, "dup2"), (6, "f")]
    periphery, writer = start(options(pg, batch_size=3), ctx(1))
    result = writer.write_split("A", as_batch(batch))
    writer.end_split("A", result.written)
    writer.close()
    periphery.commit()
    periphery.release()
    reasons = {r.row[0]: r.reason for r in result.rejected}
    assert sorted(reasons) == [1, 2, 3, 4, 9] and result.written == 3
    assert reasons[2].startswith("(22001) value too long for type character varying(5)")
    assert reasons[3].startswith("(23502) null value in column \"name\"")
    assert reasons[9].startswith("(23505) duplicate key value") and "Key (id)=(9) already exists" in reasons[9]
    assert reasons[4] == "column name: a string holding NUL (\\x00), which PostgreSQL text cannot store"
    assert [r.row for r in result.rejected if r.row[0] == 1] == [(1, "dup2")]  # the first of the key is kept
    assert rows(pg) == [(1, "a"), (5, "e"), (6, "f"), (9, "old")]


def test_a_zero_date_kept_as_text_is_a_rejected_row(pg: Any) -> None:
    schema = Schema((Column("id", "int"), Column("d", "date"), Column("ts", "datetime")))
    batch = [(1, date(2024, 1, 1), datetime(2024, 1, 1)), (2, "0000-00-00", None), (3, None, "2024-00-10 00:00:00")]
    results = run_destination(SINK, options(pg, create_table=True, columns=["id", "Day", "at"]), [batch], schema=schema)
    assert [c for (c,) in pg_execute(pg[1], "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                                            "%s ORDER BY ordinal_position", (pg[2],)) if c in ("id", "Day", "at")] \
        == ["id", "Day", "at"]  # the names columns gives, their case kept
    assert [(r.row[0], r.reason) for r in results[0].rejected] == [
        (2, "column d: '0000-00-00' (a MySQL zero or partial date kept as text) has no PostgreSQL date value"),
        (3, "column ts: '2024-00-10 00:00:00' (a MySQL zero or partial date kept as text) has no PostgreSQL "
            "timestamp value")]
    assert rows(pg) == [batch[0]]


def test_verify_count_fails_the_commit_when_the_table_holds_other_rows(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')")
    periphery, writer = start(options(pg, verify="count"), ctx(1))
    write_whole(writer, "A")
    writer.close()
    sql(pg, "INSERT INTO {s}.t VALUES (100, 'someone else')")
    with pytest.raises(CommitError, match=r'verify count: .*"t" holds 5 rows, expected 4 \(3 written\)'):
        periphery.commit()


# -- staging ---------------------------------------------------------------------------------------


def test_staging_rollback_leaves_the_target_untouched(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')",
        "COMMENT ON TABLE {s}.t IS 'the users'' table'")
    results = run_destination(SINK, options(pg, load="staging"), [[(1, "a")], [(2, "b")]], schema=TWO, commit=False)
    assert [r.written for r in results] == [1, 1]
    assert rows(pg) == [(99, "old")] and pg_tables(pg[1], pg[2]) == ["t", "wormhole_splits"] and markers(pg) == []
    run_destination(SINK, options(pg, load="staging"), [[(1, "a")]], schema=TWO)
    assert rows(pg) == [(1, "a")]
    sql(pg, "CREATE TABLE {s}.p (id int, name text) PARTITION BY RANGE (id)")
    with pytest.raises(PrepareError, match=r'"p" is partitioned: a staging table made LIKE it would not be'):
        SINK.periphery(options(pg, table="p", load="staging"), ctx(1)).prepare()
    assert pg_execute(pg[1], "SELECT obj_description(%s::regclass, 'pg_class')",
                      (f"{qi(pg[2])}.t",)) == [("the users' table",)]  # the target's comment, not the marker


def test_the_staging_swap_is_atomic_for_a_concurrent_reader(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.t (id serial PRIMARY KEY, name text)", "INSERT INTO {s}.t (name) VALUES ('old')")
    server, _, schema = pg
    opts = options(pg, load="staging")
    periphery = SINK.periphery(opts, ctx(1))
    periphery.prepare()
    writer = SINK.writer(opts, ctx(1), periphery, 0)
    writer.open()
    writer.write(Batch.of_rows([(i, f"n{i}") for i in range(1, 101)]))
    writer.close()
    seen: list[int] = []
    done = threading.Event()

    def read() -> None:
        conn = server.connect()
        try:
            while not done.is_set():
                seen.append(conn.execute(f"SELECT count(*) FROM {qi(schema)}.t").fetchone()[0])
        finally:
            conn.close()

    reader = threading.Thread(target=read)
    reader.start()
    while len(seen) < 20:
        time.sleep(0.005)
    periphery.commit()
    while seen[-1] != 100:
        time.sleep(0.005)
    done.set()
    reader.join()
    assert set(seen) == {1, 100}  # the old table or the new one, never an empty or missing one
    # The serial's sequence moved to the swapped-in table (dropping the old one would have taken it along).
    assert pg_execute(pg[1], "SELECT nextval(pg_get_serial_sequence(%s, 'id'))", (f"{qi(schema)}.t",)) == [(2,)]
    assert pg_execute(pg[1], "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass",
                      (f"{qi(schema)}.t",)) == [("t_pkey",)]  # the target's index and constraint names


@pytest.fixture(name="roles")
def fixture_roles(pg: Any) -> Iterator[Callable[[str], str]]:
    """Makes uuid-named roles (cluster-wide), dropped with their grants after the test."""
    made: list[str] = []

    def make(label: str, login: bool = False) -> str:
        made.append(f"wh_{label}_{uuid.uuid4().hex[:8]}")
        pg[1].execute(f"CREATE ROLE {qi(made[-1])}{' LOGIN' if login else ''}")
        return made[-1]

    try:
        yield make
    finally:
        if made:
            pg[1].execute(f"DROP OWNED BY {', '.join(map(qi, made))} CASCADE")
            pg[1].execute(f"DROP ROLE {', '.join(map(qi, made))}")


def kept(pg: Any, table: str = "t") -> dict[str, Any]:
    """What a staging swap must keep of ``table``, read from the catalog."""
    ref = f"{qi(pg[2])}.{qi(table)}"
    found: dict[str, Any] = dict(zip(("owner", "acl", "rls", "forced"), pg_execute(
        pg[1], "SELECT pg_get_userbyid(relowner), relacl::text, relrowsecurity, relforcerowsecurity FROM pg_class "
               "WHERE oid = %s::regclass", (ref,))[0], strict=True))
    found["columns"] = pg_execute(pg[1], "SELECT attname, attacl::text FROM pg_attribute WHERE attrelid = %s::regclass "
                                         "AND attacl IS NOT NULL ORDER BY 1", (ref,))
    found["policies"] = pg_execute(pg[1], "SELECT policyname, permissive, roles, cmd, qual, with_check FROM "
                                          "pg_policies WHERE schemaname = %s AND tablename = %s ORDER BY 1",
                                   (pg[2], table))
    found["triggers"] = pg_execute(pg[1], "SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger WHERE "
                                          "tgrelid = %s::regclass AND NOT tgisinternal ORDER BY 1", (ref,))
    found["foreign_keys"] = pg_execute(pg[1], "SELECT conname, pg_get_constraintdef(oid), convalidated FROM "
                                              "pg_constraint WHERE conrelid = %s::regclass AND contype = 'f' "
                                              "ORDER BY 1", (ref,))
    return found


def test_the_staging_swap_keeps_the_targets_foreign_keys_and_a_load_breaking_one_fails(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.p (id int PRIMARY KEY)", "INSERT INTO {s}.p VALUES (10), (20)",
        "CREATE TABLE {s}.t (id int PRIMARY KEY, pid int REFERENCES {s}.p DEFERRABLE, up int)",
        "ALTER TABLE {s}.t ADD CONSTRAINT t_up FOREIGN KEY (up) REFERENCES {s}.t (id)",
        "INSERT INTO {s}.t VALUES (1, 10, NULL)")
    before = kept(pg)
    assert [k[0] for k in before["foreign_keys"]] == ["t_pid_fkey", "t_up"]
    ints = Schema((Column("id", "int"), Column("pid", "int"), Column("up", "int")))
    run_destination(SINK, options(pg, load="staging"), [[(2, 20, None), (3, 10, 2)]], schema=ints)
    assert rows(pg) == [(2, 20, None), (3, 10, 2)] and kept(pg) == before
    with pytest.raises(CommitError, match=r'violates foreign key constraint "t_pid_fkey"'):
        run_destination(SINK, options(pg, load="staging"), [[(4, 99, None)]], schema=ints)
    assert rows(pg) == [(2, 20, None), (3, 10, 2)] and kept(pg) == before  # the target as it was


def test_the_staging_swap_keeps_owner_grants_row_security_and_triggers(pg: Any, roles: Any) -> None:
    owner, reader = roles("owner"), roles("reader")
    sql(pg, "CREATE TABLE {s}.t (id int PRIMARY KEY, name text)", "INSERT INTO {s}.t VALUES (99, 'old')",
        "CREATE TABLE {s}.audit (id int)",
        "CREATE FUNCTION {s}.audit() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO {s}.audit "
        "VALUES (NEW.id); RETURN NEW; END$$",
        "CREATE TRIGGER t_audit AFTER INSERT ON {s}.t FOR EACH ROW WHEN (NEW.id > 0) EXECUTE FUNCTION {s}.audit()",
        "CREATE TRIGGER t_off BEFORE UPDATE ON {s}.t FOR EACH ROW EXECUTE FUNCTION {s}.audit()",
        "ALTER TABLE {s}.t DISABLE TRIGGER t_off", f"ALTER TABLE {{s}}.t OWNER TO {qi(owner)}",
        f"GRANT USAGE ON SCHEMA {{s}} TO {qi(reader)}", f"GRANT SELECT ON {{s}}.t TO {qi(reader)}",
        f"GRANT UPDATE (name) ON {{s}}.t TO {qi(reader)} WITH GRANT OPTION",
        "ALTER TABLE {s}.t ENABLE ROW LEVEL SECURITY", "ALTER TABLE {s}.t FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY small ON {{s}}.t AS PERMISSIVE FOR SELECT TO {qi(reader)} USING (id < 100)",
        "CREATE POLICY no_odd ON {s}.t AS RESTRICTIVE FOR INSERT TO PUBLIC WITH CHECK (id % 2 = 0)")
    before = kept(pg)
    assert before["acl"] == f"{{{owner}=arwdDxt/{owner},{reader}=r/{owner}}}"
    run_destination(SINK, options(pg, load="staging"), [[(1, "a"), (200, "b")]], schema=TWO)
    assert rows(pg) == [(1, "a"), (200, "b")]
    assert kept(pg) == before  # owner, grants, column grants, row security and its policies, triggers
    _, conn, schema = pg
    with conn.transaction():  # the reporting role still reads it, through its policy
        conn.execute(f"SET LOCAL ROLE {qi(reader)}")
        assert pg_execute(conn, f"SELECT id FROM {qi(schema)}.t") == [(1,)]
    sql(pg, "INSERT INTO {s}.t VALUES (4, 'd')")
    assert pg_execute(conn, f"SELECT id FROM {qi(schema)}.audit") == [(4,)]  # later writes fire the trigger


def test_a_staging_swap_that_cannot_keep_a_grant_is_refused_before_anything_is_made(pg: Any, roles: Any) -> None:
    owner, reader, other = roles("owner"), roles("reader"), roles("other")
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')",
        f"ALTER TABLE {{s}}.t OWNER TO {qi(owner)}", f"GRANT USAGE ON SCHEMA {{s}} TO {qi(reader)}",
        f"GRANT SELECT ON {{s}}.t TO {qi(reader)} WITH GRANT OPTION")
    _, conn, schema = pg
    with conn.transaction():
        conn.execute(f"SET LOCAL ROLE {qi(reader)}")
        conn.execute(f"GRANT SELECT ON {qi(schema)}.t TO {qi(other)}")  # recorded as made by the reader
    before = kept(pg)
    with pytest.raises(PrepareError) as refused:
        SINK.periphery(options(pg, load="staging"), ctx(1)).prepare()
    assert f"grants SELECT to {other} by {reader} were made by a role other than its owner {owner!r}" \
        in str(refused.value) and "nothing was loaded" in str(refused.value)
    assert kept(pg) == before and rows(pg) == [(99, "old")] and pg_tables(conn, schema) == ["t", "wormhole_splits"]


def test_a_loader_that_is_not_the_owner_is_refused_at_prepare_and_a_member_keeps_the_owner(pg: Any,
                                                                                            roles: Any) -> None:
    owner, reader, loader = roles("owner"), roles("reader"), roles("loader", login=True)
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')",
        f"ALTER TABLE {{s}}.t OWNER TO {qi(owner)}", f"GRANT SELECT, INSERT ON {{s}}.t TO {qi(loader)}",
        f"GRANT SELECT ON {{s}}.t TO {qi(reader)}", f"GRANT USAGE, CREATE ON SCHEMA {{s}} TO {qi(loader)}, {qi(owner)}")
    server, conn, schema = pg
    as_loader, _ = parse(PostgresWriterOptions, {**server.params(schema, table="t", load="staging"), "user": loader})
    before = kept(pg)
    with pytest.raises(PrepareError, match=rf"load 'staging' replaces .*\"t\", owned by '{owner}': the user "
                                           rf"'{loader}' is neither that role nor a member of it"):
        SINK.periphery(as_loader, ctx(1)).prepare()  # not at commit, after every row was loaded
    assert kept(pg) == before and pg_tables(conn, schema) == ["t", "wormhole_splits"]
    sql(pg, f"GRANT {qi(owner)} TO {qi(loader)}")
    run_destination(SINK, as_loader, [[(1, "a")]], schema=TWO)
    assert rows(pg) == [(1, "a")] and kept(pg) == before  # the owner given back by a member, grants as they were


# -- splits, resume, leftovers ------------------------------------------------------------------------

SPLITS = {"A": [(1, "a1"), (2, "a2"), (3, "a3")], "B": [(10, "b1"), (11, "b2")], "C": [(20, "c1")]}


def write_whole(writer: Any, split_id: str) -> None:
    for row in SPLITS[split_id]:  # a batch a row: several batches per split
        assert writer.write_split(split_id, Batch.of_rows([row])).written == 1
    writer.end_split(split_id, len(SPLITS[split_id]))


@pytest.mark.parametrize("load", ["append", "truncate", "staging"])
def test_a_crashed_run_resumes_from_its_markers(pg: Any, load: str) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')")  # no key: dups show
    opts = options(pg, load=load, verify="count")
    old = [(99, "old")] if load == "append" else []
    periphery, writer = start(opts, ctx(1))
    write_whole(writer, "A")
    writer.write_split("B", Batch.of_rows(SPLITS["B"][:1]))  # B is open when the process dies
    crash(writer)
    assert [m[2] for m in markers(pg)] == ["", "A"]
    periphery, writer = start(opts, ctx(2, origin=1))
    assert periphery.durable_splits() == {"A": 3}
    write_whole(writer, "A")  # written again (a split the engine had not seen end): found durable, lands once
    write_whole(writer, "B")
    writer.close()
    periphery.commit()  # verify count: A of run 1 with B of run 2, A once
    assert rows(pg) == sorted(old + SPLITS["A"] + SPLITS["B"])
    assert markers(pg)[0][4] == "committed"
    periphery, _ = start(opts, ctx(3, origin=1))  # a crash after the commit, before the outcome was recorded
    periphery.commit()
    periphery.release()
    assert rows(pg) == sorted(old + SPLITS["A"] + SPLITS["B"]) and markers(pg) == []
    assert pg_tables(pg[1], pg[2]) == ["t", "wormhole_splits"]


def test_leftovers_of_this_task_are_listed_and_cleaned_others_untouched(pg: Any) -> None:
    sql(pg, "CREATE TABLE {s}.t (id int, name text)")
    _, writer = start(options(pg, load="staging"), ctx(1))
    write_whole(writer, "A")
    crash(writer)
    sql(pg, "CREATE TABLE {s}.t__wh8_1_ab12 (id int)", "COMMENT ON TABLE {s}.t__wh8_1_ab12 IS "
            "'wormhole:db=ab12,task=8,run=1,dest=out'", "CREATE TABLE {s}.t__wh7_5_ab12 (id int)",
            "INSERT INTO {s}.wormhole_splits (taskdb, task_id, state_run, destination, split_id, rows) VALUES "
            "('ab12', 8, 1, 'out', 'X', 1), ('ab12', 7, 2, 'elsewhere', 'Y', 1), ('zz', 7, 4, 'out', 'Z', 1)")
    fresh = SINK.periphery(options(pg, load="staging"), ctx(3))  # not prepared: `wormhole task clean`
    assert isinstance(fresh, LeftoverPeriphery)
    s = qi(pg[2])
    found = [f'table {s}."t__wh7_1_ab12" (staging of run 1)', f'1 split marker(s) of run 1 in {s}."wormhole_splits"']
    assert fresh.leftovers(None) == found
    assert fresh.leftovers(1) == []  # run 1 may still be resumed
    assert fresh.clean_leftovers(None) == found and fresh.leftovers(None) == []
    assert pg_tables(pg[1], pg[2]) == ["t", "t__wh7_5_ab12", "t__wh8_1_ab12", "wormhole_splits"]
    assert [m[:3] for m in markers(pg)] == [(7, 2, "Y"), (7, 4, "Z"), (8, 1, "X")]


def test_a_session_killed_mid_copy_fails_and_rollback_leaves_nothing(pg: Any) -> None:
    server, conn, schema = pg
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')")
    opts = options(pg, load="staging", retries=0)
    periphery = SINK.periphery(opts, ctx(1))
    periphery.prepare()
    writer = SINK.writer(opts, ctx(1), periphery, 0)
    writer.open()
    assert writer.write(Batch.of_rows([(1, "a")])).written == 1  # committed into the staging table
    locker = server.connect()
    locker.autocommit = False
    locker.execute(f"LOCK TABLE {qi(schema)}.{qi(periphery.write_table)} IN SHARE MODE")  # the next COPY waits
    failure: list[BaseException] = []

    def write() -> None:
        try:
            writer.write(Batch.of_rows([(2, "b"), (3, "c")]))
        except BaseException as exc:  # handed to the test's thread
            failure.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    deadline = time.monotonic() + 10
    # The writer's session waiting on this test's lock (other tests' sessions share the database).
    while not (pids := pg_execute(conn, "SELECT pid FROM pg_stat_activity WHERE application_name = 'wormhole' AND "
                                        "%s = ANY(pg_blocking_pids(pid))", (locker.info.backend_pid,))):
        assert time.monotonic() < deadline, "the COPY never waited on the lock"
        time.sleep(0.02)
    pg_execute(conn, "SELECT pg_terminate_backend(%s)", (pids[0][0],))
    thread.join(10)
    locker.rollback()
    locker.close()
    assert len(failure) == 1 and isinstance(failure[0], WriteError)
    assert str(failure[0]).endswith("failed after 1 attempt(s): (57P01) terminating connection due to administrator "
                                    "command")
    writer.close()
    periphery.rollback()
    assert rows(pg) == [(99, "old")] and pg_tables(conn, schema) == ["t", "wormhole_splits"] and markers(pg) == []


def test_a_lost_split_session_raises_split_lost_and_leaves_nothing_of_it(pg: Any) -> None:
    from wormhole.errors import SplitLost

    sql(pg, "CREATE TABLE {s}.t (id int, name text)")
    periphery, writer = start(options(pg), ctx(1))
    writer.write_split("A", Batch.of_rows(SPLITS["A"][:1]))
    pg_execute(pg[1], "SELECT pg_terminate_backend(%s)", (backend_pid(writer._splits["A"]),))
    with pytest.raises(SplitLost, match="split 'A' lost its transaction"):
        writer.write_split("A", Batch.of_rows(SPLITS["A"][1:]))
    writer.abort_split("A")
    write_whole(writer, "A")
    writer.close()
    periphery.commit()
    assert rows(pg) == SPLITS["A"]


def _losing_commit(conn: Any, pg: Any, *, commit_first: bool) -> None:
    """Make ``conn.commit`` lose its session: terminated before COMMIT is sent, or right after the server
    committed (the answer never arrives); either way the writer sees a broken connection."""
    real = conn.commit
    pid = backend_pid(conn)

    def commit() -> None:
        if commit_first:
            real()
        _terminate(pg, pid)
        if commit_first:
            conn.execute("SELECT 1")  # the connection finds its session gone
        real()

    conn.commit = commit


@pytest.mark.parametrize("commit_first", [True, False], ids=["after_commit", "before_commit"])
def test_a_commit_lost_in_flight_is_settled_by_the_marker(pg: Any, commit_first: bool) -> None:
    from wormhole.errors import SplitLost

    sql(pg, "CREATE TABLE {s}.t (id int, name text)")  # no key: a split landing twice would show
    periphery, writer = start(options(pg), ctx(1))
    write_whole(writer, "A")
    writer.write_split("B", Batch.of_rows(SPLITS["B"]))
    _losing_commit(writer._splits["B"], pg, commit_first=commit_first)
    with capture_logs() as logs:
        if commit_first:
            writer.end_split("B", 2)  # it did commit: durable, nothing to write again
        else:
            with pytest.raises(SplitLost, match="did not commit") as lost:
                writer.end_split("B", 2)
            assert lost.value.split_id == "B"
            assert [m[2] for m in markers(pg)] == ["", "A"]
            writer.abort_split("B")  # what the engine does: then B is delivered again
            write_whole(writer, "B")
    assert [e["durable"] for e in logs if e["event"] == "writer.commit_settled"] == [commit_first]
    writer.close()
    periphery.commit()
    assert rows(pg) == sorted(SPLITS["A"] + SPLITS["B"])


def _terminate(pg: Any, pid: int) -> None:
    pg_execute(pg[1], "SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 10
    while pg_execute(pg[1], "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)):
        assert time.monotonic() < deadline, f"session {pid} was never terminated"
        time.sleep(0.02)


@pytest.mark.parametrize("commit_first", [True, False], ids=["after_commit", "before_commit"])
def test_a_load_whose_commit_answer_is_lost_is_settled_by_its_committed_phase(pg: Any, commit_first: bool) -> None:
    """The staging swap's one transaction loses its session: after its COMMIT (the answer never arrives) the
    load is done, once; before it, the commit fails and the rollback leaves the target as it was."""
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')")
    periphery, writer = start(options(pg, load="staging", verify="count"), ctx(1))
    write_whole(writer, "A")
    writer.close()
    real = periphery._commit

    def losing(conn: Any) -> None:
        if commit_first:
            real(conn)
        _terminate(pg, backend_pid(conn))
        if commit_first:
            conn.execute("SELECT 1")  # the connection finds its session gone
        real(conn)

    periphery._commit = losing
    with capture_logs() as logs:
        if commit_first:
            periphery.commit()
        else:
            with pytest.raises(CommitError, match="it did not commit"):
                periphery.commit()
            periphery.rollback()
    assert [e["durable"] for e in logs if e["event"] == "writer.commit_settled"] == [commit_first]
    assert rows(pg) == (SPLITS["A"] if commit_first else [(99, "old")])
    assert pg_tables(pg[1], pg[2]) == ["t", "wormhole_splits"]
    if commit_first:
        periphery.release()
    assert markers(pg) == []


def test_a_commit_whose_outcome_cannot_be_settled_is_not_rolled_back_and_a_resume_finds_it(pg: Any) -> None:
    """The commit's answer is lost and the server cannot be reached to ask: the rollback leaves the load and
    its markers alone (undoing a load that may be committed is no rollback), and the resumed run finds it
    committed and does not load it again."""
    from wormhole.errors import RollbackError

    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (99, 'old')")
    opts = options(pg, load="staging", verify="count")
    periphery, writer = start(opts, ctx(1))
    write_whole(writer, "A")
    writer.close()
    real = periphery._commit

    def losing(conn: Any) -> None:
        real(conn)
        _terminate(pg, backend_pid(conn))
        periphery.connect = unreachable  # from here on the server cannot be asked
        conn.execute("SELECT 1")

    def unreachable(*_: Any, **__: Any) -> Any:
        raise CommitError("cannot connect: refused")

    periphery._commit = losing
    reachable = periphery.connect
    with pytest.raises(CommitError, match="whether it committed cannot be asked"):
        periphery.commit()
    periphery.connect = reachable  # the server is back by the time the run rolls back
    with pytest.raises(RollbackError, match=r"not rolled back: .* the markers are kept"):
        periphery.rollback()
    assert rows(pg) == SPLITS["A"] and [m[4] for m in markers(pg)][:1] == ["committed"]
    resumed, _ = start(opts, ctx(2, origin=1))
    resumed.commit()  # found committed: nothing again
    resumed.release()
    assert rows(pg) == SPLITS["A"] and markers(pg) == []


def test_binary_rows_not_in_the_columns_types_fail_the_destination_at_once(pg: Any) -> None:
    """A source's binary rows whose declared types match the target's but whose bytes do not (a column's type
    changed during the run): PostgreSQL refuses them as malformed (22P03), which is no row's fault, so the
    destination fails on the first COPY instead of refusing every row with a COPY of its own."""
    import struct

    from wormhole.plugins.batch import EncodedRows, Encoding
    from wormhole.plugins.postgres.passthrough import FORMAT

    sql(pg, "CREATE TABLE {s}.t (id bigint, n integer)")
    opts = options(pg)
    periphery, writer = start(opts, ctx(1, schema=Schema((Column("id", "int"), Column("n", "int")))))
    encoding = Encoding(FORMAT, ("bigint", "integer"))
    assert periphery.takes_encoding(encoding)
    payload, ends = bytearray(), []
    for i in range(500):  # n as 8 bytes (a bigint), where the column takes 4
        payload += struct.pack(">hiqiq", 2, 8, i, 8, i)
        ends.append(len(payload))
    batch = Batch.of_encoded(EncodedRows(encoding, bytes(payload), ends, lambda _, i: (i, i)))
    with pytest.raises(WriteError, match=r"refused binary COPY rows as malformed.*\(22P03\)"):
        writer.write_encoded(batch, "A")  # before: each row refused by a COPY of its own, and the write went on
    assert periphery.broken is not None
    writer.close()
    periphery.rollback()
    assert rows(pg) == []


def test_a_deadlock_mid_split_is_retried_from_the_pieces_savepoint(pg: Any) -> None:
    """The split holds key 1 and waits for key 2, which another session holds while it waits for key 1:
    PostgreSQL cancels the split's statement (40P01). Its piece is undone to its savepoint and retried once
    the other session gave up; the split's earlier batch stays."""
    server, conn, schema = pg
    sql(pg, "CREATE TABLE {s}.t (id int PRIMARY KEY, name text)")
    periphery, writer = start(options(pg, retry_wait_s=0.2), ctx(1))
    writer.write_split("A", Batch.of_rows([(1, "a")]))
    other = server.connect()
    other.autocommit = False
    other.execute("SET deadlock_timeout = '30s'")  # the split's session finds the deadlock, not this one
    other.execute(f"INSERT INTO {qi(schema)}.t VALUES (2, 'other')")

    def wait_for_key_1() -> None:
        try:
            other.execute("SET statement_timeout = '1200ms'")
            other.execute(f"INSERT INTO {qi(schema)}.t VALUES (1, 'other')")
        except Exception:  # the timeout: this session gives up and frees key 2
            other.rollback()

    thread = threading.Thread(target=wait_for_key_1)
    thread.start()
    deadline = time.monotonic() + 10
    while not pg_execute(conn, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = "
                               "current_database()"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with capture_logs() as logs:
        assert writer.write_split("A", Batch.of_rows([(2, "b")])).written == 1
    thread.join(10)
    other.close()
    writer.end_split("A", 2)
    writer.close()
    periphery.commit()
    assert rows(pg) == [(1, "a"), (2, "b")]
    assert [e["error"][:30] for e in logs if e["event"] == "writer.retry"] == ["TransientWriteError: (40P01) d"]


# -- create_table -------------------------------------------------------------------------------


def test_create_table_types_and_rollback_drops_the_table_it_made(pg: Any) -> None:
    natives = [("ti1", "int", "tinyint(1)", "smallint"), ("mu", "int", "mediumint(8) unsigned", "integer"),
               ("iu", "int", "int(10) unsigned", "bigint"), ("bu", "int", "bigint(20) unsigned", "numeric(20,0)"),
               ("b1", "int", "bit(1)", "boolean"), ("b10", "int", "bit(10)", "bigint"),
               ("d", "decimal", "decimal(65,30)", "numeric(65,30)"), ("fl", "float", "float", "real"),
               ("c", "string", "char(10) utf8mb4", "character varying(10)"),
               ("en", "string", "enum('a','b') utf8mb4", "text"), ("tm", "string", "time(6)", "text"),
               ("bl", "bytes", "blob", "bytea"), ("dt", "datetime", "datetime(3)", "timestamp(3) without time zone"),
               ("dt0", "datetime", "datetime", "timestamp(0) without time zone"), ("js", "json", "json", "jsonb"),
               ("yr", "int", "year(4)", "smallint"), ("pg", "string", "character varying(5)", "text")]
    logical = [("i", "int", None, "bigint"), ("f", "float", None, "double precision"),
               ("n", "decimal", None, "numeric"), ("s", "string", None, "text"), ("by", "bytes", None, "bytea"),
               ("bo", "bool", None, "boolean"), ("da", "date", None, "date"),
               ("ts", "datetime", None, "timestamp(6) without time zone"), ("j", "json", None, "jsonb")]
    columns = natives + logical
    schema = Schema(tuple(Column(n, t, nullable=n != "i", native=native)  # type: ignore[arg-type]
                          for n, t, native, _ in columns))
    periphery = SINK.periphery(options(pg, create_table=True), ctx(1, schema=schema))
    periphery.prepare()
    found = pg_execute(pg[1], "SELECT column_name, format_type(atttypid, atttypmod), attnotnull FROM "
                              "information_schema.columns JOIN pg_attribute ON attrelid = %s::regclass AND "
                              "attname = column_name WHERE table_schema = %s AND table_name = 't' ORDER BY "
                              "ordinal_position", (f"{qi(pg[2])}.t", pg[2]))
    assert [(n, t) for n, t, _ in found] == [(n, pg_type) for n, _, _, pg_type in columns]
    assert [n for n, _, not_null in found if not_null] == ["i"]
    indexes = pg_execute(pg[1], "SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass", (f"{qi(pg[2])}.t",))
    assert indexes == [(0,)]
    periphery.rollback()  # the table was not there before prepare
    assert pg_tables(pg[1], pg[2]) == ["wormhole_splits"]


def test_a_missing_target_fails_prepare_unless_create_table(pg: Any) -> None:
    with pytest.raises(PrepareError, match=r'table .*"t" does not exist .* \(create_table can create it\)'):
        SINK.periphery(options(pg), ctx(1)).prepare()
    sql(pg, "CREATE TABLE {s}.t (id int, name text)", "INSERT INTO {s}.t VALUES (1, 'a')")
    periphery = SINK.periphery(options(pg), ctx(1))
    periphery.prepare()
    writer = SINK.writer(options(pg), ctx(1), periphery, 0)
    writer.open()
    writer.write(Batch.of_rows([(2, "b")]))
    writer.close()
    with pytest.raises(RollbackError, match=r"1 rows committed to .* stay there"):
        periphery.rollback()


def test_a_missing_schema_is_named_at_prepare(pg: Any) -> None:
    missing = f"{pg[2]}_gone"
    opts, _ = parse(PostgresWriterOptions, pg[0].params(missing, table="t", create_table=True))
    with pytest.raises(PrepareError) as failed:
        SINK.periphery(opts, ctx(1)).prepare()
    assert f"schema {missing!r} does not exist" in str(failed.value)
    assert "CREATE SCHEMA" in str(failed.value) and "params.schema" in str(failed.value)
    assert "CREATE TABLE IF NOT EXISTS" not in str(failed.value) and "privilege" not in str(failed.value)


# -- the CLI ------------------------------------------------------------------------------------


def test_a_cli_run_from_sqlite_into_postgres(ws: Workspace, pg: Any) -> None:
    server, _, schema = pg
    db = ws.root / "src.db"
    source = sqlite3.connect(db)
    with source:
        source.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, amount REAL, raw BLOB)")
        source.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                           [(i, f"n\t{i}\\ é" if i % 7 else None, i / 3, bytes([i % 256, 0])) for i in range(500)])
    want = list(source.execute("SELECT * FROM t ORDER BY id"))
    source.close()
    spec = {"source": {"plugin": "sqlite", "params": {"path": str(db), "table": "t"}},
            "destinations": [{"id": "pg", "plugin": "postgres", "concurrency": 2,
                              "params": server.params(schema, table="copy", create_table=True, load="staging",
                                                      verify="count", batch_size=64)}]}
    task_id = ws.submit(spec)
    proc = ws.run("--task-id", str(task_id))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [(i, n, float(a), bytes(r)) for i, n, a, r in rows(pg, "copy")]
    assert hashlib.sha256(repr(got).encode()).hexdigest() == hashlib.sha256(repr(want).encode()).hexdigest()
    assert ws.show(task_id)["result"]["destinations"]["pg"]["rows_written"] == 500
    assert markers(pg) == [] and pg_tables(pg[1], schema) == ["copy", "wormhole_splits"]

"""The checksum of rows over what wormhole itself reads (issue 39): a MySQL table of mixed types copied by
wormhole to PostgreSQL, sqlite, parquet, jsonl and csv, each copy read back through its store's source
plugin, gives the digest of the MySQL source read; a changed copy gives another.

Where a store cannot give back a value the digest is taken as docs/manual/types.md says: sqlite rejects an
integer beyond 2**63 - 1 (compared without that row), jsonl has one null (``json_null="null"`` on both
sides), csv read without declared columns is text (``logical`` names the types)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, execute, q
from tests.pg_helpers import Schemas, pg_execute, pg_schemas, qi
from tests.plugin_helpers import ListDirtySink, parse, read_ctx
from tests.spark_helpers import run_task
from wormhole.config import EngineConf, PathsConf
from wormhole.plugins import registry
from wormhole.plugins.batch import as_batch
from wormhole.verify import Digest, digest
from wormhole.verify.checksum import JsonNull

pytestmark = [pytest.mark.mysql, pytest.mark.postgres]

__all__ = ["pg_schemas"]  # the fixture, used by name

DDL = """CREATE TABLE src (
  id INT PRIMARY KEY, bu BIGINT UNSIGNED, d2 DECIMAL(12,2), db DOUBLE, fl FLOAT, s VARCHAR(60),
  dt DATETIME(6), day DATE, js JSON, bl BLOB
) CHARACTER SET utf8mb4"""
ROWS: list[tuple[Any, ...]] = [
    (1, 18446744073709551615, "12345678.90", 1.7976931348623157e308, 1.1, "😀 ünïcödé 𝄞",
     "2024-01-02 03:04:05.123456", "2024-02-29", '{"b": [1, 2.50, "x😀"], "a": null}', b"\x00\xff\t\n\\N"),
    (2, 0, "-0.01", 0.1, 16777216, "", "1000-01-01 00:00:00.000000", "1000-01-01", "[]", b""),
    (3, None, None, None, None, None, None, None, None, None),
    (4, 9223372036854775807, "0.00", -2.2250738585072014e-308, -1.5, "tab\there \\N 'q'",
     "9999-12-31 23:59:59.999999", "9999-12-31", '"just a string"', bytes(range(256))),
    (5, 7, "100.50", 0.30000000000000004, 0.0, "a", "2024-06-01 12:00:00.000001", "2024-06-01", "null", b"x"),
]
COLUMNS = ["id", "bu", "d2", "db", "fl", "s", "dt", "day", "js", "bl"]
TYPES = {"id": "int", "bu": "int", "d2": "decimal", "db": "float", "fl": "float", "s": "string", "dt": "datetime",
         "day": "date", "js": "json", "bl": "bytes"}
TOO_BIG_FOR_SQLITE = 1
"""The row whose BIGINT UNSIGNED is beyond 2**63 - 1: the sqlite destination rejects it (docs/manual/types.md)."""


def read_batches(plugin: str, params: Mapping[str, Any]) -> list[pa.RecordBatch]:
    """Every batch the store's source plugin reads, as the record batches wormhole carries."""
    role = registry.source(plugin)
    options, problems = parse(role.options, dict(params))
    assert not problems.items, problems.items
    sink = ListDirtySink()
    ctx = read_ctx(sink, batch_rows=2)  # batches of 2 rows: the digest crosses batch boundaries
    reader = role.reader(options, ctx)
    schema = reader.schema()
    batches = [as_batch(b, schema).arrow_form for split in role.splitter(options, ctx).split(3)
               for b in reader.read(split)]
    assert sink.rows == [], sink.rows
    return batches


def without_id(batches: list[pa.RecordBatch], row_id: int) -> list[pa.RecordBatch]:
    return [b.filter(pc.not_equal(b.column(b.schema.get_field_index("id")), row_id)) for b in batches]


def checked(batches: list[pa.RecordBatch], *, logical: Mapping[str, str] | None = None,
            json_null: JsonNull = "value") -> Digest:
    return digest(batches, COLUMNS, logical=logical, json_null=json_null)


def differing(got: list[pa.RecordBatch], want: list[pa.RecordBatch], **kw: Any) -> list[str]:
    """The columns whose own digests (with the id) differ: what an assertion says when the rows do."""
    return [c for c in COLUMNS
            if digest(got, ["id", c], logical={k: v for k, v in kw.get("logical", {}).items() if k == c},
                      json_null=kw.get("json_null", "value")) != digest(want, ["id", c], json_null=kw.get(
                          "json_null", "value"))]


@pytest.fixture
def copied(dbs: Databases, server: Server, pg_schemas: Schemas, tmp_path: Path) -> dict[str, Any]:
    """The MySQL source, copied by one wormhole run to every store: where each copy is."""
    admin = server.connect()
    db = dbs.create("h_digest")
    execute(admin, f"USE {q(db)}")
    execute(admin, DDL)
    execute(admin, "CREATE TABLE copy LIKE src")
    execute(admin, "SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES'")
    with admin.cursor() as cur:
        cur.executemany(f"INSERT INTO src VALUES ({', '.join(['%s'] * len(COLUMNS))})", ROWS)
    admin.close()
    schema = pg_schemas.create("h_digest")
    pg = pg_schemas.server
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    files = {f: str(tmp_path / f) for f in ("parquet", "jsonl", "csv")}
    result, _ = run_task(conf, {
        "source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
        "destinations": [
            {"id": "mysql", "plugin": "mysql", "params": server.params(db, table="copy")},
            {"id": "postgres", "plugin": "postgres", "params": pg.params(schema, table="copy", create_table=True)},
            {"id": "sqlite", "plugin": "sqlite", "params": {"path": str(tmp_path / "copy.sqlite"), "table": "t"}},
            *({"id": f, "plugin": "file", "params": {"path": path, "format": f}} for f, path in files.items())],
        "settings": {"speed": {"channel": 2}, "error_limit": {"record": 10}}})
    assert result.exit_code in (0, 201), result.result  # 201: sqlite's rejected row, below
    return {"mysql": server.params(db, table="src", split_pk="id"), "mysql_copy": server.params(db, table="copy"),
            "pg": pg, "schema": schema,
            "sqlite": str(tmp_path / "copy.sqlite"), **files}


def test_every_store_read_back_gives_the_mysql_sources_digest(copied: dict[str, Any]) -> None:
    source = read_batches("mysql", copied["mysql"])
    want = checked(source)
    assert want.rows == len(ROWS)

    mysql = read_batches("mysql", copied["mysql_copy"])
    assert checked(mysql) == want, differing(mysql, source)

    pg = read_batches("postgres", copied["pg"].params(copied["schema"], table="copy", split_pk="id"))
    assert checked(pg) == want, differing(pg, source)

    parquet = read_batches("file", {"path": copied["parquet"], "format": "parquet"})
    assert checked(parquet, logical={"js": "json"}) == want  # parquet holds JSON as its text
    assert checked(parquet) != want  # which its reader gives as a string

    declared = [{"name": c, "type": t} for c, t in TYPES.items()]
    jsonl = read_batches("file", {"path": copied["jsonl"], "format": "jsonl", "columns": declared})
    # jsonl has one null: the JSON null of row 5 reads back as SQL NULL; with the JSON null taken as NULL on
    # both sides the copies agree, and without, the difference shows.
    assert checked(jsonl, json_null="null") == checked(source, json_null="null")
    assert checked(jsonl) != want

    csv_typed = read_batches("file", {"path": copied["csv"], "format": "csv", "columns": declared})
    assert checked(csv_typed) == want
    # csv read without declared types is text: the caller names them. Its bytes are base64 text, which only
    # the reader of a column declared bytes decodes: that column is left out of both sides.
    csv_text = read_batches("file", {"path": copied["csv"], "format": "csv"})
    assert {str(f.type) for b in csv_text for f in b.schema} <= {"string", "large_string"}
    texts = [c for c in COLUMNS if c != "bl"]
    assert digest(csv_text, texts, logical={c: TYPES[c] for c in texts}) == digest(source, texts)
    assert digest(csv_text, texts) != digest(source, texts)

    sqlite = read_batches("sqlite", {"path": copied["sqlite"], "table": "t"})
    assert sum(b.num_rows for b in sqlite) == len(ROWS) - 1  # the unsigned beyond 2**63 - 1 rejected
    kept = without_id(source, TOO_BIG_FOR_SQLITE)
    # The sqlite store makes decimal and json columns TEXT (their text kept exactly), which read back as strings.
    as_text = {"d2": "decimal", "js": "json"}
    assert checked(sqlite, logical=as_text) == checked(kept), differing(sqlite, kept, logical=as_text)
    assert checked(sqlite, logical=as_text) != want
    assert checked(sqlite) != checked(kept)


def test_a_changed_copy_gives_another_digest(copied: dict[str, Any]) -> None:
    """Each change issue 39 lists, made in a copy, changes its digest; undone, the digest is the source's again."""
    want = checked(read_batches("mysql", copied["mysql"]))
    pg, schema = copied["pg"], copied["schema"]
    conn = pg.connect()
    table = f"{qi(schema)}.copy"
    changes = [  # (change, undo)
        (f"UPDATE {table} SET d2 = 12345678.91 WHERE id = 1", f"UPDATE {table} SET d2 = 12345678.90 WHERE id = 1"),
        (f"UPDATE {table} SET s = '' WHERE id = 3", f"UPDATE {table} SET s = NULL WHERE id = 3"),
        (f"UPDATE {table} SET s = NULL WHERE id = 2", f"UPDATE {table} SET s = '' WHERE id = 2"),
        (f"UPDATE {table} SET dt = date_trunc('second', dt) WHERE id = 1",
         f"UPDATE {table} SET dt = '2024-01-02 03:04:05.123456' WHERE id = 1"),
        (f"UPDATE {table} SET db = 0.30000000000000009 WHERE id = 5",  # the double after 0.30000000000000004
         f"UPDATE {table} SET db = 0.30000000000000004 WHERE id = 5"),
        (f"INSERT INTO {table} SELECT * FROM {table} WHERE id = 2", f"DELETE FROM {table} WHERE ctid IN "
         f"(SELECT max(ctid) FROM {table} WHERE id = 2)"),
    ]
    try:
        for change, undo in changes:
            pg_execute(conn, change)
            got = checked(read_batches("postgres", pg.params(schema, table="copy")))
            assert got != want, change
            pg_execute(conn, undo)
        assert checked(read_batches("postgres", pg.params(schema, table="copy"))) == want
    finally:
        conn.close()

    lite = sqlite3.connect(copied["sqlite"])
    with lite:
        lite.execute("DELETE FROM t WHERE id = 4")
    lite.close()
    source = read_batches("mysql", copied["mysql"])
    back = checked(read_batches("sqlite", {"path": copied["sqlite"], "table": "t"}), logical={"d2": "decimal",
                                                                                               "js": "json"})
    assert back != checked(without_id(source, TOO_BIG_FOR_SQLITE))
    assert back == checked(without_id(without_id(source, TOO_BIG_FOR_SQLITE), 4))

    parquet = pq.read_table(copied["parquet"])  # a plain pyarrow read of the files compares too
    assert digest([parquet], COLUMNS, logical={"js": "json"}) == want

    declared = [{"name": c, "type": t} for c, t in TYPES.items()]
    edits = (("csv", "100.50", "100.51"), ("jsonl", "2024-06-01T12:00:00.000001", "2024-06-01T12:00:00"))
    for store, old, new in edits:  # a value changed, a timestamp's microseconds truncated
        part = next(p for p in Path(copied[store]).rglob("*") if p.is_file() and old.encode() in p.read_bytes())
        text = part.read_text(encoding="utf-8")
        params = {"path": copied[store], "format": store, "columns": declared}
        nulls: JsonNull = "null" if store == "jsonl" else "value"
        assert checked(read_batches("file", params), json_null=nulls) == checked(source, json_null=nulls)
        part.write_text(text.replace(old, new), encoding="utf-8")
        assert checked(read_batches("file", params), json_null=nulls) != checked(source, json_null=nulls), store

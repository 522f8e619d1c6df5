"""The postgres destination's binary COPY against the real PostgreSQL: every type it encodes lands exactly as
the text path lands it, bad rows are rejected with their reasons, and a target type it does not encode (or
a value beyond an int column's range) goes through text.

Each test works in a schema of its own (``wh_<uuid>`` of the database ``test``), dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.pg_helpers import PgServer, fresh_schema, pg_execute, qi
from tests.plugin_helpers import parse, write_ctx
from wormhole.plugins import registry
from wormhole.plugins.base import Column, Rejected, Row, Schema
from wormhole.plugins.batch import as_batch
from wormhole.plugins.postgres.options import PostgresWriterOptions

pytestmark = pytest.mark.postgres

SINK = registry.get("postgres").sink
assert SINK is not None

TYPES = [("id", "int", "bigint PRIMARY KEY"), ("i2", "int", "smallint"), ("i4", "int", "integer"),
         ("i8", "int", "bigint"), ("f", "float", "double precision"), ("b", "bool", "boolean"),
         ("d", "date", "date"), ("ts", "datetime", "timestamp(6)"), ("s", "string", "text"),
         ("v", "string", "varchar(20)"), ("c", "string", "char(3)"), ("bt", "bytes", "bytea"),
         ("n0", "decimal(18,0)", "numeric(18,0)"), ("n1", "decimal(5,1)", "numeric(5,1)"),
         ("n2", "decimal(12,2)", "numeric(12,2)"), ("n5", "decimal(15,5)", "numeric(15,5)"),
         ("n18", "decimal(18,18)", "numeric"), ("j", "json", "jsonb"), ("js", "json", "json"),
         ("sj", "string", "jsonb")]
COLUMNS = {
    "i2": [-32768, 32767, 0, -1, 1],
    "i4": [-2147483648, 2147483647, 0, 42, -42],
    "i8": [-9223372036854775808, 9223372036854775807, 0, 1, -1],
    "f": [-0.0, float("nan"), float("inf"), float("-inf"), 5e-324, 2.2250738585072014e-308,
          1.7976931348623157e308, 0.1],
    "b": [True, False],
    "d": [date(1, 1, 1), date(9999, 12, 31), date(2000, 1, 1), date(1970, 1, 1), date(1999, 12, 31)],
    "ts": [datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999), datetime(2024, 2, 29, 12, 34, 56, 789012),
           datetime(1969, 12, 31, 23, 59, 59, 999999), datetime(2000, 1, 1)],
    "s": ["", "héllo ☃ 😀", "tab\tnew\nline\\back\r", "x" * 300],
    "v": ["", "ünïcødé", "a\\b"],
    "c": ["ab", "", "xyz"],
    "bt": [bytes(range(256)), b"", b"\x00", b"\\x"],
    "n0": [Decimal("999999999999999999"), Decimal("-999999999999999999"), Decimal(0), Decimal(7)],
    "n1": [Decimal("9999.9"), Decimal("-0.1"), Decimal("0.0"), Decimal("1000.0")],
    "n2": [Decimal("1234567890.12"), Decimal("-0.01"), Decimal("0.00"), Decimal("-9999999999.99"), Decimal("1.50")],
    "n5": [Decimal("1234567890.12345"), Decimal("-0.00001"), Decimal("0.00000"), Decimal("10000.00001")],
    "n18": [Decimal("0.123456789012345678"), Decimal("-0.000000000000000001"), Decimal(0),
            Decimal("-0.999999999999999999")],
    "j": [{"a": [1, 2.5, None, "x"]}, [], "s", 0],
    "js": [{"k": "v"}, [1, {"z": None}]],
    "sj": ['{"b": 1, "a": [true]}', "[]", '"x"'],
}
ROWS = 9  # rows 0-7 take the columns' values in turn; the last is NULL in every column but the key


def schema() -> Schema:
    cols = []
    for name, kind, _ in TYPES:
        if kind.startswith("decimal"):
            precision, scale = kind[8:-1].split(",")
            cols.append(Column(name, "decimal", precision=int(precision), scale=int(scale)))
        else:
            cols.append(Column(name, kind, nullable=name != "id"))
    return Schema(tuple(cols))


def every_row() -> list[Row]:
    out: list[Row] = []
    for r in range(ROWS):
        values = [COLUMNS[name][r % len(COLUMNS[name])] if r < ROWS - 1 else None for name, _, _ in TYPES[1:]]
        out.append((r, *values))
    return out


@pytest.fixture(name="pg")
def fixture_pg() -> Iterator[tuple[PgServer, Any, str]]:
    yield from fresh_schema("bin")


def load(pg: tuple[PgServer, Any, str], table: str, columns: Schema, batch: list[Row], *, text: bool = False,
         **params: Any) -> tuple[list[Rejected], str]:
    """Write ``batch`` into ``table`` (binary when the destination chooses it, text when ``text``): the rows
    rejected and the COPY format the destination logged at prepare ("+text" when a batch went as text)."""
    server, _, schema_name = pg
    options, problems = parse(PostgresWriterOptions, server.params(schema_name, table=table, **params,
                                                                    copy_format="text" if text else "auto"))
    assert not problems, problems.items
    ctx = write_ctx(columns)
    with capture_logs() as logs:
        periphery = SINK.periphery(options, ctx)
        periphery.prepare()
        writer = SINK.writer(options, ctx, periphery, 0)
        writer.open()
        try:
            result = writer.write(as_batch(batch))
        finally:
            writer.close()
        periphery.commit()
        periphery.release()
    (chosen,) = [e["format"] for e in logs if e["event"] == "writer.copy_format"]
    fallback = any(e["event"] == "writer.text_batch" for e in logs)
    return list(result.rejected), chosen + ("+text" if fallback else "")


def create(pg: tuple[PgServer, Any, str], table: str, columns: str) -> None:
    pg_execute(pg[1], f"CREATE TABLE {qi(pg[2])}.{qi(table)} ({columns})")


def as_text(pg: tuple[PgServer, Any, str], table: str) -> list[tuple[Any, ...]]:
    """Every column as PostgreSQL's own text of it (float8 with all its digits), key order."""
    _, conn, schema_name = pg
    pg_execute(conn, "SET extra_float_digits = 3")
    cols = ", ".join(f"{qi(name)}::text" for name, _, _ in TYPES)
    return pg_execute(conn, f"SELECT {cols} FROM {qi(schema_name)}.{qi(table)} ORDER BY 1")


def test_every_type_lands_alike_through_binary_and_text(pg: Any) -> None:
    columns = ", ".join(f"{qi(name)} {sql}" for name, _, sql in TYPES)
    create(pg, "bin", columns)
    create(pg, "txt", columns)
    batch = every_row()
    assert load(pg, "bin", schema(), batch) == ([], "binary")
    assert load(pg, "txt", schema(), batch, text=True) == ([], "text")
    got, want = as_text(pg, "bin"), as_text(pg, "txt")
    assert len(got) == ROWS
    assert got == want
    assert got[-1][1:] == (None,) * (len(TYPES) - 1)  # NULL in every column
    native = pg_execute(pg[1], f"SELECT i8, f, d, ts, s, bt, n2, n18, c FROM {qi(pg[2])}.bin ORDER BY id")
    assert native[0][:4] == (-9223372036854775808, -0.0, date(1, 1, 1), datetime(1, 1, 1))
    assert str(native[0][1]) == "-0.0" and native[4][1] == 5e-324
    assert native[1][3] == datetime(9999, 12, 31, 23, 59, 59, 999999) and native[1][2] == date(9999, 12, 31)
    assert native[1][4] == "héllo ☃ 😀" and native[0][5] == bytes(range(256)) and native[0][4] == ""
    assert native[3][6] == Decimal("-9999999999.99") and native[1][7] == Decimal("-0.000000000000000001")
    assert native[0][8] == "ab "  # char(3) pads, as from text


def test_a_string_holding_nul_is_still_rejected_before_the_copy(pg: Any) -> None:
    create(pg, "t", "id int, s text")
    columns = Schema((Column("id", "int"), Column("s", "string")))
    rejected, chosen = load(pg, "t", columns, [(1, "a"), (2, "x\x00y"), (3, "c")])
    assert chosen == "binary"
    assert [(r.row, r.reason) for r in rejected] == [
        ((2, "x\x00y"), "column s: a string holding NUL (\\x00), which PostgreSQL text cannot store")]
    assert pg_execute(pg[1], f"SELECT id, s FROM {qi(pg[2])}.t ORDER BY id") == [(1, "a"), (3, "c")]


def test_an_int_beyond_its_column_is_rejected_as_the_text_path_rejects_it(pg: Any) -> None:
    columns = Schema((Column("id", "int"), Column("small", "int")))
    batch = [(1, 5), (2, 40000), (3, -7), (4, -32769)]
    reasons = []
    for table, text in (("bin", False), ("txt", True)):
        create(pg, table, "id int, small smallint")
        rejected, chosen = load(pg, table, columns, batch, text=text)
        assert chosen == ("text" if text else "binary+text")  # the batch beyond int2 went as text
        reasons.append([(r.row, r.reason) for r in rejected])
        assert pg_execute(pg[1], f"SELECT * FROM {qi(pg[2])}.{table} ORDER BY id") == [(1, 5), (3, -7)]
    assert reasons[0] == reasons[1]
    assert reasons[0][0] == ((2, 40000), '(22003) value "40000" is out of range for type smallint (column small)')


def test_an_int_into_boolean_is_binary_for_0_and_1_and_rejected_as_text_rejects_it_beyond(pg: Any) -> None:
    """MySQL's TINYINT(1) (an int here) into a boolean column: 0 and 1 are binary; a batch holding 2 goes as
    text, whose boolean input rejects that row."""
    columns = Schema((Column("id", "int"), Column("flag", "int")))
    create(pg, "flags", "id int, flag boolean")
    assert load(pg, "flags", columns, [(1, 1), (2, 0), (3, None)]) == ([], "binary")
    assert pg_execute(pg[1], f"SELECT * FROM {qi(pg[2])}.flags ORDER BY id") == [(1, True), (2, False), (3, None)]
    batch = [(1, 1), (2, 2), (3, 0), (4, -1)]
    reasons = []
    for table, text in (("bin", False), ("txt", True)):
        create(pg, table, "id int, flag boolean")
        rejected, chosen = load(pg, table, columns, batch, text=text)
        assert chosen == ("text" if text else "binary+text")
        reasons.append([(r.row, r.reason) for r in rejected])
        assert pg_execute(pg[1], f"SELECT * FROM {qi(pg[2])}.{table} ORDER BY id") == [(1, True), (3, False)]
    assert reasons[0] == reasons[1]
    assert [row for row, _ in reasons[0]] == [(2, 2), (4, -1)]
    assert reasons[0][0][1].startswith('(22P02) invalid input syntax for type boolean: "2"')


def test_bad_rows_in_binary_are_rejected_with_reasons_and_the_rest_loaded(pg: Any) -> None:
    create(pg, "t", "id int PRIMARY KEY, name varchar(5) NOT NULL")
    pg_execute(pg[1], f"INSERT INTO {qi(pg[2])}.t VALUES (9, 'old')")
    columns = Schema((Column("id", "int"), Column("name", "string")))
    batch = [(1, "a"), (2, "toolong"), (3, None), (9, "dup"), (5, "e"), (1, "dup2"), (6, "f")]
    rejected, chosen = load(pg, "t", columns, batch, batch_size=3)
    assert chosen == "binary"
    reasons = {r.row[0]: r.reason for r in rejected}
    assert sorted(reasons) == [1, 2, 3, 9]
    assert reasons[2] == "(22001) value too long for type character varying(5) (column name)"
    assert reasons[3].startswith('(23502) null value in column "name"')
    assert reasons[9].startswith("(23505) duplicate key value") and "Key (id)=(9) already exists" in reasons[9]
    assert [r.row for r in rejected if r.row[0] == 1] == [(1, "dup2")]
    assert pg_execute(pg[1], f"SELECT * FROM {qi(pg[2])}.t ORDER BY id") == [(1, "a"), (5, "e"), (6, "f"), (9, "old")]


@pytest.mark.parametrize("target", ["uuid", "numeric(10,2)", "real", "timestamptz"])
def test_a_target_type_binary_does_not_encode_sends_the_destination_to_text(pg: Any, target: str) -> None:
    create(pg, "t", f"id int, x {target}")
    kind, value = {"uuid": ("string", "00000000-0000-0000-0000-000000000001"), "numeric(10,2)": ("int", 12),
                   "real": ("float", 0.5), "timestamptz": ("datetime", datetime(2024, 1, 2, 3, 4, 5))}[target]
    rejected, chosen = load(pg, "t", Schema((Column("id", "int"), Column("x", kind))), [(1, value), (2, None)])
    assert (rejected, chosen) == ([], "text")
    assert pg_execute(pg[1], f"SELECT count(*), count(x) FROM {qi(pg[2])}.t") == [(2, 1)]

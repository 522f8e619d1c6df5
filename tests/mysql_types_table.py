"""The awkward-types MySQL table: 33 columns, every integer width at its limits (unsigned too),
DECIMAL(65,30), emoji and control characters, a 70,000-character MEDIUMTEXT, every byte value, zero and
partial-zero dates, TIME at +-838 h, YEAR 1901/2155/0, BIT(10) = 1023, JSON, and a row of NULLs.

Shared by the mysql store's round-trip test (tests/integration/test_mysql_store.py) and the Spark
type-equality test (tests/spark/test_spark_types.py), so both engines are held to the same rows.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.mysql_helpers import Databases, Server, db_of, execute, q
from tests.pg_helpers import PgServer
from tests.spark_helpers import run_task
from wormhole.config import EngineConf

TYPES_DDL = """CREATE TABLE `{name}` (
  id INT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED,
  i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
  dec65 DECIMAL(65,30), d2 DECIMAL(10,2), fl FLOAT, db DOUBLE,
  c CHAR(10), vc VARCHAR(300), tx TEXT, mt MEDIUMTEXT,
  bn BINARY(4), vb VARBINARY(300), bl BLOB,
  dt DATE, dtm DATETIME(6), dt0 DATETIME, ts TIMESTAMP(3) NULL, tm TIME(6), yr YEAR,
  js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10), b1 BIT(1)
) CHARACTER SET utf8mb4"""

TYPE_ROWS: list[tuple[Any, ...]] = [
    (1, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807,
     18446744073709551615, "99999999999999999999999999999999999.999999999999999999999999999999", "12345678.90",
     1.5, 1.7976931348623157e308, "abc", "😀🎉 ünïcödé 𝄞", "tab\there\nnew\\back \x00nul 'q' \"dq\" \\N",
     "x" * 70000, b"\x00\x01\xff\x00", bytes(range(256))[:300], b"\t\n\\N\x00", "2024-02-29",
     "2024-01-02 03:04:05.123456", "9999-12-31 23:59:59", "2038-01-19 03:14:07.999", "838:59:59.000000", 2155,
     '{"a": [1, 2.5, "x😀", 12345678901234567890], "b": null, "c": {"d": true}}', "c", "x,z", 1023, 1),
    (2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
     "-99999999999999999999999999999999999.999999999999999999999999999999", "-0.01",
     -1.5, -2.2250738585072014e-308, "", "", "", "", b"\x00\x00\x00\x00", b"", b"", "1000-01-01",
     "1000-01-01 00:00:00.000000", "1000-01-01 00:00:00", "1970-01-01 00:00:01.000", "-838:59:59.000000", 1901,
     "[]", "a", "", 0, 0),
    (3, *([None] * 32)),
    (4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "0.000000000000000000000000000001", "0.00", 0.0, 0.1, " pad", "a\rb", "\\",
     "", b"ab\x00\x00", b"\xf0\x9f\x98", b"\xff" * 1000, "0000-00-00", "0000-00-00 00:00:00.000000",
     "2024-00-10 00:00:00", None, "00:00:00.000001", 0, '"just a string"', "b", "x,y,z", 512, 1),
]

TYPE_COLUMNS: list[str] = ["id", "ti", "tu", "si", "su", "mi", "mu", "i", "iu", "bi", "bu", "dec65", "d2", "fl", "db",
                           "c", "vc", "tx", "mt", "bn", "vb", "bl", "dt", "dtm", "dt0", "ts", "tm", "yr", "js", "en",
                           "st", "bt", "b1"]
"""The columns of TYPES_DDL in order."""


# ---------------------------------------------------------------------------------------------
def fill_types_table(url: str, *copies: str, rows: Sequence[tuple[Any, ...]] = TYPE_ROWS, strict: bool = False,
                     then: Sequence[str] = ()) -> None:
    """In the database of the mysql:// ``url``: table ``src`` (TYPES_DDL) holding ``rows``, empty tables
    ``copies`` of the same shape, then the statements ``then``, in a UTC session (strict with ``strict``)."""
    conn = Server.from_url(url).connect(db_of(url))
    try:
        for name in ("src", *copies):
            execute(conn, TYPES_DDL.format(name=name))
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'" + (", sql_mode = 'STRICT_ALL_TABLES'" if strict else ""))
            cur.executemany(f"INSERT INTO src VALUES ({', '.join(['%s'] * len(TYPE_COLUMNS))})", rows)
            for statement in then:
                cur.execute(statement)
    finally:
        conn.close()


# The type round-trip table (docs/manual/types.md, "Type round trip"): one awkward value per row, so a store that
# refuses a row refuses that value only; each store's copy is read back into MySQL by wormhole and
# compared with the source cell by cell, exactly (tests/integration/test_type_table.py: local mode;
# tests/spark/test_spark_types.py: Spark mode).

ROUNDTRIP_COLUMNS: dict[str, tuple[str, str, str]] = {
    # column: (MySQL type, logical type the files are read back as, the cell's exact text in SQL)
    "fl": ("FLOAT", "float", "CAST(CAST({c} AS DOUBLE) AS CHAR)"),
    "db": ("DOUBLE", "float", "CAST({c} AS CHAR)"),
    "dec": ("DECIMAL(65,30)", "decimal", "CAST({c} AS CHAR)"),
    "d18": ("DECIMAL(38,18)", "decimal", "CAST({c} AS CHAR)"),
    "bu": ("BIGINT UNSIGNED", "int", "CAST({c} AS CHAR)"),
    "bt": ("BIT(10)", "int", "CAST({c} + 0 AS CHAR)"),
    "b64": ("BIT(64)", "int", "CAST({c} + 0 AS CHAR)"),
    "zd": ("DATE", "date", "CAST({c} AS CHAR)"),
    "tm": ("TIME(6)", "string", "CAST({c} AS CHAR)"),
    "js": ("JSON", "json", "JSON_COMPACT({c})"),
    "bn": ("VARBINARY(16)", "bytes", "HEX({c})"),
    "u8": ("VARCHAR(40)", "string", "HEX({c})"),
    "es": ("VARCHAR(10)", "string", "HEX({c})"),
}
ROUNDTRIP_LABELS: dict[str, str] = {
    "fl": "FLOAT", "db": "DOUBLE", "dec": "DECIMAL(65,30)", "d18": "DECIMAL(38,18)", "bu": "BIGINT UNSIGNED",
    "bt": "BIT(10)", "b64": "BIT(64)", "zd": "DATE (zero dates)", "tm": "TIME beyond 24 h",
    "js": "JSON (JSON null, exact numbers too)",
    "bn": "VARBINARY", "u8": "VARCHAR utf8mb4", "es": "'' and NULL",
}
ROUNDTRIP_VALUES: list[tuple[str, Any]] = [
    ("fl", 16777216.0), ("fl", 123456.7890625), ("fl", 3.4028234663852886e38), ("fl", -0.0), ("fl", 1.1),
    ("db", 1.7976931348623157e308), ("db", 0.1), ("db", -2.2250738585072014e-308),
    ("dec", "123456789012345678901234567890.123456789012345678901234567891"),
    ("dec", "-0.000000000000000000000000000001"),
    ("d18", "0"), ("d18", "-12345678901234567890.000000000000000001"),
    ("bu", 18446744073709551615), ("bu", 9223372036854775808), ("bu", 0),
    ("bt", 1023), ("bt", 0),
    ("b64", 18446744073709551615), ("b64", 9223372036854775808),
    ("zd", "0000-00-00"), ("zd", "2024-00-10"), ("zd", "2024-02-29"),
    ("tm", "838:59:59.000000"), ("tm", "-838:59:59.000000"), ("tm", "00:00:00.000001"),
    ("js", '{"a": null, "b": [1, 2.5, "x\U0001f600"]}'), ("js", "null"), ("js", '"text"'), ("js", "[]"),
    ("js", '{"b": 1, "a": 2}'), ("js", "12345678901234567890.123456789"),
    ("js", "0.1000000000000000055511151231257827"), ("js", '{"price": 0.10000000000000000001}'),
    ("bn", b"\x00\xff\t\n\\N"), ("bn", b""),
    ("u8", "\U0001f600 \U0001d11e \u00fc \u4e2d"), ("u8", "tab\there \\N"),
    ("es", ""), ("es", " "),
]
"""(column, value): row ``id`` = position + 1 holds the value, every other column NULL; the last row
(:data:`NULL_ROW`) is NULL throughout."""
NULL_ROW = len(ROUNDTRIP_VALUES) + 1


def roundtrip_ddl(table: str) -> str:
    columns = ", ".join(f"`{c}` {t}" for c, (t, _, _) in ROUNDTRIP_COLUMNS.items())
    return f"CREATE TABLE `{table}` (id INT PRIMARY KEY, {columns}) CHARACTER SET utf8mb4"


def roundtrip_rows() -> list[tuple[Any, ...]]:
    names = list(ROUNDTRIP_COLUMNS)
    rows = [tuple([i] + [value if c == name else None for c in names])
            for i, (name, value) in enumerate(ROUNDTRIP_VALUES, start=1)]
    return [*rows, tuple([NULL_ROW] + [None] * len(names))]


def roundtrip_cells(conn: Any, db: str, table: str) -> dict[int, dict[str, str | None]]:
    """Per row, per column: the exact text of the cell (None for NULL)."""
    exprs = ", ".join(sql.format(c=f"`{c}`") for c, (_, _, sql) in ROUNDTRIP_COLUMNS.items())
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, {exprs} FROM `{db}`.`{table}` ORDER BY id")
        found = cur.fetchall()
    return {int(r[0]): dict(zip(ROUNDTRIP_COLUMNS, r[1:], strict=True)) for r in found}


Cells = dict[int, dict[str, str | None]]


def roundtrip_outcome(source: Cells, copy: Cells) -> dict[str, str]:
    """Per column: ``exact``, or what happened to which values (rejected rows, changed cells)."""
    out: dict[str, list[str]] = {c: [] for c in ROUNDTRIP_COLUMNS}
    for i, (name, _) in enumerate(ROUNDTRIP_VALUES, start=1):
        want = source[i][name]
        if i not in copy:
            out[name].append(f"{want} rejected")
        elif copy[i][name] != want:
            got = copy[i][name]
            out[name].append(f"{want} -> {'NULL' if got is None else got}")
    for name in ROUNDTRIP_COLUMNS:
        got = copy.get(NULL_ROW, {}).get(name, "row rejected")
        if got is not None:
            out[name].append(f"NULL -> {got}")
    return {c: "exact" if not problems else "; ".join(problems) for c, problems in out.items()}


def roundtrip_markdown(outcomes: dict[str, dict[str, str]]) -> str:
    """The manual's table: a row per source type, a column per store."""
    stores = list(outcomes)
    lines = ["| MySQL source type | " + " | ".join(stores) + " |", "|---" * (len(stores) + 1) + "|"]
    for c in ROUNDTRIP_COLUMNS:
        cells = [outcomes[s][c].replace("|", "\\|") for s in stores]
        lines.append(f"| {ROUNDTRIP_LABELS[c]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


ROUNDTRIP_STORES = ("mysql", "sqlite", "csv", "jsonl", "parquet")

POSTGRES_INEXACT: dict[str, str] = {
    # A PostgreSQL date has no zero or partial date: the postgres destination rejects those rows (naming
    # the column) rather than store another date.
    "zd": "0000-00-00 rejected; 2024-00-10 rejected",
    # create_table makes a MySQL JSON column jsonb, which keeps the JSON value, not its text: its keys come
    # back in jsonb's order (shorter keys first), which MariaDB, keeping JSON as text, compares unequal.
    "js": '{"b":1,"a":2} -> {"a":2,"b":1}',
}
"""The postgres store's round trip (MySQL -> a table create_table makes -> MySQL), in both engines: every
other column, every value and NULL, is exact."""


def _store_destination(store: str, root: Path, server: Server, db: str, pg: tuple[PgServer, str] | None,
                       ) -> dict[str, Any]:
    if store == "mysql":
        return {"id": store, "plugin": "mysql", "params": server.params(db, table="back_mysql")}
    if store == "postgres":  # the PostgreSQL types are the ones create_table chooses for the MySQL columns
        assert pg is not None, "the postgres store needs a PostgreSQL server and schema"
        return {"id": store, "plugin": "postgres", "params": pg[0].params(pg[1], table="copy", create_table=True)}
    if store == "sqlite":
        return {"id": store, "plugin": "sqlite", "params": {"path": str(root / "copy.sqlite"), "table": "t"}}
    if store == "hive":
        return {"id": store, "plugin": "hive", "params": {"table": f"default.{db}_copy", "create": True}}
    return {"id": store, "plugin": "file", "params": {"path": str(root / store), "format": store}}


def _back_source(store: str, root: Path, db: str, pg: tuple[PgServer, str] | None) -> dict[str, Any]:
    if store == "postgres":
        assert pg is not None
        return {"plugin": "postgres", "params": pg[0].params(pg[1], table="copy", split_pk="id")}
    if store == "hive":
        return {"plugin": "hive", "params": {"table": f"default.{db}_copy"}}
    if store == "sqlite":
        return {"plugin": "sqlite", "params": {"path": str(root / "copy.sqlite"), "table": "t"}}
    params: dict[str, Any] = {"path": str(root / store), "format": store}
    if store != "parquet":  # csv and jsonl are read back as the source's logical types
        params["columns"] = [{"name": "id", "type": "int"}] + [
            {"name": c, "type": t} for c, (_, t, _) in ROUNDTRIP_COLUMNS.items()]
    return {"plugin": "file", "params": params}


def measure_roundtrip(conf: EngineConf, engine: str, server: Server, dbs: Databases, root: Path,
                      stores: tuple[str, ...] = ROUNDTRIP_STORES, pg: tuple[PgServer, str] | None = None,
                      ) -> dict[str, dict[str, str]]:
    """Copy the round-trip table to ``stores`` in ``engine``, read each copy back into MySQL (local
    mode; hive in Spark mode, its only one), and say per store and column what arrived
    (:func:`roundtrip_outcome`). ``pg`` (a server and a fresh schema) is where the postgres store's copy goes."""
    admin = server.connect()
    db = dbs.create("roundtrip")
    for table in ("src", *(f"back_{s}" for s in stores)):
        execute(admin, f"USE {q(db)}")
        execute(admin, roundtrip_ddl(table))
    execute(admin, "SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES'")
    marks = ", ".join(["%s"] * (len(ROUNDTRIP_COLUMNS) + 1))
    with admin.cursor() as cur:
        cur.executemany(f"INSERT INTO {q(db)}.src VALUES ({marks})", roundtrip_rows())
    destinations = [_store_destination(s, root, server, db, pg) for s in stores]
    settings = {"speed": {"channel": 2}, "error_limit": {"record": 100}}
    result, _ = run_task(conf, {"source": {"plugin": "mysql", "params": server.params(db, table="src", split_pk="id")},
                                "destinations": destinations, "settings": {**settings, "engine": engine}})
    assert result.exit_code in (0, 201), result.result
    for store in stores[1:]:
        back, _ = run_task(conf, {"source": _back_source(store, root, db, pg), "destinations": [
            {"id": "back", "plugin": "mysql", "params": server.params(db, table=f"back_{store}")}],
            "settings": {**settings, "engine": "spark" if store == "hive" else "local"}})
        assert back.exit_code in (0, 201), (store, back.result)
    source = roundtrip_cells(admin, db, "src")
    assert len(source) == NULL_ROW
    outcomes = {s: roundtrip_outcome(source, roundtrip_cells(admin, db, f"back_{s}")) for s in stores}
    admin.close()
    return outcomes


TYPES_DOC = Path(__file__).resolve().parents[1] / "docs" / "manual" / "types.md"
WRITE_ENV = "WORMHOLE_WRITE_TYPE_TABLE"


def check_manual_table(name: str, table: str) -> None:
    """The manual's table ``name`` (docs/manual/types.md, between ``<!-- type-table:NAME -->`` and
    ``<!-- /type-table:NAME -->``) must be what the test measured; with WORMHOLE_WRITE_TYPE_TABLE=1 the test
    writes it there."""
    text = TYPES_DOC.read_text(encoding="utf-8")
    start, end = f"<!-- type-table:{name} -->\n", f"\n<!-- /type-table:{name} -->"
    assert start in text and end in text, f"{TYPES_DOC.name} has no {start.strip()} section"
    before, rest = text.split(start, 1)
    current, after = rest.split(end, 1)
    if os.environ.get(WRITE_ENV) == "1":
        TYPES_DOC.write_text(before + start + table + end + after, encoding="utf-8")
        return
    assert current == table, (f"{TYPES_DOC.name}'s {name} type table is not what the test measured (rerun it with "
                              f"{WRITE_ENV}=1 if the change is meant):\n{table}")

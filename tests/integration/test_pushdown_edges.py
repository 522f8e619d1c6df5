"""Issue 23, items 2 and 6-9, each as a named case on a MySQL table of edge values (BIGINT UNSIGNED max,
BIGINT min/max, FLOAT, DECIMAL(65,30), zero and partial dates): wormhole's own evaluation (on the
values its reader gives) keeps the right rows, the source's SQL keeps the same ones where the filter is
pushed, and it is pushed only where MySQL computes it exactly. Then the real engine runs a few of them
under ``pushup: off`` and ``static``: both write the same right rows, and a destination's own copy of the
filter (always in wormhole) keeps them all; every task derives ``d * 1``, which must keep all 60 digits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MYSQL_URL, Workspace, mysql_or_skip, run_task
from tests.mysql_helpers import Databases, Server, create_table, execute
from tests.pushdown_helpers import evaluated_and_pushed
from wormhole.transform.sqlgen import compile_sql

pytestmark = pytest.mark.mysql

BIG = "123456789012345678901234567890.123456789012345678901234567891"
TINY = "0.000000000000000000000000000001"
ROWS = [  # id, u, v, i, f, d, zd, zt
    (1, 1, 2, 2**63 - 1, 0.5, TINY, "0000-00-00", "0000-00-00 00:00:00"),
    (2, 2**64 - 1, 1, -(2**63), 1.5, BIG, "2024-01-05", "2024-00-10 10:00:00"),
    (3, 5, 5, 0, -2.25, "-0", "2024-00-10", "2024-01-05 10:00:00"),
    (4, None, None, None, None, None, None, None),
]
CASES = [  # (item, filter, the ids it keeps, pushed under static)
    ("6 float =", "f = 0.5", [1], False),
    ("6 float >", "f > 0.5", [2], False),
    ("6 float IN", "f IN (0.5, -2.25)", [1, 3], False),
    ("7 unsigned minus", "u - v > 1", [2], True),
    ("7 plus", "i + 1000 > 0", [1, 3], True),
    ("7 abs", "abs(i) > 0", [1, 2], True),
    ("7 negate", "- i > 0", [2], True),
    ("7 times", "i * 2 > 0", [1], True),
    ("7 unsigned times", "u * u > u", [2, 3], True),
    ("7 mod", "u % (0 - v) = 0", [2, 3], True),
    ("8 sum", "d + 1 > 1", [1, 2], False),
    ("8 product", "d * d > 0", [1, 2], False),
    ("8 compare", "d > 0", [1, 2], True),
    ("9 date compare", "zd >= DATE '2000-01-01'", [2], True),
    ("9 date below", "zd < DATE '2030-01-01'", [2], True),
    ("9 year", "year(zd) = 2024", [2], True),
    ("9 cast", "cast(zd as string) IS NULL", [1, 3, 4], True),
    ("9 coalesce", "coalesce(zd, DATE '1999-01-01') < DATE '2000-01-01'", [1, 3, 4], True),
    ("9 datetime", "zt < TIMESTAMP '2030-01-01 00:00:00'", [3], True),
]


@pytest.fixture(scope="module")
def source() -> Iterator[dict[str, Any]]:
    mysql_or_skip().close()
    server = Server.from_url(MYSQL_URL)
    admin = server.connect()
    dbs = Databases(server, admin)
    db = dbs.create("edges")
    create_table(admin, db, "t", "id BIGINT PRIMARY KEY, u BIGINT UNSIGNED, v BIGINT UNSIGNED, i BIGINT, f FLOAT, "
                                 "d DECIMAL(65, 30), zd DATE, zt DATETIME")
    execute(admin, "SET SESSION sql_mode = ''")  # zero dates go in as they are
    for row in ROWS:
        execute(admin, f"INSERT INTO `{db}`.t VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", row)
    yield server.params(db, table="t", split_pk="id")
    dbs.drop_all()


def _kept(path: Path) -> list[tuple[int, Decimal | None]]:
    rows = [json.loads(line) for f in sorted(path.glob("*.jsonl")) for line in f.read_text().splitlines()]
    return sorted((r["id"], None if r["d2"] is None else Decimal(str(r["d2"]))) for r in rows)


class _Read:
    """The rows as the mysql reader gives them (zero dates kept as their text), column-wise."""

    names = ("u", "v", "i", "f", "d", "zd", "zt")

    def __init__(self) -> None:
        self.n = len(ROWS)
        values = [[r[k + 1] for r in ROWS] for k in range(len(self.names))]
        values[4] = [None if v is None else Decimal(v) for v in values[4]]
        values[5] = [v if v is None or v.startswith(("0000", "2024-00")) else date.fromisoformat(v) for v in values[5]]
        values[6] = [v if v is None or v.startswith(("0000", "2024-00")) else datetime.fromisoformat(v)
                     for v in values[6]]
        self.cols = dict(zip(self.names, values, strict=True))

    def get(self, name: str) -> list[Any]:
        return self.cols[name]


SCHEMA = {"u": "int", "v": "int", "i": "int", "f": "float", "d": "decimal", "zd": "date", "zt": "datetime"}


@pytest.mark.parametrize(("item", "text", "ids", "pushed"), CASES, ids=[c[0] for c in CASES])
def test_wormhole_and_the_source_keep_the_same_right_rows(source: dict[str, Any], item: str, text: str,
                                                          ids: list[int], pushed: bool) -> None:
    got, sql = evaluated_and_pushed(text, SCHEMA, _Read(), compile_sql, "mysql", pushed)
    assert [k for k, v in enumerate(got, 1) if v is True] == ids, (item, got)
    if sql is None:
        return
    conn = Server.from_url(MYSQL_URL).connect(source["database"])
    try:
        kept = execute(conn, f"SELECT id FROM t WHERE {sql.render('%s', escape_percent=True)} ORDER BY id",
                       sql.args)
    finally:
        conn.close()
    assert [r[0] for r in kept] == ids, item


ENGINE_CASES = [
    ("6", "f IN (0.5, -2.25)", [1, 3]),
    ("7", "u - v > 1 AND abs(i) > 0 AND i * 2 < 0 AND - i > 0", [2]),
    ("8", "d + 1 > 1 AND d * d > 0", [1, 2]),
    ("9", "zd >= DATE '2000-01-01' OR year(zt) = 2024 OR cast(zd as string) = '0000-00-00'", [2, 3]),
]


@pytest.mark.parametrize(("item", "text", "ids"), ENGINE_CASES, ids=[c[0] for c in ENGINE_CASES])
def test_each_placement_writes_the_same_right_rows(ws: Workspace, source: dict[str, Any], item: str, text: str,
                                                   ids: list[int]) -> None:
    want = [(k, None if ROWS[k - 1][5] is None else Decimal(ROWS[k - 1][5])) for k in ids]
    for mode in ("off", "static"):
        out = ws.root / mode
        spec = {"name": "edges", "source": {"plugin": "mysql", "params": source},
                "transforms": [{"filter": text}, {"derive": {"d2": "d * 1"}}],
                "destinations": [
                    {"id": "a", "plugin": "file", "params": {"path": str(out / "a"), "format": "jsonl"}},
                    {"id": "b", "plugin": "file", "params": {"path": str(out / "b"), "format": "jsonl"},
                     "transforms": [{"filter": text}]}],
                "settings": {"pushup": mode, "engine": "local"}}
        code, task, stderr = run_task(ws, spec)
        assert code == 0, (item, mode, stderr[-2000:])
        assert _kept(out / "a") == want, (item, mode)
        assert _kept(out / "b") == want, (item, mode)
        query = task["result"]["plan"]["transforms"].get("source_query") or {}
        assert (query.get("where") is not None) == (item in ("7", "9") and mode == "static"), (item, mode, query)

"""The shipped examples a user starts from (conf/examples/) run against the real servers, as written.

Only where the example reaches a server changes: its host, port, user and password become the test
server's, and each database it names becomes a fresh database (MariaDB) or schema (PostgreSQL) of its own.
Every other key (tables, loads, write modes, keys, paths) is the file's own, and `.venv/bin/wormhole run`
runs it in a workspace, so the relative paths land there. The README's first MySQL task is run twice:
its guide promises what a re-run does to each destination.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, Workspace
from tests.mysql_helpers import Databases, Server, count, execute, q
from tests.pg_helpers import Schemas, fresh_schemas, pg_execute, qi

pytestmark = [pytest.mark.e2e, pytest.mark.mysql]

EXAMPLES = REPO / "conf" / "examples"
ROWS = [(i, f"customer {i % 7}", Decimal(f"{i}.{i % 100:02d}"), dt.datetime(2026, 1, 1) + dt.timedelta(hours=i))
        for i in range(1, 1001)]
MYSQL_ORDERS = ("id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, amount DECIMAL(12,2), "
                "created_at DATETIME NOT NULL")
PG_ORDERS = "id bigint PRIMARY KEY, customer varchar(40) NOT NULL, amount numeric(12,2), created_at timestamp NOT NULL"


def example(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / name).read_text(encoding="utf-8"))


def rewire(spec: dict[str, Any], mysql: Callable[[str], dict[str, Any]],
           postgres: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The spec with each mysql / postgres store's connection keys replaced by what ``mysql(database)`` /
    ``postgres(database)`` give for the database it names."""
    for store in [spec["source"], *spec["destinations"]]:
        connect = {"mysql": mysql, "postgres": postgres}.get(store["plugin"])
        if connect is not None:
            params = store["params"]
            database = params["database"]
            for key in ("host", "port", "user", "password", "password_env", "database", "schema"):
                params.pop(key, None)
            params.update(connect(database))
    return spec


class Stores:
    """Fresh MariaDB databases and PostgreSQL schemas standing for the databases the examples name."""

    def __init__(self, server: Server, dbs: Databases, schemas: Schemas) -> None:
        self.server, self.dbs, self.schemas = server, dbs, schemas
        self.mysql_dbs: dict[str, str] = {}
        self.pg_schemas: dict[str, str] = {}

    def mysql(self, database: str) -> dict[str, Any]:
        if database not in self.mysql_dbs:
            self.mysql_dbs[database] = self.dbs.create(database)
        return self.server.params(self.mysql_dbs[database])

    def postgres(self, database: str) -> dict[str, Any]:
        if database not in self.pg_schemas:
            self.pg_schemas[database] = self.schemas.create(database)
        return self.schemas.server.params(self.pg_schemas[database])

    def spec(self, name: str) -> dict[str, Any]:
        return rewire(example(name), self.mysql, self.postgres)


@pytest.fixture
def stores(server: Server, dbs: Databases) -> Iterator[Stores]:
    for schemas in fresh_schemas():
        yield Stores(server, dbs, schemas)


def run_example(ws: Workspace, spec: dict[str, Any], name: str) -> dict[str, Any]:
    path = ws.root / name
    path.write_text(json.dumps(spec), encoding="utf-8")
    proc = ws.run("run", str(path), timeout=240)
    task_id = max(int(line.split()[0]) for line in ws.run_here("task", "list", check=True).stdout.splitlines()[1:])
    task = ws.show(task_id)
    assert proc.returncode == 0, (task["result"], proc.stderr[-3000:])
    return task


def mysql_orders(stores: Stores, database: str, *, rows: bool = True) -> str:
    name = stores.mysql_dbs.get(database) or stores.dbs.create(database)
    stores.mysql_dbs[database] = name
    conn = stores.server.connect(name)
    execute(conn, f"CREATE TABLE orders ({MYSQL_ORDERS})")
    if rows:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s)", ROWS)
    conn.close()
    return name


def pg_orders(stores: Stores, database: str) -> str:
    schema = stores.pg_schemas.get(database) or stores.schemas.create(database)
    stores.pg_schemas[database] = schema
    stores.schemas.conn.execute(f"CREATE TABLE {qi(schema)}.orders ({PG_ORDERS})")
    with stores.schemas.conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {qi(schema)}.orders VALUES (%s, %s, %s, %s)", ROWS)
    return schema


def test_the_first_mysql_task_runs_and_runs_again(ws: Workspace, stores: Stores) -> None:
    """MySQL -> MySQL (staging) + csv + sqlite (upsert on id): every destination holds the source's rows,
    and a second run leaves each holding them once (the swap replaces, overwrite replaces, upsert updates)."""
    mysql_orders(stores, "shop")
    report = mysql_orders(stores, "report", rows=False)  # the mysql store creates no table
    spec = stores.spec("mysql-first-task.json")
    admin = stores.server.connect()
    for _ in range(2):
        task = run_example(ws, spec, "first.json")
        assert {d: r["status"] for d, r in task["result"]["destinations"].items()} == dict.fromkeys(
            ("report", "files", "local"), "success")
        assert execute(admin, f"SELECT id, customer, amount, created_at FROM {q(report)}.orders ORDER BY id") == [
            tuple(r) for r in ROWS]
        out = ws.root / "var" / "first-task"
        assert (out / "orders_csv" / "_SUCCESS").is_file()
        csv_lines = sum(len(p.read_text(encoding="utf-8").splitlines()) - 1
                        for p in (out / "orders_csv").glob("part-*.csv"))
        with sqlite3.connect(out / "orders.db") as conn:
            local = conn.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM orders").fetchone()
        assert csv_lines == len(ROWS) and local == (len(ROWS), len(ROWS))
    assert count(admin, report, "orders") == len(ROWS)
    admin.close()


def test_mysql_to_postgres_creates_the_table_and_copies_the_rows(ws: Workspace, stores: Stores) -> None:
    mysql_orders(stores, "shop")
    spec = stores.spec("mysql-to-postgres.json")
    run_example(ws, spec, "m2p.json")
    schema = stores.pg_schemas["warehouse"]
    got = pg_execute(stores.schemas.conn,
                     f"SELECT id, customer, amount, created_at FROM {qi(schema)}.orders ORDER BY id")
    assert got == [tuple(r) for r in ROWS]


def test_postgres_to_parquet_writes_the_rows(ws: Workspace, stores: Stores) -> None:
    pg_orders(stores, "warehouse")
    spec = stores.spec("postgres-to-parquet.json")
    run_example(ws, spec, "p2parquet.json")
    lake = ws.root / "var" / "lake" / "orders"
    assert (lake / "_SUCCESS").is_file()
    table = pq.read_table([str(p) for p in sorted(lake.glob("*.parquet"))])
    got = sorted(zip(*(table.column(c).to_pylist() for c in ("id", "customer", "amount", "created_at")), strict=True))
    assert [(i, c, Decimal(a), t) for i, c, a, t in got] == [tuple(r) for r in ROWS]


def test_every_example_is_run_or_only_validated_on_purpose() -> None:
    """A new example joins the runs above, or this list of the ones that need what the tests lack (remote
    shards, a Hive warehouse) or another example's output."""
    run = {"mysql-first-task.json", "mysql-to-postgres.json", "postgres-to-parquet.json",
           "quickstart.json"}  # the last one: tests/e2e/test_demo.py
    demo = {"demo-fanout.json"}  # `make demo` runs it; tests/e2e/test_demo.py runs its shape, smaller
    validated_only = {"csv-to-sqlite.json", "mysql-shards-fanout.json", "spark-hive-fanout.json"}
    assert {p.name for p in EXAMPLES.glob("*.json")} == run | demo | validated_only


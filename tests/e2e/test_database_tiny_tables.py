"""Many tiny tables in one database task: what each table costs the server besides its rows (issue 38).

The task reads and writes through a MariaDB account of its own whose connections and statements an hour
the server limits (``MAX_CONNECTIONS_PER_HOUR``, ``MAX_QUERIES_PER_HOUR``): a task whose tables each open
their own sessions (a describe, a prepare, a commit, a release, DDL: about 12 connections and 50 statements
a table) runs out of them and fails; one whose table runs share what they learnt and lend idle sessions to
the next copies every table exactly, well inside the limits. The statements are counted closely: every
table's columns are described in one catalog statement ahead of the table runs, and the split markers of all
tables are deleted by one statement after the task's outcome (151 statements for 12 tables; 174 when each
table described its own columns and deleted its own markers).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import MYSQL_URL, Workspace, log_events, mysql_or_skip, run_task
from tests.mysql_helpers import Server, execute, q

pytestmark = [pytest.mark.mysql, pytest.mark.e2e]

SERVER = Server.from_url(MYSQL_URL)
TABLES = 12
ROWS = 5
CONNECTIONS = 2 * TABLES
"""The account's connections an hour: both sides of the whole task (about 12 a table before)."""
QUERIES = 14 * TABLES
"""The account's statements an hour: both sides of the whole task (about 50 a table before the sessions were
shared, 14.5 before the describes and the marker deletes were grouped, 12.6 now)."""


@dataclass(frozen=True)
class Account:
    user: str
    password: str
    source: str
    target: str


@pytest.fixture
def account() -> Iterator[Account]:
    """A source database of tiny tables, an empty target database and an account limited per hour on both."""
    mysql_or_skip().close()
    tag = uuid.uuid4().hex[:8]
    acct = Account(f"wh_htiny_{tag}", f"pw-{tag}", f"wh_htiny_src_{tag}", f"wh_htiny_dst_{tag}")
    admin = SERVER.connect()
    try:
        for db in (acct.source, acct.target):
            execute(admin, f"CREATE DATABASE {q(db)} CHARACTER SET utf8mb4")
        for i in range(TABLES):
            table = f"{q(acct.source)}.{q(f't{i:02d}')}"
            execute(admin, f"CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, "
                           f"day DATE NULL, KEY by_day (day))")
            execute(admin, f"INSERT INTO {table} VALUES " + ", ".join(
                f"({r}, 'row {i}-{r}', '2026-01-{r:02d}')" for r in range(1, ROWS + 1)))
        execute(admin, f"CREATE USER '{acct.user}'@'%' IDENTIFIED BY '{acct.password}' WITH "
                       f"MAX_CONNECTIONS_PER_HOUR {CONNECTIONS} MAX_QUERIES_PER_HOUR {QUERIES}")
        execute(admin, f"GRANT SELECT ON {q(acct.source)}.* TO '{acct.user}'@'%'")
        execute(admin, f"GRANT ALL ON {q(acct.target)}.* TO '{acct.user}'@'%'")
        yield acct
    finally:
        execute(admin, f"DROP USER IF EXISTS '{acct.user}'@'%'")
        for db in (acct.source, acct.target):
            execute(admin, f"DROP DATABASE IF EXISTS {q(db)}")
        admin.close()


def task(acct: Account) -> dict[str, Any]:
    login = {"host": SERVER.host, "port": SERVER.port, "user": acct.user, "password": acct.password}
    return {"source": {"plugin": "mysql", "params": {**login, "database": acct.source, "tables": ["*"]}},
            "destinations": [{"id": "rep", "plugin": "mysql",
                              "params": {**login, "database": acct.target, "create_table": True}}],
            "settings": {"speed": {"channel": 1}}}


def test_tiny_tables_share_sessions_and_what_they_asked(ws: Workspace, account: Account) -> None:
    code, result, stderr = run_task(ws, task(account))
    assert code == 0, result.get("error")
    admin = SERVER.connect()
    try:
        for i in range(TABLES):
            table = f"{q(account.target)}.{q(f't{i:02d}')}"
            rows = execute(admin, f"SELECT id, name, day FROM {table} ORDER BY id")
            assert [(r[0], r[1], str(r[2])) for r in rows] == [
                (r, f"row {i}-{r}", f"2026-01-{r:02d}") for r in range(1, ROWS + 1)]
            indexes = {r[2] for r in execute(admin, f"SHOW INDEX FROM {table}")}
            assert indexes == {"PRIMARY", "by_day"}, indexes  # a small table's index made with it
        # Released once the outcome was recorded: every table's markers, by one grouped DELETE.
        assert execute(admin, f"SELECT COUNT(*) FROM {q(account.target)}.wormhole_splits")[0][0] == 0
    finally:
        admin.close()
    events = log_events(stderr)
    pairs = [e for e in events if e["event"] == "database.pair_done"]
    assert len(pairs) == TABLES and all(e["status"] == "success" for e in pairs)
    sessions = next(e for e in events if e["event"] == "database.sessions")
    assert sessions.get("lent", 0) >= 3 * TABLES, sessions  # describe, prepare, commit, DDL, writer, reader: lent
    # A table's routine steps, its stores' included, are debug lines: per table its DDL and its outcome at info.
    per_event = Counter(e["event"] for e in events if e.get("level") == "info")
    assert per_event["task.started"] == 1, per_event
    assert per_event["database.table_created"] == TABLES, per_event
    assert not {"writer.load_method", "writer.load_from_wire", "splitter.done", "reader.started"} & set(per_event)

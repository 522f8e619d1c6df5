"""A database task looks up which of its targets are missing once per destination database (not once per table),
and a table found missing then is created without asking again; a target made meanwhile is judged as before
(wormhole/database/ddl_steps.py, issue 38)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import MYSQL_URL, mysql_or_skip
from tests.mysql_helpers import Server, execute, q
from tests.plugin_helpers import parse
from wormhole.database.ddl import TargetName, translate
from wormhole.database.ddl_steps import PairDdl, absent_targets
from wormhole.database.model import ColumnDef, TableDef, TableRef
from wormhole.errors import InvalidTaskConfig
from wormhole.log import get_logger
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.shared import RunShared

pytestmark = [pytest.mark.mysql]

SERVER = Server.from_url(MYSQL_URL)
SOURCE = TableDef(
    TableRef("src", "t"),
    (ColumnDef("id", "int(11)", False), ColumnDef("name", "varchar(20)", True)),
    primary_key=("id",),
)


@pytest.fixture
def database() -> Iterator[str]:
    mysql_or_skip().close()
    name = f"wh_ddl_lookup_{uuid.uuid4().hex[:8]}"
    admin = SERVER.connect()
    try:
        execute(admin, f"CREATE DATABASE {q(name)} CHARACTER SET utf8mb4")
        yield name
    finally:
        execute(admin, f"DROP DATABASE IF EXISTS {q(name)}")
        admin.close()


def pair(database: str, table: str) -> PairDdl:
    options, problems = parse(MysqlWriterOptions, SERVER.params(database, table=table, create_table=True))
    assert not problems, problems.items
    target = TargetName(database, table)
    return PairDdl("rep", "mysql", options, translate(SOURCE, "mysql", "mysql", options, target, lambda r: None))


def columns(database: str, table: str) -> list[str]:
    admin = SERVER.connect()
    try:
        return [
            r[0]
            for r in execute(
                admin,
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                "%s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (database, table),
            )
        ]
    finally:
        admin.close()


def test_missing_targets_are_found_in_one_lookup_and_created_without_asking_again(database: str) -> None:
    admin = SERVER.connect()
    execute(admin, f"CREATE TABLE {q(database)}.there (id INT PRIMARY KEY, name VARCHAR(20))")
    admin.close()
    pairs = [pair(database, "there"), pair(database, "missing")]
    shared = RunShared()
    try:
        absent = absent_targets(pairs, shared)
        assert absent == {("rep", TargetName(database, "missing"))}
        log = get_logger()
        assert pairs[1].create(log, shared, absent=True) == "created"
        assert pairs[0].create(log, shared, absent=False) == "exists"
    finally:
        shared.close()
    assert columns(database, "missing") == ["id", "name"]


def test_a_target_made_after_the_lookup_is_judged_as_one_found_there(database: str) -> None:
    same, other = pair(database, "same"), pair(database, "other")
    shared = RunShared()
    try:
        absent = absent_targets([same, other], shared)
        assert {t.table for _, t in absent} == {"same", "other"}
        admin = SERVER.connect()
        execute(admin, f"CREATE TABLE {q(database)}.same (id INT PRIMARY KEY, name VARCHAR(20))")
        execute(admin, f"CREATE TABLE {q(database)}.other (id INT PRIMARY KEY, extra INT)")
        admin.close()
        log = get_logger()
        assert same.create(log, shared, absent=True) == "exists"
        with pytest.raises(InvalidTaskConfig, match="exists and differs"):
            other.create(log, shared, absent=True)
    finally:
        shared.close()
    assert columns(database, "other") == ["id", "extra"]

"""Small helpers for the PostgreSQL tests: connect, make a fresh schema, read tables back.

Everything here talks to the server with plain psycopg, independently of the plugin under test, so what
the tests see is what a user querying the database would see. Each test works in a schema of its own
(``wh_<uuid>``) of the database ``test``, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

PG_URL = os.environ.get("WORMHOLE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def qi(name: str) -> str:
    """A double-quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class PgServer:
    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "postgres"
    database: str = "test"

    @classmethod
    def from_url(cls, url: str = PG_URL) -> PgServer:
        from urllib.parse import urlparse

        u = urlparse(url)
        return cls(u.hostname or "127.0.0.1", u.port or 5432, u.username or "postgres", u.path.lstrip("/") or "test")

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(host=self.host, port=self.port, user=self.user, dbname=self.database,
                               autocommit=True, connect_timeout=5)

    def params(self, schema: str | None = None, **extra: Any) -> dict[str, Any]:
        """Plugin ``params`` reaching this server's database (and ``schema``) as the test user."""
        params: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user, "database": self.database}
        if schema is not None:
            params["schema"] = schema
        return {**params, **extra}


def pg_or_skip(server: PgServer | None = None) -> Any:
    """A connection to the test server; skip when absent unless WORMHOLE_REQUIRE_MYSQL=1 (CI: the
    machine's services are required, PostgreSQL with MariaDB)."""
    import psycopg

    try:
        return (server or PgServer.from_url()).connect()
    except psycopg.OperationalError as exc:
        if os.environ.get("WORMHOLE_REQUIRE_MYSQL") == "1":
            pytest.fail(f"PostgreSQL at {PG_URL} is required (WORMHOLE_REQUIRE_MYSQL=1) but unreachable: {exc}")
        pytest.skip(f"PostgreSQL at {PG_URL} unreachable: {exc}")


@dataclass
class Schemas:
    """Fresh schemas on the test database, dropped (with all they hold) by :meth:`drop_all`."""

    server: PgServer
    conn: Any
    made: list[str] = field(default_factory=list)

    def create(self, label: str = "s") -> str:
        name = f"wh_{label}_{uuid.uuid4().hex[:8]}"
        self.conn.execute(f"CREATE SCHEMA {qi(name)}")
        self.made.append(name)
        return name

    def drop_all(self) -> None:
        for name in self.made:
            self.conn.execute(f"DROP SCHEMA IF EXISTS {qi(name)} CASCADE")
        self.conn.close()


def fresh_schemas() -> Iterator[Schemas]:
    """A fixture's body: fresh schemas on the test server, every one dropped afterwards."""
    server = PgServer.from_url()
    schemas = Schemas(server, pg_or_skip(server))
    try:
        yield schemas
    finally:
        schemas.drop_all()


def fresh_schema(label: str) -> Iterator[tuple[PgServer, Any, str]]:
    """A fixture's body: (the test server, an autocommit connection, one fresh schema ``wh_<label>_...``)."""
    for schemas in fresh_schemas():
        yield schemas.server, schemas.conn, schemas.create(label)


@pytest.fixture
def pg_schemas() -> Iterator[Schemas]:
    yield from fresh_schemas()


def pg_execute(conn: Any, sql: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    cur = conn.execute(sql, args)
    return list(cur.fetchall()) if cur.description is not None else []


def pg_rows(conn: Any, schema: str, table: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    return pg_execute(conn, f"SELECT {', '.join(map(qi, columns))} FROM {qi(schema)}.{qi(table)} ORDER BY 1")


def pg_tables(conn: Any, schema: str) -> list[str]:
    return [r[0] for r in pg_execute(conn, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1",
                                     (schema,))]


def pg_store(server: PgServer, schema: str, table: str, **params: Any) -> dict[str, Any]:
    """A postgres source's or destination's ``plugin`` and ``params`` on ``table`` of ``schema``."""
    return {"plugin": "postgres", "params": server.params(schema, table=table, **params)}


def from_src(server: PgServer, schema: str, destinations: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    """A task reading table ``src`` of ``schema``, split on ``id``, into ``destinations``; ``top`` holds its
    other keys (``settings``...)."""
    return {"source": pg_store(server, schema, "src", split_pk="id"), "destinations": destinations, **top}

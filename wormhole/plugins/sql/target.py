"""Statements on one destination's namespace (a MySQL database, a PostgreSQL schema), failing with the
destination's error classes: what every part of the SQL store kit runs its SQL through."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from wormhole.errors import StorageError
from wormhole.plugins.sql.dialect import Dialect


@dataclass(frozen=True, slots=True)
class TargetSql:
    """One destination's namespace on one server, as its dialect spells it."""

    endpoint: Any
    """The store's endpoint (its ``mark`` names the server in messages)."""
    namespace: str
    destination: str
    dialect: Dialect

    def ref(self, name: str) -> str:
        quote = self.dialect.quote
        return f"{quote(self.namespace)}.{quote(name)}"

    def error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.destination, plugin=self.dialect.name)

    def run(self, conn: Any, statement: str, what: str, error: type[StorageError]) -> None:
        """``statement`` as given (the task author's SQL: no parameters, so ``%`` stays literal)."""
        try:
            self.dialect.run_text(conn, statement)
        except self.dialect.db_error as exc:
            raise self.error(error, f"{what} failed on {self.endpoint.mark}: {self.dialect.describe(exc)} "
                                    f"(statement: {statement[:200]})") from exc

    @contextmanager
    def failing_as(self, error: type[StorageError], what: str) -> Iterator[None]:
        """A driver error inside becomes ``error``: '<what> failed on <server>: <the driver's text>'."""
        try:
            yield
        except self.dialect.db_error as exc:
            raise self.error(error, f"{what} failed on {self.endpoint.mark}: {self.dialect.describe(exc)}") from exc

    def table_comment(self, conn: Any, name: str) -> str | None:
        """The comment of table ``name`` ('' without one), or None when there is no such table."""
        return self.dialect.table_comment(conn, self.namespace, name)


def fetch_all(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    """Rows of a query, on a cursor (pymysql and psycopg alike)."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def fetch_one(conn: Any, sql: str, args: Any = None) -> Any:
    """The first row of a query as a tuple (None when there is none)."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        found = cur.fetchone()
        return None if found is None else tuple(found)

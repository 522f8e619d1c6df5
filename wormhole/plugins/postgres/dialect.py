"""PostgreSQL's :class:`~wormhole.plugins.sql.dialect.Dialect`: how the SQL store kit's statements are
spelled for it and how psycopg answers, for its source and its destination."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg

from wormhole.plugins.postgres import catalog, connection
from wormhole.plugins.postgres.options import MAX_IDENTIFIER_BYTES
from wormhole.plugins.sql import quote
from wormhole.plugins.sql.connection import SessionDialect
from wormhole.plugins.sql.source_options import Shard

_UNIQUE_VIOLATION = "23505"
_UTC_NOW = "date_trunc('second', now() AT TIME ZONE 'UTC')"
_LOCAL_NOW = ("date_trunc('second', now() AT TIME ZONE "
              "(SELECT reset_val FROM pg_settings WHERE name = 'TimeZone'))")


class PostgresDialect(SessionDialect):
    """The postgres store's dialect (one instance, :data:`POSTGRES`)."""

    # -- both sides -------------------------------------------------------------------------------

    name = connection.PLUGIN_NAME
    db_error: type[Exception] = psycopg.Error

    quote = staticmethod(quote)
    describe = staticmethod(connection.describe)
    open = staticmethod(connection.connect)
    # Refused (not allowed to signal it): the session ends on its own once it finds its client gone.
    end_session_sql = "SELECT pg_terminate_backend(%s)"
    session_alive_sql = "SELECT 1 FROM pg_stat_activity WHERE pid = %s"

    # -- read side (the source's kit) ------------------------------------------------------------

    kind_types: Mapping[str, str] = catalog.KIND_TYPES

    describe_table = staticmethod(catalog.describe_table)
    describe_tables = staticmethod(catalog.describe_tables)
    describe_query = staticmethod(catalog.describe_query)

    @staticmethod
    def max_and_now(conn: psycopg.Connection[Any], shard: Shard, relation: str, info: catalog.ColumnInfo,
                    column: str) -> tuple[Any, datetime]:
        """The maximum is over finite values (``infinity`` has no Python value). The clock is ``now()`` to the
        whole second: in UTC for a ``timestamptz`` column (the reader gives its values in UTC), and for a
        ``timestamp`` column in the server's own time zone (its configured ``TimeZone``, what its writers'
        sessions use unless they chose another), as the mysql store compares a DATETIME."""
        q = quote(info.name)
        value = f"({q} AT TIME ZONE 'UTC')" if info.kind == "timestamptz" else q
        finite = f" FILTER (WHERE isfinite({q}))" if info.kind in ("date", "datetime", "timestamptz") else ""
        clock = _LOCAL_NOW if info.kind == "datetime" else _UTC_NOW
        row = conn.execute(f"SELECT (SELECT MAX({value}){finite} FROM {relation}), {clock}").fetchone()
        assert row is not None
        return row[0], row[1]

    # -- write side (the destination's kit) ------------------------------------------------------

    namespace_kind = "schema"
    markers_ddl = (
        "CREATE TABLE IF NOT EXISTS {table} (taskdb varchar(32) NOT NULL DEFAULT '', task_id bigint NOT NULL, "
        "state_run bigint NOT NULL, destination varchar(64) NOT NULL, split_id varchar(255) NOT NULL, "
        "\"rows\" bigint NULL, phase varchar(16) NULL, done_at timestamptz NOT NULL DEFAULT now(), "
        "PRIMARY KEY (taskdb, task_id, state_run, destination, split_id))")
    markers_upgrade: str | None = None

    is_transient = staticmethod(connection.is_transient)

    def fit_name(self, table: str, suffix: str) -> str:
        """Cut at a character boundary so the whole fits PostgreSQL's 63 bytes: a longer name would be cut
        by the server, silently."""
        room = MAX_IDENTIFIER_BYTES - len(suffix.encode())
        return table.encode()[:room].decode(errors="ignore") + suffix

    def upsert_prepared_sql(self, table: str) -> str:
        return (f"INSERT INTO {table} (taskdb, task_id, state_run, destination, split_id, \"rows\", phase) VALUES "
                f"(%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (taskdb, task_id, state_run, destination, split_id) "
                f"DO UPDATE SET \"rows\" = EXCLUDED.\"rows\", phase = EXCLUDED.phase")

    def marker_columns(self, conn: Any, namespace: str, table: str) -> set[str]:
        return {str(r[0]).lower() for r in conn.execute(
            "SELECT a.attname FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT "
            "a.attisdropped", (f"{quote(namespace)}.{quote(table)}",)).fetchall()}

    def created_meanwhile(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.errors.UniqueViolation)  # pg_type's unique name: created at the same moment

    def missing_namespace(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.errors.InvalidSchemaName)

    def commented_tables(self, conn: Any, namespace: str) -> list[tuple[str, str]]:
        return [(str(name), str(comment or "")) for name, comment in conn.execute(
            "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace n ON n.oid = "
            "c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND obj_description(c.oid, 'pg_class') "
            "LIKE 'wormhole:%%' ORDER BY c.relname", (namespace,)).fetchall()]

    def table_comment(self, conn: Any, namespace: str, name: str) -> str | None:
        found = conn.execute("SELECT coalesce(obj_description(c.oid, 'pg_class'), '') FROM pg_class c JOIN "
                             "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s "
                             "AND c.relkind IN ('r', 'p')", (namespace, name)).fetchone()
        return None if found is None else str(found[0])

    def run_text(self, conn: Any, statement: str) -> None:
        with conn.cursor() as cur:
            cur.execute(statement.encode())  # bytes: psycopg does not look for placeholders

    def session_id(self, conn: Any) -> int:
        return connection.backend_pid(conn)

    def is_duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error) and connection.sqlstate(exc) == _UNIQUE_VIOLATION

    def idle(self, conn: Any, autocommit: bool = True) -> bool:
        return bool(not conn.closed and conn.autocommit == autocommit
                    and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)

    def commit_unknown(self, exc: BaseException, conn: Any) -> bool:
        return isinstance(exc, psycopg.OperationalError) and bool(conn.broken or conn.closed)


POSTGRES = PostgresDialect()

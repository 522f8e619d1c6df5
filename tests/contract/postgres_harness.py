"""The postgres store's harness: a table the user created in a fresh schema, loaded with ``load: staging``.

``staging`` is the load whose commit is atomic (DROP and RENAME in one transaction) and whose rollback
leaves the target untouched, as for mysql. The table is read back with plain psycopg (tests/pg_helpers).
"""

from __future__ import annotations

from typing import Any

from tests.contract.harness import Deviation, SqlStagingHarness, scale18
from tests.pg_helpers import PgServer, Schemas, pg_execute, pg_or_skip, pg_rows, pg_tables, qi

DDL = ('CREATE TABLE {table} (id bigint PRIMARY KEY, f double precision, "dec" numeric(38,18), s varchar(200), '
       "raw bytea, flag boolean, day date, ts timestamp(6), doc jsonb)")
"""A user's table holding every logical type (varchar(200): the refused row's string is longer)."""

COLUMNS = ("id", "f", "dec", "s", "raw", "flag", "day", "ts", "doc")


class PostgresHarness(SqlStagingHarness):
    plugin = "postgres"
    deviations = (
        Deviation("dec", "postgres: numeric as decimal at the column's scale (here 18)", scale18),
    )

    def __init__(self) -> None:
        server = PgServer.from_url()
        self.schemas = Schemas(server, pg_or_skip(server))
        self.server = server
        self.schema = self.schemas.create("contract")
        self.conn = self.schemas.conn
        self.conn.execute(DDL.format(table=f"{qi(self.schema)}.t"))

    def sink_params(self) -> dict[str, Any]:
        return self.server.params(self.schema, table="t", load="staging")

    def source_params(self) -> dict[str, Any]:
        return self.server.params(self.schema, table="t", split_pk="id")

    def snapshot(self) -> Any:
        # wormhole_splits (the split markers of resumable runs) may stay, empty once no run is pending.
        names = [t for t in pg_tables(self.conn, self.schema) if t != "wormhole_splits"
                 or pg_execute(self.conn, f"SELECT COUNT(*) FROM {qi(self.schema)}.wormhole_splits")[0][0]]
        return names, pg_rows(self.conn, self.schema, "t", COLUMNS)

    def visible_ids(self) -> list[int]:
        return sorted(r[0] for r in pg_execute(self.conn, f"SELECT id FROM {qi(self.schema)}.t"))

    def close(self) -> None:
        self.schemas.drop_all()

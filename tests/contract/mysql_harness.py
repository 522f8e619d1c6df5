"""The mysql store's harness: a table the user created in a fresh database, loaded with ``load: staging``.

``staging`` is the load whose commit is atomic (one RENAME TABLE) and whose rollback leaves the
target untouched; ``append`` commits piece by piece by design (README, *Loads*), so it is not the
load the commit contract is about. The table is read back with plain pymysql (tests/mysql_helpers).
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.contract.harness import Deviation, SqlStagingHarness, scale18
from tests.mysql_helpers import Server, db_of, execute, q, table_rows, tables

DDL = ("CREATE TABLE {table} (id BIGINT PRIMARY KEY, f DOUBLE, `dec` DECIMAL(38,18), s VARCHAR(200), "
       "raw VARBINARY(300), flag BOOLEAN, day DATE, ts DATETIME(6), doc JSON) CHARACTER SET utf8mb4")
"""A user's table holding every logical type (VARCHAR(200): the refused row's string is longer)."""


class MysqlHarness(SqlStagingHarness):
    plugin = "mysql"
    deviations = (
        Deviation("dec", "mysql: DECIMAL as decimal at full precision (the column's scale, here 18)", scale18),
        Deviation("flag", "mysql: every integer width reads as int (BOOLEAN is TINYINT(1))", int),
    )

    def __init__(self, url: str) -> None:
        self.server = Server.from_url(url)
        self.db = db_of(url)
        self.table = f"t_{uuid.uuid4().hex[:8]}"
        self.conn = self.server.connect(self.db)
        execute(self.conn, DDL.format(table=q(self.table)))

    def sink_params(self) -> dict[str, Any]:
        return self.server.params(self.db, table=self.table, load="staging")

    def source_params(self) -> dict[str, Any]:
        return self.server.params(self.db, table=self.table, split_pk="id")

    def snapshot(self) -> Any:
        columns = ["id", "f", "dec", "s", "raw", "flag", "day", "ts", "doc"]
        # wormhole_splits (the split markers of resumable runs) may stay, empty once no run is pending.
        names = [t for t in tables(self.conn, self.db) if t != "wormhole_splits"
                 or execute(self.conn, f"SELECT COUNT(*) FROM {q(self.db)}.wormhole_splits")[0][0]]
        return names, table_rows(self.conn, self.db, self.table, columns)

    def visible_ids(self) -> list[int]:
        return sorted(r[0] for r in execute(self.conn, f"SELECT id FROM {q(self.db)}.{q(self.table)}"))

    def close(self) -> None:
        self.conn.close()

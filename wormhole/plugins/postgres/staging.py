"""The postgres store's staging swap (``load: staging``) on the SQL kit's staging table: created ``LIKE`` the
target ``INCLUDING ALL`` in prepare's transaction, swapped in within the commit's (DROP and RENAME, the
indexes' names, owned sequences and :mod:`.kept` carried over), dropped at rollback (docs/manual/postgres.md)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.sql import Literal

from wormhole.plugins.postgres.kept import read_kept
from wormhole.plugins.sql import quote
from wormhole.plugins.sql.staging import Staging, staging_marker


class PostgresStaging(Staging):
    """One run's staging table: created and marked at prepare, swapped in at commit, dropped at rollback."""

    def adopt(self, conn: psycopg.Connection[Any]) -> bool:
        """Take over the staging table of the state run, when it is there and carries its marker."""
        return self._left_by_state_run(conn) and self._adopted()

    def create(self, conn: psycopg.Connection[Any]) -> None:
        """Drop a leftover of this task by the staging name, then create and mark the staging table (the
        caller's transaction makes both one step)."""
        self._reclaim(conn)
        sql = self.sql
        conn.execute(f"CREATE TABLE {sql.ref(self.name)} (LIKE {sql.ref(self.target)} INCLUDING ALL)")
        conn.execute(f"COMMENT ON TABLE {sql.ref(self.name)} IS {Literal(staging_marker(self.ctx)).as_string(conn)}")
        self.created = True

    def swap(self, conn: psycopg.Connection[Any]) -> None:
        """Inside the commit's transaction: the staging table becomes the target."""
        sql = self.sql
        comment = sql.table_comment(conn, self.target)
        conn.execute(f"COMMENT ON TABLE {sql.ref(self.name)} IS {Literal(comment or None).as_string(conn)}")
        # A serial column's sequence belongs to the target: dropping the target would drop it (or refuse,
        # as the staging table's default uses it), so it moves to the staging table's column first.
        owned = conn.execute("SELECT s.oid::regclass::text, a.attname FROM pg_depend d JOIN pg_class s ON s.oid = "
                             "d.objid AND s.relkind = 'S' JOIN pg_attribute a ON a.attrelid = d.refobjid AND "
                             "a.attnum = d.refobjsubid WHERE d.refobjid = to_regclass(%s) AND d.deptype = 'a'",
                             (sql.ref(self.target),)).fetchall()
        for sequence, column in owned:
            conn.execute(f"ALTER SEQUENCE {sequence} OWNED BY {sql.ref(self.name)}.{quote(column)}")
        names = self._index_names(conn)
        kept = read_kept(conn, sql.ref(self.target))
        conn.execute(f"DROP TABLE {sql.ref(self.target)}")
        conn.execute(f"ALTER TABLE {sql.ref(self.name)} RENAME TO {quote(self.target)}")
        for staged, kept_name in names:  # the target's names are free now: t_pkey stays t_pkey
            conn.execute(f"ALTER INDEX {sql.ref(staged)} RENAME TO {quote(kept_name)}")
        kept.apply(sql, conn, sql.ref(self.target))  # its owner, grants, row security and triggers

    def _index_names(self, conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
        """(staging index, the target's index of the same definition) pairs, each index once."""
        shape = ("SELECT c.relname, i.indisunique, i.indisprimary, i.indkey::text, i.indclass::text, "
                 "coalesce(pg_get_expr(i.indexprs, i.indrelid), ''), coalesce(pg_get_expr(i.indpred, i.indrelid), '') "
                 "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass(%s) "
                 "ORDER BY c.relname")
        staged = conn.execute(shape, (self.sql.ref(self.name),)).fetchall()
        targets = conn.execute(shape, (self.sql.ref(self.target),)).fetchall()
        pairs = []
        for row in staged:
            match = next((t for t in targets if t[1:] == row[1:]), None)
            if match is not None and match[0] != row[0]:
                targets.remove(match)
                pairs.append((str(row[0]), str(match[0])))
        return pairs

    def drop(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {self.sql.ref(self.name)}")

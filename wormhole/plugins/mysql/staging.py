"""The mysql store's staging swap (``load: staging``) on the SQL kit's staging table: ``CREATE TABLE ... LIKE``
the target, swapped in at commit by one atomic ``RENAME TABLE target TO old, staging TO target``, swapped back
and dropped at rollback (docs/manual/mysql.md, *Loads*). MySQL's DDL is not transactional: the commit records
the phases ``swapping`` and ``swapped`` around the RENAME, so a resumed run knows whether it happened."""

from __future__ import annotations

import pymysql

from wormhole.errors import CommitError, PrepareError, RollbackError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.mysql.connection import NO_ANSWER, error_code
from wormhole.plugins.sql.markers import SWAPPED, SWAPPING
from wormhole.plugins.sql.settling import Unsettled, settle
from wormhole.plugins.sql.staging import Staging, run_tag, staging_marker
from wormhole.plugins.sql.target import TargetSql, fetch_all


def refuse_unkept(sql: TargetSql, conn: pymysql.Connection, database: str, table: str, target: str) -> None:
    """A staging swap replaces the target's table object. Its grants are kept (MySQL records them by
    name), but its triggers and foreign keys belong to the object: the RENAME takes them (and the foreign
    keys of other tables referencing it) to the old table, which is dropped. A target with any is
    refused, naming them."""
    args = (database, table)
    found = [f"trigger {r[0]}" for r in fetch_all(
        conn, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = %s AND "
              "EVENT_OBJECT_TABLE = %s ORDER BY TRIGGER_NAME", args)]
    found += [f"foreign key {r[0]}" for r in fetch_all(
        conn, "SELECT CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = "
              "%s AND TABLE_NAME = %s ORDER BY CONSTRAINT_NAME", args)]
    # Tables of the same database only: asking for every database's would open every table on the server.
    found += [f"foreign key {r[0]} of table {r[1]}" for r in fetch_all(
        conn, "SELECT CONSTRAINT_NAME, TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE "
              "CONSTRAINT_SCHEMA = %s AND REFERENCED_TABLE_NAME = %s AND UNIQUE_CONSTRAINT_SCHEMA = "
              "CONSTRAINT_SCHEMA AND TABLE_NAME <> REFERENCED_TABLE_NAME ORDER BY 2, 1", args)]
    if found:
        raise sql.error(PrepareError, f"load 'staging' cannot keep the {', '.join(found)} of {target}: "
                                      f"MySQL triggers and foreign keys belong to the table the swap "
                                      f"replaces, so nothing was loaded (use load 'truncate' or 'append', "
                                      f"which keep the table)")


class MysqlStaging(Staging):
    """One run's staging table: created and marked at prepare, swapped in at commit, dropped at rollback."""

    def __init__(self, sql: TargetSql, ctx: WriteContext, target: str, name: str | None) -> None:
        super().__init__(sql, ctx, target, name)
        self.old = sql.dialect.fit_name(target, f"__whold{run_tag(ctx, ctx.state_run)}")
        self.swapped = False
        self.swap_session: int | None = None
        """The session that sent the RENAME while its answer is outstanding: when it never came (the
        connection lost), whether the swap happened is settled at rollback."""
        self.target_comment = ""
        """The target's own table comment, given back to the staging table before the swap."""

    def prepare(self, conn: pymysql.Connection, phase: str | None = None) -> None:
        """Create the staging table; when resuming, adopt the one the state run left instead.

        ``phase``: how far the state run's commit got. ``swapping``: the RENAME may have happened; the
        staging table still there says it did not, the old table there says it did. ``swapped``: it did,
        and the commit goes on after it."""
        sql, ctx = self.sql, self.ctx
        self.target_comment = sql.table_comment(conn, self.target) or ""
        if ctx.resuming and phase in (SWAPPING, SWAPPED):
            self._resume_swap(conn, phase)
            return
        if ctx.resuming and self._adopt(conn):
            return
        self._reclaim(conn)
        if sql.table_comment(conn, self.old) is not None:
            raise sql.error(PrepareError, f"table {sql.ref(self.old)} already exists on {sql.endpoint.mark}; the "
                                          f"staging swap renames the target to that name, so it is left untouched "
                                          f"and nothing is loaded: drop or rename it")
        sql.run(conn, f"CREATE TABLE {sql.ref(self.name)} LIKE {sql.ref(self.target)}", "staging", PrepareError)
        self.created = True
        sql.run(conn, f"ALTER TABLE {sql.ref(self.name)} COMMENT = {conn.escape(staging_marker(ctx))}",
                "marking the staging table", PrepareError)

    def _resume_swap(self, conn: pymysql.Connection, phase: str) -> None:
        sql = self.sql
        self.created = self.adopted = True
        if phase == SWAPPING and sql.table_comment(conn, self.name) is not None:
            # Not renamed yet (its marker may already be the target's comment): swapped at commit.
            self.ctx.log.info("writer.staging_adopted", table=self.name, state_run=self.ctx.state_run, phase=phase)
            return
        if phase == SWAPPING and sql.table_comment(conn, self.old) is None:
            raise sql.error(PrepareError, f"run {self.ctx.state_run}'s commit of {sql.ref(self.target)} stopped around "
                                          f"its swap, and neither the staging table {sql.ref(self.name)} nor the "
                                          f"old table {sql.ref(self.old)} is there, so whether the load is in "
                                          f"{sql.ref(self.target)} cannot be told: check it, then run the task afresh")
        self.swapped = True  # the loaded table is the target: the commit resumes after the RENAME
        self.ctx.log.info("writer.swap_resumed", target=self.target, state_run=self.ctx.state_run, phase=phase)

    def _adopt(self, conn: pymysql.Connection) -> bool:
        """Take over the staging table of the state run, when it is there and carries its marker."""
        sql, ctx = self.sql, self.ctx
        if not self._left_by_state_run(conn):
            return False
        if sql.table_comment(conn, self.old) is not None:
            # The crashed run died inside its commit's swap: the target is already the loaded table.
            raise sql.error(PrepareError, f"table {sql.ref(self.old)} exists next to the staging table "
                                          f"{sql.ref(self.name)} on {sql.endpoint.mark}: run {ctx.state_run}'s "
                                          f"commit was interrupted mid-swap; both are left untouched: check "
                                          f"{sql.ref(self.target)} and drop the one not wanted")
        return self._adopted()

    def swap(self, conn: pymysql.Connection) -> None:
        sql = self.sql
        # The marker is for wormhole's own bookkeeping: the table swapped in keeps the target's comment.
        sql.run(conn, f"ALTER TABLE {sql.ref(self.name)} COMMENT = {conn.escape(self.target_comment)}",
                "restoring the table comment", CommitError)
        self.swap_session = conn.thread_id()
        try:
            sql.run(conn, f"RENAME TABLE {sql.ref(self.target)} TO {sql.ref(self.old)}, "
                          f"{sql.ref(self.name)} TO {sql.ref(self.target)}", "swapping in the staging table",
                    CommitError)
        except CommitError as exc:
            if not _no_answer(exc.__cause__):  # the server answered: the RENAME did not happen
                self.swap_session = None
            raise
        self.swapped = True
        self.swap_session = None

    def drop_old(self, conn: pymysql.Connection) -> None:
        """Drop the table the swap set aside (the load is committed: a failure only leaves it behind)."""
        if not self.swapped:
            return
        try:
            self.sql.run(conn, f"DROP TABLE IF EXISTS {self.sql.ref(self.old)}", "dropping the old table",
                         CommitError)
        except CommitError as exc:
            self.ctx.log.warning("writer.old_table_left", table=self.sql.ref(self.old), error=str(exc))

    def rollback(self, conn: pymysql.Connection) -> None:
        sql = self.sql
        if self.swap_session is not None:
            self._settle_swap(conn, self.swap_session)
        if self.swapped:  # post_sql failed after the swap: put the old table back first
            sql.run(conn, f"RENAME TABLE {sql.ref(self.target)} TO {sql.ref(self.name)}, "
                          f"{sql.ref(self.old)} TO {sql.ref(self.target)}", "swapping back", RollbackError)
            self.swapped = False
        sql.run(conn, f"DROP TABLE IF EXISTS {sql.ref(self.name)}", "dropping the staging table", RollbackError)

    def _settle_swap(self, conn: pymysql.Connection, session: int) -> None:
        """The RENAME failed without an answer: once the server has ended its session, the tables say whether
        it happened (the staging table gone and the old one there: the loaded table is the target)."""
        sql = self.sql
        try:
            self.swapped = settle(sql.dialect, session, self.ctx.stop, conn=conn, ask=lambda c: (
                sql.table_comment(c, self.name) is None and sql.table_comment(c, self.old) is not None))
        except Unsettled as exc:
            raise sql.error(RollbackError, f"the swap into {sql.ref(self.target)} failed without an answer and "
                                           f"whether it happened {exc}") from exc
        self.swap_session = None
        self.ctx.log.warning("writer.swap_settled", target=self.target, swapped=self.swapped)


def _no_answer(exc: BaseException | None) -> bool:
    return exc is not None and (error_code(exc) in NO_ANSWER or isinstance(exc, (pymysql.err.InterfaceError,
                                                                                  ConnectionError)))

"""The staging table of a ``load: staging`` destination, and the statements a destination runs.

Rows go to ``CREATE TABLE <staging> LIKE <target>``; commit swaps it in with one
``RENAME TABLE target TO old, staging TO target`` (atomic: a reader sees the old table or the new
one, never a half-loaded one), then the old table is dropped; rollback swaps back when the swap was
done (post_sql failed after it) and drops the staging table, leaving the target untouched.

wormhole never drops a table it did not create: the staging table it creates carries the comment
``wormhole:db=<task database id>,task=<id>,run=<id>,dest=<id>``; at prepare, an existing table by the
staging name is dropped only when it carries that marker for the same task database, task and
destination (the leftover of a crashed run), and any other existing table fails the destination and
stays as it is. Commit and rollback drop only the staging table this run created and the old table
this run renamed.

The staging table is named and marked by the destination's *state run* (``ctx.state_run``): a run
that resumes a crashed one adopts the staging table that run left (its durable splits are in it)
instead of reclaiming it; a fresh run reclaims leftovers of its task and destination as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pymysql

from wormhole.errors import CommitError, PrepareError, RollbackError, StorageError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.mysql.connection import (
    PLUGIN_NAME,
    describe,
    error_code,
    fetch_all,
    fetch_one,
    wait_session_ended,
)
from wormhole.plugins.mysql.options import MAX_IDENTIFIER, Endpoint
from wormhole.plugins.sql import backquote as quote

_MARKER = re.compile(r"wormhole:(?:db=([0-9A-Za-z_-]+),)?task=(\d+),run=(\d+),dest=(\S+)")


def staging_marker(ctx: WriteContext) -> str:
    """The table comment of a staging table wormhole created (destination ids hold no comma or space);
    without a task database id, the comment of the versions before it."""
    db = f"db={ctx.taskdb_id}," if ctx.taskdb_id else ""
    return f"wormhole:{db}task={ctx.task_id},run={ctx.state_run},dest={ctx.destination}"


def parse_marker(comment: str) -> tuple[str, int, int, str] | None:
    """``(task database id, task, run, destination)`` of a staging marker ('' for a marker without a
    task database id), or None when the comment is not one."""
    found = _MARKER.fullmatch(comment.strip())
    return None if found is None else (found[1] or "", int(found[2]), int(found[3]), found[4])


def derived_name(table: str, suffix: str) -> str:
    """``table`` + ``suffix``, the table's name cut so the whole fits MySQL's 64 characters."""
    return table[: MAX_IDENTIFIER - len(suffix)] + suffix


def default_name(target: str, ctx: WriteContext, state_run: int) -> str:
    """The staging table of ``target`` for a task's state run, when ``staging_table`` names none."""
    return derived_name(target, f"__wh{_tag(ctx, state_run)}")


def _tag(ctx: WriteContext, state_run: int) -> str:
    return f"{ctx.task_id}_{state_run}" + (f"_{ctx.taskdb_id}" if ctx.taskdb_id else "")


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


def staging_leftovers(sql: TargetSql, conn: pymysql.Connection, ctx: WriteContext, target: str,
                      named: str | None, keep_run: int | None) -> list[tuple[str, int]]:
    """``(table, run)`` of every staging table of ``ctx``'s task and destination but ``keep_run``'s:
    a table counts only when it carries the marker *and* has the staging name of the marker's run
    (``named``, or the default one), so a user's table is never taken for one."""
    found = fetch_all(conn, "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                            "AND TABLE_COMMENT LIKE %s ORDER BY TABLE_NAME",
                      (sql.endpoint.database, "wormhole:%"))
    leftovers = []
    for name, comment in found:
        marker = parse_marker(str(comment or ""))
        if marker is None or marker[:2] != (ctx.taskdb_id, ctx.task_id) or marker[3] != ctx.destination \
                or marker[2] == keep_run:
            continue
        if str(name) == (named or default_name(target, ctx, marker[2])):
            leftovers.append((str(name), marker[2]))
    return leftovers


_SETTLE_WAIT_S = 30.0
"""How long a RENAME without an answer is waited for (its session ending on the server)."""
_NO_ANSWER = (2013, 2055)
"""The connection lost while the answer was awaited: the statement may have run."""
PREPARED_PHASE, SWAPPING, SWAPPED, COMMITTED = "prepared", "swapping", "swapped", "committed"
"""The phases of a load, kept in the destination's own row of the split markers (:mod:`.markers`): a
staging load's commit records ``swapping`` before its RENAME and ``swapped`` after it, so a resumed run
knows whether the swap happened; ``committed`` once the load is in the target."""


@dataclass(frozen=True, slots=True)
class TargetSql:
    """Statements on one destination's database, failing with the destination's error classes."""

    endpoint: Endpoint
    destination: str

    def ref(self, name: str) -> str:
        return f"{quote(self.endpoint.database)}.{quote(name)}"

    def error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.destination, plugin=PLUGIN_NAME)

    def run(self, conn: pymysql.Connection, statement: str, what: str, error: type[StorageError]) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
            conn.commit()
        except pymysql.err.MySQLError as exc:
            raise self.error(error, f"{what} failed on {self.endpoint.mark}: {describe(exc)} "
                                    f"(statement: {statement[:200]})") from exc

    def table_comment(self, conn: pymysql.Connection, name: str) -> str | None:
        """The comment of table ``name`` (a view's is 'VIEW'), or None when there is no such table."""
        found = fetch_one(conn, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                                "AND TABLE_NAME = %s", (self.endpoint.database, name))
        return None if found is None else str(found[0] or "")


class Staging:
    """One run's staging table: created and marked at prepare, swapped in at commit, dropped at rollback."""

    def __init__(self, sql: TargetSql, ctx: WriteContext, target: str, name: str | None) -> None:
        self.sql = sql
        self.ctx = ctx
        self.target = target
        self.named = name is not None
        self.name = name or default_name(target, ctx, ctx.state_run)
        self.old = derived_name(target, f"__whold{_tag(ctx, ctx.state_run)}")
        self.created = False
        """This run created (or adopted) the staging table: only then may commit or rollback drop it."""
        self.adopted = False
        """The staging table is the one the crashed run of ``ctx.state_run`` left, rows and all."""
        self.swapped = False
        self.swap_session: int | None = None
        """The session that sent the RENAME while its answer is outstanding: when it never came (the
        connection lost), whether the swap happened is settled at rollback."""
        self.target_comment = ""
        """The target's own table comment, given back to the staging table before the swap."""

    def prepare(self, conn: pymysql.Connection, phase: str | None = None) -> None:
        """Create the staging table; when resuming, adopt the one the state run left instead.

        ``phase``: how far the state run's commit got (:mod:`.markers`). ``swapping``: the RENAME may
        have happened; the staging table still there says it did not, the old table there says it did.
        ``swapped``: it did, and the commit goes on after it."""
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
        sql.run(conn, f"ALTER TABLE {sql.ref(self.name)} COMMENT = "
                      f"{conn.escape(staging_marker(ctx))}",
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
        comment = sql.table_comment(conn, self.name)
        if comment is None or parse_marker(comment) != (ctx.taskdb_id, ctx.task_id, ctx.state_run, ctx.destination):
            return False
        if sql.table_comment(conn, self.old) is not None:
            # The crashed run died inside its commit's swap: the target is already the loaded table.
            raise sql.error(PrepareError, f"table {sql.ref(self.old)} exists next to the staging table "
                                          f"{sql.ref(self.name)} on {sql.endpoint.mark}: run {ctx.state_run}'s "
                                          f"commit was interrupted mid-swap; both are left untouched: check "
                                          f"{sql.ref(self.target)} and drop the one not wanted")
        self.created = self.adopted = True
        ctx.log.info("writer.staging_adopted", table=self.name, state_run=ctx.state_run)
        return True

    def _reclaim(self, conn: pymysql.Connection) -> None:
        """Drop a table by the staging name only when it is a leftover of this task and destination."""
        sql, ctx = self.sql, self.ctx
        comment = sql.table_comment(conn, self.name)
        if comment is None:
            return
        marker = parse_marker(comment)
        if marker is None or marker[:2] != (ctx.taskdb_id, ctx.task_id) or marker[3] != ctx.destination:
            # A user's table (or another task database's, task's or destination's staging table): never
            # ours to drop.
            where = (f"params.staging_table of destination {ctx.destination!r}" if self.named else
                     f"the default staging name of destination {ctx.destination!r}, derived from params.table; "
                     f"params.staging_table can name another")
            whose = ("it carries no wormhole staging marker" if marker is None else
                     f"it is the staging table of task {marker[1]}, destination {marker[3]!r} of "
                     + (f"task database {marker[0]}" if marker[0] else "a task database without an id")
                     + f" (this task database is {ctx.taskdb_id or 'without an id'})")
            raise sql.error(PrepareError, f"staging table {sql.ref(self.name)} ({where}) already exists on "
                                          f"{sql.endpoint.mark} and {whose}; it is left untouched: drop or rename "
                                          f"it, or choose another staging_table")
        # Ours, left by a run of this task and destination that never finished: reclaim it.
        sql.run(conn, f"DROP TABLE {sql.ref(self.name)}", "dropping a leftover staging table", PrepareError)
        ctx.log.info("writer.staging_reclaimed", table=self.name, left_by_run=marker[2])

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
            wait_session_ended(conn, session, self.ctx.stop, _SETTLE_WAIT_S)
        except (pymysql.err.MySQLError, TimeoutError) as exc:
            raise sql.error(RollbackError, f"the swap into {sql.ref(self.target)} failed without an answer and "
                                           f"whether it happened cannot be settled: {exc}") from exc
        self.swapped = sql.table_comment(conn, self.name) is None and sql.table_comment(conn, self.old) is not None
        self.swap_session = None
        self.ctx.log.warning("writer.swap_settled", target=self.target, swapped=self.swapped)


def _no_answer(exc: BaseException | None) -> bool:
    return exc is not None and (error_code(exc) in _NO_ANSWER or isinstance(exc, (pymysql.err.InterfaceError,
                                                                                  ConnectionError)))

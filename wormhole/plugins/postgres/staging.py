"""The staging table of a ``load: staging`` postgres destination, and the statements a destination runs.

Rows go to ``CREATE TABLE <staging> (LIKE <target> INCLUDING ALL)`` (defaults, constraints, indexes,
identity, storage and comments of the columns). Commit swaps it in inside the commit's transaction: the
target's own table comment is given to the staging table, sequences the target's columns own (``serial``)
are handed to the staging table's columns, then ``DROP TABLE target`` and ``ALTER TABLE staging RENAME
TO target``, and its indexes take the names of the target's matching ones; then it gets the target's
owner, grants, row-level security and triggers (:mod:`.kept`). DDL is transactional in
PostgreSQL, so the swap is atomic: a reader sees the old table or the new one, never none (it waits on
the DROP's lock until the commit, then reads the new table).
Rollback drops the staging table, leaving the target untouched.

wormhole never drops a table it did not create: the staging table carries the table comment
``wormhole:db=<task database id>,task=<id>,run=<id>,dest=<id>`` (as the mysql store's), set in the
transaction that creates it. At prepare, an existing table by the staging name is dropped only when it
carries that marker for the same task database, task and destination (the leftover of a crashed run);
any other fails the destination and stays as it is. The table is named and marked by the destination's
*state run*, so a run that resumes a crashed one adopts the staging table that run left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg

from wormhole.errors import PrepareError, StorageError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.postgres.connection import PLUGIN_NAME, describe
from wormhole.plugins.postgres.kept import read_kept
from wormhole.plugins.postgres.options import MAX_IDENTIFIER_BYTES, Endpoint
from wormhole.plugins.sql import quote

_MARKER = re.compile(r"wormhole:(?:db=([0-9A-Za-z_-]+),)?task=(\d+),run=(\d+),dest=(\S+)")


def staging_marker(ctx: WriteContext) -> str:
    db = f"db={ctx.taskdb_id}," if ctx.taskdb_id else ""
    return f"wormhole:{db}task={ctx.task_id},run={ctx.state_run},dest={ctx.destination}"


def parse_marker(comment: str) -> tuple[str, int, int, str] | None:
    """``(task database id, task, run, destination)`` of a staging marker, or None when it is not one."""
    found = _MARKER.fullmatch(comment.strip())
    return None if found is None else (found[1] or "", int(found[2]), int(found[3]), found[4])


def derived_name(table: str, suffix: str) -> str:
    """``table`` + ``suffix``, the table's name cut (at a character boundary) so the whole fits PostgreSQL's
    63 bytes: a longer name would be cut by the server, silently."""
    room = MAX_IDENTIFIER_BYTES - len(suffix.encode())
    return table.encode()[:room].decode(errors="ignore") + suffix


def default_name(target: str, ctx: WriteContext, state_run: int) -> str:
    """The staging table of ``target`` for a task's state run, when ``staging_table`` names none."""
    return derived_name(target, f"__wh{ctx.task_id}_{state_run}" + (f"_{ctx.taskdb_id}" if ctx.taskdb_id else ""))


@dataclass(frozen=True, slots=True)
class TargetSql:
    """Statements on one destination's schema, failing with the destination's error classes."""

    endpoint: Endpoint
    schema: str
    destination: str

    def ref(self, name: str) -> str:
        return f"{quote(self.schema)}.{quote(name)}"

    def error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.destination, plugin=PLUGIN_NAME)

    def run(self, conn: psycopg.Connection[Any], statement: str, what: str, error: type[StorageError]) -> None:
        """``statement`` as given (the task author's SQL: no parameters, so ``%`` stays literal)."""
        try:
            with conn.cursor() as cur:
                cur.execute(statement.encode())  # bytes: psycopg does not look for placeholders
        except psycopg.Error as exc:
            raise self.error(error, f"{what} failed on {self.endpoint.mark}: {describe(exc)} "
                                    f"(statement: {statement[:200]})") from exc

    def table_comment(self, conn: psycopg.Connection[Any], name: str) -> str | None:
        """The comment of table ``name`` ('' without one), or None when there is no such table."""
        found = conn.execute("SELECT coalesce(obj_description(c.oid, 'pg_class'), '') FROM pg_class c JOIN "
                             "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s "
                             "AND c.relkind IN ('r', 'p')", (self.schema, name)).fetchone()
        return None if found is None else str(found[0])


def staging_leftovers(sql: TargetSql, conn: psycopg.Connection[Any], ctx: WriteContext, target: str,
                      named: str | None, keep_run: int | None) -> list[tuple[str, int]]:
    """``(table, run)`` of every staging table of ``ctx``'s task and destination but ``keep_run``'s: a
    table counts only when it carries the marker *and* has the staging name of the marker's run."""
    found = conn.execute("SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c JOIN pg_namespace n "
                         "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND "
                         "obj_description(c.oid, 'pg_class') LIKE 'wormhole:%%' ORDER BY c.relname",
                         (sql.schema,)).fetchall()
    leftovers = []
    for name, comment in found:
        marker = parse_marker(str(comment or ""))
        if marker is None or marker[:2] != (ctx.taskdb_id, ctx.task_id) or marker[3] != ctx.destination \
                or marker[2] == keep_run:
            continue
        if str(name) == (named or default_name(target, ctx, marker[2])):
            leftovers.append((str(name), marker[2]))
    return leftovers


class Staging:
    """One run's staging table: created and marked at prepare, swapped in at commit, dropped at rollback."""

    def __init__(self, sql: TargetSql, ctx: WriteContext, target: str, name: str | None) -> None:
        self.sql = sql
        self.ctx = ctx
        self.target = target
        self.named = name is not None
        self.name = name or default_name(target, ctx, ctx.state_run)
        self.created = False
        """This run created (or adopted) the staging table: only then may rollback drop it."""
        self.adopted = False
        """The staging table is the one the crashed run of ``ctx.state_run`` left, rows and all."""

    def adopt(self, conn: psycopg.Connection[Any]) -> bool:
        """Take over the staging table of the state run, when it is there and carries its marker."""
        ctx = self.ctx
        comment = self.sql.table_comment(conn, self.name)
        if comment is None or parse_marker(comment) != (ctx.taskdb_id, ctx.task_id, ctx.state_run, ctx.destination):
            return False
        self.created = self.adopted = True
        ctx.log.info("writer.staging_adopted", table=self.name, state_run=ctx.state_run)
        return True

    def create(self, conn: psycopg.Connection[Any]) -> None:
        """Drop a leftover of this task by the staging name, then create and mark the staging table (the
        caller's transaction makes both one step)."""
        self._reclaim(conn)
        sql = self.sql
        conn.execute(f"CREATE TABLE {sql.ref(self.name)} (LIKE {sql.ref(self.target)} INCLUDING ALL)")
        conn.execute(f"COMMENT ON TABLE {sql.ref(self.name)} IS {_literal(staging_marker(self.ctx))}")
        self.created = True

    def _reclaim(self, conn: psycopg.Connection[Any]) -> None:
        sql, ctx = self.sql, self.ctx
        comment = sql.table_comment(conn, self.name)
        if comment is None:
            return
        marker = parse_marker(comment)
        if marker is None or marker[:2] != (ctx.taskdb_id, ctx.task_id) or marker[3] != ctx.destination:
            where = (f"params.staging_table of destination {ctx.destination!r}" if self.named else
                     f"the default staging name of destination {ctx.destination!r}, derived from params.table; "
                     f"params.staging_table can name another")
            whose = ("it carries no wormhole staging marker" if marker is None else
                     f"it is the staging table of task {marker[1]}, destination {marker[3]!r}"
                     + (f" of task database {marker[0]}" if marker[0] else ""))
            raise sql.error(PrepareError, f"staging table {sql.ref(self.name)} ({where}) already exists on "
                                          f"{sql.endpoint.mark} and {whose}; it is left untouched: drop or rename "
                                          f"it, or choose another staging_table")
        conn.execute(f"DROP TABLE {sql.ref(self.name)}")
        ctx.log.info("writer.staging_reclaimed", table=self.name, left_by_run=marker[2])

    def swap(self, conn: psycopg.Connection[Any]) -> None:
        """Inside the commit's transaction: the staging table becomes the target."""
        sql = self.sql
        comment = sql.table_comment(conn, self.target)
        conn.execute(f"COMMENT ON TABLE {sql.ref(self.name)} IS {_literal(comment) if comment else 'NULL'}")
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


def _literal(text: str) -> str:
    """A string literal (standard_conforming_strings: only ``'`` is doubled)."""
    return "'" + text.replace("'", "''") + "'"

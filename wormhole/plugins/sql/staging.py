"""The staging table of a ``load: staging`` SQL destination: its name, its marker, and reclaiming it.

Rows go to a staging table made like the target, swapped in at commit (each store's swap is its own:
MySQL's RENAME, PostgreSQL's transactional DROP and RENAME); rollback drops it, leaving the target
untouched.

wormhole never drops a table it did not create: the staging table it creates carries the table comment
``wormhole:db=<task database id>,task=<id>,run=<id>,dest=<id>``. At prepare, an existing table by the
staging name is dropped only when it carries that marker for the same task database, task and destination
(the leftover of a crashed run); any other existing table fails the destination and stays as it is.

The staging table is named and marked by the destination's *state run* (``ctx.state_run``): a run that
resumes a crashed one adopts the staging table that run left (its durable splits are in it) instead of
reclaiming it; a fresh run reclaims leftovers of its task and destination as before.
"""

from __future__ import annotations

import re
from typing import Any

from wormhole.errors import PrepareError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.target import TargetSql

_MARKER = re.compile(r"wormhole:(?:db=([0-9A-Za-z_-]+),)?task=(\d+),run=(\d+),dest=(\S+)")

Marker = tuple[str, int, int, str]
"""``(task database id, task, run, destination)`` of a staging table."""


def staging_marker(ctx: WriteContext) -> str:
    """The table comment of a staging table wormhole created (destination ids hold no comma or space);
    without a task database id, the comment of the versions before it."""
    db = f"db={ctx.taskdb_id}," if ctx.taskdb_id else ""
    return f"wormhole:{db}task={ctx.task_id},run={ctx.state_run},dest={ctx.destination}"


def parse_marker(comment: str) -> Marker | None:
    """The marker in a table comment ('' for a marker without a task database id), or None when it is not one."""
    found = _MARKER.fullmatch(comment.strip())
    return None if found is None else (found[1] or "", int(found[2]), int(found[3]), found[4])


def run_tag(ctx: WriteContext, state_run: int) -> str:
    return f"{ctx.task_id}_{state_run}" + (f"_{ctx.taskdb_id}" if ctx.taskdb_id else "")


def default_name(dialect: Dialect, target: str, ctx: WriteContext, state_run: int) -> str:
    """The staging table of ``target`` for a task's state run, when ``staging_table`` names none."""
    return dialect.fit_name(target, f"__wh{run_tag(ctx, state_run)}")


def staging_leftovers(sql: TargetSql, conn: Any, ctx: WriteContext, target: str, named: str | None,
                      keep_run: int | None) -> list[tuple[str, int]]:
    """``(table, run)`` of every staging table of ``ctx``'s task and destination but ``keep_run``'s: a
    table counts only when it carries the marker *and* has the staging name of the marker's run
    (``named``, or the default one), so a user's table is never taken for one."""
    leftovers = []
    shared = ctx.shared

    def listed() -> tuple[tuple[str, str], ...]:
        return tuple(sql.dialect.commented_tables(conn, sql.namespace))
    # A database task lists them once per namespace: what earlier runs left is there when this run starts, and
    # what this run makes is its own (keep_run's).
    commented = listed() if shared is None else shared.once(("commented", sql.dialect.name, sql.endpoint,
                                                              sql.namespace), listed)
    for name, comment in commented:
        marker = parse_marker(comment)
        if marker is None or marker[:2] != (ctx.taskdb_id, ctx.task_id) or marker[3] != ctx.destination \
                or marker[2] == keep_run:
            continue
        if name == (named or default_name(sql.dialect, target, ctx, marker[2])):
            leftovers.append((name, marker[2]))
    return leftovers


class Staging:
    """One run's staging table: what every store's does alike (its name, adopting the state run's, reclaiming
    a leftover); each store's subclass creates it and swaps it in."""

    def __init__(self, sql: TargetSql, ctx: WriteContext, target: str, name: str | None) -> None:
        self.sql = sql
        self.ctx = ctx
        self.target = target
        self.named = name is not None
        self.name = name or default_name(sql.dialect, target, ctx, ctx.state_run)
        self.created = False
        """This run created (or adopted) the staging table: only then may commit or rollback drop it."""
        self.adopted = False
        """The staging table is the one the crashed run of ``ctx.state_run`` left, rows and all."""

    def _left_by_state_run(self, conn: Any) -> bool:
        """A table by the staging name is there and carries the state run's own marker."""
        ctx = self.ctx
        comment = self.sql.table_comment(conn, self.name)
        return comment is not None and \
            parse_marker(comment) == (ctx.taskdb_id, ctx.task_id, ctx.state_run, ctx.destination)

    def _adopted(self) -> bool:
        self.created = self.adopted = True
        self.ctx.log.info("writer.staging_adopted", table=self.name, state_run=self.ctx.state_run)
        return True

    def _reclaim(self, conn: Any) -> None:
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

"""What earlier runs of a task left in an SQL destination: staging tables (marked and named as wormhole
names them) and split markers of state runs that never finished, found and removed."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from wormhole.errors import PeripheryError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.sql.markers import SplitMarkers
from wormhole.plugins.sql.staging import staging_leftovers
from wormhole.plugins.sql.target import TargetSql

Leftover = tuple[str, Callable[[Any], None]]
"""What a leftover is (for ``task show``), and how it is removed on a connection."""


def find_leftovers(sql: TargetSql, conn: Any, ctx: WriteContext, options: Any, markers: SplitMarkers,
                   keep_run: int | None) -> list[Leftover]:
    """The staging tables and split markers of every state run of the task's destination but ``keep_run``'s."""
    found: list[Leftover] = []
    for name, run in staging_leftovers(sql, conn, ctx, options.table, options.staging_table, keep_run):
        ref = sql.ref(name)
        found.append((f"table {ref} (staging of run {run})",
                      partial(sql.run, statement=f"DROP TABLE {ref}", what="dropping a leftover staging table",
                              error=PeripheryError)))
    for run, splits in markers.other_runs(conn, keep_run).items():
        found.append((f"{splits} split marker(s) of run {run} in {markers.table}",
                      partial(markers.drop_run, state_run=run)))
    return found


def remove_leftovers(sql: TargetSql, conn: Any, ctx: WriteContext, found: list[Leftover], *,
                     quietly: bool) -> list[str]:
    """Remove ``found``; ``quietly``: one that cannot be removed is logged and kept (it is not this run's:
    ``task show`` keeps listing it), else its error is raised."""
    removed = []
    for text, remove in found:
        try:
            remove(conn)
        except (PeripheryError, sql.dialect.db_error) as exc:
            if not quietly:
                raise
            error = str(exc) if isinstance(exc, PeripheryError) else sql.dialect.describe(exc)
            ctx.log.warning("writer.leftover_not_removed", leftover=text, error=error)
        else:
            removed.append(text)
            ctx.log.info("writer.leftover_removed", leftover=text)
    return removed

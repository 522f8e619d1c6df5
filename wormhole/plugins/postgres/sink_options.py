"""What users write under a postgres destination's ``params`` (:class:`PostgresWriterOptions`).

The connection keys are :class:`~.options.ServerOptions`'s; identifiers are checked by
:func:`~.options.check_identifier` and always double-quoted in SQL (their case is kept as written).
``pre_sql``, ``post_sql`` and ``rollback_sql`` are SQL text from the task author and run as given. What
only the target can tell (an upsert's key when ``upsert_key`` names none, the columns ``distributed_by``
names) is checked at prepare, with the key path in the message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from wormhole.options import Problems, join_path, opt
from wormhole.plugins.postgres.options import (
    NAMING,
    ServerOptions,
    check_column_names,
    check_credentials,
    check_identifier,
)
from wormhole.plugins.sql.sink_options import SinkParams
from wormhole.plugins.sql.source_options import Naming


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresWriterOptions(ServerOptions, SinkParams):
    database: str = opt(nonempty=True)
    """The database of the target table."""
    schema: str = opt("public", nonempty=True)
    """The schema of the target table (and of the ``wormhole_splits`` marker table)."""
    table: str = opt(nonempty=True)
    """The target table; it must exist unless ``create_table`` (with ``staging``, its structure is copied)."""
    columns: tuple[str, ...] | None = opt(None, min_items=1)
    """Target column names, positionally matching the source schema; default the source's names. A name
    matches the target's column of that exact name, else its only column of that name ignoring case."""
    write_mode: Literal["insert", "upsert"] = "insert"
    """``insert`` (a duplicate key rejects the row) or ``upsert``: each batch is COPY'd into a temporary
    table, then ``INSERT ... ON CONFLICT (upsert_key) DO UPDATE`` of every written column."""
    upsert_key: tuple[str, ...] | None = opt(None, min_items=1)
    """Columns of the upsert's ON CONFLICT (a unique index must cover exactly them); default the target's
    primary key. Only with write_mode 'upsert'."""
    load: Literal["append", "truncate", "staging"] = "append"
    """``append``: each split is committed with its marker row in one transaction; a rollback runs
    ``rollback_sql`` or, without it, leaves the rows and says so. ``truncate``: TRUNCATE at prepare (in the
    transaction that records it, so a resumed run does not truncate again), then as ``append``.
    ``staging``: rows go to a table created ``LIKE`` the target ``INCLUDING ALL``; commit swaps it in
    (DROP the target, RENAME the staging table) in one transaction, rollback drops it."""
    create_table: bool = False
    """Create the target from the source's schema when it does not exist (types: README "postgres")."""
    distributed_by: tuple[str, ...] | None = opt(None, min_items=1)
    """Greenplum: the distribution key of a table wormhole creates (``DISTRIBUTED BY (...)``). Only with
    create_table; PostgreSQL itself refuses the clause."""
    pre_sql: tuple[str, ...] = ()
    """Statements run before any row is written (each in its own transaction, in order); not again when a
    run resumes one that got through prepare."""
    post_sql: tuple[str, ...] = ()
    """Statements run at commit in the commit's transaction, after the rows are in place (with staging:
    after the swap): if one fails, the commit (and the swap) is undone. No statement that cannot run
    inside a transaction block (VACUUM, CREATE INDEX CONCURRENTLY)."""
    rollback_sql: tuple[str, ...] = ()
    """Statements that undo an ``append`` or ``truncate`` load when the destination rolls back."""
    verify: Literal["count"] | None = None
    """``count``: at commit, the table written must hold exactly the rows written (plus, for append, the
    rows it held before); a difference fails the destination. Needs write_mode insert."""
    staging_table: str | None = opt(None, nonempty=True)
    """Name of the staging table; default ``<table>__wh<task id>_<run id>_<task database id>`` (cut to 63
    bytes). An existing table by that name fails the destination at prepare unless it is a marked leftover
    of this task and destination: wormhole never drops a table it did not create."""
    batch_size: int = opt(65536, min=1, max=1_000_000)
    """Most rows per COPY; a split's COPYs share its transaction."""
    copy_format: Literal["auto", "text"] = "auto"
    """``auto``: COPY in binary when every target column's type has a binary form wormhole makes (chosen at
    prepare from the catalog; the server's COPY costs less), else text; ``text``: always text (a server
    without binary COPY)."""
    retries: int = opt(3, min=0, max=20)
    """Retries of a batch after a transient error (deadlock, serialization failure, lock not available,
    lost connection); a split whose transaction is lost is written again from its start."""
    retry_wait_s: float = opt(0.5, min=0.0)
    """First wait before a retry; it doubles each time (at most 30 s). A stopping task ends the wait at once."""

    NAMING: ClassVar[Naming] = NAMING

    def check(self, path: str, problems: Problems) -> None:
        check_credentials(self.password, self.password_env, path, problems)
        check_column_names(self.columns, join_path(path, "columns"), problems)
        check_column_names(self.upsert_key, join_path(path, "upsert_key"), problems)
        check_column_names(self.distributed_by, join_path(path, "distributed_by"), problems)
        for key in ("database", "schema", "table"):
            check_identifier(getattr(self, key), join_path(path, key), problems)
        self.check_staging(path, problems)
        if self.upsert_key is not None and self.write_mode != "upsert":
            problems.add(join_path(path, "upsert_key"), "only with write_mode 'upsert'")
        self.check_rollback(path, problems)
        if self.distributed_by is not None and not self.create_table:
            problems.add(join_path(path, "distributed_by"), "only with create_table (it is part of the CREATE "
                                                            "TABLE wormhole runs)")


def single_writer_key(options: PostgresWriterOptions) -> str | None:
    """Two destinations truncating or swapping the same table would undo each other's load."""
    if options.load == "append":
        return None
    return f"postgres table {options.host.lower()}:{options.port}/{options.database}.{options.schema}.{options.table}"

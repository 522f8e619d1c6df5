"""The SQL destination's periphery, what every SQL store's does alike: the phases of a load around its
writers (prepare, commit, rollback, release), the split markers that make a run resumable, the row count
``verify`` checks, and the leftovers of earlier runs.

Loads (``load``):
- ``append``: each split is committed with its marker row (:mod:`.markers`); rollback runs ``rollback_sql``,
  or, without it, fails plainly (the rows stay and the result says so);
- ``truncate``: ``TRUNCATE`` at prepare (a resumed run does not truncate again), then as append;
- ``staging``: rows go to a staging table (:mod:`.staging`) swapped in at commit.

Resumable runs (:class:`~wormhole.plugins.base.DurablePeriphery`): a run that resumes (``ctx.resuming``)
after the crashed run's prepare had finished repeats none of it (no ``pre_sql``, no TRUNCATE, the staging
table adopted) and reports the markers as its durable splits; one resuming after a commit that was not
recorded does nothing again. A store's subclass (``plugins/<store>/``) supplies how it prepares the target
and commits (its DDL transactional or not), and how it connects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from wormhole.errors import CommitError, PeripheryError, PrepareError, RollbackError, StorageError, WriteError
from wormhole.plugins.base import ShippedWithoutLock, WriteContext
from wormhole.plugins.sql.leftovers import Leftover, find_leftovers, remove_leftovers
from wormhole.plugins.sql.markers import COMMITTED, SplitMarkers
from wormhole.plugins.sql.settling import Unsettled, settle
from wormhole.plugins.sql.staging import Staging
from wormhole.plugins.sql.target import TargetSql, fetch_one

P = TypeVar("P", bound="SqlWriterPeriphery")
"""The store's periphery class: the methods its role's facets name are typed by it, not by this base."""


class SqlWriterPeriphery(ShippedWithoutLock):
    """Prepares the target, and commits or rolls back the load: the phases' common part."""

    def __init__(self, options: Any, ctx: WriteContext, sql: TargetSql) -> None:
        self.options = options
        self.ctx = ctx
        self.sql = sql
        self.endpoint = sql.endpoint
        self.dialect = sql.dialect
        self.lock = threading.Lock()
        self.columns: tuple[str, ...] = ()
        """The target's columns written, by position of the source's."""
        self.write_table: str = options.table
        """Where writers put rows: the target, or the staging table."""
        self.staging: Staging | None = None
        self.rows_before: int | None = None
        self.rows_written = 0
        self._counted: set[str] = set()
        self.truncated = False
        self.prepared = False
        self.finished = False
        self.broken: str | None = None
        """Why the load cannot be committed (set by a writer whose piece failed for good)."""
        self.markers = SplitMarkers(sql, ctx)
        self.markers_ready = False
        self.durable: dict[str, int] = {}
        """Splits held durably before this run (resuming): split id -> rows."""
        self.phase: str | None = None
        """How far the state run's load got when this run prepared (resuming): see :mod:`.markers`."""
        self.commit_unknown: str | None = None
        """Why a commit's outcome could not be settled: then rollback leaves everything for a resume to read."""

    @property
    def target(self) -> str:
        return self.sql.ref(self.options.table)

    def table_ref(self, name: str) -> str:
        return self.sql.ref(name)

    def connect(self, error: type[StorageError], *, log: Any = None, **settings: Any) -> Any:
        """A connection to the destination's server (``settings``: ``autocommit``, the store's own)."""
        return self.dialect.open(self.endpoint, error, timeout=self.options.connect_timeout_s,
                                 destination=self.ctx.destination, stop=self.ctx.stop,
                                 log=self.ctx.log if log is None else log, **self.session_settings(), **settings)

    def session_settings(self) -> dict[str, Any]:
        """The store's connect settings from its options."""
        return {}

    def add_written(self: P, rows: int, split_id: str | None = None) -> None:
        """Count rows committed to the written table; a split's rows count once, however many attempts at it
        ended (a split durable before this run is counted in :attr:`durable_rows`)."""
        with self.lock:
            if split_id is not None:
                if split_id in self._counted or split_id in self.durable:
                    return
                self._counted.add(split_id)
            self.rows_written += rows

    def count_rows(self: P) -> int:
        """The rows the target holds now (``settings.verify: count``)."""
        conn = self.connect(WriteError)
        try:
            with self.sql.failing_as(WriteError, f"counting the rows of {self.target}"):
                found = fetch_one(conn, f"SELECT COUNT(*) FROM {self.target}")
        finally:
            self.dialect.close_quietly(conn)
        return int(found[0]) if found else 0

    def delete_keys(self: P, columns: Sequence[str], keys: Sequence[tuple[Any, ...]]) -> int:
        """Delete the target's rows holding each key, in one transaction (``wormhole verify --repair``): the
        rows deleted. The values are bound parameters, never SQL text."""
        quote = self.dialect.quote
        statement = f"DELETE FROM {self.target} WHERE " + " AND ".join(f"{quote(c)} = %s" for c in columns)
        conn = self.connect(WriteError, autocommit=False)
        deleted = 0
        try:
            with self.sql.failing_as(WriteError, f"deleting rows of {self.target}"), conn.cursor() as cur:
                for key in keys:
                    cur.execute(statement, tuple(key))
                    deleted += max(cur.rowcount, 0)
                conn.commit()
        finally:
            self.dialect.close_quietly(conn)  # an uncommitted transaction goes with its connection
        return deleted

    def durable_splits(self: P) -> dict[str, int]:
        """The splits this destination already holds for ``ctx.state_run`` (their markers), read at prepare."""
        return dict(self.durable)

    def durable_now(self: P) -> dict[str, int]:
        """The splits this destination holds for ``ctx.state_run`` now, read again from its markers: a Spark task
        run again asks, since an earlier attempt of it may have made its split durable after prepare read them."""
        found: dict[str, int] = {}
        self._session(WriteError, "reading the split markers of", lambda conn: found.update(self.markers.durable(conn)))
        return found

    @property
    def durable_rows(self) -> int:
        return sum(self.durable.values())

    def _session(self, error: type[StorageError], what: str, step: Callable[[Any], None]) -> None:
        """``step`` on a connection of its own (or one a step before left idle: :meth:`_lend`); a driver error
        fails as '<what> <target> on <server> failed'."""
        conn = self._lend(error)
        kept = False
        try:
            with self.sql.failing_as(error, f"{what} {self.target}"):
                step(conn)
            kept = self._give_back(conn)
        finally:
            if not kept:
                self.dialect.close_quietly(conn)

    def _lend(self, error: type[StorageError]) -> Any:
        """A session for a step of prepare, commit or release: in a database task, one another table's step
        left idle on this server (:mod:`wormhole.plugins.shared`), else a new connection."""
        shared = self.ctx.shared
        conn = shared.lend(self._session_key()) if shared is not None and self.lends() else None
        return conn if conn is not None else self.connect(error)

    def _give_back(self, conn: Any) -> bool:
        """Keep ``conn`` for the next step when it is as a new session would be; whether it was kept."""
        shared = self.ctx.shared
        if shared is None or not self.lends() or not self.dialect.idle(conn):
            return False
        shared.keep(self._session_key(), conn, self.dialect.close_quietly)
        return True

    def _session_key(self) -> Any:
        return ("periphery", self.dialect.name, self.endpoint, tuple(sorted(self.session_settings().items())))

    def lends(self) -> bool:
        """The task author's statements (``pre_sql``, ``post_sql``, ``rollback_sql``) may change a session's
        settings: a destination that has any keeps its sessions to itself."""
        opts = self.options
        return not (getattr(opts, "pre_sql", ()) or getattr(opts, "post_sql", ()) or getattr(opts, "rollback_sql", ()))

    # -- prepare --------------------------------------------------------------------------------

    def prepare(self) -> None:
        if self.prepared:
            return
        self._session(PrepareError, "preparing", self._prepare)
        self.prepared = True

    def _prepare(self, conn: Any) -> None:
        raise NotImplementedError

    def _written_names(self) -> tuple[str, ...]:
        """The target's columns the source's are written to (``columns``, else the source's names)."""
        opts, schema = self.options, self.ctx.schema
        names = opts.columns if opts.columns is not None else schema.names
        if len(names) != len(schema):
            raise self.sql.error(PrepareError, f"columns names {len(names)} column(s) but the source has "
                                               f"{len(schema)}: {', '.join(schema.names)}")
        return tuple(names)

    def _open_markers(self, conn: Any) -> tuple[str | None, int | None]:
        """The markers table made ready and other runs' leftovers removed; resuming, how far the state run's
        load got and the row count its prepare recorded."""
        self.markers.ensure(conn)
        self.markers_ready = True
        found = self._leftovers(conn, keep_run=self.ctx.state_run)  # other runs' staging and markers
        remove_leftovers(self.sql, conn, self.ctx, found, quietly=True)
        self.phase, before = self.markers.phase(conn) if self.ctx.resuming else (None, None)
        return self.phase, before

    def _resume_prepared(self, phase: str, recorded_before: int | None) -> None:
        """The crashed run got through prepare: its pre_sql and TRUNCATE ran, and its durable splits are in
        the target (or its staging table): running them again would lose those, so they are taken as done."""
        self.ctx.log.info("writer.prepare_resumed", state_run=self.ctx.state_run, phase=phase)
        self.truncated = self.options.load == "truncate"
        self.rows_before = recorded_before

    def _pre_sql(self, conn: Any) -> None:
        for statement in self.options.pre_sql:
            self.sql.run(conn, statement, "pre_sql", PrepareError)

    def _truncate(self, conn: Any) -> None:
        self.sql.run(conn, f"TRUNCATE TABLE {self.target}", "truncate", PrepareError)

    def _count_before(self, conn: Any) -> None:
        """An append that verifies counts the target's rows first (recorded with the prepared marker)."""
        if self.options.verify == "count" and self.options.load == "append":
            found = fetch_one(conn, f"SELECT COUNT(*) FROM {self.target}")
            self.rows_before = int(found[0]) if found else 0

    # -- commit / rollback ----------------------------------------------------------------------

    def commit(self) -> None:
        if self.finished:
            return
        if self.broken is not None:
            raise self.sql.error(CommitError, f"cannot commit {self.target}: {self.broken}")
        done = self.phase == COMMITTED
        if done:
            self.ctx.log.info("writer.commit_skipped", reason=f"run {self.ctx.state_run} committed this load "
                                                              "before it crashed")
        self._commit_load(done)
        self.phase = COMMITTED
        self.finished = True

    def _commit_load(self, done: bool) -> None:
        """Commit the load (``done``: the state run committed it already, only what follows is left)."""
        raise NotImplementedError

    def _commit_settled(self, commit: Callable[[Any], None]) -> None:
        """``commit`` (one transaction, its ``committed`` phase in it) on a connection of its own. When the
        connection is lost with COMMIT's answer among what was lost, that phase says whether it happened once
        the server has ended the session (:mod:`.settling`): committed, the load is done; not, it fails."""
        conn = self._lend(CommitError)
        session = self.dialect.session_id(conn)
        kept = False
        try:
            commit(conn)
            kept = self._give_back(conn)
        except self.dialect.db_error as exc:
            failed = f"committing {self.target} on {self.endpoint.mark} failed: {self.dialect.describe(exc)}"
            if not (self.dialect.commit_unknown(exc, conn) and self.markers_ready):
                raise self.sql.error(CommitError, failed) from exc
            try:
                phase, _ = settle(self.dialect, session, self.ctx.stop, self.markers.phase,
                                  connect=lambda: self.connect(CommitError))
            except Unsettled as error:
                self.commit_unknown = f"{failed}; whether it committed {error}"
                raise self.sql.error(CommitError, self.commit_unknown) from error
            self.ctx.log.warning("writer.commit_settled", table=self.target, durable=phase == COMMITTED, error=failed)
            if phase != COMMITTED:
                raise self.sql.error(CommitError, f"{failed}; it did not commit") from exc
        finally:
            if not kept:
                self.dialect.close_quietly(conn)

    def _post_sql(self, conn: Any) -> None:
        for statement in self.options.post_sql:
            self.sql.run(conn, statement, "post_sql", CommitError)

    def _verify(self, conn: Any) -> None:
        """Rows in the written table == rows before the load + rows written by this run and by the runs it
        resumes (their markers). The count before an append is recorded at prepare, so a resumed run knows
        it too; should it be unknown (a marker table from before), the check is skipped."""
        table = self.sql.ref(self.write_table)
        if self.options.load == "append" and self.rows_before is None:
            self.ctx.log.warning("writer.verify_skipped", reason="the row count before the load is unknown")
            return
        found = fetch_one(conn, f"SELECT COUNT(*) FROM {table}")
        count = int(found[0]) if found else 0
        expected = self.rows_written + self.durable_rows + (self.rows_before or 0)
        if count != expected:
            earlier = f", {self.durable_rows} by the runs resumed" if self.durable else ""
            raise self.sql.error(CommitError, f"verify count: {table} holds {count} rows, expected {expected} "
                                              f"({self.rows_written} written{earlier})")

    def release(self: P) -> None:
        """The task's outcome is recorded: this load's markers are not needed to resume any more. In a database
        task they go with the other tables' of the same markers table, one statement for hundreds of tables
        (:meth:`RunShared.release_later`), not a statement and a commit each at the end of the run."""
        if not self.markers_ready:
            return
        shared = self.ctx.shared
        if shared is not None and self.lends():
            shared.release_later(("markers", *self.markers.release_group()), self, _forget_all)
            return
        self._session(PeripheryError, "deleting the split markers of", self.markers.forget)

    def rollback(self) -> None:
        if self.finished:
            return
        if self.phase == COMMITTED:
            self.finished = True
            raise self.sql.error(RollbackError, f"not rolled back: run {self.ctx.state_run} committed the load "
                                                f"into {self.target} before it crashed")
        self._rollback_load()
        self.finished = True

    def _rollback_load(self) -> None:
        raise NotImplementedError

    def _rollback_sql(self, conn: Any) -> None:
        for statement in self.options.rollback_sql:
            self.sql.run(conn, statement, "rollback_sql", RollbackError)

    def _left_as_is(self) -> None:
        """Without rollback_sql an append or truncate cannot be undone: what stays is said."""
        self._session(RollbackError, "rolling back", self.markers.forget)
        committed = self.rows_written + self.durable_rows
        what = []
        if self.truncated:
            what.append(f"{self.target} was truncated (its earlier rows are gone)")
        if committed:
            earlier = f" ({self.durable_rows} by the runs resumed)" if self.durable else ""
            what.append(f"{committed} rows committed to {self.target}{earlier} stay there")
        if what:
            self.finished = True
            raise self.sql.error(RollbackError, f"not rolled back: load is '{self.options.load}' without "
                                                f"rollback_sql: {'; '.join(what)}")

    # -- leftovers of earlier runs ------------------------------------------------------------

    def leftovers(self: P, keep_run: int | None) -> list[str]:
        """What crashed runs of this task left for this destination: staging tables (marked and named as
        wormhole names them) and split markers, of every state run but ``keep_run``."""
        found: list[str] = []
        self._session(PeripheryError, "looking for leftovers of",
                      lambda conn: found.extend(text for text, _ in self._leftovers(conn, keep_run)))
        return found

    def clean_leftovers(self: P, keep_run: int | None) -> list[str]:
        removed: list[str] = []
        self._session(PeripheryError, "removing leftovers of", lambda conn: removed.extend(remove_leftovers(
            self.sql, conn, self.ctx, self._leftovers(conn, keep_run), quietly=False)))
        return removed

    def _leftovers(self, conn: Any, keep_run: int | None) -> list[Leftover]:
        return find_leftovers(self.sql, conn, self.ctx, self.options, self.markers, keep_run)


def _forget_all(peripheries: Sequence[SqlWriterPeriphery]) -> None:
    """The markers of ``peripheries`` (one :meth:`SplitMarkers.release_group`) deleted on a session of the first."""
    first = peripheries[0]
    destinations = [p.ctx.destination for p in peripheries]
    first._session(PeripheryError, f"deleting the split markers of {len(destinations)} tables, the first",
                   lambda conn: first.markers.forget_all(conn, destinations))

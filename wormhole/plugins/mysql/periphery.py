"""The mysql store's peripheries on the SQL kit's (:mod:`wormhole.plugins.sql.periphery`). MySQL's DDL is not
transactional: prepare runs ``pre_sql``, TRUNCATE and the staging table each on its own, then records the
prepared marker; commit records the phases around the staging swap (:mod:`.staging`), then ``post_sql`` and
``committed``, so a resumed run finishes a swap that was under way."""

from __future__ import annotations

from typing import Any

import pymysql
import pymysql.cursors

from wormhole.errors import CommitError, PrepareError, RollbackError
from wormhole.plugins.base import WriteContext
from wormhole.plugins.mysql.dialect import MYSQL
from wormhole.plugins.mysql.options import MysqlWriterOptions
from wormhole.plugins.mysql.passthrough import choose_method, load_method, target_columns, wire_columns
from wormhole.plugins.mysql.staging import MysqlStaging, refuse_unkept
from wormhole.plugins.sql import backquote as quote
from wormhole.plugins.sql.markers import COMMITTED, SWAPPED, SWAPPING
from wormhole.plugins.sql.narrowing import Narrowing, mysql_target, narrowings
from wormhole.plugins.sql.periphery import SqlWriterPeriphery
from wormhole.plugins.sql.reader_periphery import SqlReaderPeriphery
from wormhole.plugins.sql.source_options import Shard
from wormhole.plugins.sql.target import TargetSql, fetch_one


class MysqlWriterPeriphery(SqlWriterPeriphery):
    """Prepares the target (pre_sql, truncate or staging table), and commits or rolls back the load."""

    staging: MysqlStaging | None

    def __init__(self, options: MysqlWriterOptions, ctx: WriteContext) -> None:
        super().__init__(options, ctx, TargetSql(options.endpoint, options.endpoint.database, ctx.destination, MYSQL))
        self.method = "insert"
        self.wire: tuple[bool, ...] = ()
        """Which columns' LOAD DATA fields are their wire text (:mod:`.passthrough`), decided at prepare."""
        self._natives: dict[str, str] = {}
        self.narrowing: tuple[Narrowing | None, ...] = ()
        """What each written column's target column holds less of than the column may carry (a value it would
        change is refused, :mod:`wormhole.plugins.sql.narrowing`), decided at prepare."""
        self.load_sql = ""
        self.insert_prefix = ""
        self.insert_suffix = ""
        self.max_packet = 16 << 20

    def session_settings(self) -> dict[str, Any]:
        return {"strict": self.options.strict}

    # -- prepare --------------------------------------------------------------------------------

    def _prepare(self, conn: pymysql.Connection) -> None:
        opts = self.options
        types = self._target_columns(conn)
        self.max_packet, local_infile = self._server_settings(conn)
        self.method = self._choose_method(conn, local_infile)
        phase, recorded_before = self._open_markers(conn)
        done = phase is not None
        if phase == COMMITTED:
            # The crashed run committed this load before its outcome was recorded: nothing is left to do.
            self.ctx.log.info("writer.load_committed_before", state_run=self.ctx.state_run)
            self.rows_before = recorded_before
            self.durable = self.markers.durable(conn)
            if opts.load == "staging":
                self.staging = MysqlStaging(self.sql, self.ctx, opts.table, opts.staging_table)
                self.staging.swapped = True  # its commit may not have dropped the old table yet
            self._build_sql([types[c.lower()] for c in self.columns])
            return
        if phase is not None:
            self._resume_prepared(phase, recorded_before)
        else:
            self._first_prepare(conn)
        if opts.load == "staging":
            self.staging = MysqlStaging(self.sql, self.ctx, opts.table, opts.staging_table)
            self.staging.prepare(conn, phase)
            self.write_table = self.staging.name
        if not done:
            self._count_before(conn)
            self.markers.record_prepared(conn, self.rows_before)
        self.durable = self.markers.durable(conn) if self.ctx.resuming else {}
        if self.durable and self.staging is not None and not self.staging.adopted:
            # The markers name splits of a staging table that is gone: they are written again.
            self.ctx.log.warning("writer.durable_state_lost", table=self.staging.name, splits=len(self.durable))
            self.markers.forget(conn)
            self.markers.record_prepared(conn, self.rows_before)
            self.durable = {}
        self._build_sql([types[c.lower()] for c in self.columns])

    def _first_prepare(self, conn: pymysql.Connection) -> None:
        """What only a run's first prepare does: refuse a target the swap cannot keep, pre_sql, TRUNCATE."""
        opts = self.options
        if opts.load == "staging":  # before pre_sql: nothing of the load is touched
            refuse_unkept(self.sql, conn, self.endpoint.database, opts.table, self.target)
        self._pre_sql(conn)
        if opts.load == "truncate":
            self._truncate(conn)
            self.truncated = True

    def _target_columns(self, conn: pymysql.Connection) -> dict[str, str]:
        """The target's column types by lower-case name; sets the columns written (checked against them)."""
        found = target_columns(conn, self.endpoint.database, self.options.table)
        if not found:
            why = (" (create_table on a mysql destination needs a database task (source.params.tables) for now)"
                   if self.options.create_table else "")
            raise self.sql.error(PrepareError, f"table {self.target} does not exist on {self.endpoint.mark}{why}")
        columns = self._written_names()
        types = {name.lower(): dt for name, dt, _ in found}
        unknown = [c for c in columns if c.lower() not in types]
        if unknown:
            raise self.sql.error(PrepareError, f"table {self.target} has no column {', '.join(unknown)}")
        self.columns = tuple(columns)
        self._natives = {name.lower(): native for name, _, native in found}
        self.narrowing = narrowings(self.ctx.schema, [mysql_target(self._natives[c.lower()]) for c in columns],
                                    "MySQL")
        return types

    def _server_settings(self, conn: pymysql.Connection) -> tuple[int, bool]:
        """The server's ``max_allowed_packet`` and ``local_infile``, asked once per server in a database task."""
        def asked() -> tuple[int, bool]:
            packet, infile = fetch_one(conn, "SELECT @@max_allowed_packet, @@GLOBAL.local_infile")
            return int(packet), bool(int(infile))
        shared = self.ctx.shared
        return asked() if shared is None else shared.once(("mysql-server", self.endpoint), asked)

    def _choose_method(self, conn: pymysql.Connection, local_infile: bool) -> str:
        method = choose_method(conn, self.options, local_infile)
        if method is None:
            raise self.sql.error(PrepareError, f"method 'load_data' needs local_infile, which {self.endpoint.mark} "
                                               f"has switched off (use method 'insert' or 'auto')")
        self.wire = (wire_columns(self.ctx.schema, self.columns, self._natives, method) if self.ctx.wire_text
                     else (False,) * len(self.columns))  # Spark's batches carry no wire text
        self.ctx.log.info("writer.load_method", load=load_method(method, self.ctx.schema, self.wire))
        return method

    def _build_sql(self, target_types: list[str]) -> None:
        opts = self.options
        table = self.table_ref(self.write_table)
        cols = ", ".join(quote(c) for c in self.columns)
        verb = "REPLACE" if opts.write_mode == "replace" else "INSERT"
        self.insert_prefix = f"{verb} INTO {table} ({cols}) VALUES "
        if opts.write_mode == "upsert":
            updates = ", ".join(f"{quote(c)} = VALUES({quote(c)})" for c in self.columns)
            self.insert_suffix = f" ON DUPLICATE KEY UPDATE {updates}"
        # LOAD DATA takes bytes as hex through a variable (a raw byte could end a field or line),
        # and BIT and YEAR columns through a CAST to a number: a loaded field is text, which BIT
        # would take byte by byte and YEAR would read '0' as 2000 where the number 0 is 0000.
        targets, sets = [], []
        for i, (name, column) in enumerate(zip(self.columns, self.ctx.schema.columns, strict=True)):
            numeric = target_types[i] in ("bit", "year") and column.type != "bytes"
            if column.type == "bytes" or numeric:
                var = f"@wh{i}"
                targets.append(var)
                expr = f"UNHEX({var})" if column.type == "bytes" else f"CAST({var} AS UNSIGNED)"
                sets.append(f"{quote(name)} = {expr}")
            else:
                targets.append(quote(name))
        replace = " REPLACE" if opts.write_mode == "replace" else ""
        marker = "\x00wh-file\x00"
        sql = (f"LOAD DATA LOCAL INFILE {marker}{replace} INTO TABLE {table} CHARACTER SET utf8mb4 "
               f"FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' "
               f"({', '.join(targets)})" + (f" SET {', '.join(sets)}" if sets else ""))
        # The file name is bound by the driver, which formats with %: a % in a name must stay literal.
        self.load_sql = sql.replace("%", "%%").replace(marker, "%s")

    # -- commit / rollback ----------------------------------------------------------------------

    def _commit_load(self, done: bool) -> None:
        conn = self._lend(CommitError)
        kept = False
        try:
            if not done:
                self._commit(conn)
            if self.staging is not None:
                self.staging.drop_old(conn)
            kept = self._give_back(conn)
        finally:
            if not kept:
                self.dialect.close_quietly(conn)

    def _commit(self, conn: pymysql.Connection) -> None:
        """Verify, swap (recording the phase around the RENAME), post_sql, then ``committed``: a crash
        anywhere in between is resumed from where it stopped (post_sql may then run again)."""
        staging = self.staging
        if staging is None or not staging.swapped:  # a resumed commit may find the swap done
            if self.options.verify == "count":
                self._verify(conn)
            if staging is not None:
                self._set_phase(conn, SWAPPING)
                staging.swap(conn)
                self._set_phase(conn, SWAPPED)
        self._post_sql(conn)
        self._set_phase(conn, COMMITTED)

    def _set_phase(self, conn: pymysql.Connection, phase: str) -> None:
        """Recorded on its own (autocommit): durable before the step it announces."""
        if self.markers_ready:
            with self.sql.failing_as(CommitError, f"recording the load's phase ({phase}) in {self.markers.table}"):
                self.markers.set_phase(conn, phase)
            self.phase = phase

    def _rollback_load(self) -> None:
        if self.options.load == "staging":
            self._rollback_staging()
        elif not (self.prepared or self.truncated):
            return  # prepare failed before any row could be written
        elif self.options.rollback_sql:
            self._session(RollbackError, "rolling back", self._undo)
        else:
            self._left_as_is()

    def _rollback_staging(self) -> None:
        if self.staging is None or not self.staging.created:
            if self.markers_ready:  # this run never created it: a table by that name is not ours to drop
                self._session(RollbackError, "rolling back", self.markers.forget)
            return
        self._session(RollbackError, "rolling back", self._undo)

    def _undo(self, conn: pymysql.Connection) -> None:
        """The staging table dropped (the swap undone first), or rollback_sql run; then the markers go."""
        if self.staging is not None:
            self.staging.rollback(conn)
        else:
            self._rollback_sql(conn)
        if not self.markers_ready:
            return
        try:
            with self.sql.failing_as(RollbackError, f"deleting split markers in {self.markers.table}"):
                self.markers.forget(conn)
        except RollbackError as exc:
            # The load itself is decided; markers of a finished state run are only leftovers.
            self.ctx.log.warning("writer.markers_left", table=self.markers.table, error=str(exc))


class MysqlReaderPeriphery(SqlReaderPeriphery):
    dialect = MYSQL

    def _running(self, conn: pymysql.Connection) -> int:
        """MySQL's Threads_running, this session's own excluded."""
        found = fetch_one(conn, "SHOW GLOBAL STATUS LIKE 'Threads_running'")
        return int(found[1]) - 1 if found else 0

    def _stats(self, conn: pymysql.Connection, shard: Shard) -> tuple[int | None, int | None]:
        marks = ", ".join(["%s"] * len(shard.tables))
        found = fetch_one(conn, f"SELECT SUM(TABLE_ROWS), SUM(DATA_LENGTH) FROM information_schema.TABLES "
                                f"WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({marks})",
                          (shard.endpoint.database, *shard.tables))
        return (None if found[0] is None else int(found[0])), (None if found[1] is None else int(found[1]))

    def _count(self, conn: pymysql.Connection, statements: list[str]) -> int:
        return sum(int(fetch_one(conn, self._with_timeout(conn, sql))[0]) for sql in statements)

    def _with_timeout(self, conn: pymysql.Connection, sql: str) -> str:
        seconds = self.source.count_timeout_s
        if "mariadb" in conn.get_server_info().lower():
            return f"SET STATEMENT max_statement_time = {seconds:g} FOR {sql}"
        return sql.replace("SELECT", f"SELECT /*+ MAX_EXECUTION_TIME({int(seconds * 1000)}) */", 1)

"""The postgres store's peripheries on the SQL kit's (:mod:`wormhole.plugins.sql.periphery`), doing in one
transaction each what PostgreSQL's transactional DDL allows: prepare (after ``pre_sql``: TRUNCATE or the
staging table, the table ``create_table`` makes, the prepared marker) and commit (verify, swap, ``post_sql``,
the ``committed`` phase, which settles a COMMIT whose answer was lost)."""

from __future__ import annotations

from typing import Any

import psycopg

from wormhole.errors import PrepareError, RollbackError
from wormhole.plugins.base import WILL_FAIL, Encoding, WriteContext
from wormhole.plugins.postgres.binary import binary_kinds
from wormhole.plugins.postgres.connection import connect, describe
from wormhole.plugins.postgres.ddl import create_table_sql
from wormhole.plugins.postgres.dialect import POSTGRES
from wormhole.plugins.postgres.kept import read_kept
from wormhole.plugins.postgres.options import PostgresWriterOptions
from wormhole.plugins.postgres.passthrough import takes
from wormhole.plugins.postgres.staging import PostgresStaging
from wormhole.plugins.sql import quote
from wormhole.plugins.sql.markers import COMMITTED
from wormhole.plugins.sql.narrowing import Narrowing, narrowings, postgres_target
from wormhole.plugins.sql.periphery import SqlWriterPeriphery
from wormhole.plugins.sql.reader_periphery import SqlReaderPeriphery
from wormhole.plugins.sql.source_options import Shard
from wormhole.plugins.sql.target import TargetSql, fetch_all, fetch_one

UPSERT_TABLE = "wh_upsert"
"""The temporary table (of each writer's session) an upsert's batch is COPY'd into first."""


class PostgresWriterPeriphery(SqlWriterPeriphery):
    """Prepares the target (pre_sql, create, truncate or staging table), and commits or rolls back the load."""

    staging: PostgresStaging | None

    def __init__(self, options: PostgresWriterOptions, ctx: WriteContext) -> None:
        endpoint = options.endpoint(options.database)
        super().__init__(options, ctx, TargetSql(endpoint, options.schema, ctx.destination, POSTGRES))
        self.copy_sql = ""
        self.copy_binary_sql = ""
        self.binary_kinds: tuple[str, ...] | None = None
        """The target columns' types when COPY is binary (:mod:`.binary`), None when text."""
        self.target_types: tuple[str, ...] = ()
        """Each written column's declared type (``format_type``), once prepared."""
        self.narrowing: tuple[Narrowing | None, ...] = ()
        """What each written column's target column holds less of than the column may carry (a value it would
        round is refused, :mod:`wormhole.plugins.sql.narrowing`), once prepared."""
        self.array_columns: tuple[int, ...] = ()
        """The written columns (by position) that are arrays (or domains over one), once prepared: a JSON
        array is written to them as an array literal (:func:`.encoding.array_literal`)."""
        self.upsert_sql: tuple[str, ...] = ()
        """An upsert's statements per batch before its COPY into :data:`UPSERT_TABLE` (``copy_sql``)."""
        self.insert_sql = ""
        """An upsert's INSERT ... SELECT from :data:`UPSERT_TABLE` ... ON CONFLICT, after the COPY."""
        self.session_sql: tuple[str, ...] = ()
        """Statements each writer session runs (committed) before its first piece: an upsert's temporary table."""
        self.created_target = False

    def session_settings(self) -> dict[str, Any]:
        return {"attempts": self.options.connect_retries}

    # -- prepare --------------------------------------------------------------------------------

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        phase, recorded_before = self._open_markers(conn)
        if phase is not None:
            self._resume_prepared(phase, recorded_before)
            self._describe_target(conn)
            if phase != COMMITTED and self.options.load == "staging":
                self._adopt_staging(conn)
        else:
            self._pre_sql(conn)
            made: dict[str, bool] = {}
            with conn.transaction():
                self._prepare_target(conn, made)
            self.created_target = made.get("created", False)  # once committed: a failed prepare made nothing
            self.truncated = made.get("truncated", False)
            if self.staging is not None:
                self.staging.created = True
        self.durable = self.markers.durable(conn) if self.ctx.resuming else {}
        self._build_sql(conn)
        self._choose_format(conn)

    def _choose_format(self, conn: psycopg.Connection[Any]) -> None:
        """Binary COPY when every target column's type (from the catalog) is one :mod:`.binary` encodes from
        its source column's logical type, else text."""
        found = dict((str(r[0]), (str(r[1]), str(r[2]), str(r[3]))) for r in fetch_all(
            conn, "SELECT a.attname, t.typname, format_type(a.atttypid, a.atttypmod), t.typcategory FROM "
                  "pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = to_regclass(%s) AND "
                  "a.attnum > 0 AND NOT a.attisdropped", (self.target,)))
        types = [found.get(c, ("?", "?", "?")) for c in self.columns]
        self.target_types = tuple(t[1] for t in types)
        self.narrowing = narrowings(self.ctx.schema, [postgres_target(t) for t in self.target_types], "PostgreSQL")
        self.array_columns = tuple(i for i, t in enumerate(types) if t[2] == "A")
        self.binary_kinds = binary_kinds([c.type for c in self.ctx.schema.columns], [t[0] for t in types]) \
            if self.options.copy_format == "auto" else None
        self.copy_binary_sql = self.copy_sql + " (FORMAT binary)"
        self.ctx.log.info("writer.copy_format", table=self.target,
                          format="binary" if self.binary_kinds is not None else "text",
                          types=[t[1] for t in types])

    def takes_encoding(self, encoding: Encoding) -> bool:
        """The source's binary COPY rows are loaded as they are: the written columns declare its types."""
        return takes(encoding, self.target_types, self.options.copy_format)

    def _prepare_target(self, conn: psycopg.Connection[Any], made: dict[str, bool]) -> None:
        """In one transaction: the target created or truncated, the staging table, the prepared marker."""
        opts = self.options
        if not self._describe_target(conn):
            conn.execute(create_table_sql(self.target, self.columns, self.ctx.schema, opts.distributed_by))
            made["created"] = True
            self.ctx.log.info("writer.table_created", table=self.target)
        if opts.load == "truncate":
            self._truncate(conn)
            made["truncated"] = True
        if opts.load == "staging":
            if fetch_one(conn, "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (self.target,)) == ("p",):
                raise self.sql.error(PrepareError, f"{self.target} is partitioned: a staging table made LIKE it "
                                                   f"would not be, so load 'staging' would swap its partitions away "
                                                   f"(use load 'truncate' or 'append')")
            read_kept(conn, self.target).check(self.sql, conn, self.target)  # refused before anything is made
            staging = PostgresStaging(self.sql, self.ctx, opts.table, opts.staging_table)
            staging.create(conn)
            staging.created = False  # not until the transaction commits
            self.staging = staging
            self.write_table = staging.name
        self._count_before(conn)
        self.markers.record_prepared(conn, self.rows_before)

    def _adopt_staging(self, conn: psycopg.Connection[Any]) -> None:
        opts = self.options
        self.staging = PostgresStaging(self.sql, self.ctx, opts.table, opts.staging_table)
        if not self.staging.adopt(conn):
            # The markers name splits of a staging table that is gone: they are written again.
            self.ctx.log.warning("writer.durable_state_lost", table=self.staging.name)
            with conn.transaction():
                self.markers.forget(conn)
                self.staging.create(conn)
                self.markers.record_prepared(conn, self.rows_before)
        self.write_table = self.staging.name

    def _describe_target(self, conn: psycopg.Connection[Any]) -> bool:
        """Sets the target columns written; False when the target does not exist and create_table makes it."""
        opts, names = self.options, self._written_names()
        found = [str(r[0]) for r in fetch_all(
            conn, "SELECT a.attname FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND "
                  "NOT a.attisdropped ORDER BY a.attnum", (self.target,))]
        if not found:
            if not opts.create_table or fetch_one(conn, "SELECT to_regclass(%s)", (self.target,)) != (None,):
                raise self.sql.error(PrepareError, f"table {self.target} does not exist on {self.endpoint.mark}"
                                                   + ("" if opts.create_table else " (create_table can create it)"))
            self._check_distribution(names)
            self.columns = tuple(names)
            return False
        self.columns = tuple(_match(n, found) or n for n in names)
        unknown = [n for n, c in zip(names, self.columns, strict=True) if c not in found]
        if unknown:
            raise self.sql.error(PrepareError, f"table {self.target} has no column {', '.join(unknown)}")
        return True

    def _check_distribution(self, names: tuple[str, ...]) -> None:
        unknown = [c for c in self.options.distributed_by or () if c not in names]
        if unknown:
            raise self.sql.error(PrepareError, f"params.distributed_by names {', '.join(unknown)}, not among the "
                                               f"columns written: {', '.join(names)}")

    def _build_sql(self, conn: psycopg.Connection[Any]) -> None:
        cols = ", ".join(quote(c) for c in self.columns)
        table = self.sql.ref(self.write_table)
        if self.options.write_mode != "upsert":
            self.copy_sql = f"COPY {table} ({cols}) FROM STDIN"
            return
        key = self._upsert_key(conn)
        self._check_unique(conn, key)
        temp = f"pg_temp.{quote(UPSERT_TABLE)}"
        updates = ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}" for c in self.columns if c not in key)
        action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
        self.copy_sql = f"COPY {temp} ({cols}) FROM STDIN"
        self.session_sql = (f"CREATE TEMP TABLE {quote(UPSERT_TABLE)} AS SELECT {cols} FROM {table} WITH NO DATA",)
        self.upsert_sql = (f"TRUNCATE {temp}",)
        self.insert_sql = (f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {temp} ON CONFLICT "
                           f"({', '.join(quote(c) for c in key)}) {action}")

    def _upsert_key(self, conn: psycopg.Connection[Any]) -> tuple[str, ...]:
        if self.options.upsert_key is not None:
            key = tuple(_match(c, list(self.columns)) or c for c in self.options.upsert_key)
            missing = [c for c in key if c not in self.columns]
            if missing:
                raise self.sql.error(PrepareError, f"params.upsert_key names {', '.join(missing)}, not among the "
                                                   f"columns written: {', '.join(self.columns)}")
            return key
        key = tuple(str(r[0]) for r in fetch_all(
            conn, "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = "
                  "ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary ORDER BY "
                  "array_position(i.indkey::int2[], a.attnum)", (self.target,)))
        if not key:
            raise self.sql.error(PrepareError, f"params.upsert_key: write_mode 'upsert' needs a key, and {self.target} "
                                               f"has no primary key: name the columns of a unique index in upsert_key")
        return key

    def _check_unique(self, conn: psycopg.Connection[Any], key: tuple[str, ...]) -> None:
        """ON CONFLICT needs a unique index on exactly the key's columns: said at prepare, before any row."""
        found = fetch_all(conn, "SELECT array_agg(a.attname::text) FROM pg_index i JOIN pg_attribute a ON a.attrelid "
                                "= i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND "
                                "i.indisunique AND i.indpred IS NULL GROUP BY i.indexrelid", (self.target,))
        if set(key) not in [set(r[0]) for r in found]:
            raise self.sql.error(PrepareError, f"params.upsert_key: {self.target} has no unique index on exactly "
                                               f"({', '.join(key)}), which INSERT ... ON CONFLICT needs")

    # -- commit / rollback ----------------------------------------------------------------------

    def _commit_load(self, done: bool) -> None:
        if not done:
            self._commit_settled(self._commit)

    def _commit(self, conn: psycopg.Connection[Any]) -> None:
        """Verify, swap, post_sql and the ``committed`` phase: one transaction, so all of it or none."""
        with conn.transaction():
            if self.options.verify == "count":
                self._verify(conn)
            if self.staging is not None:
                self.staging.swap(conn)
            self._post_sql(conn)
            if self.markers_ready:
                self.markers.set_phase(conn, COMMITTED)

    def _rollback_load(self) -> None:
        self.finished = True
        if self.commit_unknown is not None:  # undoing what may be committed could leave neither load: a resume reads
            raise self.sql.error(RollbackError, f"not rolled back: {self.commit_unknown}; the markers are kept, so "
                                                f"retrying the task resumes from whichever it was")
        if not self.markers_ready:
            return  # prepare stopped before anything was made (the markers come first)
        if self.created_target or self.staging is not None:
            self._session(RollbackError, "rolling back", self._drop_made)
        elif self.options.rollback_sql:
            self._session(RollbackError, "rolling back", self._undo_sql)
        else:
            self._left_as_is()

    def _drop_made(self, conn: psycopg.Connection[Any]) -> None:
        """What this run made goes: the staging table, a target it created (its rows with it)."""
        with conn.transaction():
            if self.staging is not None and self.staging.created:
                self.staging.drop(conn)
            if self.created_target:
                conn.execute(f"DROP TABLE IF EXISTS {self.target}")
            self.markers.forget(conn)

    def _undo_sql(self, conn: psycopg.Connection[Any]) -> None:
        self._rollback_sql(conn)
        self.markers.forget(conn)


def _match(name: str, columns: list[str]) -> str | None:
    """The column of ``columns`` named ``name``: exactly, else its only one ignoring case."""
    if name in columns:
        return name
    folded = [c for c in columns if c.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def plan_load(options: PostgresWriterOptions, schema: Any, rows_changed: bool) -> str:
    """The ``load`` line of ``wormhole plan`` for a postgres destination: whether its target exists is read
    (a missing one fails the run unless ``create_table``); the format is chosen at prepare from its types."""
    into = "a temporary table, then INSERT ... ON CONFLICT" if options.write_mode == "upsert" else \
        ("the staging table" if options.load == "staging" else "the target")
    target = f"{quote(options.schema)}.{quote(options.table)}"
    endpoint = options.endpoint(options.database)
    try:
        conn = connect(endpoint, PrepareError, attempts=1, timeout=options.connect_timeout_s)
        try:
            exists = fetch_one(conn, "SELECT to_regclass(%s)", (target,)) != (None,)
        finally:
            POSTGRES.close_quietly(conn)
    except (PrepareError, psycopg.Error) as exc:
        note = f" (the target cannot be reached: {exc if isinstance(exc, PrepareError) else describe(exc)})"
    else:
        if not exists and not options.create_table:
            return (f"{WILL_FAIL}: table {target} does not exist on {endpoint.mark} (create_table: true creates "
                    "it from the source's columns)")
        note = "" if exists else f" (no table {target} yet: the run creates it from the source's columns)"
    if options.copy_format == "text":
        return f"COPY text from Arrow into {into}{note}"
    undecoded = "" if rows_changed else \
        "; a postgres source's binary rows as they are when every destination declares its column types"
    return (f"COPY binary from Arrow into {into} if the target's column types allow (chosen at prepare), else "
            f"text{undecoded}{note}")


_STATS_SQL = ("SELECT c.reltuples::bigint, pg_relation_size(c.oid) FROM pg_class c "
              "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s")
_BUSY_SQL = ("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() "
             "AND backend_type = 'client backend'")


class PostgresReaderPeriphery(SqlReaderPeriphery):
    dialect = POSTGRES

    def _running(self, conn: psycopg.Connection[Any]) -> int:
        """Active client backends, this session excluded."""
        found = conn.execute(_BUSY_SQL).fetchone()
        return int(found[0]) if found else 0

    def _stats(self, conn: psycopg.Connection[Any], shard: Shard) -> tuple[int | None, int | None]:
        rows, size = 0, 0
        for table in shard.tables:
            found = conn.execute(_STATS_SQL, (shard.schema, table)).fetchone()
            if found is None or found[0] is None or int(found[0]) < 0:
                return None, None  # a view, or a table never analyzed (reltuples -1): no estimate
            rows += int(found[0])
            size += int(found[1] or 0)
        return rows, size

    def _count(self, conn: psycopg.Connection[Any], statements: list[str]) -> int:
        # statement_timeout cancels a count slower than count_timeout_s (SQLSTATE 57014).
        conn.execute(f"SET statement_timeout = {max(1, round(self.source.count_timeout_s * 1000))}")
        return sum(int(found[0]) if (found := conn.execute(sql).fetchone()) else 0 for sql in statements)

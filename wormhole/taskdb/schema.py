"""DDL of the task database: one logical schema (:data:`TABLES`), rendered for SQLite and for MySQL/MariaDB.

Both spellings accept the upstream contract: a plain
``INSERT INTO wormhole_task (name, spec) VALUES ('orders', '{...json...}')`` creates a pending task,
the column defaults fill in everything else (``priority`` 0). All timestamps are UTC.

A database created by an older ``db init`` lacks the columns added since; ``init_schema`` adds every
column of ``*_ADDED_COLUMNS`` that is missing, so ``db init`` is also the upgrade. The job variables'
columns (``wormhole_task.params``, ``wormhole_task_run.variables``) need no ``db init``: a store reads
NULL from a database without them, and the first write that has a value adds the column as ``db init``
would; so do a recurring task's (``schedule``, ``next_run_at``, ``tick_at``, ``paused``). The checkpoint
rows' ``kind`` likewise, with its migration: the rows written before it get their kinds from the sentinels
that marked them then (:data:`LEGACY_KIND`); and the split digests' table (``wormhole_split_digest``), made by the
first digest a run records. The console's actions (``wormhole_action``) are made by ``db init``
and, on a database from before them, by the first action recorded; a running task's progress
(``wormhole_task.progress``, written with its heartbeat) only by ``db init``: until then no progress is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TASK_TABLE = "wormhole_task"
RUN_TABLE = "wormhole_task_run"
DAEMON_TABLE = "wormhole_daemon"
CHECKPOINT_TABLE = "wormhole_checkpoint"
WATERMARK_TABLE = "wormhole_watermark"
"""Incremental tasks' watermarks: one row per state key and destination (see ``wormhole/incremental.py``)."""
STATE_LOCK_TABLE = "wormhole_state_lock"
"""Which run of an incremental job holds its state key: one row per state key while a run holds it."""
ACTION_TABLE = "wormhole_action"
"""What people did through the console (submit, retry, cancel, pause, resume), who did it and when; a cancel
row is also the request the running task's heartbeat looks for (see ``wormhole/taskdb/actions.py``)."""
DIGEST_TABLE = "wormhole_split_digest"
"""``settings.verify``: the digest of what a destination accepted of a split, one row per (task, origin run, split,
destination), written before the destination commits the split (see ``wormhole/taskdb/checkpoints.py``). It
claims nothing about durability: the destination's own record says whether it holds the split."""
META_TABLE = "wormhole_meta"
"""Facts about the task database itself: ``taskdb_id`` (see ``SqlTaskStore.taskdb_id``)."""

PLAN_DESTINATION = ""
"""The ``destination`` stored in a plan row (and, before ``kind``, what marked one)."""
WINDOW_DESTINATION = "#window"
"""The ``destination`` stored in a window row (no destination id starts with ``#``)."""
NO_SPLIT = ""
"""The ``split_id`` stored in a window or commit row. The stored values keep the rows of one run apart
(``UNIQUE (run_id, split_id, destination)``) and are what an older version reads."""

LEGACY_KIND = (f"CASE WHEN destination = '{PLAN_DESTINATION}' THEN 'plan' WHEN destination = '{WINDOW_DESTINATION}'"
               f" THEN 'window' WHEN split_id = '{NO_SPLIT}' THEN 'committed' ELSE 'durable' END")
"""The kind of a checkpoint row written before ``kind`` (or by an older version since), from its sentinels."""
KIND_MIGRATION = f"UPDATE {CHECKPOINT_TABLE} SET kind = {LEGACY_KIND} WHERE kind IS NULL"

# Lengths enforced by the VARCHAR/TEXT columns on MySQL; the store clips values to them so that
# SQLite (which does not enforce lengths) keeps exactly the same data.
NAME_MAX = 255
SPLIT_ID_MAX = 255
DESTINATION_MAX = 255
CLAIMED_BY_MAX = 255
STATUS_MAX = 16
# MySQL TEXT holds 65,535 bytes; 16,000 characters of utf8mb4 always fit.
ERROR_MAX = 16_000

UPSTREAM_INSERT_EXAMPLE = (
    "INSERT INTO wormhole_task (name, spec) VALUES ('orders', '{\"source\": {...}, \"destinations\": [...]}')"
)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: str
    """A key of :class:`Dialect` ``types``: how each dialect spells it."""
    not_null: bool = False
    default: str | None = None
    """A literal, the same in both dialects (the timestamp kinds bring their own)."""


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ("id",)
    """The primary key; ``("id",)`` with an ``auto`` column: the row id the database assigns."""
    unique: tuple[str, tuple[str, ...]] | None = None
    """One unique key: its name's suffix and its columns."""
    indexes: tuple[str, ...] = ()
    """Columns with an index of their own (``ix_<table>_<column>``)."""


_c = Column  # short: the tables below list many


_ID = _c("id", "auto")
_TASK_ID = _c("task_id", "ref", not_null=True)
_RUN_ID = _c("run_id", "ref", not_null=True)
_NAME = "name255"

TASK = Table(TASK_TABLE, (
    _ID, _c("name", _NAME, not_null=True, default="''"), _c("spec", "long", not_null=True),
    _c("status", "name16", not_null=True, default="'pending'"), _c("attempts", "int", not_null=True, default="0"),
    _c("created_at", "created"), _c("started_at", "time"), _c("finished_at", "time"), _c("claimed_by", _NAME),
    _c("result", "long"), _c("error", "text"), _c("priority", "int", not_null=True, default="0"),
    _c("heartbeat_at", "time"), _c("params", "text"), _c("schedule", "short"), _c("next_run_at", "time"),
    _c("tick_at", "time"), _c("paused", "flag", not_null=True, default="0"), _c("progress", "text"),
), indexes=("status",))
RUN = Table(RUN_TABLE, (
    _ID, _TASK_ID, _c("status", "name16", not_null=True, default="'running'"), _c("claimed_by", _NAME),
    _c("started_at", "time"), _c("finished_at", "time"), _c("exit_code", "int"), _c("result", "long"),
    _c("error", "text"), _c("resumed_from", "ref"), _c("variables", "text"),
), indexes=("task_id",))
DAEMON = Table(DAEMON_TABLE, (
    _ID, _c("host", _NAME, not_null=True), _c("pid", "int", not_null=True), _c("started_at", "time"),
    _c("heartbeat_at", "time"), _c("running_tasks", "int", not_null=True, default="0"),
    _c("status", "name16", not_null=True, default="'running'"),
))
CHECKPOINT = Table(CHECKPOINT_TABLE, (
    _ID, _TASK_ID, _RUN_ID, _c("origin_run_id", "ref", not_null=True), _c("split_id", _NAME, not_null=True),
    _c("destination", _NAME, not_null=True, default="''"), _c("rows", "count"), _c("payload", "long"),
    _c("recorded_at", "recorded"), _c("kind", "name16"),
), unique=("split", ("run_id", "split_id", "destination")), indexes=("task_id",))
META = Table(META_TABLE, (_c("name", "name64", not_null=True), _c("value", _NAME, not_null=True)), key=("name",))
WATERMARK = Table(WATERMARK_TABLE, (
    _c("state_key", _NAME, not_null=True), _c("destination", _NAME, not_null=True), _c("value", "text"),
    _TASK_ID, _RUN_ID, _c("updated_at", "recorded"),
), key=("state_key", "destination"))
STATE_LOCK = Table(STATE_LOCK_TABLE, (
    _c("state_key", _NAME, not_null=True), _TASK_ID, _RUN_ID, _c("claimed_by", _NAME, not_null=True),
    _c("acquired_at", "time"),
), key=("state_key",))
DIGEST = Table(DIGEST_TABLE, (
    _TASK_ID, _c("origin_run_id", "ref", not_null=True), _c("split_id", _NAME, not_null=True),
    _c("destination", _NAME, not_null=True), _RUN_ID, _c("digest", "name64", not_null=True),
    _c("checksum_version", "int", not_null=True), _c("recorded_at", "recorded"),
), key=("task_id", "origin_run_id", "split_id", "destination"))
ACTION = Table(ACTION_TABLE, (
    _ID, _c("task_id", "ref"), _c("run_id", "ref"), _c("action", "name16", not_null=True),
    _c("actor", _NAME, not_null=True), _c("claimed_by", _NAME), _c("detail", "text"), _c("created_at", "recorded"),
), indexes=("task_id",))

ADDED_COLUMNS: tuple[tuple[Table, str], ...] = (
    (TASK, "priority"), (TASK, "heartbeat_at"), (RUN, "resumed_from"), (TASK, "params"), (RUN, "variables"),
    (TASK, "schedule"), (TASK, "next_run_at"), (TASK, "tick_at"), (TASK, "paused"), (CHECKPOINT, "kind"),
    (TASK, "progress"),
)
"""Columns added after the first release. Each is also in its table, so a fresh database has it from the start."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database spells :data:`TABLES`."""

    types: Mapping[str, tuple[str, str | None]]
    """A column kind: its type and its default (None: the column's own)."""
    nullable: str
    """What follows the type of a column that may be NULL."""
    suffix: str
    """After the closing parenthesis of CREATE TABLE."""
    inline_indexes: bool
    """Indexes declared in CREATE TABLE (MySQL: it has no CREATE INDEX IF NOT EXISTS), else apart."""
    auto_is_key: bool = False
    """The ``auto`` row id's spelling makes it the primary key (SQLite's INTEGER PRIMARY KEY AUTOINCREMENT)."""
    reserved: frozenset[str] = frozenset()
    """Column names quoted with backticks."""

    def column(self, col: Column) -> str:
        kind, default = self.types[col.kind]
        if col.kind == "auto":  # the row id: its spelling is the whole definition
            return f"{col.name} {kind}"
        null = " NOT NULL" if col.not_null else self.nullable
        default = default if default is not None else col.default
        name = f"`{col.name}`" if col.name in self.reserved else col.name
        return f"{name} {kind}{null}{f' DEFAULT {default}' if default is not None else ''}"

    def create(self, table: Table) -> tuple[str, ...]:
        """CREATE TABLE (and, where indexes are apart, CREATE INDEX) of ``table``, all IF NOT EXISTS."""
        lines = [self.column(c) for c in table.columns]
        if not (self.auto_is_key and any(c.kind == "auto" for c in table.columns)):
            lines.append(f"PRIMARY KEY ({', '.join(table.key)})")
        if table.unique is not None:
            suffix, cols = table.unique
            named = f"UNIQUE KEY ux_{table.name}_{suffix}" if self.inline_indexes else "UNIQUE"
            lines.append(f"{named} ({', '.join(cols)})")
        indexes = [(f"ix_{table.name}_{c}", c) for c in table.indexes]
        if self.inline_indexes:
            lines += [f"KEY {ix} ({c})" for ix, c in indexes]
            indexes = []
        body = ",\n    ".join(lines)
        return (f"CREATE TABLE IF NOT EXISTS {table.name} (\n    {body}\n){self.suffix}",
                *(f"CREATE INDEX IF NOT EXISTS {ix} ON {table.name} ({c})" for ix, c in indexes))

    def added(self) -> tuple[tuple[str, str, str], ...]:
        """(table, column, definition) of :data:`ADDED_COLUMNS`."""
        return tuple((t.name, name, self.column(next(c for c in t.columns if c.name == name)).partition(" ")[2])
                     for t, name in ADDED_COLUMNS)


# SQLite keeps timestamps as 'YYYY-MM-DD HH:MM:SS.fff' UTC text: strftime('now') is UTC, and the text
# sorts chronologically.
_SQLITE_NOW = "(strftime('%Y-%m-%d %H:%M:%f', 'now'))"
# The column kinds: auto (the row id), ref (another row's id), int, count (rows), flag (0/1), text, long
# (a spec or result), short (a line), time (written by the store), created (stamped by the database when an
# upstream INSERT leaves it out), recorded (written by the store; SQLite also stamps it), nameN (VARCHAR(N)).
_VARCHARS = {f"name{n}": (f"VARCHAR({n})", None) for n in (16, 64, 255)}

SQLITE = Dialect(types={
    "auto": ("INTEGER PRIMARY KEY AUTOINCREMENT", None), "ref": ("INTEGER", None), "int": ("INTEGER", None),
    "count": ("INTEGER", None), "flag": ("INTEGER", None), "text": ("TEXT", None), "long": ("TEXT", None),
    "short": ("TEXT", None), "time": ("TEXT", None), "created": ("TEXT", _SQLITE_NOW),
    "recorded": ("TEXT", _SQLITE_NOW), **_VARCHARS,
}, nullable="", suffix="", inline_indexes=False, auto_is_key=True)
# created_at is TIMESTAMP(3), not DATETIME(3): TIMESTAMP stores UTC and converts from the *inserting*
# session's time zone, so an upstream INSERT from a session that is not on UTC still records UTC.
# The other timestamps are always written by the store (its sessions run on '+00:00').
MYSQL = Dialect(types={
    "auto": ("BIGINT NOT NULL AUTO_INCREMENT", None), "ref": ("BIGINT", None), "int": ("INT", None),
    "count": ("BIGINT", None), "flag": ("TINYINT", None), "text": ("TEXT", None), "long": ("LONGTEXT", None),
    "short": ("VARCHAR(255)", None), "time": ("DATETIME(3)", None),
    "created": ("TIMESTAMP(3)", "CURRENT_TIMESTAMP(3)"), "recorded": ("DATETIME(3)", None), **_VARCHARS,
}, nullable=" NULL", suffix=" ENGINE=InnoDB DEFAULT CHARSET=utf8mb4", inline_indexes=True,
    reserved=frozenset({"rows"}))  # ROWS is a reserved word of MySQL 8

TABLES = (TASK, RUN, DAEMON, CHECKPOINT, META)
"""What ``db init`` creates first (the meta table last: :data:`wormhole.taskdb.base._META_DDL`); the watermark,
state lock, action and split digest tables follow, and are also made on first use on a database from before them."""

SQLITE_DDL = tuple(statement for table in TABLES for statement in SQLITE.create(table))
MYSQL_DDL = tuple(statement for table in TABLES for statement in MYSQL.create(table))
SQLITE_ADDED_COLUMNS = SQLITE.added()
MYSQL_ADDED_COLUMNS = MYSQL.added()
(SQLITE_WATERMARK_DDL,), (MYSQL_WATERMARK_DDL,) = SQLITE.create(WATERMARK), MYSQL.create(WATERMARK)
(SQLITE_STATE_LOCK_DDL,), (MYSQL_STATE_LOCK_DDL,) = SQLITE.create(STATE_LOCK), MYSQL.create(STATE_LOCK)
SQLITE_ACTION_DDL, MYSQL_ACTION_DDL = SQLITE.create(ACTION), MYSQL.create(ACTION)  # SQLite: the index apart
(SQLITE_DIGEST_DDL,), (MYSQL_DIGEST_DDL,) = SQLITE.create(DIGEST), MYSQL.create(DIGEST)

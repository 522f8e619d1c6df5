"""DDL of the task database: one logical schema, spelled once for SQLite and once for MySQL/MariaDB.

Both spellings accept the upstream contract: a plain
``INSERT INTO wormhole_task (name, spec) VALUES ('orders', '{...json...}')`` creates a pending task,
the column defaults fill in everything else (``priority`` 0). All timestamps are UTC.

A database created by an older ``db init`` lacks the columns added since; ``init_schema`` adds every
column of ``*_ADDED_COLUMNS`` that is missing, so ``db init`` is also the upgrade. The job variables'
columns (``wormhole_task.params``, ``wormhole_task_run.variables``) need no ``db init``: a store reads
NULL from a database without them, and the first write that has a value adds the column as ``db init``
would; so do a recurring task's (``schedule``, ``next_run_at``, ``tick_at``, ``paused``). The checkpoint
rows' ``kind`` likewise, with its migration: the rows written before it get their kinds from the sentinels
that marked them then (:data:`LEGACY_KIND`). The console's actions (``wormhole_action``) are made by ``db init``
and, on a database from before them, by the first action recorded; a running task's progress
(``wormhole_task.progress``, written with its heartbeat) only by ``db init``: until then no progress is written.
"""

from __future__ import annotations

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

# Columns added after the first release, as (table, column, definition) per dialect. Each also
# appears in its CREATE TABLE below, so a fresh database has it from the start.
SQLITE_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (TASK_TABLE, "priority", "INTEGER NOT NULL DEFAULT 0"),
    (TASK_TABLE, "heartbeat_at", "TEXT"),
    (RUN_TABLE, "resumed_from", "INTEGER"),
    (TASK_TABLE, "params", "TEXT"),
    (RUN_TABLE, "variables", "TEXT"),
    (TASK_TABLE, "schedule", "TEXT"),
    (TASK_TABLE, "next_run_at", "TEXT"),
    (TASK_TABLE, "tick_at", "TEXT"),
    (TASK_TABLE, "paused", "INTEGER NOT NULL DEFAULT 0"),
    (CHECKPOINT_TABLE, "kind", "VARCHAR(16)"),
    (TASK_TABLE, "progress", "TEXT"),
)
MYSQL_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (TASK_TABLE, "priority", "INT NOT NULL DEFAULT 0"),
    (TASK_TABLE, "heartbeat_at", "DATETIME(3) NULL"),
    (RUN_TABLE, "resumed_from", "BIGINT NULL"),
    (TASK_TABLE, "params", "TEXT NULL"),
    (RUN_TABLE, "variables", "TEXT NULL"),
    (TASK_TABLE, "schedule", "VARCHAR(255) NULL"),
    (TASK_TABLE, "next_run_at", "DATETIME(3) NULL"),
    (TASK_TABLE, "tick_at", "DATETIME(3) NULL"),
    (TASK_TABLE, "paused", "TINYINT NOT NULL DEFAULT 0"),
    (CHECKPOINT_TABLE, "kind", "VARCHAR(16) NULL"),
    (TASK_TABLE, "progress", "TEXT NULL"),
)

# SQLite keeps timestamps as 'YYYY-MM-DD HH:MM:SS.fff' UTC text: strftime('now') is UTC, and the text
# sorts chronologically.
_SQLITE_NOW = "(strftime('%Y-%m-%d %H:%M:%f', 'now'))"

SQLITE_DDL: tuple[str, ...] = (
    f"""CREATE TABLE IF NOT EXISTS {TASK_TABLE} (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        VARCHAR(255) NOT NULL DEFAULT '',
    spec        TEXT NOT NULL,
    status      VARCHAR(16) NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT DEFAULT {_SQLITE_NOW},
    started_at  TEXT,
    finished_at TEXT,
    claimed_by  VARCHAR(255),
    result      TEXT,
    error       TEXT,
    priority    INTEGER NOT NULL DEFAULT 0,
    heartbeat_at TEXT,
    params      TEXT,
    schedule    TEXT,
    next_run_at TEXT,
    tick_at     TEXT,
    paused      INTEGER NOT NULL DEFAULT 0,
    progress    TEXT
)""",
    f"CREATE INDEX IF NOT EXISTS ix_{TASK_TABLE}_status ON {TASK_TABLE} (status)",
    f"""CREATE TABLE IF NOT EXISTS {RUN_TABLE} (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER NOT NULL,
    status      VARCHAR(16) NOT NULL DEFAULT 'running',
    claimed_by  VARCHAR(255),
    started_at  TEXT,
    finished_at TEXT,
    exit_code   INTEGER,
    result      TEXT,
    error       TEXT,
    resumed_from INTEGER,
    variables   TEXT
)""",
    f"CREATE INDEX IF NOT EXISTS ix_{RUN_TABLE}_task_id ON {RUN_TABLE} (task_id)",
    f"""CREATE TABLE IF NOT EXISTS {DAEMON_TABLE} (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    host          VARCHAR(255) NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    TEXT,
    heartbeat_at  TEXT,
    running_tasks INTEGER NOT NULL DEFAULT 0,
    status        VARCHAR(16) NOT NULL DEFAULT 'running'
)""",
    f"""CREATE TABLE IF NOT EXISTS {CHECKPOINT_TABLE} (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id       INTEGER NOT NULL,
    run_id        INTEGER NOT NULL,
    origin_run_id INTEGER NOT NULL,
    split_id      VARCHAR(255) NOT NULL,
    destination   VARCHAR(255) NOT NULL DEFAULT '',
    rows          INTEGER,
    payload       TEXT,
    recorded_at   TEXT DEFAULT {_SQLITE_NOW},
    kind          VARCHAR(16),
    UNIQUE (run_id, split_id, destination)
)""",
    f"CREATE INDEX IF NOT EXISTS ix_{CHECKPOINT_TABLE}_task_id ON {CHECKPOINT_TABLE} (task_id)",
    f"CREATE TABLE IF NOT EXISTS {META_TABLE} (name VARCHAR(64) PRIMARY KEY, value VARCHAR(255) NOT NULL)",
)
SQLITE_WATERMARK_DDL = f"""CREATE TABLE IF NOT EXISTS {WATERMARK_TABLE} (
    state_key   VARCHAR(255) NOT NULL,
    destination VARCHAR(255) NOT NULL,
    value       TEXT,
    task_id     INTEGER NOT NULL,
    run_id      INTEGER NOT NULL,
    updated_at  TEXT DEFAULT {_SQLITE_NOW},
    PRIMARY KEY (state_key, destination)
)"""
SQLITE_STATE_LOCK_DDL = f"""CREATE TABLE IF NOT EXISTS {STATE_LOCK_TABLE} (
    state_key   VARCHAR(255) NOT NULL PRIMARY KEY,
    task_id     INTEGER NOT NULL,
    run_id      INTEGER NOT NULL,
    claimed_by  VARCHAR(255) NOT NULL,
    acquired_at TEXT
)"""

# Indexes are declared inline: MySQL (unlike MariaDB) has no CREATE INDEX IF NOT EXISTS.
# created_at is TIMESTAMP(3), not DATETIME(3): TIMESTAMP stores UTC and converts from the *inserting*
# session's time zone, so an upstream INSERT from a session that is not on UTC still records UTC.
# The other timestamps are always written by the store (its sessions run on '+00:00').
MYSQL_DDL: tuple[str, ...] = (
    f"""CREATE TABLE IF NOT EXISTS {TASK_TABLE} (
    id          BIGINT NOT NULL AUTO_INCREMENT,
    name        VARCHAR(255) NOT NULL DEFAULT '',
    spec        LONGTEXT NOT NULL,
    status      VARCHAR(16) NOT NULL DEFAULT 'pending',
    attempts    INT NOT NULL DEFAULT 0,
    created_at  TIMESTAMP(3) NULL DEFAULT CURRENT_TIMESTAMP(3),
    started_at  DATETIME(3) NULL,
    finished_at DATETIME(3) NULL,
    claimed_by  VARCHAR(255) NULL,
    result      LONGTEXT NULL,
    error       TEXT NULL,
    priority    INT NOT NULL DEFAULT 0,
    heartbeat_at DATETIME(3) NULL,
    params      TEXT NULL,
    schedule    VARCHAR(255) NULL,
    next_run_at DATETIME(3) NULL,
    tick_at     DATETIME(3) NULL,
    paused      TINYINT NOT NULL DEFAULT 0,
    progress    TEXT NULL,
    PRIMARY KEY (id),
    KEY ix_{TASK_TABLE}_status (status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"""CREATE TABLE IF NOT EXISTS {RUN_TABLE} (
    id          BIGINT NOT NULL AUTO_INCREMENT,
    task_id     BIGINT NOT NULL,
    status      VARCHAR(16) NOT NULL DEFAULT 'running',
    claimed_by  VARCHAR(255) NULL,
    started_at  DATETIME(3) NULL,
    finished_at DATETIME(3) NULL,
    exit_code   INT NULL,
    result      LONGTEXT NULL,
    error       TEXT NULL,
    resumed_from BIGINT NULL,
    variables   TEXT NULL,
    PRIMARY KEY (id),
    KEY ix_{RUN_TABLE}_task_id (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"""CREATE TABLE IF NOT EXISTS {DAEMON_TABLE} (
    id            BIGINT NOT NULL AUTO_INCREMENT,
    host          VARCHAR(255) NOT NULL,
    pid           INT NOT NULL,
    started_at    DATETIME(3) NULL,
    heartbeat_at  DATETIME(3) NULL,
    running_tasks INT NOT NULL DEFAULT 0,
    status        VARCHAR(16) NOT NULL DEFAULT 'running',
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"""CREATE TABLE IF NOT EXISTS {CHECKPOINT_TABLE} (
    id            BIGINT NOT NULL AUTO_INCREMENT,
    task_id       BIGINT NOT NULL,
    run_id        BIGINT NOT NULL,
    origin_run_id BIGINT NOT NULL,
    split_id      VARCHAR(255) NOT NULL,
    destination   VARCHAR(255) NOT NULL DEFAULT '',
    `rows`        BIGINT NULL,
    payload       LONGTEXT NULL,
    recorded_at   DATETIME(3) NULL,
    kind          VARCHAR(16) NULL,
    PRIMARY KEY (id),
    UNIQUE KEY ux_{CHECKPOINT_TABLE}_split (run_id, split_id, destination),
    KEY ix_{CHECKPOINT_TABLE}_task_id (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"""CREATE TABLE IF NOT EXISTS {META_TABLE} (
    name  VARCHAR(64) NOT NULL,
    value VARCHAR(255) NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
)
MYSQL_WATERMARK_DDL = f"""CREATE TABLE IF NOT EXISTS {WATERMARK_TABLE} (
    state_key   VARCHAR(255) NOT NULL,
    destination VARCHAR(255) NOT NULL,
    value       TEXT NULL,
    task_id     BIGINT NOT NULL,
    run_id      BIGINT NOT NULL,
    updated_at  DATETIME(3) NULL,
    PRIMARY KEY (state_key, destination)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
MYSQL_STATE_LOCK_DDL = f"""CREATE TABLE IF NOT EXISTS {STATE_LOCK_TABLE} (
    state_key   VARCHAR(255) NOT NULL,
    task_id     BIGINT NOT NULL,
    run_id      BIGINT NOT NULL,
    claimed_by  VARCHAR(255) NOT NULL,
    acquired_at DATETIME(3) NULL,
    PRIMARY KEY (state_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
SQLITE_ACTION_DDL = f"""CREATE TABLE IF NOT EXISTS {ACTION_TABLE} (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER,
    run_id      INTEGER,
    action      VARCHAR(16) NOT NULL,
    actor       VARCHAR(255) NOT NULL,
    claimed_by  VARCHAR(255),
    detail      TEXT,
    created_at  TEXT DEFAULT {_SQLITE_NOW}
)"""
MYSQL_ACTION_DDL = f"""CREATE TABLE IF NOT EXISTS {ACTION_TABLE} (
    id          BIGINT NOT NULL AUTO_INCREMENT,
    task_id     BIGINT NULL,
    run_id      BIGINT NULL,
    action      VARCHAR(16) NOT NULL,
    actor       VARCHAR(255) NOT NULL,
    claimed_by  VARCHAR(255) NULL,
    detail      TEXT NULL,
    created_at  DATETIME(3) NULL,
    PRIMARY KEY (id),
    KEY ix_{ACTION_TABLE}_task_id (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

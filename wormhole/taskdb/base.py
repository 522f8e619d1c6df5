"""The task store contract, its records, and the one SQL implementation both databases share.

Every statement is written once, with ``?`` placeholders and every value bound as a parameter;
a dialect subclass only says how to connect, how to run a statement and how to recognise its errors.
This module holds the task rows' life (submit, runs, finish, retry); the claims and the checkpoint
rows are mixins of their own (``claims.py``, ``checkpoints.py``) on the plumbing of ``sql.py``.
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from wormhole.errors import TaskDbError
from wormhole.recovery.checkpoint import CRASHED, RunHistory
from wormhole.taskdb.actions import ActionsMixin
from wormhole.taskdb.claims import ClaimsMixin
from wormhole.taskdb.schedules import SchedulesMixin
from wormhole.taskdb.schema import (
    CLAIMED_BY_MAX,
    ERROR_MAX,
    META_TABLE,
    NAME_MAX,
    RUN_TABLE,
    STATUS_MAX,
    TASK_TABLE,
)
from wormhole.taskdb.sql import clip, format_ts, parse_ts, utcnow
from wormhole.taskdb.watermarks import StateHolder, WatermarksMixin

__all__ = ["CRASHED", "DEFAULT_STALE_S", "TASK_STATUSES", "RunRecord", "SqlTaskStore", "TaskRecord", "TaskStore"]

TASK_STATUSES: tuple[str, ...] = ("pending", "running", "success", "partial", "failed", "scheduled")
"""``scheduled``: a recurring task waiting for its next tick (``next_run_at``) between runs."""

# Where a task may be sent back to pending from, without and with force (with force, a running
# task too, but only once its heartbeat is stale: see ``retry``).
_RETRYABLE = ("failed", "partial")
_RETRYABLE_FORCED = ("failed", "partial", "success")

DEFAULT_STALE_S = 30.0
"""``ClaimConf.stale_s``'s default, for callers without an engine.toml at hand."""

_TASK_COLUMNS = (
    "id, name, spec, status, attempts, created_at, started_at, finished_at, claimed_by, result, error, priority,"
    " heartbeat_at"
)
_RUN_COLUMNS = "id, task_id, status, claimed_by, started_at, finished_at, exit_code, result, error, resumed_from"
# The job variables' columns: read as NULL from a database that lacks them (see ``_optional``).
_PARAMS = (TASK_TABLE, "params")
_VARIABLES = (RUN_TABLE, "variables")
# A recurring task's columns, likewise (see ``wormhole.schedule``).
_SCHEDULE_COLUMNS = ("schedule", "next_run_at", "tick_at", "paused")
_PROGRESS = "progress"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecord:
    """One row of ``wormhole_task``; timestamps are naive UTC."""

    id: int
    name: str
    spec: str
    status: str
    attempts: int
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    claimed_by: str | None
    result: str | None
    error: str | None
    priority: int = 0
    heartbeat_at: datetime | None = None
    """When the process running the task last showed it is alive (None: never, or not running)."""
    params: str | None = None
    """The job variables' values, a JSON object of names to values (None: none)."""
    schedule: str | None = None
    """A recurring task's cron expression (None: the task runs once)."""
    next_run_at: datetime | None = None
    """The tick a recurring task waits for (while it runs: the one it waited for)."""
    tick_at: datetime | None = None
    """The tick the latest run of a recurring task was claimed for (``${tick_ts}``)."""
    paused: bool = False
    """``task pause``: no daemon starts a run of it until ``task resume``."""
    progress: str | None = None
    """A running task's latest progress (JSON, written with its heartbeat; its ``run_id`` says which run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One row of ``wormhole_task_run`` (one attempt at running a task); timestamps are naive UTC."""

    id: int
    task_id: int
    status: str
    claimed_by: str | None
    started_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    result: str | None
    error: str | None
    resumed_from: int | None = None
    """The run this one took over (a crashed run of the same task), else None."""
    variables: str | None = None
    """The job variables this run's spec used, a JSON object (a run resuming it uses the same)."""


@runtime_checkable
class TaskStore(RunHistory, Protocol):
    """What the CLI and the engine need from the task database: recovery's checkpoints and run history
    (the protocols of :mod:`wormhole.recovery`, which this package implements), and the rest below."""

    url: str  # redacted: safe for messages and logs

    def init_schema(self) -> None: ...
    def taskdb_id(self) -> str: ...
    def submit(self, name: str, spec: str, priority: int = 0, params: str | None = None,
               schedule: tuple[str, datetime] | None = None) -> int: ...
    def get(self, task_id: int) -> TaskRecord | None: ...
    def list(self, status: str | None = None, limit: int = 100,
             search: str | None = None) -> builtins.list[TaskRecord]: ...
    def claim(self, task_id: int, claimed_by: str) -> bool: ...
    def adopt(self, task_id: int, claimed_by: str) -> bool: ...
    def pending(self, limit: int) -> builtins.list[int]: ...
    def release(self, task_id: int, claimed_by: str, *, exit_code: int, error: str,
                run_status: str = "failed") -> str | None: ...
    def register_daemon(self, host: str, pid: int) -> int: ...
    def heartbeat(self, daemon_id: int, *, running_tasks: int, status: str) -> None: ...
    def beat(self, task_id: int, claimed_by: str, progress: str | None = None) -> bool: ...
    def take_over(self, task_id: int, claimed_by: str, stale_s: float) -> int | None: ...
    def stale(self, limit: int, stale_s: float) -> builtins.list[int]: ...
    def heartbeat_age(self, task_id: int) -> float | None: ...
    def start_run(self, task_id: int, claimed_by: str, resumed_from: int | None = None,
                  variables: str | None = None) -> int: ...
    def finish(self, task_id: int, run_id: int, *, status: str, run_status: str, exit_code: int,
               result: str | None, error: str | None, claimed_by: str | None = None,
               schedule: tuple[str, datetime] | None = None) -> bool: ...
    def fail_task(self, task_id: int, error: str) -> None: ...
    def runs(self, task_id: int) -> builtins.list[RunRecord]: ...
    def retry(self, task_id: int, *, force: bool = False, stale_s: float = DEFAULT_STALE_S) -> bool: ...
    def lock_state(self, state_key: str, task_id: int, run_id: int, claimed_by: str,
                   stale_s: float) -> StateHolder | None: ...
    def unlock_state(self, state_key: str, task_id: int, claimed_by: str) -> None: ...
    def delete_checkpoints(self, task_id: int, keep_runs: Collection[int] = ()) -> int: ...
    def close(self) -> None: ...


_ID_KEY = "taskdb_id"
_META_DDL = -1
"""``wormhole_meta``'s CREATE TABLE is the last statement of both dialects' DDL."""


def new_id() -> str:
    """8 characters, a letter then hex digits: short enough for table names, and never read as a task id."""
    return "abcdef"[secrets.randbelow(6)] + secrets.token_hex(4)[:7]


def _check_status(status: str, what: str = "status") -> None:
    if status not in TASK_STATUSES:
        raise ValueError(f"unknown task {what} {status!r}: expected one of {', '.join(TASK_STATUSES)}")


class SqlTaskStore(ClaimsMixin, WatermarksMixin, SchedulesMixin, ActionsMixin):
    """The task store logic, shared by SQLite and MySQL; subclasses supply the dialect hooks."""

    ddl: ClassVar[tuple[str, ...]] = ()
    _taskdb_id: str | None = None

    # -- the store ----------------------------------------------------------------------------------

    def init_schema(self) -> None:
        """Create what is missing, tables and (on a database from an older version) columns."""
        for statement in (*self.ddl, self.watermark_ddl, self.state_lock_ddl, *self.action_ddl, self.digest_ddl):
            self._run("create the schema", statement)
        for table, column, definition in self.added_columns:
            with self._guard(f"add the column {table}.{column}"):
                if column not in self._columns(table):
                    self._execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}", ())
        self.migrate_checkpoint_kinds()
        self.taskdb_id()

    def taskdb_id(self) -> str:
        """This task database's id, made once (by ``db init``, or by the first run on a database from an
        older version) and kept in ``wormhole_meta``. Task and run ids are unique only within one task
        database: destinations name what they keep for a run (split markers, staging tables) by this id
        too, so two deployments writing one table never take each other's state for their own."""
        if self._taskdb_id is None:
            self._taskdb_id = self._read_or_make_id()
        return self._taskdb_id

    def _read_or_make_id(self) -> str:
        select = f"SELECT value FROM {META_TABLE} WHERE name = ?"
        with self._guard("read the task database id"):
            try:
                found = self._execute(select, (_ID_KEY,)).rows
            except self.driver_errors as exc:
                if not self._is_missing_table(exc):
                    raise
                self._execute(self.ddl[_META_DDL], ())  # a database from before wormhole_meta, as db init would
                found = []
            if found:
                return str(found[0][0])
            # Concurrent first runs: the first INSERT wins, every process reads back the same id.
            self._execute(f"{self.insert_ignore} INTO {META_TABLE} (name, value) VALUES (?, ?)", (_ID_KEY, new_id()))
            return str(self._execute(select, (_ID_KEY,)).rows[0][0])

    def _task_columns(self) -> str:
        optional = (self._optional(TASK_TABLE, c) for c in ("params", *_SCHEDULE_COLUMNS, _PROGRESS))
        return f"{_TASK_COLUMNS}, {', '.join(optional)}"

    def submit(self, name: str, spec: str, priority: int = 0, params: str | None = None,
               schedule: tuple[str, datetime] | None = None) -> int:
        """Insert a pending task; with ``schedule`` (its cron expression, its first tick) a scheduled one."""
        # Same shape as the upstream INSERT: the column defaults make it pending.
        columns, values = "name, spec, priority", [clip(name, NAME_MAX), spec, priority]
        if params is not None:
            self._add_optional(*_PARAMS)
            columns, values = columns + ", params", [*values, params]
        if schedule is not None:
            for column in _SCHEDULE_COLUMNS:
                self._add_optional(TASK_TABLE, column)
            columns += ", status, schedule, next_run_at"
            values += ["scheduled", schedule[0], format_ts(schedule[1])]
        marks = ", ".join("?" for _ in values)
        res = self._run("submit a task", f"INSERT INTO {TASK_TABLE} ({columns}) VALUES ({marks})", values)
        if res.lastrowid is None:
            raise TaskDbError(f"task database {self.url}: submit returned no task id", url=self.url)
        return int(res.lastrowid)

    def get(self, task_id: int) -> TaskRecord | None:
        res = self._run(f"read task {task_id}",
                        f"SELECT {self._task_columns()} FROM {TASK_TABLE} WHERE id = ?",
                        (task_id,))
        return self._records(_task_record, res.rows[:1])[0] if res.rows else None

    def list(self, status: str | None = None, limit: int = 100, search: str | None = None) -> builtins.list[TaskRecord]:
        """Tasks, newest first; ``search``: only those whose name contains it (or whose id it is)."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        params: builtins.list[Any] = []
        where: builtins.list[str] = []
        if status is not None:
            _check_status(status)
            where.append("status = ?")
            params.append(status)
        if search:
            # '!' escapes: a backslash means different things to SQLite and to MySQL's string literals.
            escaped = search.replace("!", "!!").replace("%", "!%").replace("_", "!_")
            where.append("(name LIKE ? ESCAPE '!' OR id = ?)")
            params += [f"%{escaped}%", int(search) if search.isdigit() and len(search) < 19 else -1]
        params.append(limit)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        res = self._run("list tasks",
                        f"SELECT {self._task_columns()} FROM {TASK_TABLE}{clause}"
                        " ORDER BY id DESC LIMIT ?", params)
        return self._records(_task_record, res.rows)

    def pending(self, limit: int) -> builtins.list[int]:
        """Ids of pending tasks in the order they should run: higher priority first, then oldest."""
        res = self._run("look for pending tasks",
                        f"SELECT id FROM {TASK_TABLE} WHERE status = ? ORDER BY priority DESC, id ASC LIMIT ?",
                        ("pending", limit))
        return [int(row[0]) for row in res.rows]

    def start_run(self, task_id: int, claimed_by: str, resumed_from: int | None = None,
                  variables: str | None = None) -> int:
        """Record a new run of the task; ``resumed_from``: the (crashed) run it takes over; ``variables``:
        the job variables its spec used."""
        columns = "task_id, status, claimed_by, started_at, resumed_from"
        values = [task_id, "running", clip(claimed_by, CLAIMED_BY_MAX), format_ts(utcnow()), resumed_from]
        if variables is not None:
            self._add_optional(*_VARIABLES)
            columns, values = columns + ", variables", [*values, variables]
        marks = ", ".join("?" for _ in values)
        res = self._run(f"start a run of task {task_id}", f"INSERT INTO {RUN_TABLE} ({columns}) VALUES ({marks})",
                        values)
        if res.lastrowid is None:
            raise TaskDbError(f"task database {self.url}: start_run returned no run id", url=self.url)
        return int(res.lastrowid)

    def finish(self, task_id: int, run_id: int, *, status: str, run_status: str, exit_code: int,
               result: str | None, error: str | None, claimed_by: str | None = None,
               schedule: tuple[str, datetime] | None = None) -> bool:
        """Record the outcome of a run on the run row and the task row, together. With ``schedule`` (a
        recurring task's cron expression and next tick) the task goes back to ``scheduled`` for that tick
        (the outcome stays on the run row, and in the task row's result and error).

        With ``claimed_by``, only a task still running under that claim is written: False (and the
        task row left to whoever took the claim over; the run row written only if still 'running')
        when it is not. Without it, the task row is written whatever its state.
        """
        _check_status(status)
        if not run_status or len(run_status) > STATUS_MAX:
            raise ValueError(f"run_status must be 1..{STATUS_MAX} characters, got {run_status!r}")
        now = format_ts(utcnow())
        error = clip(error, ERROR_MAX)
        run_sql = (f"UPDATE {RUN_TABLE} SET status = ?, finished_at = ?, exit_code = ?, result = ?, error = ?"
                   " WHERE id = ? AND task_id = ?")
        run_params = (run_status, now, exit_code, result, error, run_id, task_id)
        if schedule is not None:  # before the transaction: an ALTER TABLE would commit it on MySQL
            for column in _SCHEDULE_COLUMNS:
                self._add_optional(TASK_TABLE, column)
        with self._atomic(f"finish task {task_id}"):
            task_sql = f"UPDATE {TASK_TABLE} SET status = ?, finished_at = ?, result = ?, error = ? WHERE id = ?"
            task_params: tuple[Any, ...] = (status, now, result, error, task_id)
            if schedule is not None:
                task_sql = task_sql.replace(" WHERE", ", schedule = ?, next_run_at = ? WHERE")
                task_params = ("scheduled", now, result, error, schedule[0], format_ts(schedule[1]), task_id)
            if claimed_by is not None:
                task_sql += " AND status = ? AND claimed_by = ?"
                task_params += ("running", clip(claimed_by, CLAIMED_BY_MAX))
            task = self._execute(task_sql, task_params)
            if task.rowcount != 1 and claimed_by is not None:
                # The claim was taken over: its new holder owns the task row (and ended this run as crashed).
                self._execute(run_sql + " AND status = ?", (*run_params, "running"))
                return False
            run = self._execute(run_sql, run_params)
            if task.rowcount != 1 or run.rowcount != 1:
                missing = f"task {task_id}" if task.rowcount != 1 else f"run {run_id} of task {task_id}"
                raise TaskDbError(f"task database {self.url}: cannot finish: {missing} not found",
                                  url=self.url)
        return True

    def fail_task(self, task_id: int, error: str) -> None:
        res = self._run(
            f"fail task {task_id}",
            f"UPDATE {TASK_TABLE} SET status = ?, finished_at = ?, result = NULL, error = ? WHERE id = ?",
            ("failed", format_ts(utcnow()), clip(error, ERROR_MAX), task_id),
        )
        if res.rowcount != 1:
            raise TaskDbError(f"task database {self.url}: cannot fail task {task_id}: not found",
                              url=self.url)

    def runs(self, task_id: int) -> builtins.list[RunRecord]:
        res = self._run(f"read the runs of task {task_id}",
                        f"SELECT {_RUN_COLUMNS}, {self._optional(*_VARIABLES)} FROM {RUN_TABLE} WHERE task_id = ?"
                        " ORDER BY id ASC",
                        (task_id,))
        return self._records(_run_record, res.rows)

    def retry(self, task_id: int, *, force: bool = False, stale_s: float = DEFAULT_STALE_S) -> bool:
        """Make a failed or partial task pending again; False when the task is in no state to be.

        With ``force`` also a successful task, and a running one whose heartbeat is older than
        ``stale_s`` (or was never written): its process is gone, and its runs still 'running' end
        'crashed'. A running task with a fresh heartbeat is never reset (its process is alive).
        """
        allowed = _RETRYABLE_FORCED if force else _RETRYABLE
        marks = ", ".join("?" for _ in allowed)
        now = utcnow()
        # The previous attempt's outcome stays in wormhole_task_run; the task row starts clean.
        reset = (f"UPDATE {TASK_TABLE} SET status = ?, claimed_by = NULL, started_at = NULL, finished_at = NULL,"
                 " heartbeat_at = NULL, result = NULL, error = NULL WHERE id = ? AND ")
        with self._atomic(f"retry task {task_id}"):
            if self._execute(reset + f"status IN ({marks})", ("pending", task_id, *allowed)).rowcount == 1:
                return True
            if not force:
                return False
            stale = self._execute(reset + "status = ? AND (heartbeat_at IS NULL OR heartbeat_at < ?)",
                                  ("pending", task_id, "running", format_ts(now - timedelta(seconds=stale_s))))
            if stale.rowcount != 1:
                return False
            self._execute(
                f"UPDATE {RUN_TABLE} SET status = ?, finished_at = ?, error = ? WHERE task_id = ? AND status = ?",
                (CRASHED, format_ts(now), "the process stopped heartbeating; reset by `wormhole task retry --force`",
                 task_id, "running"),
            )
            return True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_connection()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def _task_record(row: Sequence[Any]) -> TaskRecord:
    return TaskRecord(
        id=int(row[0]), name=row[1], spec=row[2], status=row[3], attempts=int(row[4]),
        created_at=parse_ts(row[5]), started_at=parse_ts(row[6]), finished_at=parse_ts(row[7]),
        claimed_by=row[8], result=row[9], error=row[10], priority=int(row[11] or 0),
        heartbeat_at=parse_ts(row[12]), params=_text(row[13]), schedule=_text(row[14]),
        next_run_at=parse_ts(row[15]), tick_at=parse_ts(row[16]), paused=bool(row[17]), progress=_text(row[18]),
    )


def _run_record(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        id=int(row[0]), task_id=int(row[1]), status=row[2], claimed_by=row[3],
        started_at=parse_ts(row[4]), finished_at=parse_ts(row[5]),
        exit_code=None if row[6] is None else int(row[6]), result=row[7], error=row[8],
        resumed_from=None if row[9] is None else int(row[9]), variables=_text(row[10]),
    )


def _text(value: Any) -> str | None:
    # A column an upstream system filled with bytes (SQLite keeps what it is given) is still text here.
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value

"""The task store contract, its records, and the one SQL implementation both databases share.

Every statement is written here once, with ``?`` placeholders and every value bound as a parameter;
a dialect subclass only says how to connect, how to run a statement and how to recognise its errors.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, TypeVar, runtime_checkable

from wormhole.errors import TaskDbError
from wormhole.taskdb.schema import (
    CLAIMED_BY_MAX,
    DAEMON_TABLE,
    ERROR_MAX,
    NAME_MAX,
    RUN_TABLE,
    STATUS_MAX,
    TASK_TABLE,
)

_R = TypeVar("_R")

TASK_STATUSES: tuple[str, ...] = ("pending", "running", "success", "partial", "failed")

# Where a task may be sent back to pending from, without and with force.
_RETRYABLE = ("failed", "partial")
_RETRYABLE_FORCED = ("failed", "partial", "running", "success")

_TASK_COLUMNS = (
    "id, name, spec, status, attempts, created_at, started_at, finished_at, claimed_by, result, error, priority"
)
_RUN_COLUMNS = "id, task_id, status, claimed_by, started_at, finished_at, exit_code, result, error"


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


@runtime_checkable
class TaskStore(Protocol):
    """What the CLI and the engine need from the task database."""

    url: str  # redacted: safe for messages and logs

    def init_schema(self) -> None: ...
    def submit(self, name: str, spec: str, priority: int = 0) -> int: ...
    def get(self, task_id: int) -> TaskRecord | None: ...
    def list(self, status: str | None = None, limit: int = 100) -> builtins.list[TaskRecord]: ...
    def claim(self, task_id: int, claimed_by: str) -> bool: ...
    def adopt(self, task_id: int, claimed_by: str) -> bool: ...
    def pending(self, limit: int) -> builtins.list[int]: ...
    def release(self, task_id: int, claimed_by: str, *, exit_code: int, error: str,
                run_status: str = "failed") -> str | None: ...
    def register_daemon(self, host: str, pid: int) -> int: ...
    def heartbeat(self, daemon_id: int, *, running_tasks: int, status: str) -> None: ...
    def start_run(self, task_id: int, claimed_by: str) -> int: ...
    def finish(self, task_id: int, run_id: int, *, status: str, run_status: str, exit_code: int,
               result: str | None, error: str | None) -> None: ...
    def fail_task(self, task_id: int, error: str) -> None: ...
    def runs(self, task_id: int) -> builtins.list[RunRecord]: ...
    def retry(self, task_id: int, *, force: bool = False) -> bool: ...
    def close(self) -> None: ...


def not_initialised_message(url: str) -> str:
    return f"task database {url} is not initialised: run `wormhole db init`"


def utcnow() -> datetime:
    """Naive UTC now, cut to milliseconds (what DATETIME(3) and the SQLite text keep)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def format_ts(value: datetime) -> str:
    """'YYYY-MM-DD HH:MM:SS.fff': the one text form both databases accept and SQLite stores."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_ts(value: object) -> datetime | None:
    """A stored timestamp (SQLite text, or the driver's datetime) as naive UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo is not None else value
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value.strip())
        return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo is not None else parsed
    raise TypeError(f"not a timestamp: {value!r}")


def _clip(text: str | None, limit: int) -> str | None:
    # Keep SQLite and MySQL (which rejects over-long values in strict mode) storing the same thing.
    if text is None or len(text) <= limit:
        return text
    marker = " ... [truncated]"
    return text[: limit - len(marker)] + marker


def _check_status(status: str, what: str = "status") -> None:
    if status not in TASK_STATUSES:
        raise ValueError(f"unknown task {what} {status!r}: expected one of {', '.join(TASK_STATUSES)}")


@dataclass(frozen=True, slots=True)
class Result:
    """What one statement produced, independent of the driver's cursor."""

    rows: builtins.list[tuple[Any, ...]]
    rowcount: int
    lastrowid: int | None


class SqlTaskStore(ABC):
    """The task store logic, shared by SQLite and MySQL; subclasses supply the dialect hooks."""

    # The driver's base exception class(es): these, and only these, become TaskDbError.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    ddl: ClassVar[tuple[str, ...]] = ()
    added_columns: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def __init__(self, url: str) -> None:
        self.url = url
        self._closed = False

    # -- dialect hooks ------------------------------------------------------------------------------

    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any]) -> Result:
        """Run one statement written with ``?`` placeholders."""

    @abstractmethod
    def _ensure_connected(self) -> None:
        """Called before each operation (not inside a transaction): reconnect if needed."""

    @abstractmethod
    def _begin(self) -> None: ...

    @abstractmethod
    def _commit(self) -> None: ...

    @abstractmethod
    def _rollback(self) -> None: ...

    @abstractmethod
    def _is_missing_table(self, exc: BaseException) -> bool: ...

    @abstractmethod
    def _close_connection(self) -> None: ...

    @abstractmethod
    def _columns(self, table: str) -> set[str]:
        """The column names ``table`` has now (lower case)."""

    @abstractmethod
    def _is_missing_column(self, exc: BaseException) -> bool: ...

    # -- plumbing -----------------------------------------------------------------------------------

    def _error(self, exc: BaseException, doing: str) -> TaskDbError:
        if self._is_missing_table(exc):
            return TaskDbError(not_initialised_message(self.url), url=self.url)
        if self._is_missing_column(exc):
            return TaskDbError(f"task database {self.url} was created by an older version: run `wormhole db init` "
                               f"to add the missing columns ({exc})", url=self.url)
        return TaskDbError(f"task database {self.url}: cannot {doing}: {exc}", url=self.url)

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        if self._closed:
            raise TaskDbError(f"task database {self.url}: cannot {doing}: the store is closed", url=self.url)
        try:
            self._ensure_connected()
            yield
        except TaskDbError:
            raise
        except self.driver_errors as exc:
            raise self._error(exc, doing) from exc

    def _run(self, doing: str, sql: str, params: Sequence[Any] = ()) -> Result:
        with self._guard(doing):
            return self._execute(sql, params)

    def _records(self, make: Callable[[Sequence[Any]], _R],
                 rows: Sequence[Sequence[Any]]) -> builtins.list[_R]:
        # Rows written by an upstream system (SQLite does not enforce column types) may not parse.
        try:
            return [make(row) for row in rows]
        except (TypeError, ValueError) as exc:
            raise TaskDbError(f"task database {self.url}: unreadable row: {exc}", url=self.url) from exc

    @contextmanager
    def _atomic(self, doing: str) -> Iterator[None]:
        """Several statements that take effect together or not at all."""
        with self._guard(doing):
            self._begin()
            try:
                yield
            except BaseException:
                with suppress(Exception):
                    self._rollback()
                raise
            self._commit()

    # -- the store ----------------------------------------------------------------------------------

    def init_schema(self) -> None:
        """Create what is missing, tables and (on a database from an older version) columns."""
        for statement in self.ddl:
            self._run("create the schema", statement)
        for table, column, definition in self.added_columns:
            with self._guard(f"add the column {table}.{column}"):
                if column not in self._columns(table):
                    self._execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}", ())

    def submit(self, name: str, spec: str, priority: int = 0) -> int:
        # Same shape as the upstream INSERT: the column defaults make it pending.
        res = self._run("submit a task", f"INSERT INTO {TASK_TABLE} (name, spec, priority) VALUES (?, ?, ?)",
                        (_clip(name, NAME_MAX), spec, priority))
        if res.lastrowid is None:
            raise TaskDbError(f"task database {self.url}: submit returned no task id", url=self.url)
        return int(res.lastrowid)

    def get(self, task_id: int) -> TaskRecord | None:
        res = self._run(f"read task {task_id}", f"SELECT {_TASK_COLUMNS} FROM {TASK_TABLE} WHERE id = ?",
                        (task_id,))
        return self._records(_task_record, res.rows[:1])[0] if res.rows else None

    def list(self, status: str | None = None, limit: int = 100) -> builtins.list[TaskRecord]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        params: builtins.list[Any] = []
        where = ""
        if status is not None:
            _check_status(status)
            where = " WHERE status = ?"
            params.append(status)
        params.append(limit)
        res = self._run("list tasks",
                        f"SELECT {_TASK_COLUMNS} FROM {TASK_TABLE}{where} ORDER BY id DESC LIMIT ?", params)
        return self._records(_task_record, res.rows)

    def claim(self, task_id: int, claimed_by: str) -> bool:
        # One conditional UPDATE: the database decides the single winner, whatever the number of claimers.
        res = self._run(
            f"claim task {task_id}",
            f"UPDATE {TASK_TABLE} SET status = ?, attempts = attempts + 1, started_at = ?, claimed_by = ?,"
            " finished_at = NULL, result = NULL, error = NULL WHERE id = ? AND status = ?",
            ("running", format_ts(utcnow()), _clip(claimed_by, CLAIMED_BY_MAX), task_id, "pending"),
        )
        return res.rowcount == 1

    def adopt(self, task_id: int, claimed_by: str) -> bool:
        """Take over a claim made under ``claimed_by`` (the daemon's hand-over to its child process).

        Conditional like ``claim``: False when the task is no longer running under that claim.
        """
        res = self._run(
            f"adopt the claim of task {task_id}",
            f"UPDATE {TASK_TABLE} SET claimed_by = ? WHERE id = ? AND status = ? AND claimed_by = ?",
            (claimed_by, task_id, "running", claimed_by),
        )
        return res.rowcount == 1

    def pending(self, limit: int) -> builtins.list[int]:
        """Ids of pending tasks in the order they should run: higher priority first, then oldest."""
        res = self._run("look for pending tasks",
                        f"SELECT id FROM {TASK_TABLE} WHERE status = ? ORDER BY priority DESC, id ASC LIMIT ?",
                        ("pending", limit))
        return [int(row[0]) for row in res.rows]

    def release(self, task_id: int, claimed_by: str, *, exit_code: int, error: str,
                run_status: str = "failed") -> str | None:
        """Settle a claim whose process ended without recording the task; the task's new status or None.

        No run started under the claim: the task was never run, so it is pending again. A run started:
        the task is failed and the run ends ``run_status``, both with ``error``. A task no longer running
        under the claim is left alone.
        """
        now = format_ts(utcnow())
        with self._atomic(f"release the claim of task {task_id}"):
            started = self._execute(f"SELECT id FROM {RUN_TABLE} WHERE task_id = ? AND claimed_by = ?",
                                    (task_id, claimed_by)).rows
            mine = "WHERE id = ? AND status = ? AND claimed_by = ?"
            if not started:
                res = self._execute(
                    f"UPDATE {TASK_TABLE} SET status = ?, claimed_by = NULL, started_at = NULL,"
                    f" attempts = attempts - 1 {mine}", ("pending", task_id, "running", claimed_by))
                return "pending" if res.rowcount == 1 else None
            error = _clip(error, ERROR_MAX) or ""
            res = self._execute(f"UPDATE {TASK_TABLE} SET status = ?, finished_at = ?, error = ? {mine}",
                                ("failed", now, error, task_id, "running", claimed_by))
            self._execute(f"UPDATE {RUN_TABLE} SET status = ?, finished_at = ?, exit_code = ?, error = ?"
                          " WHERE task_id = ? AND claimed_by = ? AND status = ?",
                          (run_status, now, exit_code, error, task_id, claimed_by, "running"))
            return "failed" if res.rowcount == 1 else None

    def register_daemon(self, host: str, pid: int) -> int:
        """Insert this daemon's heartbeat row; its id."""
        now = format_ts(utcnow())
        res = self._run("register the daemon",
                        f"INSERT INTO {DAEMON_TABLE} (host, pid, started_at, heartbeat_at, running_tasks, status)"
                        " VALUES (?, ?, ?, ?, ?, ?)", (_clip(host, CLAIMED_BY_MAX), pid, now, now, 0, "running"))
        if res.lastrowid is None:
            raise TaskDbError(f"task database {self.url}: register_daemon returned no id", url=self.url)
        return int(res.lastrowid)

    def heartbeat(self, daemon_id: int, *, running_tasks: int, status: str) -> None:
        self._run("write the daemon heartbeat",
                  f"UPDATE {DAEMON_TABLE} SET heartbeat_at = ?, running_tasks = ?, status = ? WHERE id = ?",
                  (format_ts(utcnow()), running_tasks, status, daemon_id))

    def start_run(self, task_id: int, claimed_by: str) -> int:
        res = self._run(
            f"start a run of task {task_id}",
            f"INSERT INTO {RUN_TABLE} (task_id, status, claimed_by, started_at) VALUES (?, ?, ?, ?)",
            (task_id, "running", _clip(claimed_by, CLAIMED_BY_MAX), format_ts(utcnow())),
        )
        if res.lastrowid is None:
            raise TaskDbError(f"task database {self.url}: start_run returned no run id", url=self.url)
        return int(res.lastrowid)

    def finish(self, task_id: int, run_id: int, *, status: str, run_status: str, exit_code: int,
               result: str | None, error: str | None) -> None:
        _check_status(status)
        if not run_status or len(run_status) > STATUS_MAX:
            raise ValueError(f"run_status must be 1..{STATUS_MAX} characters, got {run_status!r}")
        now = format_ts(utcnow())
        error = _clip(error, ERROR_MAX)
        with self._atomic(f"finish task {task_id}"):
            task = self._execute(
                f"UPDATE {TASK_TABLE} SET status = ?, finished_at = ?, result = ?, error = ? WHERE id = ?",
                (status, now, result, error, task_id),
            )
            run = self._execute(
                f"UPDATE {RUN_TABLE} SET status = ?, finished_at = ?, exit_code = ?, result = ?, error = ?"
                " WHERE id = ? AND task_id = ?",
                (run_status, now, exit_code, result, error, run_id, task_id),
            )
            if task.rowcount != 1 or run.rowcount != 1:
                missing = f"task {task_id}" if task.rowcount != 1 else f"run {run_id} of task {task_id}"
                raise TaskDbError(f"task database {self.url}: cannot finish: {missing} not found",
                                  url=self.url)

    def fail_task(self, task_id: int, error: str) -> None:
        res = self._run(
            f"fail task {task_id}",
            f"UPDATE {TASK_TABLE} SET status = ?, finished_at = ?, result = NULL, error = ? WHERE id = ?",
            ("failed", format_ts(utcnow()), _clip(error, ERROR_MAX), task_id),
        )
        if res.rowcount != 1:
            raise TaskDbError(f"task database {self.url}: cannot fail task {task_id}: not found",
                              url=self.url)

    def runs(self, task_id: int) -> builtins.list[RunRecord]:
        res = self._run(f"read the runs of task {task_id}",
                        f"SELECT {_RUN_COLUMNS} FROM {RUN_TABLE} WHERE task_id = ? ORDER BY id ASC",
                        (task_id,))
        return self._records(_run_record, res.rows)

    def retry(self, task_id: int, *, force: bool = False) -> bool:
        allowed = _RETRYABLE_FORCED if force else _RETRYABLE
        marks = ", ".join("?" for _ in allowed)
        # The previous attempt's outcome stays in wormhole_task_run; the task row starts clean.
        res = self._run(
            f"retry task {task_id}",
            f"UPDATE {TASK_TABLE} SET status = ?, claimed_by = NULL, started_at = NULL, finished_at = NULL,"
            f" result = NULL, error = NULL WHERE id = ? AND status IN ({marks})",
            ("pending", task_id, *allowed),
        )
        return res.rowcount == 1

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
    )


def _run_record(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        id=int(row[0]), task_id=int(row[1]), status=row[2], claimed_by=row[3],
        started_at=parse_ts(row[4]), finished_at=parse_ts(row[5]),
        exit_code=None if row[6] is None else int(row[6]), result=row[7], error=row[8],
    )

"""The SQL plumbing every part of the task store shares: the dialect hooks, statements run under one
error mapping, transactions, and the timestamp and text helpers.

Kept apart from ``base.py`` so the store's parts (``claims.py``, ``checkpoints.py``) can build on it
without importing the store they are mixed into.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from wormhole.errors import TaskDbError

_R = TypeVar("_R")


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


def clip(text: str | None, limit: int) -> str | None:
    # Keep SQLite and MySQL (which rejects over-long values in strict mode) storing the same thing.
    if text is None or len(text) <= limit:
        return text
    marker = " ... [truncated]"
    return text[: limit - len(marker)] + marker


@dataclass(frozen=True, slots=True)
class Result:
    """What one statement produced, independent of the driver's cursor."""

    rows: builtins.list[tuple[Any, ...]]
    rowcount: int
    lastrowid: int | None


class SqlStoreBase(ABC):
    """Runs statements for the task store; subclasses supply the dialect hooks."""

    # The driver's base exception class(es): these, and only these, become TaskDbError.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    # How the dialect spells an INSERT that skips a row whose unique key exists (idempotent writes).
    insert_ignore: ClassVar[str] = "INSERT OR IGNORE"
    added_columns: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    _present: frozenset[tuple[str, str]] = frozenset()

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

    # -- columns added since the first release -------------------------------------------------------

    def _optional(self, table: str, column: str) -> str:
        """``column``, or ``NULL`` on a database from before it: a new column read by every run must not
        make an older database unusable until ``db init`` (only a present column is remembered, so one
        added meanwhile by another process is seen)."""
        if (table, column) not in self._present:
            with self._guard(f"read the columns of {table}"):
                if column not in self._columns(table):
                    return "NULL"
            self._present |= {(table, column)}
        return column

    def _schedule_of(self, task_id: int) -> str | None:
        """A recurring task's cron expression (None: it runs once)."""
        if self._optional("wormhole_task", "schedule") == "NULL":
            return None
        rows = self._run(f"read the schedule of task {task_id}", "SELECT schedule FROM wormhole_task WHERE id = ?",
                         (task_id,)).rows
        value = rows[0][0] if rows else None
        return value.decode() if isinstance(value, bytes) else value

    def _add_optional(self, table: str, column: str) -> None:
        """Add a missing optional column before a value is written to it, as ``db init`` would."""
        if self._optional(table, column) != "NULL":
            return
        definition = next(d for t, c, d in self.added_columns if (t, c) == (table, column))
        with self._guard(f"add the column {table}.{column}"):
            try:
                self._execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}", ())
            except self.driver_errors:
                if column not in self._columns(table):  # else another process added it first
                    raise
        self._present |= {(table, column)}

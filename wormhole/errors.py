"""The one exception hierarchy of wormhole.

::

    WormholeError                  code, exit_code=203, retryable=False
    ├── ConfigError                exit_code=204 (bad task: the task is not run)
    │   ├── TaskNotFound
    │   ├── InvalidTaskConfig      .problems: every problem, each with its key path
    │   └── PluginError            UnknownPlugin
    ├── TaskClaimed                exit_code=205 (another process owns the task)
    ├── TaskDbError                the task database is unreachable or not initialised
    ├── StorageError               .destination .plugin
    │   ├── ReadError              (TransientReadError: retryable)
    │   │   └── SnapshotError      the consistent snapshot cannot be taken or read through
    │   ├── WriteError             (TransientWriteError: retryable)
    │   │   ├── WriterStalled      the destination took no batch for push_timeout_s
    │   │   ├── SplitLost          a split's open transaction is gone: abort it and deliver it again
    │   │   └── WritersUnfinished  its writers were still running when the task ended
    │   ├── SplitError
    │   ├── PeripheryError         PrepareError (PrepareTimeout), CommitError, RollbackError
    │   ├── RowsUnaccounted        queued != delivered != written + rejected
    │   └── DirtyLimitExceeded     .limit .observed
    └── TaskAborted                .reason (SIGTERM, read side failed, ...)
        └── RolledBack             a healthy destination undone because of the others or the task

``exit_code`` is what the CLI exits with when the error ends a run before any destination was
decided; per-destination outcomes are decided by the engine, not by raising.
"""

from __future__ import annotations

from typing import Any


class WormholeError(Exception):
    code = "WORMHOLE_ERROR"
    exit_code = 203
    retryable = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep errors picklable across processes (Spark executors) with their details.
        return (_rebuild, (type(self), self.message, self.details))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[WormholeError], message: str, details: dict[str, Any]) -> WormholeError:
    err = cls.__new__(cls)
    WormholeError.__init__(err, message, **details)
    for key, value in details.items():
        setattr(err, key, value)
    return err


class ConfigError(WormholeError):
    code = "CONFIG_ERROR"
    exit_code = 204


class TaskNotFound(ConfigError):
    code = "TASK_NOT_FOUND"


class InvalidTaskConfig(ConfigError):
    code = "INVALID_TASK"

    def __init__(self, problems: list[str], *, where: str = "task") -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {where}: {len(self.problems)} problem(s)\n{lines}", problems=self.problems)


class PluginError(ConfigError):
    code = "PLUGIN_ERROR"


class UnknownPlugin(PluginError):
    code = "UNKNOWN_PLUGIN"


class TaskClaimed(WormholeError):
    code = "TASK_CLAIMED"
    exit_code = 205


class TaskDbError(WormholeError):
    code = "TASK_DB_ERROR"


class StorageError(WormholeError):
    code = "STORAGE_ERROR"

    def __init__(self, message: str, *, destination: str | None = None, plugin: str | None = None,
                 **details: Any) -> None:
        super().__init__(message, destination=destination, plugin=plugin, **details)
        self.destination = destination
        self.plugin = plugin


class ReadError(StorageError):
    code = "READ_ERROR"


class TransientReadError(ReadError):
    code = "READ_TRANSIENT"
    retryable = True


class SnapshotError(ReadError):
    """The source's consistent snapshot (``settings.snapshot``) cannot be taken (its lock not had in time) or
    read through (every connection it holds was lost): no other connection would see the same instant."""

    code = "SNAPSHOT_ERROR"


class WriteError(StorageError):
    code = "WRITE_ERROR"


class TransientWriteError(WriteError):
    code = "WRITE_TRANSIENT"
    retryable = True


class SplitLost(WriteError):
    """A split's uncommitted writes are gone (deadlock, lost connection, a COMMIT that did not land):
    the destination is healthy, but the split must be aborted and delivered again whole. Not
    ``retryable``: retrying the failed call alone would lose the split's earlier batches."""

    code = "SPLIT_LOST"

    def __init__(self, message: str, *, split_id: str, **details: Any) -> None:
        super().__init__(message, split_id=split_id, **details)
        self.split_id = split_id


class WriterStalled(WriteError):
    code = "WRITER_STALLED"


class WritersUnfinished(WriteError):
    code = "UNFINISHED"


class SplitError(StorageError):
    code = "SPLIT_ERROR"


class PeripheryError(StorageError):
    code = "PERIPHERY_ERROR"


class PrepareError(PeripheryError):
    code = "PREPARE_ERROR"


class PrepareTimeout(PrepareError):
    code = "PREPARE_TIMEOUT"


class CommitError(PeripheryError):
    code = "COMMIT_ERROR"


class RollbackError(PeripheryError):
    code = "ROLLBACK_ERROR"


class RowsUnaccounted(StorageError):
    code = "ROWS_UNACCOUNTED"


class DirtyLimitExceeded(StorageError):
    code = "DIRTY_LIMIT_EXCEEDED"

    def __init__(self, message: str, *, limit: int | float, observed: int | float, **details: Any) -> None:
        super().__init__(message, limit=limit, observed=observed, **details)
        self.limit = limit
        self.observed = observed


class TaskAborted(WormholeError):
    code = "TASK_ABORTED"

    def __init__(self, message: str, *, reason: str = "aborted", **details: Any) -> None:
        super().__init__(message, reason=reason, **details)
        self.reason = reason


class RolledBack(TaskAborted):
    code = "ROLLED_BACK"

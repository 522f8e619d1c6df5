"""How long a run waits out a task database that refuses it (:class:`Patience`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from wormhole import log
from wormhole.config import EngineConf
from wormhole.errors import TaskDbError

_T = TypeVar("_T")


class Patience:
    """A daemon's child (``adopted``) waits out a task database that refuses it before its run starts,
    while the daemon's claim is still good (``claim.stale_s - heartbeat_s`` from the child's start): the
    daemon reached the database a moment ago, so a failure now is the database going away for a while,
    which the daemon waits out too, not a reason to fail the task. Anyone else fails at once."""

    def __init__(self, conf: EngineConf, adopted: bool, logger: log.Logger) -> None:
        self._good_for = conf.claim.stale_s - conf.claim.heartbeat_s
        self._deadline = time.monotonic() + self._good_for if adopted else 0.0
        self._logger = logger

    def holding(self, since: float) -> None:
        """The claim is ours, taken at ``since``: until it could go stale, no one else may take the task,
        so a refusing database is waited for by anyone (a failure now would leave the task claimed)."""
        self._deadline = max(self._deadline, since + self._good_for)

    def __call__(self, what: str, call: Callable[[], _T], *, for_s: float | None = None) -> _T:
        """``call()``, retried on a task database error until the deadline, or for ``for_s`` from now."""
        deadline = self._deadline if for_s is None else time.monotonic() + for_s
        wait = 0.5
        while True:
            try:
                return call()
            except TaskDbError as exc:
                if time.monotonic() + wait > deadline:
                    raise
                self._logger.warning("task.taskdb_unreachable", step=what, error=str(exc), retry_in_s=wait)
            time.sleep(wait)
            wait = min(wait * 2, 5.0)

"""One consistent snapshot of a task's source, shared by every table run that reads it (``settings.snapshot``).

:meth:`Snapshot.open` takes it once, through the source store's ``SourceRole.snapshot`` facet (the engine never
imports a store), for as many reader connections as will read through it at once; each :class:`~wormhole.engine.Engine`
given it (``Engine(..., snapshot=...)``) puts it in its read context, so its splitter, bounds and readers read
at its instant, and neither opens nor closes it. An Engine of a task with ``snapshot: consistent`` given none
opens its own and closes it when its reads have ended. Whoever opened it closes it, after every reader has
ended: its connections hold the instant.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Mapping
from typing import Any

from wormhole.errors import SnapshotError
from wormhole.log import Logger
from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, SnapshotRequest, SourceSnapshot
from wormhole.task_spec import SourceSpec


class Snapshot:
    """A source's consistent snapshot, open until :meth:`close`."""

    def __init__(self, plugin: str, source: SourceSnapshot, readers: int, log: Logger, taken_s: float) -> None:
        self.plugin = plugin
        self.source = source
        """The store's own snapshot: what a read context carries (``ReadContext.snapshot``)."""
        self.readers = readers
        self.taken_at = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        self.position: dict[str, str] = {str(k): str(v) for k, v in source.position.items()}
        """Where the instant stands in the source's change history (binlog file/pos, GTID, LSN); {} when it has none."""
        self._taken_s = taken_s
        self._log = log
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def open(cls, source: SourceSpec, ctx: ReadContext, *, readers: int, lock_timeout_s: float,
             log: Logger) -> Snapshot:
        """Take the snapshot of ``source`` for ``readers`` connections reading at once (``ctx``: the context
        it connects with: its stop ends connection retries). SnapshotError (or the store's ReadError) when it
        cannot be taken; then nothing stays held."""
        facet = registry.source(source.plugin).snapshot
        if facet is None:
            raise SnapshotError(f"the {source.plugin} store cannot hold a consistent snapshot", plugin=source.plugin)
        started = time.monotonic()
        taken = facet.open(source.options, ctx, SnapshotRequest(readers=readers, lock_timeout_s=lock_timeout_s))
        snapshot = cls(source.plugin, taken, readers, log, round(time.monotonic() - started, 4))
        log.info("snapshot.taken", plugin=source.plugin, position=snapshot.position, readers=readers,
                 took_s=snapshot._taken_s)
        return snapshot

    def describe(self, *, resumed: bool = False) -> Mapping[str, Any]:
        """What a run's result records of it (``snapshot`` in the result JSON)."""
        return {"mode": "consistent", "position": dict(self.position), "taken_at": self.taken_at,
                "took_s": self._taken_s, "readers": self.readers, "new_on_resume": resumed}

    def close(self) -> None:
        """Release it (its connections, their transactions); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.source.close()
        finally:
            self._log.info("snapshot.closed", plugin=self.plugin, position=self.position)

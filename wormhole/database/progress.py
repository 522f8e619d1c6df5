"""A database task's progress: its table runs' snapshots combined into the task's, one line per destination
summed over its tables, the source's line over every table, and the tables done and in flight."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from wormhole.monitor import DestinationProgress, ProgressListener, ProgressSnapshot


class _TableListener:
    def __init__(self, combined: DatabaseProgress, table: str) -> None:
        self._combined, self._table = combined, table

    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        self._combined.table_progress(self._table, snapshot)


class DatabaseProgress:
    """Listens to every table run and tells the task's listeners (the live display, metrics, the console)."""

    def __init__(self, listeners: Sequence[ProgressListener], *, task_id: int, source: str,
                 destinations: Mapping[str, str], tables: int, estimated_rows: int | None) -> None:
        self._listeners = tuple(listeners)
        self._task_id, self._source = task_id, source
        self._destinations = dict(destinations)
        """Destination id -> plugin."""
        self._total, self._estimated = tables, estimated_rows
        self._latest: dict[str, ProgressSnapshot] = {}
        self._done: dict[str, ProgressSnapshot] = {}
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def listener(self, table: str) -> ProgressListener:
        return _TableListener(self, table)

    def table_progress(self, table: str, snapshot: ProgressSnapshot) -> None:
        with self._lock:
            if snapshot.final:
                self._done[table] = snapshot
                self._latest.pop(table, None)
            else:
                self._latest[table] = snapshot
            combined = self._combined(None, {})
        self._publish(combined)

    def finish(self, status: str, outcomes: Mapping[str, str]) -> None:
        """The task's final snapshot: ``outcomes`` is each destination's over its tables."""
        with self._lock:
            combined = self._combined(status, outcomes)
        self._publish(combined)

    def _publish(self, snapshot: ProgressSnapshot) -> None:
        for listener in self._listeners:
            listener.on_progress(snapshot)

    def _combined(self, final: str | None, outcomes: Mapping[str, str]) -> ProgressSnapshot:
        snaps = [*self._done.values(), *self._latest.values()]
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        rows = sum(s.rows_read for s in snaps)
        estimated = self._estimated
        percent = round(min(100.0, 100.0 * rows / estimated), 1) if estimated else None
        eta = round(max(estimated - rows, 0) / (rows / elapsed), 1) if estimated and rows else None
        return ProgressSnapshot(
            task_id=self._task_id, source=self._source, state=final or "running", final=final is not None,
            rows_read=rows, rows_per_s=rows / elapsed, estimated_rows=estimated, percent=percent, eta_s=eta,
            elapsed_s=round(elapsed, 1),
            destinations=tuple(self._destination(d, plugin, snaps, elapsed, outcomes.get(d))
                               for d, plugin in self._destinations.items()),
            tables={"done": len(self._done), "total": self._total, "in_flight": sorted(self._latest)})

    def _destination(self, dest: str, plugin: str, snaps: Sequence[ProgressSnapshot], elapsed: float,
                     outcome: str | None) -> DestinationProgress:
        pairs = [p for s in snaps for p in s.destinations if p.id.startswith(f"{dest}/")]
        running = any(p.state == "running" for s in self._latest.values() for p in s.destinations
                      if p.id.startswith(f"{dest}/"))
        failed = any(p.state in ("failed", "rolled_back") for p in pairs)
        state = outcome or ("running" if running else "failed" if failed else "pending" if not pairs else "done")
        written = sum(p.written for p in pairs)
        return DestinationProgress(id=dest, plugin=plugin, state=state, written=written,
                                   rejected=sum(p.rejected for p in pairs), bytes=sum(p.bytes for p in pairs),
                                   rows_per_s=written / elapsed)

"""A database task's progress: its table runs' snapshots combined into the task's, one line per destination
summed over its tables, the source's line over every table, and the tables done and in flight."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from wormhole.monitor import DestinationProgress, ProgressListener, ProgressSnapshot


class _TableListener:
    def __init__(self, combined: DatabaseProgress, table: str) -> None:
        self._combined, self._table = combined, table

    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        self._combined.table_progress(self._table, snapshot)


@dataclass
class _Done:
    """One destination's pairs of the tables done, summed (each snapshot adds the in-flight tables only: a task
    of 1,000 tables would otherwise sum every done table on each of its 2,000 snapshots)."""

    pairs: int = 0
    written: int = 0
    rejected: int = 0
    bytes: int = 0
    failed: int = 0

    def add(self, snapshot: ProgressSnapshot, dest: str, sign: int) -> None:
        for p in snapshot.destinations:
            if p.id.startswith(f"{dest}/"):
                self.pairs += sign
                self.written += sign * p.written
                self.rejected += sign * p.rejected
                self.bytes += sign * p.bytes
                self.failed += sign * (p.state in ("failed", "rolled_back"))


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
        self._done_rows = 0
        self._done_by_dest = {d: _Done() for d in self._destinations}
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def listener(self, table: str) -> ProgressListener:
        return _TableListener(self, table)

    def table_progress(self, table: str, snapshot: ProgressSnapshot) -> None:
        with self._lock:
            if snapshot.final:
                before = self._done.get(table)
                if before is not None:  # a table's final snapshot told again: counted once
                    self._count_done(before, -1)
                self._done[table] = snapshot
                self._count_done(snapshot, 1)
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

    def _count_done(self, snapshot: ProgressSnapshot, sign: int) -> None:
        self._done_rows += sign * snapshot.rows_read
        for dest, done in self._done_by_dest.items():
            done.add(snapshot, dest, sign)

    def _publish(self, snapshot: ProgressSnapshot) -> None:
        for listener in self._listeners:
            listener.on_progress(snapshot)

    def _combined(self, final: str | None, outcomes: Mapping[str, str]) -> ProgressSnapshot:
        snaps = list(self._latest.values())
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        rows = self._done_rows + sum(s.rows_read for s in snaps)
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
        done = self._done_by_dest[dest]
        pairs = [p for s in snaps for p in s.destinations if p.id.startswith(f"{dest}/")]
        running = any(p.state == "running" for p in pairs)
        failed = done.failed > 0 or any(p.state in ("failed", "rolled_back") for p in pairs)
        some = done.pairs > 0 or bool(pairs)
        state = outcome or ("running" if running else "failed" if failed else "pending" if not some else "done")
        written = done.written + sum(p.written for p in pairs)
        return DestinationProgress(id=dest, plugin=plugin, state=state, written=written,
                                   rejected=done.rejected + sum(p.rejected for p in pairs),
                                   bytes=done.bytes + sum(p.bytes for p in pairs), rows_per_s=written / elapsed)

"""What the runner tells the ones watching a run (the CLI's live display and metrics endpoint), and the
latest progress its heartbeat writes to the task database (what the console shows)."""

from __future__ import annotations

import json
import threading
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from wormhole.monitor import ProgressListener, ProgressSnapshot
from wormhole.task_spec import TaskSpec


class RunObservers(Protocol):
    """What the runner tells the ones watching the run (the CLI's display and metrics endpoint)."""

    def start(self) -> bool:
        """Start watching; False (logged) when they cannot (a metrics port in use)."""

    def for_run(self, run_id: int) -> None: ...

    def set_state(self, state: str) -> None: ...

    def watching(self) -> AbstractContextManager[list[ProgressListener]]:
        """The listeners of the Engine's run, for as long as it runs."""

    def show_outcome(self, status: str, exit_code: int, result: dict[str, Any], spec: TaskSpec) -> None: ...

    def close(self, *, hold: bool = True) -> None: ...


class LatestProgress:
    """Keeps the monitor's latest snapshot (one assignment per snapshot, on the monitor's thread); the
    heartbeat thread takes it as JSON, so the task database holds the run's progress as of its last beat."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self._latest: ProgressSnapshot | None = None
        self._lock = threading.Lock()

    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        self._latest = snapshot  # NOTE: one reference swap, atomic under the GIL: the run's thread never waits

    def take(self) -> str | None:
        """The snapshot not yet taken, as JSON; None when there is none new."""
        with self._lock:
            snap, self._latest = self._latest, None
        if snap is None:
            return None
        return json.dumps({
            "run_id": self.run_id, "at": datetime.now(UTC).isoformat(timespec="milliseconds"), "state": snap.state,
            "rows_read": snap.rows_read, "rows_per_s": round(snap.rows_per_s, 1), "estimated_rows": snap.estimated_rows,
            "percent": snap.percent, "elapsed_s": round(snap.elapsed_s, 3),
            "destinations": [{"id": d.id, "plugin": d.plugin, "state": d.state, "written": d.written,
                              "rejected": d.rejected, "rows_per_s": round(d.rows_per_s, 1)}
                             for d in snap.destinations]})

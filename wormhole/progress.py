"""Live progress on a terminal: one updating line for the source and one per destination.

A :class:`TtyProgress` is a :class:`wormhole.monitor.ProgressListener` drawn with rich's ``Live``
(a maintained library rather than hand-written cursor control). While it runs, log lines written
through :meth:`TtyProgress.write` are printed above the display, never through it. The last frame
(every destination's outcome) stays on the screen when it stops. Nothing here is imported unless
a display is wanted: the engine and the monitor know only the listener protocol.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from wormhole.monitor import DestinationProgress, ProgressSnapshot

STATE_STYLES = {"running": "cyan", "done": "cyan", "success": "green", "failed": "red", "rolled_back": "yellow",
                "partial": "yellow", "interrupted": "yellow", "pending": "dim"}


def _count(n: int) -> str:
    return f"{n:,}"


def _duration(seconds: float) -> str:
    return str(dt.timedelta(seconds=int(seconds)))


def _estimate(done: int, rate: float, estimated: int | None) -> str:
    """``12.3% ETA 0:00:20`` when the source gave an estimate, else empty."""
    if not estimated:
        return ""
    text = f"{min(100.0, 100.0 * done / estimated):5.1f}%"
    if rate > 0 and done < estimated:
        text += f"  ETA {_duration((estimated - done) / rate)}"
    return text


def _state(state: str) -> Text:
    return Text(state, style=STATE_STYLES.get(state, ""))


def _destination_row(d: DestinationProgress, snap: ProgressSnapshot) -> list[Text | str]:
    detail = []
    if d.queued_rows is not None and d.queue_fill is not None:
        detail.append(f"queue {d.queued_rows:,} ({d.queue_fill:.0%})")
    if d.tasks is not None:
        detail.append(f"tasks {d.tasks_done or 0}/{d.tasks}")
    estimate = "" if snap.final else _estimate(d.written + d.rejected, d.rows_per_s, snap.estimated_rows)
    return [f"-> {d.id}", d.plugin, _state(d.state), f"written {_count(d.written)}",
            f"rejected {_count(d.rejected)}", f"{_count(round(d.rows_per_s))} rows/s", estimate, "  ".join(detail)]


def render(snap: ProgressSnapshot) -> Table:
    """One line for the source, one per destination, in aligned columns."""
    table = Table.grid(padding=(0, 2))
    for _ in range(8):
        table.add_column(no_wrap=True, overflow="ellipsis")
    estimate = "" if snap.final else _estimate(snap.rows_read, snap.rows_per_s, snap.estimated_rows)
    table.add_row(f"task {snap.task_id}", snap.source, _state(snap.state), f"read {_count(snap.rows_read)}",
                  f"of {_count(snap.estimated_rows)}" if snap.estimated_rows is not None else "",
                  f"{_count(round(snap.rows_per_s))} rows/s", estimate, f"elapsed {_duration(snap.elapsed_s)}")
    for dest in snap.destinations:
        table.add_row(*_destination_row(dest, snap))
    return table


class TtyProgress:
    """The live display on ``stream`` (stderr); ``force`` draws it even when that is no terminal."""

    def __init__(self, stream: TextIO, *, force: bool = False) -> None:
        self._console = Console(file=stream, force_terminal=True if force else None, highlight=False, emoji=False)
        self._live = Live(Text("starting..."), console=self._console, refresh_per_second=4, transient=False,
                          redirect_stdout=False, redirect_stderr=False)
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> None:
        with self._lock:
            if not self._started:
                self._live.start()
                self._started = True

    def stop(self) -> None:
        """Draw the last frame and leave it on the screen; safe to call twice."""
        with self._lock:
            if self._started:
                self._live.stop()
                self._started = False

    def on_progress(self, snapshot: ProgressSnapshot) -> None:
        self._live.update(render(snapshot), refresh=True)

    def write(self, text: str) -> int:
        """A log line: printed above the display (rich moves the display down)."""
        self._console.print(Text(text.rstrip("\n")), soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        self._console.file.flush()

    def isatty(self) -> bool:
        return self._console.is_terminal

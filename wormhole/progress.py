"""Live progress on a terminal: one updating line for the source and one per destination, the plan
before it and a short outcome table after it, the log kept in a file (:class:`TerminalLog`).

A :class:`TtyProgress` is a :class:`wormhole.monitor.ProgressListener` drawn with rich's ``Live``
(a maintained library rather than hand-written cursor control). While it runs, log lines written
through :meth:`TtyProgress.write` are printed above the display, never through it. The last frame
(every destination's outcome) stays on the screen when it stops. Nothing here is imported unless
a display is wanted: the engine and the monitor know only the listener protocol.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from wormhole.log import Event, Render, json_line
from wormhole.monitor import DestinationProgress, ProgressSnapshot
from wormhole.result import verify_summary

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
    if snap.tables is not None:
        flying = ", ".join(snap.tables["in_flight"][:4]) + (" ..." if len(snap.tables["in_flight"]) > 4 else "")
        table.add_row("", "tables", "", f"done {snap.tables['done']:,}", f"of {snap.tables['total']:,}", "",
                      "", f"in flight: {flying}" if flying else "")
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


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def plan_lines(plan: Mapping[str, Any], log_file: str | None = None) -> list[str]:
    """``plan.made`` (:meth:`wormhole.planning.plan.Plan.to_dict`'s keys) as a few lines: the engine and the
    channels and why, what is read, one line per destination, the limits and transforms when set."""
    splits, groups = plan.get("splits") or [], plan.get("task_groups") or []
    estimate = plan.get("estimated_rows")
    lines = [f"plan: {plan.get('engine')} engine ({plan.get('engine_reason')}), "
             f"{_plural(plan.get('channels') or 0, 'channel')} ({plan.get('channel_reason')})",
             f"  read {_plural(len(splits), 'split')} in {_plural(len(groups), 'task group')}, "
             + (f"{estimate:,} rows estimated" if estimate is not None else "no row estimate")]
    dests = plan.get("destinations") or []
    id_width = max((len(str(d.get("id"))) for d in dests), default=0)
    plugin_width = max((len(str(d.get("plugin"))) for d in dests), default=0)
    lines += [f"  -> {d.get('id')!s:<{id_width}}  {d.get('plugin')!s:<{plugin_width}}  "
              f"{_plural(d.get('writers') or 0, 'writer'):<10}  {d.get('method')}"
              + (f"; load: {d['load']}" if d.get("load") else "") for d in dests]
    speed = plan.get("speed") or {}
    limits = [f"{speed[k]:,} {unit}/s" for k, unit in (("record", "rows"), ("byte", "bytes")) if speed.get(k)]
    if limits:
        lines.append(f"  speed limit: {', '.join(limits)}")
    transforms = plan.get("transforms")
    if transforms:
        at_source = len(transforms.get("source_chain", {}).get("operators", []))
        total = at_source + sum(len(c.get("operators", [])) for c in transforms.get("chains", []))
        lines.append(f"  transforms: {_plural(total, 'operator')}, {at_source} in the source's query")
    if log_file:
        lines.append(f"  full log: {log_file}")
    return lines


def database_plan_lines(event: Mapping[str, Any], log_file: str | None = None) -> list[str]:
    """``database.plan_made``: the tables, largest first (a few named), and the channels they share."""
    order = event.get("order") or []
    named = ", ".join(str(t.get("table")) for t in order[:5]) + (", ..." if len(order) > 5 else "")
    lines = [f"plan: {_plural(event.get('tables') or 0, 'table')}, {event.get('estimated_rows') or 0:,} rows "
             f"estimated, {_plural(event.get('channels') or 0, 'channel')} shared, largest first: {named}"]
    if log_file:
        lines.append(f"  full log: {log_file}")
    return lines


def outcome(d: Mapping[str, Any]) -> str:
    """What happened to a destination's rows, in words: a rolled-back count must never read as committed."""
    written = d["rows_written"]
    if d.get("skipped"):
        return f"skipped ({d['skipped']})"
    if d["status"] == "success":
        return f"committed ({written:,} written)"
    if d["rolled_back"]:
        return f"rolled back ({written:,} written, undone)"
    if d["rollback_error"]:
        return f"FAILED, rollback failed ({written:,} written, may remain)"
    return "failed (nothing written)" if written == 0 else f"failed ({written:,} written, not undone)"


def brief(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def output_of(options: Any) -> str | None:
    """Where a destination's rows go, as the outcome table names them: its path and/or table (from its
    options, or its ``params`` mapping)."""
    def get(key: str) -> Any:
        return options.get(key) if isinstance(options, Mapping) else getattr(options, key, None)

    parts = [str(get("path"))] if get("path") else []
    parts += [f"table {get('table')}"] if get("table") else []
    return ", ".join(parts) or None


def outcome_lines(task_id: int, status: str, exit_code: int, result: Mapping[str, Any],
                  outputs: Mapping[str, str | None]) -> list[str]:
    """A finished run as a short table: one line per destination (its outcome, rejected rows, where its
    output went or why it failed). ``result`` is the task's result JSON; ``outputs`` each destination's
    path or table."""
    rows = []
    for dest_id, d in result["destinations"].items():
        if d["status"] == "success":
            note = f"output: {outputs[dest_id]}" if outputs.get(dest_id) else ""
            checked = d.get("verify")
            if checked and checked["state"] != "verified":
                note = f"verify {checked['state'].replace('_', ' ')}: {brief(checked.get('reason') or '')}"
        else:
            note = f"error: {brief(d['error'] or 'unknown')}"
            if d["rollback_error"]:
                note += f"; rollback error: {brief(d['rollback_error'])}"
        rows.append((dest_id, d["plugin"], outcome(d), f"{d['rows_rejected']:,}", note))
    id_width = max(len("destination"), *(len(r[0]) for r in rows)) if rows else len("destination")
    plugin_width = max(len("plugin"), *(len(r[1]) for r in rows)) if rows else len("plugin")
    width = max(len("outcome"), *(len(r[2]) for r in rows)) if rows else len("outcome")
    lines = [f"== task {task_id}: status {status}, exit code {exit_code}, "
             f"{result['source']['rows_read']:,} rows read once in {result['duration_s']} s",
             f"{'destination':<{id_width}}  {'plugin':<{plugin_width}}  {'outcome':<{width}}  {'rejected':>8}  note"]
    lines += [f"{r[0]:<{id_width}}  {r[1]:<{plugin_width}}  {r[2]:<{width}}  {r[3]:>8}  {r[4]}".rstrip() for r in rows]
    if result.get("dirty_file"):
        lines.append(f"rejected rows and their reasons: {result['dirty_file']}")
    summary = verify_summary(result)
    if summary:
        lines.append(summary)
    return lines


class TerminalLog:
    """The log while a live display shows (a :data:`wormhole.log.Diversion`): every event goes, as the
    JSON line it would be off a terminal, to a file; the screen gets the plan as a few lines, warnings
    and errors. Events logged before the file is named are kept until it is."""

    def __init__(self, *, compact: bool = True) -> None:
        self._compact = compact  # console lines: no ids (the display shows them), the time of day only
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._file: TextIO | None = None
        self._show_all = False  # the file could not be written: the screen gets every event instead
        self.path: Path | None = None

    def open(self, path: Path) -> str | None:
        """Write to ``path`` from now on (the events kept so far first); the reason when it cannot."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            file = path.open("a", encoding="utf-8", buffering=1)  # line-buffered: `tail -f` sees each event
        except OSError as exc:
            with self._lock:
                self._show_all, self._pending = True, []
            return f"cannot write the log file {path}: {exc.strerror or exc}; every event is shown here"
        with self._lock:
            file.writelines(f"{line}\n" for line in self._pending)
            self._pending, self._file, self.path = [], file, path
        return None

    def __call__(self, event: Event, render: Render) -> str | None:
        line = json_line(event)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
            elif not self._show_all:
                self._pending.append(line)
        if self._show_all or _LEVELS.get(str(event.get("level")), 0) >= _LEVELS["warning"]:
            return render(self._screen(event))
        if event.get("event") == "plan.made" and "table" not in event:  # a database task's tables: its own line
            return "\n".join(plan_lines(event, str(self.path) if self.path else None))
        if event.get("event") == "database.plan_made":
            return "\n".join(database_plan_lines(event, str(self.path) if self.path else None))
        if event.get("event") == "spark.session_starting":  # a JVM start takes a while: say what it waits for
            return f"starting Spark session on {event.get('master')} (JVM output: {event.get('jvm_log')})"
        return None

    def _screen(self, event: Event) -> Event:
        """A copy (the console renderer takes keys out of what it renders), shortened for the screen."""
        shown = dict(event)
        if self._compact:
            shown.pop("task_id", None)
            shown.pop("run_id", None)
            if isinstance(shown.get("timestamp"), str):
                shown["timestamp"] = shown["timestamp"][11:19]  # ISO 8601: the time of day
        return shown

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}

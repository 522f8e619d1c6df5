"""The documents the console's API returns, made from the task database's records; every secret shown as
``***`` by the one redaction rule (:mod:`wormhole.redaction`), as ``wormhole task show`` shows them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from wormhole import incremental
from wormhole.cli.task import loads_redacted, shown_values, watermarks_of
from wormhole.redaction import redact, redact_url
from wormhole.taskdb import RunRecord, SqlTaskStore, TaskRecord
from wormhole.taskdb.actions import ActionRecord, DaemonRecord
from wormhole.taskdb.sql import utcnow


def ts(value: datetime | None) -> str | None:
    """A naive UTC timestamp as ISO 8601 with its zone, as the page's clock reads it."""
    return None if value is None else value.isoformat(timespec="milliseconds") + "Z"


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def progress_of(record: TaskRecord, runs: list[RunRecord] | None = None) -> dict[str, Any] | None:
    """A running task's latest progress (written with its heartbeat), when it is the current run's."""
    doc = _json(record.progress)
    if record.status != "running" or not isinstance(doc, dict):
        return None
    if runs is not None and (not runs or runs[-1].id != doc.get("run_id")):
        return None  # a previous run's: the current one has not beaten yet
    return dict(redact(doc))


def _part(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def last_result(record: TaskRecord) -> dict[str, Any] | None:
    """The latest recorded outcome, in a few numbers."""
    doc = _json(record.result)
    if not isinstance(doc, dict):
        return None
    source, dests = _part(doc, "source"), _part(doc, "destinations")
    return {"status": doc.get("status"), "exit_code": doc.get("exit_code"), "run_id": doc.get("run_id"),
            "duration_s": doc.get("duration_s"), "rows_read": source.get("rows_read"),
            "rows_rejected": sum(int(d.get("rows_rejected") or 0) for d in dests.values() if isinstance(d, dict))}


def task_summary(record: TaskRecord) -> dict[str, Any]:
    """A row of the task list."""
    return {
        "id": record.id, "name": record.name, "status": record.status, "priority": record.priority,
        "attempts": record.attempts, "created_at": ts(record.created_at), "started_at": ts(record.started_at),
        "finished_at": ts(record.finished_at), "claimed_by": record.claimed_by, "heartbeat_at": ts(record.heartbeat_at),
        "error": record.error,
        "schedule": None if record.schedule is None else {
            "cron": record.schedule, "next_run_at": ts(record.next_run_at), "last_tick": ts(record.tick_at),
            "paused": record.paused},
        "last_result": last_result(record),
        "progress": progress_of(record),
    }


def run_summary(task: TaskRecord, run: RunRecord) -> dict[str, Any]:
    return {"id": run.id, "task_id": run.task_id, "status": run.status, "exit_code": run.exit_code,
            "claimed_by": run.claimed_by, "started_at": ts(run.started_at), "finished_at": ts(run.finished_at),
            "resumed_from": run.resumed_from, "variables": shown_values(task, run.variables), "error": run.error}


def action_doc(action: ActionRecord) -> dict[str, Any]:
    return {"id": action.id, "task_id": action.task_id, "run_id": action.run_id, "action": action.action,
            "actor": action.actor, "claimed_by": action.claimed_by, "detail": action.detail,
            "at": ts(action.created_at)}


def daemon_doc(daemon: DaemonRecord) -> dict[str, Any]:
    age = None if daemon.heartbeat_at is None else round((utcnow() - daemon.heartbeat_at).total_seconds(), 1)
    return {"id": daemon.id, "host": daemon.host, "pid": daemon.pid, "started_at": ts(daemon.started_at),
            "heartbeat_at": ts(daemon.heartbeat_at), "heartbeat_age_s": age, "running_tasks": daemon.running_tasks,
            "status": daemon.status}


def task_detail(store: SqlTaskStore, record: TaskRecord) -> dict[str, Any]:
    """A task's page: its summary, spec (redacted), job variables, runs, watermarks and actions."""
    runs = store.runs(record.id)
    doc = task_summary(record)
    doc.update({"spec": loads_redacted(record.spec), "params": shown_values(record, record.params),
                "progress": progress_of(record, runs), "watermarks": watermarks_of(store, record),
                "runs": [run_summary(record, r) for r in runs],
                "actions": [action_doc(a) for a in store.actions(record.id, limit=50)]})
    return doc


def run_detail(store: SqlTaskStore, record: TaskRecord, run: RunRecord, dirty_dir: Path) -> dict[str, Any]:
    """A run's page: its plan, each destination's rows, rate, state and failure, whether it rolled back or
    resumed, the watermarks before and after, the splits' timeline, and its rejected rows' file."""
    result = loads_redacted(run.result)
    result = result if isinstance(result, dict) else {}
    if not result and record.result is not None:  # a run whose row holds no result: the task row's, if its
        task_result = loads_redacted(record.result)
        result = task_result if isinstance(task_result, dict) and task_result.get("run_id") == run.id else {}
    times = store.checkpoint_times(run.id)
    dirty = dirty_path(dirty_dir, record.id, run.id)
    return {
        **run_summary(record, run), "task_name": record.name,
        "plan": result.get("plan"), "source": result.get("source"), "speed": result.get("speed"),
        "engine": result.get("engine"), "duration_s": result.get("duration_s"),
        "interrupted": result.get("interrupted"), "resumed_from_run": result.get("resumed_from_run"),
        "destinations": _destinations(result),
        "watermarks": _watermarks(times, store, run.id, result),
        "timeline": timeline(times, run.started_at),
        "dirty": {"rows": _dirty_count(result), "file": dirty.name if dirty.is_file() else None},
        "progress": progress_of(record, store.runs(record.id)) if run.status == "running" else None,
    }


def _destinations(result: dict[str, Any]) -> list[dict[str, Any]]:
    dests = result.get("destinations")
    if not isinstance(dests, dict):
        return []
    rows = []
    for name, d in dests.items():
        if not isinstance(d, dict):
            continue
        seconds = d.get("duration_s") or 0
        written = int(d.get("rows_written") or 0)
        rows.append({"id": name, "plugin": d.get("plugin"), "status": d.get("status"), "rows_written": written,
                     "rows_rejected": d.get("rows_rejected"), "rows_delivered": d.get("rows_delivered"),
                     "rows_per_s": round(written / seconds, 1) if seconds else None, "duration_s": d.get("duration_s"),
                     "rolled_back": d.get("rolled_back"), "rollback_error": d.get("rollback_error"),
                     "error": d.get("error"), "error_code": d.get("error_code"), "skipped": d.get("skipped"),
                     "rows_resumed": d.get("rows_resumed"), "splits_resumed": d.get("splits_resumed")})
    return rows


def _dirty_count(result: dict[str, Any]) -> int:
    source, dests = _part(result, "source"), _part(result, "destinations")
    return int(source.get("rows_rejected") or 0) + sum(int(d.get("rows_rejected") or 0) for d in dests.values()
                                                       if isinstance(d, dict))


def _watermarks(times: list[Any], store: SqlTaskStore, run_id: int, result: dict[str, Any]) -> dict[str, Any] | None:
    """An incremental run's watermark of each destination before it and after it (unchanged where the
    destination did not commit), from the window its plan recorded."""
    window_rows = [r.payload for r in store.checkpoint(run_id) if r.kind.value == "window" and r.payload]
    if not window_rows:
        return None
    window = incremental.Window.from_json(window_rows[0])
    statuses = {d["id"]: d["status"] for d in _destinations(result)}
    return {"state_key": window.state_key, "column": window.column, "to": incremental.show(window.upper),
            "destinations": {d: {"before": incremental.show(before),
                                 "after": incremental.show(window.advanced(d) if statuses.get(d) == "success"
                                                           else before)}
                             for d, before in sorted(window.lowers.items())}}


def timeline(times: list[tuple[str, str, str, int | None, datetime | None]],
             started: datetime | None) -> dict[str, Any]:
    """Each destination's splits over the run: a split's bar runs from the destination's previous mark (or
    the plan) to when the destination held it durably; the commit is a mark of its own."""
    stamps = [t[4] for t in times if t[4] is not None]
    origin = started or (min(stamps) if stamps else None)
    if origin is None:
        return {"destinations": {}, "end_s": 0}

    def at(value: datetime | None) -> float:
        return round(max(0.0, ((value or origin) - origin).total_seconds()), 3)

    planned = max((at(t[4]) for t in times if t[0] == "plan"), default=0.0)
    lanes: dict[str, dict[str, Any]] = {}
    for kind, split, dest, rows, when in times:
        if kind not in ("durable", "committed"):
            continue
        lane = lanes.setdefault(dest, {"splits": [], "committed_s": None, "last": planned})
        if kind == "committed":
            lane["committed_s"] = at(when)
            continue
        lane["splits"].append({"split": split, "rows": rows, "start_s": lane["last"], "end_s": at(when)})
        lane["last"] = at(when)
    end = max((at(s) for s in stamps), default=0.0)
    return {"planned_s": planned, "end_s": end,
            "destinations": {d: {"splits": v["splits"], "committed_s": v["committed_s"]} for d, v in lanes.items()}}


def dirty_path(dirty_dir: Path, task_id: int, run_id: int) -> Path:
    """Where run ``run_id`` kept its rejected rows: made from the ids and engine.toml's ``paths.dirty_dir``,
    never from a path a row holds (an upstream system's row could name any file)."""
    return dirty_dir / f"task-{task_id}" / f"run-{run_id}.jsonl"


def dirty_rows(path: Path, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` rejected rows of a run's file: where and why each was rejected, and the row."""
    found: list[dict[str, Any]] = []
    if not path.is_file():
        return found
    with path.open(encoding="utf-8", errors="backslashreplace") as lines:
        for line in lines:
            if len(found) >= limit:
                break
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                found.append({"origin": doc.get("origin"), "split": doc.get("split"), "reason": doc.get("reason"),
                              "row": doc.get("row")})
    return found


def store_doc(store: SqlTaskStore) -> dict[str, Any]:
    return {"task_db": redact_url(store.url)}

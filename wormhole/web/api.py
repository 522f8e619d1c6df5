"""The console's JSON API: one table of endpoints (:data:`ENDPOINTS`), from which the routes and the OpenAPI
description are both made, so the document cannot drift from the code. The page uses nothing else.

Every endpoint opens its own task-store connection in a worker thread (a connection is never shared between
threads); reads are plain SELECTs, so watching costs a run nothing it would not pay anyway (docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from wormhole.cli.common import check_spec, submit_record
from wormhole.cli.plan import check_incremental
from wormhole.config import EngineConf
from wormhole.errors import ConfigError, InvalidTaskConfig, TaskDbError, WormholeError
from wormhole.schedule import next_tick
from wormhole.taskdb import TASK_STATUSES, SqlTaskStore, open_store
from wormhole.taskdb.sql import utcnow
from wormhole.web import views
from wormhole.web.settings import ConsoleSettings

Handler = Callable[[Request], Awaitable[Response]]
ID_MAX = 2**63 - 1


class Json(JSONResponse):
    """JSON as ASCII: a rejected row's text may hold what UTF-8 cannot encode (a lone surrogate)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":"), default=str).encode("ascii")


class ApiError(Exception):
    """An answer other than success: its HTTP status, a stable code, the message (and problems)."""

    def __init__(self, status: int, code: str, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.problems = status, code, problems

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": str(self), "code": self.code}
        if self.problems is not None:
            body["problems"] = self.problems
        return Json(body, status_code=self.status)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One endpoint: its route, what the OpenAPI document says of it, and its work."""

    method: str
    path: str
    summary: str
    work: Callable[[Call], Any]
    query: tuple[tuple[str, str, str], ...] = ()
    """(name, type, description) of the query parameters."""
    body: dict[str, Any] | None = None
    """The JSON schema of the request body (actions)."""
    answers: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Call:
    """What an endpoint's work gets: the settings, the request's path and query values, body and actor."""

    settings: ConsoleSettings
    path: dict[str, str]
    query: dict[str, str]
    body: Any
    actor: str | None

    def task_id(self) -> int:
        return _id(self.path["task_id"], "task id")

    def store(self) -> SqlTaskStore:
        return open_store(self.settings.task_db)


def _id(text: str, what: str) -> int:
    if not text.lstrip("-").isdigit() or len(text) > 20 or abs(int(text)) > ID_MAX:
        raise ApiError(404, "NOT_FOUND", f"no {what} {text[:40]!r}")
    return int(text)


def _task(store: SqlTaskStore, task_id: int) -> Any:
    record = store.get(task_id)
    if record is None:
        raise ApiError(404, "TASK_NOT_FOUND", f"no task with id {task_id} in {store.url}")
    return record


def _int_query(call: Call, name: str, default: int, top: int) -> int:
    text = call.query.get(name)
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= top:
        raise ApiError(400, "BAD_QUERY", f"{name} must be an integer from 1 to {top}")
    return int(text)


# -- reads ----------------------------------------------------------------------------------------


def list_tasks(call: Call) -> Any:
    status = call.query.get("status") or None
    if status is not None and status not in TASK_STATUSES:
        raise ApiError(400, "BAD_QUERY", f"status must be one of {', '.join(TASK_STATUSES)}")
    search = (call.query.get("search") or "").strip()[:255] or None
    with call.store() as store:
        records = store.list(status=status, limit=_int_query(call, "limit", 200, 10_000), search=search)
        return {"tasks": [views.task_summary(r) for r in records], **views.store_doc(store)}


def show_task(call: Call) -> Any:
    with call.store() as store:
        return views.task_detail(store, _task(store, call.task_id()))


def task_progress(call: Call) -> Any:
    with call.store() as store:
        record = _task(store, call.task_id())
        progress = views.progress_of(record, store.runs(record.id))
        return {"task_id": record.id, "status": record.status, "progress": progress}


def running(call: Call) -> Any:
    """Every running task's progress, and the daemons' heartbeats: the live page's one poll."""
    with call.store() as store:
        records = store.list(status="running", limit=200)
        return {"tasks": [views.task_summary(r) for r in records],
                "daemons": [views.daemon_doc(d) for d in store.daemons()]}


def _run(store: SqlTaskStore, call: Call) -> tuple[Any, Any]:
    record = _task(store, call.task_id())
    run_id = _id(call.path["run_id"], "run")
    run = next((r for r in store.runs(record.id) if r.id == run_id), None)
    if run is None:
        raise ApiError(404, "RUN_NOT_FOUND", f"task {record.id} has no run {run_id}")
    return record, run


def _dirty_dir(call: Call) -> Path:
    return Path(EngineConf.load(call.settings.conf_dir).paths.dirty_dir)


def show_run(call: Call) -> Any:
    with call.store() as store:
        record, run = _run(store, call)
        return views.run_detail(store, record, run, _dirty_dir(call))


def dirty_rows(call: Call) -> Any:
    limit = _int_query(call, "limit", call.settings.dirty_rows, 10_000)
    with call.store() as store:
        record, run = _run(store, call)
    path = views.dirty_path(_dirty_dir(call), record.id, run.id)
    return {"task_id": record.id, "run_id": run.id, "limit": limit, "file": path.name if path.is_file() else None,
            "rows": views.dirty_rows(path, limit)}


def dirty_file(call: Call) -> Any:
    with call.store() as store:
        record, run = _run(store, call)
    path = views.dirty_path(_dirty_dir(call), record.id, run.id)
    if not path.is_file():
        raise ApiError(404, "NO_DIRTY_FILE", f"run {run.id} of task {record.id} rejected no row (no file)")
    return FileResponse(path, media_type="application/x-ndjson", filename=f"task-{record.id}-run-{run.id}-dirty.jsonl")


def daemons(call: Call) -> Any:
    with call.store() as store:
        running_tasks = store.list(status="running", limit=500)
        return {"daemons": [views.daemon_doc(d) for d in store.daemons()],
                "claims": [{"task_id": r.id, "name": r.name, "claimed_by": r.claimed_by,
                            "started_at": views.ts(r.started_at), "heartbeat_at": views.ts(r.heartbeat_at)}
                           for r in running_tasks]}


def list_actions(call: Call) -> Any:
    task = call.query.get("task_id")
    with call.store() as store:
        found = store.actions(None if task is None else _id(task, "task"), limit=_int_query(call, "limit", 100, 10_000))
        return {"actions": [views.action_doc(a) for a in found]}


# -- actions --------------------------------------------------------------------------------------


def _spec_text(call: Call) -> tuple[str, dict[str, str]]:
    body = call.body
    if not isinstance(body, dict) or "spec" not in body:
        raise ApiError(400, "BAD_REQUEST", "the body must be a JSON object with the task's spec under \"spec\"")
    spec = body["spec"]
    text = spec if isinstance(spec, str) else json.dumps(spec, ensure_ascii=False)
    params = body.get("params") or {}
    if not isinstance(params, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
        raise ApiError(400, "BAD_REQUEST", "params must be an object of names to string values")
    return text, params


def _checked(call: Call) -> tuple[str, Any, dict[str, str]]:
    """The spec checked as ``wormhole validate`` checks a file: 422 with the same message and problems."""
    text, params = _spec_text(call)
    try:
        text, spec, _ = check_spec(text, params, call.settings.conf_dir)
    except InvalidTaskConfig as exc:
        raise ApiError(422, exc.code, str(exc), exc.problems) from exc
    except ConfigError as exc:
        raise ApiError(422, exc.code, str(exc), [str(exc)]) from exc
    return text, spec, params


def validate(call: Call) -> Any:
    _, spec, _ = _checked(call)
    return {"valid": True, "source": spec.source.plugin,
            "destinations": [{"id": d.id, "plugin": d.plugin} for d in spec.destinations]}


def submit_task(call: Call) -> Any:
    text, spec, params = _checked(call)
    body = call.body
    name = body.get("name") if isinstance(body.get("name"), str) else None
    priority = body.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool) or not -(2**31) <= priority < 2**31:
        raise ApiError(400, "BAD_REQUEST", "priority must be a 32-bit integer")
    try:
        check_incremental(spec, EngineConf.load(call.settings.conf_dir))  # as `task submit` does
    except InvalidTaskConfig as exc:
        raise ApiError(422, exc.code, str(exc), exc.problems) from exc
    with call.store() as store:
        task_id = submit_record(store, name or spec.name or "console", text, spec, priority, params)
        store.record_action("submit", call.actor or "", task_id=task_id)
        return {"id": task_id, "status": _task(store, task_id).status}


def retry_task(call: Call) -> Any:
    force = bool(call.body.get("force")) if isinstance(call.body, dict) else False
    stale_s = EngineConf.load(call.settings.conf_dir).claim.stale_s
    with call.store() as store:
        task_id = _task(store, call.task_id()).id
        if not store.retry(task_id, force=force, stale_s=stale_s):
            status = _task(store, task_id).status
            raise ApiError(409, "NOT_RETRYABLE", f"task {task_id} is {status}: only a failed or partial task is retried"
                           " (with force, a successful one, or a running one whose heartbeat is stale)")
        store.record_action("retry", call.actor or "", task_id=task_id, detail="force" if force else None)
        return {"id": task_id, "status": "pending"}


def cancel_task(call: Call) -> Any:
    with call.store() as store:
        task_id = _task(store, call.task_id()).id
        request = store.request_cancel(task_id, call.actor or "")
        if request is None:
            raise ApiError(409, "NOT_RUNNING", f"task {task_id} is not running: there is nothing to cancel")
        return {"id": task_id, "status": "running", "cancel": views.action_doc(request)}


def _pause(call: Call, paused: bool) -> Any:
    with call.store() as store:
        record = _task(store, call.task_id())
        after = None if paused or record.schedule is None else next_tick(record.schedule, utcnow())
        if record.schedule is None or not store.set_paused(record.id, paused, after):
            raise ApiError(409, "NO_SCHEDULE", f"task {record.id} has no schedule (settings.schedule)")
        store.record_action("pause" if paused else "resume", call.actor or "", task_id=record.id)
        return views.task_summary(_task(store, record.id))


SPEC_BODY = {"type": "object", "required": ["spec"], "properties": {
    "spec": {"description": "The task's spec: a JSON object, or its text", "type": ["object", "string"]},
    "name": {"type": "string"}, "priority": {"type": "integer"},
    "params": {"type": "object", "additionalProperties": {"type": "string"}}}}
RETRY_BODY = {"type": "object", "properties": {"force": {"type": "boolean"}}}
TASK_READ = {200: "the document", 404: "no such task"}

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/api/tasks", "Tasks, newest first (state, schedule, next run, last result)", list_tasks,
             query=(("status", "string", "only tasks in this state"), ("search", "string", "name contains, or id"),
                    ("limit", "integer", "at most this many (200)")), answers={200: "the tasks", 400: "bad query"}),
    Endpoint("POST", "/api/tasks", "Submit a task (checked as `wormhole validate` checks a file)", submit_task,
             body=SPEC_BODY, answers={200: "the new task's id", 422: "invalid spec: the problems"}),
    Endpoint("POST", "/api/validate", "Check a spec as `wormhole validate` does, recording nothing", validate,
             body=SPEC_BODY, answers={200: "valid", 422: "invalid spec: the problems"}),
    Endpoint("GET", "/api/running", "Running tasks' progress and the daemons' heartbeats", running),
    Endpoint("GET", "/api/daemons", "The daemons (heartbeats) and the running tasks' claims", daemons),
    Endpoint("GET", "/api/actions", "Actions taken through the console, who did them and when", list_actions,
             query=(("task_id", "integer", "of this task only"), ("limit", "integer", "at most this many (100)"))),
    Endpoint("GET", "/api/tasks/{task_id}", "A task: spec (secrets as ***), runs, watermarks, actions", show_task,
             answers=TASK_READ),
    Endpoint("GET", "/api/tasks/{task_id}/progress", "A running task's latest progress", task_progress,
             answers=TASK_READ),
    Endpoint("GET", "/api/tasks/{task_id}/runs/{run_id}", "A run: plan, destinations, watermarks, timeline",
             show_run, answers={200: "the run", 404: "no such task or run"}),
    Endpoint("GET", "/api/tasks/{task_id}/runs/{run_id}/dirty", "A run's first rejected rows and why", dirty_rows,
             query=(("limit", "integer", "at most this many rows"),), answers={200: "the rows", 404: "no such run"}),
    Endpoint("GET", "/api/tasks/{task_id}/runs/{run_id}/dirty/file", "A run's rejected rows' file (JSON lines)",
             dirty_file, answers={200: "the file", 404: "no such run, or no row rejected"}),
    Endpoint("POST", "/api/tasks/{task_id}/retry", "Make a failed or partial task pending again", retry_task,
             body=RETRY_BODY, answers={200: "pending", 404: "no such task", 409: "not retryable"}),
    Endpoint("POST", "/api/tasks/{task_id}/cancel", "Stop a running task as SIGTERM does (it rolls back)",
             cancel_task, answers={200: "asked", 404: "no such task", 409: "not running"}),
    Endpoint("POST", "/api/tasks/{task_id}/pause", "Pause a recurring task's schedule", lambda c: _pause(c, True),
             answers={200: "paused", 404: "no such task", 409: "no schedule"}),
    Endpoint("POST", "/api/tasks/{task_id}/resume", "Resume a recurring task's schedule", lambda c: _pause(c, False),
             answers={200: "resumed", 404: "no such task", 409: "no schedule"}),
)


def handler(endpoint: Endpoint, settings: ConsoleSettings) -> Handler:
    """The Starlette endpoint of ``endpoint``: the body parsed, the work in a worker thread, errors as JSON."""

    async def handle(request: Request) -> Response:
        body: Any = None
        if endpoint.method == "POST":
            raw = await request.body()
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                return ApiError(400, "BAD_JSON", f"the body is not JSON: {exc}").response()
            if not isinstance(body, dict):
                return ApiError(400, "BAD_JSON", "the body must be a JSON object").response()
        call = Call(settings, dict(request.path_params), dict(request.query_params), body,
                    request.scope.get("state", {}).get("actor"))
        try:
            answer = await run_in_threadpool(endpoint.work, call)
        except ApiError as exc:
            return exc.response()
        except TaskDbError as exc:
            return ApiError(503, exc.code, str(exc)).response()
        except WormholeError as exc:
            return ApiError(500, exc.code, str(exc)).response()
        return answer if isinstance(answer, Response) else Json(answer)

    return handle

"""The console's JSON API, in process (Starlette's test client) over a real task database and real runs:
tokens, same origin, body limits, bad input, unknown tasks, the actions and their records, no secret shown."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.conftest import Workspace
from tests.web.conftest import SECRET, TOKEN, chdir, dirty_task, good_task, secret_task, slow_task
from wormhole.redaction import MASK, is_secret_key
from wormhole.web.api import ENDPOINTS
from wormhole.web.app import create_app
from wormhole.web.settings import ConsoleSettings, Tokens

AUTH = {"Authorization": f"Bearer {TOKEN}"}
ACTIONS = [e for e in ENDPOINTS if e.method == "POST"]
READS = [e for e in ENDPOINTS if e.method == "GET"]


def client(ws: Workspace, host: str = "127.0.0.1", max_body_bytes: int = 1_048_576) -> TestClient:
    settings = ConsoleSettings(host=host, port=8080, task_db=f"sqlite:///{ws.root}/var/wormhole.db",
                               conf_dir=str(ws.root / "conf"),
                               tokens=Tokens({TOKEN: "tester"}), max_body_bytes=max_body_bytes)
    return TestClient(create_app(settings), base_url="http://127.0.0.1:8080")


@pytest.fixture(name="api")
def fixture_api(cws: Workspace) -> Iterator[TestClient]:
    previous = chdir(cws.root)
    try:
        yield client(cws)
    finally:
        chdir(Path(previous))


def url(endpoint: Any, task_id: int = 1, run_id: int = 1) -> str:
    return endpoint.path.replace("{task_id}", str(task_id)).replace("{run_id}", str(run_id))


@pytest.mark.parametrize("endpoint", ACTIONS, ids=lambda e: e.path)
def test_every_action_needs_the_token(api: TestClient, endpoint: Any) -> None:
    """No token: 401; a wrong one: 403; the right one from another site's page: 403; nothing recorded."""
    assert api.post(url(endpoint), json={}).status_code == 401
    assert api.post(url(endpoint), json={}, headers={"X-Wormhole-Token": "x" * 30}).status_code == 403
    cross = api.post(url(endpoint), json={}, headers={**AUTH, "Origin": "http://evil.example"})
    assert (cross.status_code, cross.json()["code"]) == (403, "CROSS_ORIGIN")
    site = api.post(url(endpoint), json={}, headers={**AUTH, "Sec-Fetch-Site": "cross-site"})
    assert site.status_code == 403
    assert api.get("/api/actions").json()["actions"] == []


@pytest.mark.parametrize("endpoint", ACTIONS, ids=lambda e: e.path)
def test_actions_refuse_bad_json_an_oversized_body_and_an_unknown_task(api: TestClient, endpoint: Any) -> None:
    bad = api.post(url(endpoint, task_id=999), content=b"{not json", headers=AUTH)
    assert (bad.status_code, bad.json()["code"]) == (400, "BAD_JSON")
    big = api.post(url(endpoint, task_id=999), content=b" " * 1_048_577, headers=AUTH)
    assert (big.status_code, big.json()["code"]) == (413, "BODY_TOO_LARGE")
    if "{task_id}" in endpoint.path:
        missing = api.post(url(endpoint, task_id=999), json={}, headers=AUTH)
        assert (missing.status_code, missing.json()["code"]) == (404, "TASK_NOT_FOUND")


@pytest.mark.parametrize("endpoint", READS, ids=lambda e: e.path)
def test_reads_need_the_token_beyond_loopback_only(cws: Workspace, endpoint: Any) -> None:
    """On loopback a read needs no token (but a request for another host name is refused, DNS rebinding);
    listening on 0.0.0.0 every read needs it: 401 without, 403 wrong, answered with it (404: no task)."""
    local = client(cws)
    answer = local.get(url(endpoint, task_id=999))
    assert answer.status_code in (200, 404) and answer.headers["cache-control"] == "no-store"
    assert local.get(url(endpoint), headers={"Host": "attacker.example:8080"}).status_code == 403
    wide = client(cws, host="0.0.0.0")
    assert wide.get(url(endpoint)).status_code == 401
    assert wide.get(url(endpoint), headers={"Authorization": "Bearer " + "y" * 30}).status_code == 403
    known = wide.get(url(endpoint, task_id=999), headers=AUTH)
    assert known.status_code in (200, 404)
    if "{task_id}" in endpoint.path:
        assert known.json()["code"] == "TASK_NOT_FOUND"


def test_a_submitted_spec_is_checked_as_validate_checks_a_file(api: TestClient, cws: Workspace) -> None:
    """An invalid spec: 422 with `wormhole validate`'s message and every problem; nothing recorded. A valid
    one: a pending task, the submit recorded with who did it."""
    spec = {"source": {"plugin": "stream", "params": {"rows": -1}}, "destinations": [{"id": "x", "plugin": "nope"}]}
    (cws.root / "bad.json").write_text(json.dumps(spec))
    validate = cws.run_here("validate", "bad.json")
    refused = api.post("/api/tasks", json={"spec": spec}, headers=AUTH)
    assert refused.status_code == 422 and validate.returncode == 204
    assert f"error: {refused.json()['error']}\n" == validate.stderr
    assert len(refused.json()["problems"]) >= 2
    assert api.post("/api/validate", json={"spec": spec}, headers=AUTH).json()["problems"] == refused.json()["problems"]
    assert api.get("/api/tasks").json()["tasks"] == []
    made = api.post("/api/tasks", json={"spec": good_task(cws.root / "o"), "priority": 3},
                    headers={**AUTH, "X-Wormhole-Actor": "Ann"})
    assert made.status_code == 200
    task = cws.show(made.json()["id"])
    assert (task["status"], task["name"], task["priority"]) == ("pending", "good", 3)
    (action,) = api.get("/api/actions").json()["actions"]
    assert (action["action"], action["task_id"]) == ("submit", task["id"])
    assert action["actor"].startswith("Ann (tester) from ")


def test_no_secret_in_any_response(api: TestClient, cws: Workspace) -> None:
    """A task whose spec holds a password: every read shows it as *** (the one redaction rule), whatever
    endpoint, and the run that failed on it names no password either."""
    task_id = api.post("/api/tasks", json={"spec": secret_task()}, headers=AUTH).json()["id"]
    cws.run("--task-id", str(task_id))  # fails: no such MySQL user; its result and error are stored
    texts = [api.get(url(e, task_id=task_id, run_id=1)).text for e in READS]
    texts.append(api.get("/api/openapi.json").text)
    assert all(SECRET not in text for text in texts)
    detail = api.get(f"/api/tasks/{task_id}").json()
    assert detail["spec"]["destinations"][0]["params"]["password"] == MASK and is_secret_key("password")


def test_a_run_page_has_the_plan_destinations_timeline_and_rejected_rows(api: TestClient, cws: Workspace) -> None:
    task_id = cws.submit(dirty_task(cws.root / "out"))
    assert cws.run("--task-id", str(task_id)).returncode == 203
    run = api.get(f"/api/tasks/{task_id}/runs/1").json()
    assert [s["id"] for s in run["plan"]["splits"]] == ["stream-0", "stream-1"]
    (dest,) = run["destinations"]
    task = cws.show(task_id)
    stored = task["result"]["destinations"]["csv"]
    assert (dest["status"], dest["rolled_back"], dest["rows_rejected"]) == ("failed", True, stored["rows_rejected"])
    assert run["status"] == task["runs"][0]["status"] == "failed" and run["dirty"]["file"] == "run-1.jsonl"
    rows = api.get(f"/api/tasks/{task_id}/runs/1/dirty?limit=3").json()["rows"]
    assert len(rows) == 3 and all("UnicodeEncodeError" in r["reason"] for r in rows)
    # The first rejected row of the file: the first of either split's (the two are read at once).
    assert rows[0]["row"][0] in (99, 1099)
    file = api.get(f"/api/tasks/{task_id}/runs/1/dirty/file")
    lines = file.text.splitlines()
    assert file.status_code == 200 and len(lines) == stored["rows_rejected"]
    assert api.get(f"/api/tasks/{task_id}/runs/7").json()["code"] == "RUN_NOT_FOUND"
    assert api.get(f"/api/tasks/{task_id}/runs/1/dirty?limit=0").status_code == 400


def test_retry_cancel_pause_and_resume_are_done_and_recorded(api: TestClient, cws: Workspace) -> None:
    """Retry makes a failed task pending; a cancel stops a running task as SIGTERM does (its run ends
    interrupted, rolled back) within a few heartbeats; a task without a schedule cannot be paused."""
    failed = cws.submit(dirty_task(cws.root / "out"))
    cws.run("--task-id", str(failed))
    assert api.post(f"/api/tasks/{failed}/retry", headers=AUTH).json()["status"] == "pending"
    assert cws.show(failed)["status"] == "pending"
    assert api.post(f"/api/tasks/{failed}/retry", headers=AUTH).json()["code"] == "NOT_RETRYABLE"
    assert api.post(f"/api/tasks/{failed}/cancel", headers=AUTH).json()["code"] == "NOT_RUNNING"
    assert api.post(f"/api/tasks/{failed}/pause", headers=AUTH).json()["code"] == "NO_SCHEDULE"
    slow = cws.submit(slow_task())
    proc = cws.popen("--task-id", str(slow))
    try:
        progress = _wait(lambda: api.get(f"/api/tasks/{slow}/progress").json()["progress"])
        run_id = cws.show(slow)["runs"][0]["id"]
        assert progress["destinations"][0]["id"] == "slow" and progress["run_id"] == run_id
        cancel = api.post(f"/api/tasks/{slow}/cancel", headers=AUTH)
        assert cancel.status_code == 200 and cancel.json()["cancel"]["run_id"] == run_id
        proc.wait(timeout=30)
    finally:
        proc.kill()
    task = cws.show(slow)
    assert task["runs"][0]["status"] == "interrupted" and "cancelled by tester" in task["result"]["error"]
    assert task["result"]["destinations"]["slow"]["rolled_back"] is True
    acts = [(a["action"], a["task_id"]) for a in api.get("/api/actions").json()["actions"]]
    assert acts == [("cancel", slow), ("retry", failed)]


def test_pause_and_resume_a_schedule(api: TestClient, cws: Workspace) -> None:
    spec = {**good_task(cws.root / "o"), "settings": {"schedule": "0 3 * * *"}}
    task_id = api.post("/api/tasks", json={"spec": spec}, headers=AUTH).json()["id"]
    paused = api.post(f"/api/tasks/{task_id}/pause", headers=AUTH).json()
    assert paused["status"] == "scheduled" and paused["schedule"]["paused"] is True
    assert cws.show(task_id)["schedule"]["paused"] is True
    assert api.post(f"/api/tasks/{task_id}/resume", headers=AUTH).json()["schedule"]["paused"] is False
    listed = api.get("/api/tasks?status=scheduled&search=goo").json()["tasks"]
    assert [t["id"] for t in listed] == [task_id] and listed[0]["schedule"]["next_run_at"].endswith("Z")
    assert api.get("/api/tasks?status=bogus").status_code == 400


def test_the_openapi_document_lists_every_endpoint(api: TestClient) -> None:
    doc = api.get("/api/openapi.json").json()
    listed = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert listed == {(e.method, e.path) for e in ENDPOINTS}
    assert all(re.fullmatch(r"[a-z_]+", op["operationId"]) for ops in doc["paths"].values() for op in ops.values())
    assert api.get("/api/nothing").status_code == 404


def _wait(probe: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")

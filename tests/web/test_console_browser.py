"""The console in a real browser (Debian's Chromium through Selenium), served by a real ``wormhole daemon
--http`` that runs the tasks submitted: what the page shows is checked against the task database.

One daemon and one browser for the module (a grouped module: one worker runs it whole). Skipped when
Chromium, chromedriver or selenium are missing, unless CI=true (`make test` installs them: scripts/install-chromium.sh).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, wormhole_command
from tests.web.conftest import TOKEN, console_workspace, dirty_task, good_task, slow_task

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _browser_or_skip() -> Any:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    try:
        from selenium import webdriver
    except ImportError:
        missing.append("selenium (the test extra)")
        webdriver = None
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the console's browser tests need {', '.join(missing)} under CI (make install adds them)")
        pytest.skip(f"no {', '.join(missing)}: scripts/install-chromium.sh installs Chromium and chromedriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


class Console:
    """The daemon serving the console on a workspace, and the browser looking at it."""

    def __init__(self, ws: Workspace, proc: subprocess.Popen[bytes], base: str, browser: Any) -> None:
        self.ws, self.proc, self.base, self.browser = ws, proc, base, browser

    def open(self, hash_path: str) -> None:
        self.browser.get(f"{self.base}/#{hash_path}")

    def wait(self, probe: Callable[[], Any], timeout_s: float = 30.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = probe()
            except Exception as exc:  # an element replaced while read (the page redraws when it polls)
                last = exc
            else:
                if last:
                    return last
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what or probe}: last {last!r}")

    def css(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.browser.find_elements(By.CSS_SELECTOR, selector))

    def _stable(self, read: Callable[[], Any]) -> Any:
        """``read`` again when the page redrew an element between finding it and reading it (the pages
        poll and replace their rows), so an assertion never sees a stale element."""
        from selenium.common.exceptions import StaleElementReferenceException

        for _ in range(100):
            try:
                return read()
            except StaleElementReferenceException:
                time.sleep(0.05)
        raise AssertionError("the page kept redrawing while it was read")

    def texts(self, selector: str) -> list[str]:
        return self._stable(lambda: [str(e.text) for e in self.css(selector)])  # type: ignore[no-any-return]

    def attrs(self, selector: str, name: str) -> list[str]:
        return self._stable(lambda: [str(e.get_attribute(name)) for e in self.css(selector)])  # type: ignore[no-any-return]

    def text(self, selector: str) -> str:
        found = self.texts(selector)
        return found[0] if found else ""

    def click(self, selector: str) -> None:
        def once() -> bool:
            found = self.css(selector)
            if found:
                found[0].click()
            return bool(found)

        self.wait(lambda: self._stable(once), what=selector)

    def task(self, task_id: int) -> dict[str, Any]:
        return self.ws.show(task_id)


@pytest.fixture(scope="module", name="console")
def fixture_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    browser = _browser_or_skip()
    ws = console_workspace(tmp_path_factory.mktemp("console"))
    log = (ws.root / "daemon.log").open("wb")
    env = {**ws.env(), "WORMHOLE_CONSOLE_TOKEN": TOKEN}
    proc = subprocess.Popen([*wormhole_command(), "daemon", "--http", "127.0.0.1:0", "--poll-s", "0.2",
                             "--heartbeat-s", "0.5", "--grace-s", "5"], cwd=ws.root, env=env, stdout=log, stderr=log)
    try:
        port = _console_port(ws.root / "daemon.log", proc)
        console = Console(ws, proc, f"http://127.0.0.1:{port}", browser)
        console.open("/")
        console.wait(lambda: console.css("#tasks"), what="the task list")
        console.wait(lambda: console.css("#token"), what="the token field")[0].send_keys(TOKEN)
        console.css("#actor")[0].send_keys("Ann")
        console.click("#save-token")
        yield console
    finally:
        browser.quit()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _console_port(path: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in path.read_text(errors="replace").splitlines():
            if '"daemon.console_serving"' in line:
                return int(json.loads(line)["port"])
        if proc.poll() is not None:
            raise AssertionError(f"the daemon exited {proc.returncode}:\n{path.read_text()}")
        time.sleep(0.1)
    raise AssertionError(f"the daemon did not serve its console:\n{path.read_text()}")


def test_submit_a_task_watch_it_progress_and_succeed(console: Console) -> None:
    """Submitted from the page, the task is run by the daemon; its page shows its progress live (a rate
    chart growing), then success; the run page's rows are the task database's."""
    console.open("/submit")
    spec = slow_task(rows=30_000, delay_ms=150)  # about 4.5 s
    spec["destinations"].append(good_task(console.ws.root / "out")["destinations"][0])
    console.wait(lambda: console.css("#spec-text"), what="the form")[0].send_keys(json.dumps(spec))
    console.click("#submit")
    link = console.wait(lambda: console.texts("#submitted a"), what="the new task's link")[0]
    task_id = int(re.sub(r"\D", "", link))
    console.click("#submitted a")
    console.wait(lambda: console.text("#task-state") == "running", what="running")
    chart = console.wait(lambda: [n for n in console.attrs(".rate-chart", "data-samples") if int(n) >= 3],
                         what="a rate chart of three samples")
    assert chart and console.css("[data-progress] tr[data-destination='slow']")
    console.wait(lambda: console.text("#task-state") == "success", what="success")
    task = console.task(task_id)
    assert task["status"] == "success"
    run_id = task["runs"][-1]["id"]
    console.click(f"tr[data-run='{run_id}'] a")
    console.wait(lambda: console.css("#destinations tr[data-destination='csv']"), what="the run page")
    for dest, stored in task["result"]["destinations"].items():
        written = console.text(f"#destinations tr[data-destination='{dest}'] td.written")
        assert written == f"{stored['rows_written']:,}"
    assert len(console.css("#timeline rect[data-split]")) == 4  # the csv destination's four splits
    console.open("/")
    row = console.wait(lambda: console.texts(f"tr[data-task='{task_id}']"), what="the task in the list")[0]
    assert "success" in row and "30,000 read" in row


def test_rejected_rows_of_a_failing_task_and_its_retry(console: Console) -> None:
    """The run page of a failed task lists its rejected rows with their reasons (as many as the file
    holds, up to the page's limit); Retry makes the task pending again, recorded with who did it."""
    task_id = console.ws.submit(dirty_task(console.ws.root / "dirty-out"), name="dirty")
    task = console.wait(lambda: (t := console.task(task_id))["status"] == "failed" and t, what="the task to fail")
    run_id = task["runs"][-1]["id"]
    console.open(f"/task/{task_id}/run/{run_id}")
    rows = console.wait(lambda: console.texts("#dirty td.reason"), what="the rejected rows")
    rejected = task["result"]["destinations"]["csv"]["rows_rejected"]
    assert len(rows) == rejected > 0
    assert all("UnicodeEncodeError" in r for r in rows)
    assert console.text("#destinations td.rolled-back") == "yes"
    console.open(f"/task/{task_id}")
    console.click("#retry")
    console.wait(lambda: len(console.task(task_id)["runs"]) == 2, what="the retried task's second run")
    # The page polls: wait for the retry's row itself (an earlier draw of the list may still be on the page).
    actions = console.wait(lambda: [r for r in console.texts("#actions tr") if "retry" in r], what="the retry")
    assert "Ann (console) from 127.0.0.1" in actions[0]


def test_cancel_a_long_task(console: Console) -> None:
    """Cancel on a running task's page stops it as SIGTERM would: the run ends interrupted, rolled back."""
    task_id = console.ws.submit(slow_task(), name="long")
    console.open(f"/task/{task_id}")
    console.wait(lambda: console.text("#task-state") == "running", what="running")
    console.wait(lambda: console.css("[data-progress] tr[data-destination]"), what="its progress")
    console.click("#cancel")
    console.wait(lambda: console.text("#task-state") == "failed", what="the task to stop")
    task = console.task(task_id)
    assert task["runs"][-1]["status"] == "interrupted" and "cancelled by Ann (console)" in task["result"]["error"]
    assert task["result"]["destinations"]["slow"]["rolled_back"] is True
    console.open("/?status=failed&search=long")
    console.wait(lambda: console.css("#tasks tr[data-task]"), what="the filtered list")
    assert [int(t) for t in console.attrs("#tasks tr[data-task]", "data-task")] == [task_id]

"""What a database task's table runs share (wormhole/plugins/shared.py): facts made once, idle sessions lent."""

from __future__ import annotations

import threading
import time

import pytest

from wormhole.plugins import shared as shared_module
from wormhole.plugins.shared import RunShared


def test_a_fact_asked_by_many_runs_at_once_is_made_once() -> None:
    shared = RunShared()
    made: list[int] = []
    started = threading.Barrier(6)

    def make() -> str:
        made.append(1)
        time.sleep(0.05)  # the others ask meanwhile
        return "current"

    def ask(out: list[str]) -> None:
        started.wait()
        out.append(shared.once(("markers", "db"), make))

    answers: list[str] = []
    threads = [threading.Thread(target=ask, args=(answers,)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == ["current"] * 6 and len(made) == 1
    assert shared.once(("markers", "other db"), lambda: False) is False  # a falsy answer is kept too


def test_a_fact_whose_making_failed_is_made_by_the_next_to_ask() -> None:
    shared = RunShared()

    def fails() -> str:
        raise RuntimeError("server gone")

    with pytest.raises(RuntimeError):
        shared.once("k", fails)
    assert shared.once("k", lambda: "made") == "made"


def test_idle_sessions_are_lent_by_key_closed_when_stale_or_the_run_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = RunShared()
    closed: list[str] = []
    shared.keep("a", "conn-1", closed.append)
    assert shared.lend("b") is None and shared.lend("a") == "conn-1" and shared.lend("a") is None
    shared.keep("a", "conn-2", closed.append)
    monkeypatch.setattr(shared_module, "IDLE_S", 0.0)
    time.sleep(0.01)
    assert shared.lend("a") is None and closed == ["conn-2"]  # kept too long: closed, not lent
    monkeypatch.setattr(shared_module, "IDLE_S", 5.0)
    shared.keep("a", "conn-3", closed.append)
    shared.close()
    shared.keep("a", "conn-4", closed.append)  # given back after the end: closed at once
    assert closed == ["conn-2", "conn-3", "conn-4"] and shared.lend("a") is None
    shared.reopen()
    shared.keep("a", "conn-5", closed.append)
    assert shared.lend("a") == "conn-5"
    assert shared.counts["lent"] == 2 and shared.counts["closed"] == 3

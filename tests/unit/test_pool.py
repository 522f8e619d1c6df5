"""wormhole/pool.py's spawn: each call runs at once in a daemon thread of its own, an idle thread that an
earlier call ended in being taken again rather than a new one started."""

from __future__ import annotations

import contextvars
import threading

import pytest

from wormhole.pool import spawn

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="none")


def test_calls_never_wait_for_a_thread_and_an_idle_one_is_taken_again() -> None:
    gate = threading.Event()
    started = threading.Barrier(6)

    here = threading.local()

    def blocked(i: int) -> tuple[int, int, str]:
        started.wait(timeout=10)  # all five at once: none waited for another's thread
        gate.wait(timeout=10)
        here.ran = i  # stays with the thread, not the call
        return i, threading.get_ident(), threading.current_thread().name

    futures = [spawn(blocked, i, name=f"blocked-{i}") for i in range(5)]
    started.wait(timeout=10)
    gate.set()
    first = [f.result(timeout=10) for f in futures]
    assert [i for i, _, _ in first] == list(range(5))
    assert [n for _, _, n in first] == [f"blocked-{i}" for i in range(5)]
    idents = {ident for _, ident, _ in first}
    assert len(idents) == 5
    # Once those ended, the next calls run in the same threads (one of the five ran there), under their names.
    again = [spawn(lambda: (getattr(here, "ran", None), threading.current_thread().name), name="again")
             .result(timeout=10) for _ in range(3)]
    assert all(ran in range(5) for ran, _ in again) and {name for _, name in again} == {"again"}


def test_an_exception_lands_in_the_future_and_a_call_sees_no_earlier_calls_context() -> None:
    def fails() -> None:
        MARK.set("set by an earlier call")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        spawn(fails, name="fails").result(timeout=10)
    assert spawn(MARK.get, name="reads").result(timeout=10) == "none"

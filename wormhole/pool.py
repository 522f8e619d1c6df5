"""Daemon worker threads with Futures, and calls bounded by a timeout that really fires.

ThreadPoolExecutor joins its threads at interpreter exit, so one hung database call could keep a
finished (or SIGTERMed) task's process alive forever. Our pools use daemon threads instead: the
engine decides when to stop waiting, and the process can always exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def spawn(fn: Callable[..., T], *args: Any, name: str) -> Future[T]:
    """Run ``fn(*args)`` in a new daemon thread; its outcome lands in the returned Future."""
    future: Future[T] = Future()
    future.set_running_or_notify_cancel()

    def target() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


def run_with_timeout(fn: Callable[[], T], timeout_s: float, name: str) -> T:
    """Call ``fn`` in its own thread and wait at most ``timeout_s``.

    Raises ``TimeoutError`` when it takes longer (the thread is abandoned, it is a daemon), and
    re-raises whatever ``fn`` raised. The original Wormhole ran the callable on the calling
    thread before waiting, so its timeouts never fired; this one does.
    """
    return spawn(fn, name=name).result(timeout=timeout_s)

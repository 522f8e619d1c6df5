"""Daemon worker threads with Futures, and calls bounded by a timeout that really fires.

ThreadPoolExecutor joins its threads at interpreter exit, so one hung database call could keep a
finished (or SIGTERMed) task's process alive forever. Our pools use daemon threads instead: the
engine decides when to stop waiting, and the process can always exit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
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


def settled(futures: Collection[Future[Any]], *,
            ignore: type[BaseException] | tuple[type[BaseException], ...] = ()) -> tuple[bool, BaseException | None]:
    """Whether every one of ``futures`` is done, and the exception of the first done one that raised one
    (but of type ``ignore``: a thread that ended so because another one failed)."""
    done = 0
    for future in futures:
        if future.done():
            done += 1
            exc = future.exception()
            if exc is not None and not isinstance(exc, ignore):
                return done == len(futures), exc
    return done == len(futures), None


def joined(futures: Collection[Future[Any]], deadline: float) -> bool:
    """Wait for ``futures`` until ``deadline`` (monotonic); False if some are still running then."""
    for future in futures:
        try:
            future.exception(timeout=max(deadline - time.monotonic(), 0))
        except TimeoutError:
            return False
    return True


def run_with_timeout(fn: Callable[[], T], timeout_s: float, name: str) -> T:
    """Call ``fn`` in its own thread and wait at most ``timeout_s``.

    Raises ``TimeoutError`` when it takes longer (the thread is abandoned, it is a daemon), and
    re-raises whatever ``fn`` raised. The original Wormhole ran the callable on the calling
    thread before waiting, so its timeouts never fired; this one does.
    """
    return spawn(fn, name=name).result(timeout=timeout_s)

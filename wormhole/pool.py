"""Daemon worker threads with Futures, and calls bounded by a timeout that really fires.

ThreadPoolExecutor joins its threads at interpreter exit, so one hung database call could keep a
finished (or SIGTERMed) task's process alive forever. Our pools use daemon threads instead: the
engine decides when to stop waiting, and the process can always exit. A thread whose call ended waits
a few seconds for the next one (:func:`spawn`) instead of ending at once.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


IDLE_S = 5.0
"""A worker thread that has waited this long for another call ends."""

_calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_lock = threading.Lock()
_idle = 0
"""Workers waiting for a call that no :func:`spawn` has claimed yet."""


def spawn(fn: Callable[..., T], *args: Any, name: str) -> Future[T]:
    """Run ``fn(*args)`` at once in a daemon thread (named ``name`` meanwhile); its outcome lands in the
    returned Future. The thread is an idle one that an earlier call ended in, else a new one: a database task
    of 1,000 tiny tables would start some 5,000 threads otherwise, each a start-up hand-off. A call never
    waits for a thread to be free; one that hangs keeps its thread."""
    future: Future[T] = Future()
    future.set_running_or_notify_cancel()

    def call() -> None:
        threading.current_thread().name = name
        try:
            result = contextvars.Context().run(fn, *args)  # as in a new thread: no context of an earlier call
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    global _idle
    with _lock:
        if _idle:
            _idle -= 1
            _calls.put(call)  # under the lock, with the claim: an idle worker is there to take it
            return future
    threading.Thread(target=_work, args=(call,), name=name, daemon=True).start()
    return future


def _work(call: Callable[[], None] | None) -> None:
    global _idle
    while call is not None:
        call()
        call = None  # what the call held (its future, its arguments) is not kept while idle
        threading.current_thread().name = "idle"
        with _lock:
            _idle += 1
        try:
            call = _calls.get(timeout=IDLE_S)
        except queue.Empty:
            with _lock:  # a call put meanwhile claimed a worker: this one, as no other is idle for it
                try:
                    call = _calls.get_nowait()
                except queue.Empty:
                    _idle -= 1


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

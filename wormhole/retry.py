"""The one retry policy: tenacity, driven by the error tree's ``retryable``, interrupted by a stop.

Every bounded retry in wormhole (a store's connect, a writer's failed piece, the task database)
goes through :func:`policy`. What is worth retrying is decided in one place, the exception's
``retryable`` attribute (``TransientReadError``, ``TransientWriteError``, ...), so a store only has
to raise the right error. Waits sleep on the task's stop signal, so SIGTERM ends a backoff at
once instead of after it; a stopped task makes no further attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from wormhole.plugins.base import StopSignal


def is_retryable(exc: BaseException) -> bool:
    """Whether the error tree calls ``exc`` transient (``WormholeError.retryable``)."""
    return bool(getattr(exc, "retryable", False))


_StopCondition = Callable[[RetryCallState], bool]


def _either(first: _StopCondition, second: _StopCondition) -> _StopCondition:
    # tenacity's ``|`` does this, but its types take only tenacity's own stop classes.
    return lambda state: first(state) or second(state)


def policy(*, attempts: int, wait_s: float = 0.5, max_wait_s: float = 30.0, stop: StopSignal | None = None,
           log: Any = None, event: str = "retry.attempt",
           retry_on: Callable[[BaseException], bool] = is_retryable, **log_keys: Any) -> Retrying:
    """A tenacity ``Retrying``: up to ``attempts`` tries, exponential waits from ``wait_s`` capped at
    ``max_wait_s``, retrying only what ``retry_on`` accepts; the last error is re-raised as is.

    With ``stop``, a wait ends as soon as the signal is set and no attempt follows it. ``log`` gets
    ``event`` (with ``log_keys``, the attempt number, the wait and the error) before each wait.
    """

    last: list[BaseException] = []

    def stopped(_: RetryCallState) -> bool:
        return stop is not None and stop.is_set()

    def sleep(seconds: float) -> None:
        if stop is not None:
            if stop.wait(seconds) and last:
                # Tenacity would attempt once more after the wait: a stopped task gets the last error.
                raise last[-1]
        elif seconds > 0:  # no stop signal to wait on (the task database before a task exists)
            time.sleep(seconds)

    def before_sleep(state: RetryCallState) -> None:
        if state.outcome is None:
            return
        exc = state.outcome.exception()
        if exc is not None:
            last[:] = [exc]
        if log is None:
            return
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(event, attempt=state.attempt_number, of=attempts, wait_s=round(wait, 3),
                    error=f"{type(exc).__name__}: {exc}", **log_keys)

    return Retrying(
        stop=_either(stop_after_attempt(max(1, attempts)), stopped),
        wait=wait_exponential(multiplier=wait_s, max=max_wait_s),
        retry=retry_if_exception(retry_on),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )

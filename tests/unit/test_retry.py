"""The one retry policy: only retryable errors are retried, and a stop ends a wait with no further attempt."""

from __future__ import annotations

import threading
import time

import pytest
from structlog.testing import capture_logs

from tests.plugin_helpers import write_ctx
from wormhole.errors import TransientWriteError, WriteError
from wormhole.plugins.base import Column, Schema
from wormhole.retry import policy


def failing(error: Exception, calls: list[float]) -> object:
    def attempt() -> None:
        calls.append(time.monotonic())
        raise error

    return attempt


def test_only_retryable_errors_are_retried_and_each_wait_is_logged() -> None:
    ctx = write_ctx(Schema((Column("id", "int"),)))
    calls: list[float] = []
    with capture_logs() as logs, pytest.raises(TransientWriteError, match="lock wait"):
        policy(attempts=3, wait_s=0.01, stop=ctx.stop, log=ctx.log, event="writer.retry")(
            failing(TransientWriteError("lock wait"), calls))
    assert len(calls) == 3
    assert [(e["event"], e["attempt"], e["destination"]) for e in logs] == [("writer.retry", 1, "out"),
                                                                             ("writer.retry", 2, "out")]
    calls.clear()
    with pytest.raises(WriteError, match="bad value"):
        policy(attempts=3, wait_s=0.01)(failing(WriteError("bad value"), calls))
    assert len(calls) == 1  # not transient: no second attempt


def test_a_stop_ends_the_wait_at_once_and_no_attempt_follows() -> None:
    stop = threading.Event()
    calls: list[float] = []
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(TransientWriteError, match="deadlock"):
        policy(attempts=5, wait_s=30.0, stop=stop)(failing(TransientWriteError("deadlock"), calls))
    assert time.monotonic() - started < 5  # not the 30 s wait
    assert len(calls) == 1  # the stopped wait is not followed by another attempt
    timer.cancel()

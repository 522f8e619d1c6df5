"""The task-wide speed limits (wormhole/exchange/throttle.py): the rate held, waits ended by a stop,
no reader blocked by another's wait.

The exact arithmetic runs on a fake clock (no sleeping, nothing to flake); the threaded tests use the
real clock, with bounds that hold on a loaded machine: the throttle never lets the measured rate
exceed the limit (that bound is exact), and the lower bounds are generous.
"""

from __future__ import annotations

import threading
import time

import pytest

from wormhole.exchange.throttle import ReadMeasure, Throttle, measure_senders
from wormhole.task_spec import SpeedSpec


class FakeTime:
    """A clock that moves only when someone waits on the stop signal it hands out."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def stop(self) -> threading.Event:
        clock = self

        class Stop(threading.Event):
            def wait(self, timeout: float | None = None) -> bool:
                assert timeout is not None
                clock.waits.append(timeout)
                clock.now += timeout
                return False

        return Stop()


def test_no_limit_means_no_throttle() -> None:
    assert Throttle.of(SpeedSpec()) is None
    assert Throttle.of(SpeedSpec(channel=4)) is None
    throttle = Throttle.of(SpeedSpec(record=10, byte=20))
    assert throttle is not None and (throttle.record, throttle.byte) == (10, 20)
    with pytest.raises(ValueError):
        Throttle()


def test_the_first_batch_pays_up_front_and_n_batches_take_total_over_limit() -> None:
    t = FakeTime()
    stop = t.stop()
    throttle = Throttle(record=1000, clock=t)
    assert throttle.acquire(500, 0, stop) == pytest.approx(0.5)  # its own cost, before it moves
    for _ in range(9):
        throttle.acquire(500, 0, stop)
    m = throttle.measure()
    assert (m.rows, m.seconds) == (5000, pytest.approx(5.0))  # exactly total / limit
    assert m.rows_per_s == pytest.approx(1000)
    assert m.waited_s == pytest.approx(5.0)


def test_reading_time_between_batches_is_not_lost_and_a_pause_earns_one_batch_of_credit() -> None:
    t = FakeTime()
    stop = t.stop()
    throttle = Throttle(record=1000, clock=t)
    for _ in range(10):
        throttle.acquire(100, 0, stop)
        t.now += 0.03  # reading the next batch takes 30 ms of its 100 ms budget
    # 1000 rows at 1000 rows/s: the last wait ends 1 s after the first acquire, not 1.3 s.
    assert throttle.measure().seconds == pytest.approx(1.0)
    t.now += 10.0  # a long pause: at most one batch goes without waiting
    assert throttle.acquire(100, 0, stop) == 0.0
    assert throttle.acquire(100, 0, stop) == pytest.approx(0.1)


def test_the_larger_of_the_record_and_byte_waits_counts() -> None:
    t = FakeTime()
    stop = t.stop()
    throttle = Throttle(record=1000, byte=10_000, clock=t)
    assert throttle.acquire(100, 5000, stop) == pytest.approx(0.5)  # bytes: 0.5 s, rows: 0.1 s
    # Rows: 1100 rows may take 1.1 s from the start, 0.6 s from now; bytes nearly free.
    assert throttle.acquire(1000, 100, stop) == pytest.approx(0.6)
    m = throttle.measure()
    assert (m.rows, m.bytes, m.seconds) == (1100, 5100, pytest.approx(1.1))
    # Neither measured rate exceeds its limit.
    assert m.bytes is not None and m.bytes / m.seconds <= 10_000
    assert m.rows / m.seconds == pytest.approx(1000)


def test_several_threads_hold_the_task_wide_rate() -> None:
    limit, threads, batches, rows = 4000, 4, 5, 200  # 4000 rows: 1 s
    throttle = Throttle(record=limit)
    stop = threading.Event()

    def reader() -> None:
        for _ in range(batches):
            throttle.acquire(rows, rows * 50, stop)

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    start = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    elapsed = time.monotonic() - start
    m = throttle.measure()
    total = threads * batches * rows
    assert m.rows == total and m.bytes == total * 50
    assert elapsed >= total / limit * 0.99  # never faster than the limit (the clock's own bound)
    assert m.rows / m.seconds <= limit * 1.0001
    # Four readers waited about the whole second each, at the same time.
    assert m.waited_s >= threads * 0.5


def test_a_stop_ends_a_long_wait_at_once() -> None:
    throttle = Throttle(record=1)
    stop = threading.Event()
    waited: list[float] = []
    reader = threading.Thread(target=lambda: waited.append(throttle.acquire(3600, 0, stop)))
    reader.start()
    time.sleep(0.2)
    assert reader.is_alive()  # an hour's wait
    t0 = time.monotonic()
    stop.set()
    reader.join(10)
    assert not reader.is_alive()
    assert time.monotonic() - t0 < 5  # at once (generous for a loaded machine), not after the hour
    assert waited == [pytest.approx(3600)]
    assert throttle.measure().waited_s < 60


def test_no_lock_is_held_while_a_reader_waits() -> None:
    throttle = Throttle(record=1)
    long_wait, stopped = threading.Event(), threading.Event()
    stopped.set()
    reader = threading.Thread(target=throttle.acquire, args=(3600, 0, long_wait))
    reader.start()
    try:
        time.sleep(0.2)
        assert reader.is_alive()
        # Another reader computes its own wait (and, already stopped, returns) while the first one
        # sleeps; the measure is readable too. A lock held across the wait would block both.
        done = threading.Event()

        def other() -> None:
            throttle.acquire(1, 0, stopped)
            throttle.measure()
            done.set()

        threading.Thread(target=other, daemon=True).start()
        assert done.wait(10)
    finally:
        long_wait.set()
        reader.join(10)


class Tally:
    def __init__(self, rows: int, nbytes: int, first: float | None, last: float | None) -> None:
        self.rows_sent, self.bytes_sent, self.first_at, self.last_at = rows, nbytes, first, last


def test_local_measure_spans_the_readers_first_batch_to_their_last() -> None:
    m = measure_senders([Tally(100, 1000, 10.0, 12.0), Tally(300, 3000, 10.5, 14.0), Tally(0, 0, None, None)], None)
    assert m == ReadMeasure(rows=400, bytes=4000, seconds=4.0, waited_s=0.0)
    assert measure_senders([], None) == ReadMeasure()
    result = m.result(SpeedSpec(record=200))
    assert (result.record_limit, result.byte_limit, result.rows_per_s, result.bytes_per_s) == (200, None, 100.0, 1000.0)
    empty = ReadMeasure().result(SpeedSpec())
    assert (empty.rows, empty.seconds, empty.rows_per_s) == (0, 0.0, None)

"""The lease: a run makes splits durable and touches destinations only while its claim is live."""

from __future__ import annotations

import threading
import time

import pytest
import structlog

from wormhole.errors import TaskAborted
from wormhole.recovery.lease import Lease


def held_in_thread(lease: Lease) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def hold() -> None:
        try:
            lease.hold("split s1")
            outcome.append(time.monotonic())
        except TaskAborted as exc:
            outcome.append(exc)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread, outcome


def test_a_fresh_lease_holds_at_once() -> None:
    lease = Lease(5.0, structlog.get_logger())
    started = time.monotonic()
    lease.hold("split s1")
    assert time.monotonic() - started < 0.1 and lease.live()


def test_an_expired_lease_waits_for_the_next_heartbeat() -> None:
    lease = Lease(0.2, structlog.get_logger())
    time.sleep(0.3)
    assert not lease.live()
    thread, outcome = held_in_thread(lease)
    time.sleep(0.5)
    assert thread.is_alive() and outcome == []  # no heartbeat went through: nothing becomes durable
    renewed = time.monotonic()
    lease.renewed(renewed)
    thread.join(2)
    assert len(outcome) == 1 and isinstance(outcome[0], float) and outcome[0] >= renewed


def test_a_heartbeat_sent_before_the_lease_ran_out_does_not_extend_it_past_its_length() -> None:
    lease = Lease(0.2, structlog.get_logger())
    sent = time.monotonic()
    time.sleep(0.3)  # the heartbeat's answer took longer than the lease (a slow task database)
    lease.renewed(sent)
    assert not lease.live()


@pytest.mark.parametrize("how", ["lose", "stop"])
def test_a_lost_claim_or_a_stop_while_uncertain_ends_the_wait(how: str) -> None:
    lease = Lease(0.1, structlog.get_logger())
    time.sleep(0.2)
    thread, outcome = held_in_thread(lease)
    time.sleep(0.2)
    getattr(lease, how)()
    thread.join(2)
    assert len(outcome) == 1 and isinstance(outcome[0], TaskAborted)
    assert outcome[0].reason == ("claim_lost" if how == "lose" else "claim_uncertain")


def test_a_stop_while_the_claim_is_live_still_holds_and_a_lost_claim_never_does() -> None:
    lease = Lease(5.0, structlog.get_logger())
    lease.stop()
    lease.hold("the rollback of d1")  # a stopping run rolls back while its claim is live
    lease.lose()
    with pytest.raises(TaskAborted, match="taken over"):
        lease.hold("the rollback of d1")

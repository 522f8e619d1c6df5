"""A destination's lifecycle (wormhole.destination.Destination): its end as commit, rollback, settle or leave,
with a store that records what was asked of it."""

from __future__ import annotations

import structlog

from wormhole.config import ErrorLimit, ExchangeConf
from wormhole.destination import Destination, DestinationSetup, Ending
from wormhole.errors import RolledBack
from wormhole.exchange import RAMStorage
from wormhole.plugins.base import Schema, SinkRole, WriteContext
from wormhole.recovery.crash import NoCrash
from wormhole.recovery.lease import Lease
from wormhole.recovery.state import RecoveryState

LOG = structlog.get_logger("test")


class Ledger:
    """A store's periphery that records its calls (and fails its commit when told to)."""

    def __init__(self, options: object, ctx: WriteContext) -> None:
        self.calls: list[str] = []
        self.fail_commit = bool(options)

    def prepare(self) -> None:
        self.calls.append("prepare")

    def commit(self) -> None:
        self.calls.append("commit")
        if self.fail_commit:
            raise OSError("disk full")

    def rollback(self) -> None:
        self.calls.append("rollback")


def writer(*args: object) -> object:
    raise AssertionError("no rows are written here")


SINK = SinkRole(options=object, periphery=Ledger, writer=writer)  # type: ignore[arg-type]


def prepared(recovery: RecoveryState, fail_commit: bool = False) -> Destination:
    setup = DestinationSetup(id="d", plugin="ledger", options=fail_commit, concurrency=1, sink=SINK,
                             limit=ErrorLimit(), log=LOG)
    dest = Destination(setup, RAMStorage("d", ExchangeConf()), recovery)
    if not dest.skip_committed(recovery):
        ctx = WriteContext(task_id=1, run_id=1, destination="d", schema=Schema(()), batch_rows=10, concurrency=1,
                           plugin="ledger", stop=dest.stop)
        dest.prepare(ctx, None, 5.0, recovery)
        assert dest.state == "pending" and not dest.durable
    return dest


def ledger(dest: Destination) -> list[str]:
    assert isinstance(dest.periphery, Ledger)
    return dest.periphery.calls


def ending(lease: Lease | None = None) -> Ending:
    return Ending(lease, None, NoCrash())


def test_a_written_destination_commits() -> None:
    dest = prepared(RecoveryState(1, 1))
    dest.start([])
    dest.end(None, ending(), lambda: 0)
    assert (dest.outcome, ledger(dest)) == ("success", ["prepare", "commit"])


def test_an_abort_rolls_a_healthy_destination_back_and_a_failed_commit_fails_it() -> None:
    healthy = prepared(RecoveryState(1, 1))
    healthy.end("the source failed", ending(), lambda: 0)
    assert (healthy.outcome, healthy.error_code, ledger(healthy)) == ("rolled_back", RolledBack.code,
                                                                      ["prepare", "rollback"])
    broken = prepared(RecoveryState(1, 1), fail_commit=True)
    broken.end(None, ending(), lambda: 0)
    assert (broken.outcome, broken.state, ledger(broken)) == ("failed", "failed", ["prepare", "commit", "rollback"])
    assert broken.error == "commit failed: OSError: disk full"


def test_a_lost_claim_leaves_the_destination_as_it_is() -> None:
    dest = prepared(RecoveryState(1, 1))
    lease = Lease(60.0, LOG)
    lease.lose()
    dest.end(None, ending(lease), lambda: 0)
    assert (dest.outcome, dest.left, ledger(dest)) == ("failed", True, ["prepare"])


def test_a_destination_a_run_of_the_chain_committed_is_not_touched_again() -> None:
    recovery = RecoveryState(2, 1, resumed_from=1, committed={"d": 40}, committed_by={"d": 1})
    dest = prepared(recovery)
    assert (dest.state, dest.committed_before, dest.periphery, dest.live) == ("done", 40, None, False)
    dest.end(None, ending(), lambda: 0)
    assert dest.outcome == "success"
    aborted = prepared(recovery)
    aborted.end("stopped", ending(), lambda: 0)
    assert aborted.outcome == "failed" and aborted.rollback_error is not None

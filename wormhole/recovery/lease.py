"""Lease: the run's claim on its task, as the writers see it.

The process running a task renews its claim with a heartbeat every ``claim.heartbeat_s``; another
process may take the task over once the heartbeat is older than ``claim.stale_s``. A run therefore
makes a split durable, or commits a destination, only while its last successful heartbeat is younger
than ``stale_s - heartbeat_s`` (the lease). A run whose heartbeat cannot be written (the task database
away, the process paused) holds those steps until a heartbeat goes through, and stops for good when
it learns the claim was taken over: two processes never both make one split durable, whatever pauses
did, as long as their hosts' clocks agree within ``heartbeat_s`` (a taker judges staleness by the
timestamps the holder wrote), except for a pause that falls between the check and the commit itself.
"""

from __future__ import annotations

import threading
import time

from wormhole.errors import TaskAborted
from wormhole.log import Logger


class Lease:
    def __init__(self, length_s: float, log: Logger, renewed_at: float | None = None) -> None:
        """``renewed_at``: when the claim was last written (monotonic; by default now)."""
        self.length_s = length_s
        self._log = log
        self._cond = threading.Condition()
        self._renewed_at = time.monotonic() if renewed_at is None else renewed_at
        self._lost = False
        self._stopped = False

    def renewed(self, at: float) -> None:
        """A heartbeat sent at ``at`` (monotonic, taken before it was sent) went through."""
        with self._cond:
            self._renewed_at = max(self._renewed_at, at)
            self._cond.notify_all()

    def lose(self) -> None:
        """The claim was taken over: nothing may become durable any more."""
        with self._cond:
            self._lost = True
            self._cond.notify_all()

    def stop(self) -> None:
        """The run is stopping: a writer waiting in ``hold`` gives up."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def live(self) -> bool:
        with self._cond:
            return not self._lost and time.monotonic() - self._renewed_at < self.length_s

    def hold(self, what: str) -> None:
        """Return once the claim is live; raise TaskAborted when it is lost, or when the run stops while
        the claim is not confirmed (``what`` then stays as it is, for whoever holds the task next)."""
        waited_since: float | None = None
        with self._cond:
            while True:
                if self._lost:
                    raise TaskAborted(f"the task's claim was taken over: {what} is left as it is", reason="claim_lost")
                age = time.monotonic() - self._renewed_at
                if age < self.length_s:
                    break
                if self._stopped:
                    raise TaskAborted(f"the run is stopping and its claim is not confirmed: {what} is left as it is",
                                      reason="claim_uncertain")
                if waited_since is None:
                    waited_since = time.monotonic()
                    self._log.warning("task.claim_uncertain", heartbeat_age_s=round(age, 3), lease_s=self.length_s,
                                      waiting=what)
                self._cond.wait(0.2)
        if waited_since is not None:
            self._log.info("task.claim_confirmed", waited_s=round(time.monotonic() - waited_since, 3))

"""`wormhole` with a crash point installed: ``python tests/crash_entry.py <point>:<destination>:<n>[:stop] ARGS``.

The crash/resume tests run this instead of the console script: it installs a :class:`CrashHook` through
the recovery package's seam (:mod:`wormhole.recovery.crash`) and then runs the CLI with ``ARGS``. The
product never reads a crash setting of its own. Run by path, so it imports nothing from ``tests``.
"""

from __future__ import annotations

import signal
import sys
import threading

from wormhole.log import Logger
from wormhole.recovery import crash
from wormhole.recovery.checkpoint import TASKDB_WRITES


class CrashHook:
    """``<point>:<destination>:<n>`` SIGKILLs the process at the n-th split of that destination, at
    ``before_seal`` (its rows written, the split's transaction or part not yet committed) or ``after_seal``
    (committed in the destination, not yet in the checkpoint: the window where only the destination's own
    record is true); or (n = 1) around the destination's final commit, at ``before_commit`` or
    ``after_commit`` (committed, the task's outcome not recorded). A fourth part ``:stop`` SIGSTOPs the
    process there instead (a paused process, which another may take the task from)."""

    def __init__(self, spec: str, log: Logger) -> None:
        self._log = log
        self._signal = signal.SIGKILL
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        parts = spec.split(":")
        if parts[-1] == "stop":
            self._signal = signal.SIGSTOP
            parts = parts[:-1]
        point, destination, n = parts[0], ":".join(parts[1:-1]), parts[-1]
        self._point = (point, destination, int(n))

    def reached(self, point: str, destination: str, split_id: str | None) -> None:
        if self._point[:2] != (point, destination):
            return
        with self._lock:
            count = self._counts[point] = self._counts.get(point, 0) + 1
        if count == self._point[2]:
            self._log.warning("test.crash", point=point, destination=destination, split_id=split_id,
                              signal=self._signal.name)
            with TASKDB_WRITES:  # never paused inside a task-database write (SIGKILL ends it anyway)
                # To this thread, not the process: a process-directed SIGSTOP is taken by whichever thread
                # the kernel picks (the main one, if it is waiting), and until that thread runs and stops the
                # others this one goes on; on a loaded machine it went on to commit the very split the test
                # means to find open. A thread-directed stop stops this thread before kill returns to it.
                signal.pthread_kill(threading.get_ident(), self._signal)


def main() -> None:
    spec, args = sys.argv[1], sys.argv[2:]
    crash.install(lambda log: CrashHook(spec, log))
    sys.argv = ["wormhole", *args]
    from wormhole.cli import main as cli

    cli()


if __name__ == "__main__":
    main()

"""What the table runs of one database task share through their stores' contexts (``ctx.shared``).

A database task runs each table as a run of its own; for a table of a hundred rows the round trips around
its rows cost far more than the rows. What one table's run learnt that holds for the next is kept here for
the task's run: a fact asked once (the destination's markers table is there and current, a server's
settings, a source table's columns) and idle sessions, lent by one step to the next (a table's prepare,
commit, release and DDL) instead of a connection each. A store keys what it keeps by its server and
database, and lends a session back only when it is as a new one would be (no transaction open, its
settings its own). A task of one table has none (``ctx.shared`` is None): every step asks and connects.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

ROUTINE = frozenset(
    {
        "engine.conf_read",
        "engine.chosen",
        "task.started",
        "plan.made",
        "reader.prepared",
        "reader.split_planned",
        "splitter.done",
        "reader.started",
        "reader.finished",
        "destination.prepared",
        "destination.started",
        "destination.written",
        "destination.committed",
        "writer.load_method",
        "writer.load_from_wire",
    }
)
"""A table run's info events that say a step went as it always does: logged at debug in a database task,
where 1,000 tables made 14,000 such lines (and their rendering and writes were a share of a tiny table's
time); each table's outcome has its line (``database.pair_done``), its warnings and errors are as they are,
and ``--log-level debug`` shows these too. The engine's (``task.started`` of a table run among them) and the
stores' (through their contexts' loggers, :meth:`RunShared.quiet`) alike."""


class QuietLog:
    """A logger that logs the :data:`ROUTINE` info events at debug, the rest as the wrapped logger logs them."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def info(self, event: str, *args: Any, **kw: Any) -> Any:
        if event in ROUTINE:
            return self._log.debug(event, *args, **kw)
        return self._log.info(event, *args, **kw)

    def bind(self, **new_values: Any) -> Any:
        return QuietLog(self._log.bind(**new_values))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


IDLE_S = 5.0
"""An idle session kept longer than this is closed instead of lent: a server may drop an idle session after
its own ``wait_timeout`` (some are set to seconds), and a tiny table's steps follow one another in
milliseconds."""
PER_KEY = 8
"""Idle sessions kept per key; more are closed."""


class RunShared:
    """Facts and idle sessions shared by a database task's table runs (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[Hashable, Any] = {}
        self._making: dict[Hashable, threading.Lock] = {}
        self._idle: dict[Hashable, list[tuple[float, Any, Callable[[Any], None]]]] = {}
        self._closed = False
        self._releases: dict[Hashable, tuple[Callable[[list[Any]], None], list[Any]]] = {}
        self.counts: Counter[str] = Counter()
        """``lent``, ``kept``, ``closed``: what the sessions did (the tests' and the log's)."""

    @staticmethod
    def quiet(log: Any) -> Any:
        """``log`` as a table run of the task logs: its routine info events at debug (:data:`ROUTINE`)."""
        return QuietLog(log)

    # -- facts -------------------------------------------------------------------------------------

    def get(self, key: Hashable) -> Any | None:
        """The fact kept under ``key`` (None: not known)."""
        with self._lock:
            return self._facts.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._facts[key] = value

    def once(self, key: Hashable, make: Callable[[], T]) -> T:
        """The fact under ``key``, made by ``make`` when not known yet; a run asking while another makes it waits
        for that one (the server is asked once). ``make`` raising keeps nothing: the next to ask makes it."""
        with self._lock:
            if key in self._facts:
                return self._facts[key]  # type: ignore[no-any-return]
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                if key in self._facts:
                    return self._facts[key]  # type: ignore[no-any-return]
            made = make()
            with self._lock:
                self._facts[key] = made
            return made

    # -- releases ----------------------------------------------------------------------------------

    def release_later(self, group: Hashable, item: Any, release: Callable[[list[Any]], None]) -> None:
        """Leave ``item``'s release (a destination's records of the run, once the task's outcome is recorded) to
        :meth:`release_now`, which releases each ``group``'s items at once with ``release(items)``."""
        with self._lock:
            self._releases.setdefault(group, (release, []))[1].append(item)

    def release_now(self) -> list[Exception]:
        """Run the releases left by :meth:`release_later`, each group once (every group is tried); the errors."""
        with self._lock:
            groups = list(self._releases.values())
            self._releases.clear()
        errors: list[Exception] = []
        for release, items in groups:
            try:
                release(items)
            except Exception as exc:
                errors.append(exc)
        return errors

    # -- idle sessions -----------------------------------------------------------------------------

    def lend(self, key: Hashable) -> Any | None:
        """An idle session kept under ``key`` (the newest), None when there is none."""
        stale: list[tuple[float, Any, Callable[[Any], None]]] = []
        lent = None
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                kept_at, conn, close = idle.pop()
                if time.monotonic() - kept_at <= IDLE_S:
                    lent = conn
                    self.counts["lent"] += 1
                    break
                stale.append((kept_at, conn, close))
        _close_all(stale, self.counts)
        return lent

    def keep(self, key: Hashable, conn: Any, close: Callable[[Any], None]) -> None:
        """Keep ``conn`` (idle, as a new session of ``key`` would be) for the next step; closed with ``close``
        when the run has ended or enough are kept."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not self._closed and len(idle) < PER_KEY:
                idle.append((time.monotonic(), conn, close))
                self.counts["kept"] += 1
                return
        _close_all([(0.0, conn, close)], self.counts)

    def close(self) -> None:
        """Close every idle session; sessions given back from now on are closed (until :meth:`reopen`)."""
        with self._lock:
            self._closed = True
            idle = [s for sessions in self._idle.values() for s in sessions]
            self._idle.clear()
        _close_all(idle, self.counts)

    def reopen(self) -> None:
        """Keep idle sessions again (the task's releases, after its run)."""
        with self._lock:
            self._closed = False


def _close_all(sessions: list[tuple[float, Any, Callable[[Any], None]]], counts: Counter[str]) -> None:
    for _, conn, close in sessions:
        counts["closed"] += 1
        try:
            close(conn)
        except Exception:  # a session that will not close cleanly is let go all the same
            pass

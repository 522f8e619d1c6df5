"""``wormhole daemon``: claim pending tasks from the task database and run each in its own process.

The daemon is a scheduler, not an engine: every task runs in a child ``wormhole --task-id N
--claimed-by TOKEN`` (its own session, so a crash or a terminal's Ctrl-C stays there). The daemon
claims a task with the store's one conditional UPDATE under a token unique to that claim, and the
child *adopts* that claim instead of claiming again; several daemons on one task database therefore
never run one task twice. The daemon settles every claim its child left unrecorded (a crash, a kill,
a task database that was away when the child ended): never run, the task is pending again; started,
it is failed (``store.release``; a recurring task waits again for the tick of that run).

Recurring tasks (``settings.schedule``) wait in status ``scheduled`` for ``next_run_at``; once it has passed
the daemon claims one for its tick (``store.claim_tick``, conditional on the task still waiting, so a tick
that comes while a run of the task holds the claim waits for it to end: :mod:`wormhole.schedule`).

The loop never exits on a task database error: it logs ``daemon.taskdb_unreachable``, drops the
connection and tries again after an exponential backoff, while it goes on watching its children.
SIGTERM or SIGINT stops the claiming; running tasks get ``grace_s`` to finish, then SIGTERM (they roll
back and record ``interrupted``), and the daemon exits 0 once they are gone. A second signal ends the
grace period at once.

With ``metrics_port`` it serves Prometheus metrics of its own (:class:`wormhole.metrics.DaemonMetrics`):
tasks claimed, running, and finished by status.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from wormhole import log
from wormhole.config import EngineConf
from wormhole.errors import TaskDbError, WormholeError
from wormhole.metrics import DaemonMetrics, MetricsServer, finished_status, serve
from wormhole.runner import RunRequest
from wormhole.runner.claim import process_token
from wormhole.schedule import due_tick
from wormhole.taskdb import CRASHED, SqlTaskStore, open_store
from wormhole.taskdb.sql import format_ts, utcnow

_T = TypeVar("_T")

TICK_S = 0.1
"""How often the loop looks at its children (a finished task frees its slot within a tick)."""
SETTLE_BUDGET_S = 10.0
"""On the way out, how long unsettled claims may wait for an unreachable task database."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonOptions:
    """What ``wormhole daemon`` was started with (the CLI's options and global options)."""

    task_db: str | None = None
    conf_dir: str | None = None
    log_format: str = "json"
    log_level: str = "info"
    max_tasks: int = 4
    poll_s: float = 2.0
    grace_s: float = 60.0
    heartbeat_s: float = 10.0
    kill_after_s: float = 60.0
    """After the children were sent SIGTERM, how long they may take before SIGKILL."""
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    metrics_port: int | None = None
    """Serve the daemon's Prometheus metrics on this port (0: any free port, logged)."""
    metrics_host: str = "127.0.0.1"
    console: Any = None
    """The operations console's settings (``--http``: :class:`wormhole.web.ConsoleSettings`), None: no console."""
    take_over: bool = True
    """Also take over running tasks whose heartbeat is older than engine.toml's ``claim.stale_s`` (their
    process died with its daemon or its machine) and resume them."""


@dataclass(slots=True)
class Child:
    """One running task: its claim token and its process."""

    task_id: int
    token: str
    proc: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    terminated: bool = False


@dataclass(frozen=True, slots=True)
class Unsettled:
    """A claim to settle once the task database answers (its child ended, maybe unrecorded)."""

    token: str
    exit_code: int
    error: str
    run_status: str


def exit_reason(code: int) -> str:
    if code < 0:
        return f"the task's process was killed by {signal.Signals(-code).name}"
    return f"the task's process exited {code} without recording the task"


class Daemon:
    """Run with :meth:`run`; returns the process exit code."""

    def __init__(self, options: DaemonOptions) -> None:
        self.o = options
        self.host = socket.gethostname()
        self.log: Any = log.get_logger(component="daemon")
        self.children: dict[int, Child] = {}
        self.unsettled: dict[int, Unsettled] = {}
        self.store: SqlTaskStore | None = None
        self.daemon_id = 0
        self.stop = threading.Event()
        self.hurry = threading.Event()
        self.signals: list[str] = []
        self.failures = 0
        self.db_retry_at = 0.0
        self.next_poll = 0.0
        self.next_beat = 0.0
        self._claims = itertools.count(1)
        self.stale_s = 0.0
        self.metrics = DaemonMetrics()
        self._server: MetricsServer | None = None
        self._console: Any = None

    # -- start and stop -----------------------------------------------------------------------------

    def run(self) -> int:
        code = self._start()
        if code:
            return code
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._loop()
            self._drain()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._close_store()
            if self._server is not None:
                self._server.close()
            if self._console is not None:
                self._console.close()
        self.log.info("daemon.stopped", signal=self.signals[0] if self.signals else None)
        return 0

    def _start(self) -> int:
        """Check the configuration and register; a failure here ends the daemon (nothing runs yet)."""
        try:
            # Every child would fail on a broken engine.toml; its claim.stale_s says which tasks lost their process.
            self.stale_s = EngineConf.load(self.o.conf_dir).claim.stale_s
            self.store = open_store(self.o.task_db)
            self.daemon_id = self.store.register_daemon(self.host, os.getpid())
        except WormholeError as exc:
            self.log.error("daemon.not_started", error=str(exc), error_code=exc.code)
            self._close_store()
            return exc.exit_code
        self.log = self.log.bind(daemon_id=self.daemon_id)
        self.log.info("daemon.started", host=self.host, pid=os.getpid(), task_db=self.store.url,
                      max_tasks=self.o.max_tasks, poll_s=self.o.poll_s, grace_s=self.o.grace_s)
        return self._serve_metrics() or self._serve_console()

    def _serve_console(self) -> int:
        if self.o.console is None:
            return 0
        from wormhole.web.server import ConsoleThread

        console = ConsoleThread(self.o.console)
        try:
            port = console.start()
        except OSError as exc:  # asked for and unavailable: say so now rather than run without it
            self.log.error("daemon.console_not_started", host=self.o.console.host, port=self.o.console.port,
                           error=str(exc), error_code="CONSOLE_UNAVAILABLE")
            console.close()
            self._close_store()
            return 203
        self._console = console
        made = self.o.console.tokens.made
        self.log.info("daemon.console_serving", host=self.o.console.host, port=port,
                      token_file=None if made is None else str(made), reads_open=not self.o.console.reads_need_token)
        return 0

    def _serve_metrics(self) -> int:
        if self.o.metrics_port is None:
            return 0
        try:
            self._server = serve(self.metrics.registry, self.o.metrics_host, self.o.metrics_port)
        except OSError as exc:  # asked for and unavailable: say so now rather than run unobserved
            self.log.error("daemon.metrics_not_started", host=self.o.metrics_host, port=self.o.metrics_port,
                           error=str(exc), error_code="METRICS_UNAVAILABLE")
            self._close_store()
            return 203
        self.log.info("daemon.metrics_serving", host=self.o.metrics_host, port=self._server.port)
        return 0

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Only flags here: logging from a handler could deadlock on the log stream's lock.
        self.signals.append(signal.Signals(signum).name)
        if self.stop.is_set():
            self.hurry.set()
        self.stop.set()

    # -- the loop -----------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self.stop.is_set():
            self._tend("running")
            if self._db_ready() and len(self.children) < self.o.max_tasks and time.monotonic() >= self.next_poll:
                self._db(self._claim_some)
                self.next_poll = time.monotonic() + self.o.poll_s
            self.stop.wait(TICK_S)

    def _tend(self, status: str) -> None:
        """What every tick does, running or stopping: reap children, settle claims, heartbeat."""
        if self._reap():
            self.next_poll = 0.0  # a slot is free: look for work now
        if self._db_ready() and self.unsettled:
            self._db(self._settle)
        if self._db_ready() and time.monotonic() >= self.next_beat and self._beat(status):
            self.next_beat = time.monotonic() + self.o.heartbeat_s

    def _beat(self, status: str) -> bool:
        def write(store: SqlTaskStore) -> bool:
            store.heartbeat(self.daemon_id, running_tasks=len(self.children), status=status)
            return True

        return bool(self._db(write))

    def _drain(self) -> None:
        self.log.info("daemon.stopping", signal=self.signals[0] if self.signals else None,
                      running=sorted(self.children), grace_s=self.o.grace_s)
        self.next_beat = 0.0
        self._wait_children(time.monotonic() + self.o.grace_s, stop_early=self.hurry)
        if self.children:
            self._signal_children(signal.SIGTERM)
            self._wait_children(time.monotonic() + self.o.kill_after_s)
        if self.children:
            self._signal_children(signal.SIGKILL)
            self._wait_children(time.monotonic() + 10.0)
        deadline = time.monotonic() + SETTLE_BUDGET_S
        while self.unsettled and time.monotonic() < deadline:
            self._db(self._settle)  # no backoff on the way out: the budget bounds it
            if self.unsettled:
                time.sleep(0.5)
        self._beat("stopped")
        for task_id, claim in self.unsettled.items():
            self.log.error("daemon.claim_unsettled", task_id=task_id, claimed_by=claim.token, error=claim.error)

    def _wait_children(self, deadline: float, stop_early: threading.Event | None = None) -> None:
        self.next_beat = 0.0
        while self.children and time.monotonic() < deadline:
            if stop_early is not None and stop_early.is_set():
                return
            self._tend("stopping")
            time.sleep(TICK_S)

    def _signal_children(self, sig: signal.Signals) -> None:
        self.log.warning("daemon.signalling_tasks", signal=sig.name, task_ids=sorted(self.children))
        for child in self.children.values():
            child.terminated = True
            try:
                child.proc.send_signal(sig)
            except ProcessLookupError:  # it ended meanwhile: reaped on the next tick
                pass

    # -- children -----------------------------------------------------------------------------------

    def _claim_some(self, store: SqlTaskStore) -> None:
        free = self.o.max_tasks - len(self.children)
        # A few more candidates than slots: other daemons may win some of them. Recurring tasks whose tick
        # has come first (a tick is due now; a pending task waits as long as it may).
        now = utcnow()
        candidates: list[tuple[int, str, datetime | None]] = [
            (task_id, "tick", due_tick(expr, waited_for, now, last)) for task_id, expr, waited_for, last
            in store.due(free + 8)]
        candidates += [(task_id, "pending", None) for task_id in store.pending(free + 8)]
        if self.o.take_over and len(candidates) < free:
            candidates += [(task_id, "stale", None) for task_id in store.stale(free + 8, self.stale_s)]
        for task_id, kind, tick in candidates:
            if free == 0:
                break
            if task_id in self.children:
                continue  # our own child, late with its heartbeat: never taken from it
            token = f"{process_token()}/daemon-{self.daemon_id}/{next(self._claims)}"
            # Noted before the claim: an answer lost on the wire leaves a claim to settle, not a stuck task.
            self.unsettled[task_id] = Unsettled(token, 0, "the daemon lost track of its claim", "failed")
            if not self._claim(store, task_id, token, kind, tick):
                del self.unsettled[task_id]
                continue
            self.metrics.claimed.inc()
            if self._spawn(task_id, token):
                del self.unsettled[task_id]
                free -= 1

    def _claim(self, store: SqlTaskStore, task_id: int, token: str, kind: str, tick: datetime | None) -> bool:
        if kind == "tick" and tick is not None:
            # Conditional on the task still waiting: a run of it in progress is never joined by a second.
            if store.claim_tick(task_id, token, tick):
                self.log.info("daemon.claimed", task_id=task_id, claimed_by=token, tick=format_ts(tick))
                return True
            return False
        if kind == "pending":
            if store.claim(task_id, token):
                self.log.info("daemon.claimed", task_id=task_id, claimed_by=token)
                return True
            return False
        # The child adopts the claim and resumes the crashed run (take_over ended it 'crashed').
        crashed = store.take_over(task_id, token, self.stale_s)
        if crashed is None:
            return False
        self.log.warning("daemon.taken_over", task_id=task_id, claimed_by=token, crashed_run=crashed or None,
                         stale_s=self.stale_s)
        return True

    def _spawn(self, task_id: int, token: str) -> bool:
        command = RunRequest(task_id, self.o.task_db, self.o.conf_dir, adopt=token).child_argv()
        try:
            # Own session: a Ctrl-C at the daemon's terminal reaches the daemon, which decides.
            proc = subprocess.Popen(command, env=self._child_env(), stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            self.log.error("daemon.spawn_failed", task_id=task_id, error=str(exc))
            self.unsettled[task_id] = Unsettled(token, -1, f"cannot start the task's process: {exc}", "failed")
            return False
        self.children[task_id] = Child(task_id, token, proc)
        self.metrics.running.set(len(self.children))
        self.log.info("daemon.task_started", task_id=task_id, pid=proc.pid, running=len(self.children))
        return True

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The URL goes by environment, not argv: a password in argv shows in every `ps`.
        for key, value in (("WORMHOLE_TASK_DB", self.o.task_db), ("WORMHOLE_CONF", self.o.conf_dir),
                           ("WORMHOLE_LOG_FORMAT", self.o.log_format), ("WORMHOLE_LOG_LEVEL", self.o.log_level)):
            if value is not None:
                env[key] = value
        env["WORMHOLE_PROGRESS"] = "plain"  # the children share the daemon's stderr: no live displays there
        return env

    def _reap(self) -> bool:
        ended = [c for c in self.children.values() if c.proc.poll() is not None]
        for child in ended:
            del self.children[child.task_id]
            code = int(child.proc.returncode)
            self.log.info("daemon.task_finished", task_id=child.task_id, exit_code=code,
                          duration_s=round(time.monotonic() - child.started, 3),
                          signal=signal.Signals(-code).name if code < 0 else None)
            self.metrics.finished.labels(finished_status(code, interrupted=child.terminated)).inc()
            self.metrics.running.set(len(self.children))
            # A child that ended without recording its run crashed: the run stays resumable (the next
            # run of the task takes up what each destination already holds).
            run_status = "interrupted" if child.terminated else CRASHED
            self.unsettled[child.task_id] = Unsettled(child.token, code, exit_reason(code), run_status)
        return bool(ended)

    def _settle(self, store: SqlTaskStore) -> None:
        for task_id, claim in list(self.unsettled.items()):
            if task_id in self.children:
                continue
            status = store.release(task_id, claim.token, exit_code=claim.exit_code, error=claim.error,
                                   run_status=claim.run_status)
            del self.unsettled[task_id]
            if status is not None:
                self.log.warning("daemon.claim_released", task_id=task_id, status=status, claimed_by=claim.token,
                                 exit_code=claim.exit_code, error=claim.error)

    # -- the task database --------------------------------------------------------------------------

    def _db_ready(self) -> bool:
        return time.monotonic() >= self.db_retry_at

    def _db(self, work: Callable[[SqlTaskStore], _T]) -> _T | None:
        """``work`` on the store, reconnecting first if needed; None (and a backoff) when it fails."""
        try:
            if self.store is None:
                self.store = open_store(self.o.task_db)
            result = work(self.store)
        except TaskDbError as exc:
            self._unreachable(exc)
            return None
        if self.failures:
            self.log.info("daemon.taskdb_reachable", after_failures=self.failures)
            self.failures = 0
        return result

    def _unreachable(self, exc: TaskDbError) -> None:
        self.failures += 1
        wait = min(self.o.max_backoff_s, self.o.backoff_s * 2 ** min(self.failures - 1, 16))
        self.db_retry_at = time.monotonic() + wait
        self.log.warning("daemon.taskdb_unreachable", error=str(exc), attempt=self.failures, retry_in_s=wait,
                         running=len(self.children))
        self._close_store()

    def _close_store(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

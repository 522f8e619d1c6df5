"""What watches a run besides the log: the live display on a terminal and the metrics endpoint.

Both are progress listeners handed to the Engine; rich and prometheus_client are imported only
when one is wanted. Options: ``--progress auto|tty|plain`` and ``--metrics-port/-host/-hold-s``,
given before the subcommand (``wormhole --task-id N``) or after ``run``.

With the live display the log is diverted (:class:`wormhole.progress.TerminalLog`): the screen shows
the plan, warnings and errors, then an outcome table; every event goes to ``var/logs/task-<id>-run-<id>.jsonl``.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wormhole import log
from wormhole.cli.common import LOG_STREAM, CliState, set_state
from wormhole.monitor import ProgressListener

if TYPE_CHECKING:
    from wormhole.metrics import MetricsServer, RunMetrics
    from wormhole.progress import TerminalLog, TtyProgress
    from wormhole.task_spec import TaskSpec

LOG_DIR = Path("var/logs")
"""Where a run with the live display keeps its full log, relative to the working directory (as
``paths.dirty_dir``'s default is)."""

PROGRESS_HELP = "auto: a live display when stderr is a terminal; tty: always; plain: log lines only."
PORT_HELP = "Serve Prometheus metrics on this port (0: any free port, logged) while the task runs."
HOST_HELP = "Address the metrics endpoint listens on."
HOLD_HELP = "Keep serving the metrics this long after the run, so a scraper reads the final values."
PORT_TYPE = click.IntRange(0, 65535)
HOLD_TYPE = click.FloatRange(0, 86_400)


@dataclass(frozen=True, slots=True)
class ObserveOptions:
    progress: str = "auto"
    log_format: str = "auto"
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    metrics_hold_s: float = 0.0

    @classmethod
    def of(cls, state: CliState) -> ObserveOptions:
        return cls(progress=state.progress, log_format=state.log_format, metrics_port=state.metrics_port,
                   metrics_host=state.metrics_host, metrics_hold_s=state.metrics_hold_s)


def root_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The root group's options (they go with ``--task-id``; ``run`` takes them after it too)."""
    options = (
        click.option("--progress", type=click.Choice(["auto", "tty", "plain"]), default="auto",
                     envvar="WORMHOLE_PROGRESS", show_default=True, help=PROGRESS_HELP),
        click.option("--metrics-port", type=PORT_TYPE, metavar="PORT", help=PORT_HELP),
        click.option("--metrics-host", default="127.0.0.1", show_default=True, metavar="HOST", help=HOST_HELP),
        click.option("--metrics-hold-s", type=HOLD_TYPE, default=0.0, show_default=True, help=HOLD_HELP),
    )
    for option in reversed(options):
        command = option(command)
    return command


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The same options after ``run``: each overrides the one given before the subcommand."""
    options = (
        click.option("--progress", type=click.Choice(["auto", "tty", "plain"]), expose_value=False,
                     callback=set_state("progress"), help=PROGRESS_HELP),
        click.option("--metrics-port", type=PORT_TYPE, metavar="PORT", expose_value=False,
                     callback=set_state("metrics_port"), help=PORT_HELP),
        click.option("--metrics-host", metavar="HOST", expose_value=False, callback=set_state("metrics_host"),
                     help=HOST_HELP),
        click.option("--metrics-hold-s", type=HOLD_TYPE, expose_value=False, callback=set_state("metrics_hold_s"),
                     help=HOLD_HELP),
    )
    for option in reversed(options):
        command = option(command)
    return command


class Observers:
    """The display and the metrics endpoint of one ``run_task``."""

    def __init__(self, options: ObserveOptions, task_id: int | None, logger: Any) -> None:
        self.options = options
        self._task_id = task_id
        self._log = logger
        self._metrics: RunMetrics | None = None
        self._server: MetricsServer | None = None
        self._terminal: TerminalLog | None = None
        self._outcome_shown = False

    def for_task(self, task_id: int, logger: Any) -> None:
        """The task these observers watch, once it is recorded (``run FILE`` serves before it records)."""
        self._task_id = task_id
        self._log = logger
        if self._metrics is not None:
            self._metrics.task_id = task_id

    def start(self) -> bool:
        """Serve the metrics when asked (once: a second call keeps the endpoint); False (logged) when
        the port cannot be had. With the live display, divert the log from now on."""
        if not self._serve():
            return False
        if self._terminal is None and self._live():
            from wormhole.progress import TerminalLog

            fmt = self.options.log_format
            self._terminal = TerminalLog(compact=fmt == "console" or (fmt == "auto" and sys.stderr.isatty()))
            log.divert(self._terminal)
        return True

    def for_run(self, run_id: int) -> None:
        """The run has its id: the diverted log goes to its file from now on."""
        if self._terminal is None or self._terminal.path is not None:
            return
        path = LOG_DIR / f"task-{self._task_id}-run-{run_id}.jsonl"
        problem = self._terminal.open(path)
        if problem is not None:
            self._log.warning("log.file_not_written", path=str(path), error=problem)

    def show_outcome(self, status: str, exit_code: int, result: dict[str, Any], spec: TaskSpec) -> None:
        """The outcome table, under the display's last frame, and where the full log is."""
        if self._terminal is None or self._task_id is None:
            return
        from wormhole.progress import outcome_lines, output_of

        outputs = {d.id: output_of(d.options) for d in spec.destinations}
        lines = outcome_lines(self._task_id, status, exit_code, result, outputs)
        if self._terminal.path is not None:
            lines.append(f"full log: {self._terminal.path}")
        click.echo("\n".join(lines), err=True)
        self._outcome_shown = True

    def _serve(self) -> bool:
        o = self.options
        if o.metrics_port is None or self._server is not None:
            return True
        from wormhole.metrics import RunMetrics, serve

        self._metrics = RunMetrics(self._task_id)
        try:
            self._server = serve(self._metrics.registry, o.metrics_host, o.metrics_port)
        except OSError as exc:
            self._log.error("metrics.not_started", host=o.metrics_host, port=o.metrics_port, error=str(exc),
                            error_code="METRICS_UNAVAILABLE")
            return False
        self._log.info("metrics.serving", host=o.metrics_host, port=self._server.port)
        return True

    def set_state(self, state: str) -> None:
        if self._metrics is not None:
            self._metrics.state = state

    @contextmanager
    def watching(self) -> Iterator[list[ProgressListener]]:
        """The listeners of the Engine's run; log lines go above a live display while it shows."""
        listeners: list[ProgressListener] = [self._metrics] if self._metrics is not None else []
        display = self._display()
        if display is None:
            yield listeners
            return
        display.start()
        LOG_STREAM.target = display
        try:
            yield [*listeners, display]
        finally:
            LOG_STREAM.target = None
            display.stop()

    def _live(self) -> bool:
        mode = self.options.progress
        return mode == "tty" or (mode == "auto" and sys.stderr.isatty())

    def _display(self) -> TtyProgress | None:
        mode = self.options.progress
        if not self._live():
            return None
        from wormhole.progress import TtyProgress

        return TtyProgress(sys.stderr, force=mode == "tty")

    def close(self, *, hold: bool = True) -> None:
        """Hold the endpoint for ``--metrics-hold-s`` (SIGTERM/SIGINT end it early), then close it; the
        log is rendered to the stream again."""
        self._close_server(hold)
        if self._terminal is None:
            return
        log.divert(None)
        self._terminal.close()
        if not self._outcome_shown and self._terminal.path is not None:
            click.echo(f"full log: {self._terminal.path}", err=True)
        self._terminal = None

    def _close_server(self, hold: bool) -> None:
        if self._server is None:
            return
        seconds = self.options.metrics_hold_s if hold else 0.0
        if seconds > 0:
            done = threading.Event()
            previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
            self._log.info("metrics.holding", seconds=seconds, port=self._server.port)
            try:
                done.wait(seconds)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        self._server.close()
        self._server = None


"""structlog set-up: JSON lines by default, a console renderer on a TTY, and secret redaction.

``configure()`` is called by the CLI (and tests), never at import. Every secret key (the one rule of
:mod:`wormhole.redaction`) has its value replaced by ``***`` wherever it appears in an event, nested
mappings included. While a live display shows (:func:`divert`), every event is handed, redacted, to
the display's log instead of being rendered to the stream: it keeps them all and shows a few.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, MutableMapping
from typing import Any, TextIO

import structlog
from structlog.typing import FilteringBoundLogger

from wormhole.redaction import MASK, is_secret_key, redact

Logger = FilteringBoundLogger
"""What :func:`get_logger` returns and what the engine passes around: a bound structlog logger."""


def redact_secrets(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: every secret key's value, at any depth, as ``***`` (the rule: :mod:`wormhole.redaction`)."""
    for key in list(event):
        event[key] = MASK if is_secret_key(key) else redact(event[key])
    return event


Event = MutableMapping[str, Any]
Render = Callable[[Event], str]
Diversion = Callable[[Event, Render], str | None]
"""Takes every event (after redaction) and the configured renderer; returns the text for the stream,
or None to write nothing there."""

_JSON = structlog.processors.JSONRenderer()


def json_line(event: Event) -> str:
    """An event as the JSON line written off a terminal."""
    return str(_JSON(None, "", event))


class _Router:
    """The last processor: the configured renderer, unless a diversion is set (looked up per event, so
    loggers bound before a live display started are diverted too)."""

    diversion: Diversion | None = None

    def __init__(self, renderer: Any) -> None:
        self._renderer = renderer

    def __call__(self, logger: Any, method: str, event: Event) -> str:
        diversion = _Router.diversion
        if diversion is None:
            return str(self._renderer(logger, method, event))
        text = diversion(event, lambda e: str(self._renderer(logger, method, e)))
        if text is None:
            raise structlog.DropEvent
        return text


def divert(diversion: Diversion | None) -> None:
    """Hand every event to ``diversion`` from now on (None: render to the stream again)."""
    _Router.diversion = diversion


def configure(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Log to ``stream`` (stderr): ``json``, ``console``, or ``auto`` (console on a TTY)."""
    stream = stream or sys.stderr
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
    renderer: Any = structlog.dev.ConsoleRenderer(colors=False) if console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            structlog.processors.format_exc_info,
            _Router(renderer),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        # One write per line (print() writes the newline apart): the daemon's task processes share
        # its stream, and another process's line must never land between a line and its newline.
        logger_factory=structlog.WriteLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )


def ensure_configured() -> None:
    """A process nobody configured (a Spark executor's Python worker) logs JSON lines to stderr,
    never structlog's default console lines on stdout."""
    if not structlog.is_configured():
        configure("json", "info")


def get_logger(**bound: Any) -> Logger:
    logger: Logger = structlog.get_logger("wormhole")
    return logger.bind(**bound)

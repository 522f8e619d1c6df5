"""structlog set-up: JSON lines by default, a console renderer on a TTY, and secret redaction.

``configure()`` is called by the CLI (and tests), never at import. Every secret key (the one rule of
:mod:`wormhole.redaction`) has its value replaced by ``***`` wherever it appears in an event, nested
mappings included.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
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
            renderer,
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

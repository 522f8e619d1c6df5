"""structlog set-up: JSON lines by default, a console renderer on a TTY, and secret redaction.

``configure()`` is called by the CLI (and tests), never at import. Every key that looks like a
secret is replaced by ``***`` wherever it appears in an event, nested mappings included.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog
from structlog.typing import FilteringBoundLogger

Logger = FilteringBoundLogger
"""What :func:`get_logger` returns and what the engine passes around: a bound structlog logger."""

SECRET_KEY = re.compile(r"pass(word|wd)?($|_)|secret|token|credential|api_?key|private_?key", re.IGNORECASE)
"""Keys whose values are never logged, printed (``task show``) nor echoed in validation messages."""


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key))


def redact(value: Any) -> Any:
    """``value`` (a JSON-like document) with the value of every secret-looking key replaced by ``***``."""
    return _redact_value(value)


def _redact_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "***" if isinstance(k, str) and SECRET_KEY.search(k) else _redact_value(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_value(v) for v in value]
    return value


def redact_secrets(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if SECRET_KEY.search(key):
            event[key] = "***"
        else:
            event[key] = _redact_value(event[key])
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

"""Crash points: a seam for tests that kill (or pause) a run at an exact step of its recovery protocol.

The run reaches named points (``before_seal``/``after_seal`` of a split, ``before_commit``/
``after_commit`` of a destination) and tells the installed :class:`CrashPoints`; by default nobody
listens, at no cost. A test entry point (``tests/crash_entry.py``) installs one before it calls the
CLI, so the product itself never reads a test's setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from wormhole.log import Logger


class CrashPoints(Protocol):
    def reached(self, point: str, destination: str, split_id: str | None) -> None:
        """The run reached ``point`` for ``destination`` (and ``split_id``, at a split's points)."""


class NoCrash:
    def reached(self, point: str, destination: str, split_id: str | None) -> None:
        pass


_factory: Callable[[Logger], CrashPoints] | None = None


def install(factory: Callable[[Logger], CrashPoints] | None) -> None:
    """Every run made after this reports its points to ``factory(log)`` (None: to nobody)."""
    global _factory
    _factory = factory


def crash_points(log: Logger) -> CrashPoints:
    """The crash points of a run (its write side's log): the installed ones, else a no-op."""
    return _factory(log) if _factory is not None else NoCrash()

"""Engine parameters of the transforms (``[pushup]`` in conf/engine.toml)."""

from __future__ import annotations

from dataclasses import dataclass

from wormhole.options import opt


@dataclass(frozen=True, slots=True, kw_only=True)
class PushUpConf:
    """Adaptive push-up (``settings.pushup = adaptive``): :mod:`wormhole.transform.pushup`."""

    interval_s: float = opt(0.5, min=0.01)
    """How often the scheduler takes the reader threads' snapshots and decides."""
    min_rows: int = opt(20_000, min=1)
    """Rows an operator must have seen before its selectivity is trusted."""
    min_selectivity: float = opt(1.25, min=1.0)
    """A filter moves into the source only when rows in / rows out reaches this (1.25: it drops 20 %)."""
    busy_threads: int = opt(8, min=0)
    """The source is busy (nothing moves in, and what did moves out) when more than this many of its
    threads run queries besides the task's own readers (MySQL's Threads_running)."""

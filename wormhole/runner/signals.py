"""SIGTERM and SIGINT stop a running engine (it rolls back and records ``interrupted``)."""

from __future__ import annotations

import signal
import threading
from typing import Any, Protocol


class Stoppable(Protocol):
    def stop(self, reason: str) -> None: ...


def install_signal_handlers(engine: Stoppable, logger: Any) -> dict[int, Any]:
    previous: dict[int, Any] = {}

    def stop(name: str) -> None:
        logger.warning("task.signal_received", signal=name)
        engine.stop(f"interrupted by {name}")

    def handler(signum: int, _frame: Any) -> None:
        # The handler runs on the main thread between two bytecodes, maybe while that thread holds the
        # log stream's lock or an Event's: logging or stopping from here could deadlock on it. A thread
        # of its own waits for those locks instead.
        threading.Thread(target=stop, args=(signal.Signals(signum).name,), daemon=True,
                         name="signal-stop").start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    return previous


def restore_signal_handlers(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)

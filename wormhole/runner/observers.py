"""What the runner tells the ones watching a run (the CLI's live display and metrics endpoint)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from wormhole.config import TaskSpec
from wormhole.monitor import ProgressListener


class RunObservers(Protocol):
    """What the runner tells the ones watching the run (the CLI's display and metrics endpoint)."""

    def start(self) -> bool:
        """Start watching; False (logged) when they cannot (a metrics port in use)."""

    def for_run(self, run_id: int) -> None: ...

    def set_state(self, state: str) -> None: ...

    def watching(self) -> AbstractContextManager[list[ProgressListener]]:
        """The listeners of the Engine's run, for as long as it runs."""

    def show_outcome(self, status: str, exit_code: int, result: dict[str, Any], spec: TaskSpec) -> None: ...

    def close(self, *, hold: bool = True) -> None: ...

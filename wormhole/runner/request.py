"""What the CLI hands the runner: a finished request to run one task (:class:`RunRequest`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What the CLI asks the runner to run: a task of a task database, under a claim of its own or adopted."""

    task_id: int
    task_db: str | None
    """The task database's URL (None: the default one)."""
    conf_dir: str | None
    """Where engine.toml is (None: the default)."""
    adopt: str | None = None
    """Run under this claim token, already taken (a daemon's child), instead of claiming the task."""

    def child_argv(self) -> list[str]:
        """The command that runs this request in a process of its own (the task database and the conf
        directory go by environment: a password in argv shows in every ``ps``)."""
        adopting = ["--claimed-by", self.adopt] if self.adopt is not None else []
        return [sys.executable, "-m", "wormhole", "--task-id", str(self.task_id), *adopting]

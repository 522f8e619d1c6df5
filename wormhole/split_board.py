"""SplitBoard: the splits of a local run by task group, handed to reader threads one at a time.

A group's channels take the group's own splits in the planned order (so concurrent readers load
different resources, as planned). A channel whose group has nothing left takes the last split of
the group with the most left: a slow shard never leaves threads idle (DataX's task groups wait).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

from wormhole.planning.assign import TaskGroup
from wormhole.plugins.base import Split


class SplitBoard:
    def __init__(self, splits: Sequence[Split], groups: Sequence[TaskGroup]) -> None:
        by_id = {s.id: s for s in splits}
        self._queues = {g.id: deque(by_id[i] for i in g.splits) for g in groups}
        self._lock = threading.Lock()

    def take(self, group: int) -> tuple[Split, int] | None:
        """The next split for a channel of ``group`` and the group it was planned for; None at the end."""
        with self._lock:
            own = self._queues[group]
            if own:
                return own.popleft(), group
            victim = max(self._queues, key=lambda g: len(self._queues[g]))
            if not self._queues[victim]:
                return None
            return self._queues[victim].pop(), victim

    @property
    def remaining(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

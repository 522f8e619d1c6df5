"""Splits to task groups, as DataX's JobAssignUtil does it (assignFairly, doAssign,
adjustChannelNumPerTaskGroup), so concurrent channels load different databases.

1. groups = ceil(channels / channels_per_task_group);
2. the splits are bucketed by resource mark in first-seen order: the reader's marks, or the
   writer's when those have more distinct values;
3. round-robin over the buckets, taking each bucket's head in turn, the i-th split taken goes to
   group ``i mod groups``;
4. the channels are spread over the groups: the first ``channels mod groups`` get one more.

One deliberate difference: DataX shuffles unmarked tasks randomly; here every split has a mark
and the order is deterministic, so ``wormhole plan`` shows exactly what a run will do.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TaskGroup:
    id: int
    channels: int
    splits: tuple[str, ...]
    """Split ids in the order the group's channels take them."""


def task_group_count(channels: int, channels_per_task_group: int) -> int:
    return max(math.ceil(channels / channels_per_task_group), 1)


def resource_buckets(reader_marks: Sequence[Hashable], writer_marks: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """Task indexes by resource mark (parseAndGetResourceMarkAndTaskIdMap): the reader's buckets
    unless the writer's marks have more distinct values."""
    readers: dict[Hashable, list[int]] = {}
    writers: dict[Hashable, list[int]] = {}
    for index, (reader_mark, writer_mark) in enumerate(zip(reader_marks, writer_marks, strict=True)):
        readers.setdefault(reader_mark, []).append(index)
        writers.setdefault(writer_mark, []).append(index)
    return readers if len(readers) >= len(writers) else writers


def do_assign(buckets: dict[Hashable, list[int]], groups: int) -> list[list[int]]:
    """Round-robin over the buckets' heads; the i-th task taken goes to group ``i mod groups``."""
    assigned: list[list[int]] = [[] for _ in range(groups)]
    queues = [list(tasks) for tasks in buckets.values()]
    longest = max((len(q) for q in queues), default=0)
    taken = 0
    for round_ in range(longest):
        for queue in queues:
            if round_ < len(queue):
                assigned[taken % groups].append(queue[round_])
                taken += 1
    return assigned


def channels_per_group(channels: int, groups: int) -> list[int]:
    """adjustChannelNumPerTaskGroup: the first ``channels mod groups`` groups get one more."""
    average, remainder = divmod(channels, groups)
    return [average + 1 if i < remainder else average for i in range(groups)]


def assign_fairly(split_ids: Sequence[str], reader_marks: Sequence[Hashable], writer_marks: Sequence[Hashable],
                  channels: int, channels_per_task_group: int) -> list[TaskGroup]:
    """The task groups of a run (see the module docstring)."""
    groups = task_group_count(channels, channels_per_task_group)
    assigned = do_assign(resource_buckets(reader_marks, writer_marks), groups)
    return [TaskGroup(id=i, channels=c, splits=tuple(split_ids[t] for t in tasks))
            for i, (c, tasks) in enumerate(zip(channels_per_group(channels, groups), assigned, strict=True))]


def dispatch_order(groups: Sequence[TaskGroup]) -> list[str]:
    """The split ids interleaved across groups (each group's first, then each one's second...): the
    order in which engines that run splits from one list (Spark's partitions) start them, so the
    first ones running load different resources as the groups do."""
    longest = max((len(g.splits) for g in groups), default=0)
    return [g.splits[i] for i in range(longest) for g in groups if i < len(g.splits)]

"""A side read by a task's last plan (``wormhole verify --task-id N``, the in-run locating of a mismatch): the
plan's splits, plus the splits that read the rows none of them reads, and which split each difference is in.

A plan's key ranges are the source's when it was cut (a SQL store's ``split_pk`` from its MIN to its MAX then),
so the source as it is now may hold rows none of its splits reads: above the last range, below the first,
between two, or with a NULL key where the plan has no ``IS NULL`` split (a file added since, for a store whose
splits are files). Those are read too (:func:`outside_splits`), and their differences counted as
:data:`OUTSIDE` the plan's splits, never blamed on one of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wormhole.plugins import registry
from wormhole.plugins.base import ReadContext, Split
from wormhole.task_spec import SourceSpec

OUTSIDE = "outside the run's splits"
"""Where ``splits.differing`` counts the differing keys of the left side's rows that no split of the given plan
reads (rows the source gained beyond the key range the plan was cut from)."""


def outside_splits(source: SourceSpec, ctx: ReadContext, plan: Sequence[Split], readers: int) -> list[Split]:
    """The splits reading the rows of ``source`` that no split of ``plan`` (cut earlier) reads: its splitter's
    ``outside`` (a SQL store: the rows beyond the plan's key ranges), else the splits it cuts now whose ids the
    plan has none of (a file added since)."""
    splitter = registry.source(source.plugin).splitter(source.options, ctx)
    outside = getattr(splitter, "outside", None)
    if outside is not None:
        return list(outside(plan))
    known = {s.id for s in plan}
    return [s for s in splitter.split(readers) if s.id not in known]


def by_split(probe: np.ndarray, where: np.ndarray, found: Mapping[str, np.ndarray], splits: Sequence[Split],
             planned: int) -> tuple[dict[str, dict[str, int]], tuple[str, int] | None]:
    """Split id -> differences per kind, for the splits of the left side holding differing keys (``probe``: its
    rows' key hashes, or row hashes without a key; ``where``: the index in ``splits`` of each row's); the keys
    only the right side holds under ``""``, those of the rows read by the splits past the first ``planned``
    (the plan's) under :data:`OUTSIDE`. With them, the first difference outside (kind, hash)."""
    names = [s.id if i < planned else OUTSIDE for i, s in enumerate(splits)]
    order = np.argsort(probe, kind="stable")
    ordered = probe[order]
    out: dict[str, dict[str, int]] = {}
    first: tuple[str, int] | None = None
    for kind, hashes in found.items():
        if not hashes.size:
            continue
        at = np.searchsorted(ordered, hashes)
        held = (at < ordered.size) & (ordered[np.minimum(at, ordered.size - 1)] == hashes)
        for h, index in zip(hashes[held].tolist(), where[order[at[held]]].tolist(), strict=True):
            tally = out.setdefault(names[index], {})
            tally[kind] = tally.get(kind, 0) + 1
            if first is None and index >= planned:
                first = (kind, int(h))
        if (~held).any():
            tally = out.setdefault("", {})
            tally[kind] = tally.get(kind, 0) + int((~held).sum())
    return out, first


def report(where: np.ndarray, planned: int, differing: Mapping[str, Mapping[str, int]],
           sample: Mapping[str, Any] | None) -> dict[str, Any]:
    """``Comparison.splits``: the plan's splits read, the rows read outside them (``where``: each row's split,
    by index; ``sample``: a difference among them, as ``samples`` shows one), and the differences per split."""
    outside = {"rows": int((where >= planned).sum()), **({"sample": dict(sample)} if sample else {})}
    return {"read": planned, "outside": outside, "differing": dict(differing)}

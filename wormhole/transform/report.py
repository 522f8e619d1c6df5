"""The ``transforms`` section of a run's result: chains, operator metrics, and each split's placement."""

from __future__ import annotations

from typing import Any

from wormhole.transform.chain import ChainRunner
from wormhole.transform.pushup import total


def _stats(runners: list[ChainRunner]) -> dict[str, dict[str, Any]]:
    return {op_id: s.to_dict() for op_id, s in total([r.snapshot() for r in runners]).items()}


def transform_report(readers: Any, writers: Any) -> dict[str, Any] | None:
    """None when the task has no transforms (the key is left out of the result)."""
    plan = writers.transforms
    if plan is None:
        return None
    pushup = readers.pushup
    runners: list[ChainRunner] = list(readers.runners)
    for dest in writers.destinations.values():
        runners.extend(dest.runners)
    out: dict[str, Any] = {
        "pushup": plan.mode,
        "operators": [{"id": op.id, "kind": op.kind, "path": op.spec.path} for op in plan.task_ops]
        + [{"id": op.id, "kind": op.kind, "path": op.spec.path} for ops in plan.destinations.values() for op in ops],
        "metrics": _stats(runners),
    }
    if pushup is not None:
        out["placements"] = dict(pushup.placements)
        out["splits"] = dict(sorted(pushup.splits.items()))
        out["moves"] = list(pushup.moves)
        out["reproduced"] = sorted(pushup.reproduced)
    return out

"""The ``transforms`` section of a run's result: chains, operator metrics, and each split's placement."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from wormhole.transform.chain import ChainRunner
from wormhole.transform.plan import TransformPlan
from wormhole.transform.pushup import PushUp, total


def _stats(runners: list[ChainRunner]) -> dict[str, dict[str, Any]]:
    return {op_id: s.to_dict() for op_id, s in total([r.snapshot() for r in runners]).items()}


class RunsChains(Protocol):
    """A destination of the run: its writer threads' chain runners."""

    @property
    def runners(self) -> list[ChainRunner]: ...


def transform_report(plan: TransformPlan | None, pushup: PushUp | None,
                     destinations: Iterable[RunsChains]) -> dict[str, Any] | None:
    """None when the task has no transforms (the key is left out of the result). ``pushup``: the
    placements of a local run (None in Spark mode), whose reader threads' runners it holds."""
    if plan is None:
        return None
    runners = [*(pushup.runners if pushup is not None else ()), *(r for d in destinations for r in d.runners)]
    out: dict[str, Any] = {
        "pushup": plan.mode,
        "operators": [op.describe() for ops in (plan.task_ops, *plan.destinations.values()) for op in ops],
        "metrics": _stats(runners),
    }
    if pushup is not None:
        out["placements"] = dict(pushup.placements)
        out["splits"] = dict(sorted(pushup.splits.items()))
        out["moves"] = list(pushup.moves)
        out["reproduced"] = sorted(pushup.reproduced)
    return out

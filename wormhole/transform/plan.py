"""The transform plan of a run: operators bound to the source schema, chains, and what the source can take.

Placement: the task's operators form *ordering groups*: a run of adjacent operators that commute
(filters) is one group, every other operator a group of its own. A placement pushes whole groups
from the front, then any subset of the next group's operators, into the source query; only operators
whose SQL form the source's dialect evaluates exactly (:meth:`~.operators.base.Operator.sql`: filters
and projections) can go. The rest of the task's operators run as one chain in the reader threads;
each destination's run as one chain in its writers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from wormhole.errors import InvalidTaskConfig
from wormhole.options import Problems
from wormhole.plugins.base import PushedQuery, Schema
from wormhole.task_spec import TaskSpec
from wormhole.transform.chain import Chain
from wormhole.transform.operators import BoundOp, SourcePart, bind_task
from wormhole.transform.sqlgen import Dialect, NotPushable, SqlText

Placement = tuple[int, ...]
"""Indices of the task's operators that run inside the source query, in the order they run there."""


@dataclass(frozen=True, slots=True)
class TransformPlan:
    source: Schema
    task_ops: tuple[BoundOp, ...]
    destinations: dict[str, tuple[BoundOp, ...]]
    dialect: Dialect | None
    mode: Literal["off", "static", "adaptive"]
    groups: tuple[tuple[int, ...], ...]
    pushable: frozenset[int]
    _parts: dict[int, SourcePart] = field(default_factory=dict)
    """Each pushable operator's share of the source query."""
    _why: dict[int, str] = field(default_factory=dict)
    """Why each other operator is not pushable."""

    @property
    def task_output(self) -> Schema:
        return self.task_ops[-1].output if self.task_ops else self.source

    def destination_chain(self, dest_id: str) -> Chain:
        ops = self.destinations.get(dest_id, ())
        return Chain(f"destination:{dest_id}", ops, self.task_output)

    def destination_schema(self, dest_id: str) -> Schema:
        return self.destination_chain(dest_id).output

    # -- placements --------------------------------------------------------------------------

    def widest(self) -> Placement:
        """Every operator the source can take, in order (``static`` push-down)."""
        out: list[int] = []
        for group in self.groups:
            taken = [i for i in group if i in self.pushable]
            out.extend(taken)
            if len(taken) < len(group):
                break
        return tuple(out)

    def initial(self) -> Placement:
        return self.widest() if self.mode == "static" else ()

    def residual(self, placement: Placement) -> Chain:
        """The task's operators that run in the reader threads under ``placement``."""
        pushed = set(placement)
        schema = self.source
        for i in placement:
            if self._parts[i].keep is not None:
                schema = self.task_ops[i].output
        return Chain("task", tuple(op for i, op in enumerate(self.task_ops) if i not in pushed), schema)

    def pushed_query(self, placement: Placement) -> PushedQuery | None:
        if not placement:
            return None
        keep = tuple(range(len(self.source)))
        wheres: list[SqlText] = []
        for i in placement:
            part = self._parts[i]
            if part.keep is not None:
                keep = tuple(keep[k] for k in part.keep)
            if part.where is not None:
                wheres.append(part.where)
        where = " AND ".join(w.text for w in wheres) or None
        args = tuple(a for w in wheres for a in w.args)
        return PushedQuery(keep=keep, where=where, args=args, plan=placement_id(self, placement))

    def describe(self, placement: Placement) -> dict[str, Any]:
        """What ``wormhole plan`` and the run's log show: chains, their operators, and the push-down."""
        pushed = self.pushed_query(placement)
        chains = [self.residual(placement).describe()] + [self.destination_chain(d).describe()
                                                         for d in self.destinations if self.destinations[d]]
        out: dict[str, Any] = {
            "pushup": self.mode, "dialect": self.dialect,
            "source_chain": {"placement": "source", "operators": [self.task_ops[i].describe() for i in placement]},
            "chains": chains,
            "not_pushable": {self.task_ops[i].id: why for i, why in sorted(self._why.items())},
        }
        if pushed is not None:
            out["source_query"] = {"where": pushed.render("?"), "columns": [self.source.names[k] for k in pushed.keep],
                                   "args": len(pushed.args)}
        return out


def placement_id(plan: TransformPlan, placement: Placement) -> str:
    if not placement:
        return "none"
    text = ",".join(plan.task_ops[i].id for i in placement)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def build_plan(spec: TaskSpec, source: Schema, dialect: Dialect | None) -> TransformPlan:
    """Bind every operator (the task's to the source schema, each destination's to the task's output);
    InvalidTaskConfig lists every problem, each with its transform path."""
    problems = Problems()
    task_ops, destinations = bind_task(spec.transforms, {d.id: d.transforms for d in spec.destinations}, source,
                                       problems)
    if problems:
        raise InvalidTaskConfig(problems.items)
    parts, why = _source_parts(task_ops, dialect)
    return TransformPlan(source=source, task_ops=task_ops, destinations=destinations, dialect=dialect,
                         mode=spec.settings.pushup, groups=_groups(task_ops), pushable=frozenset(parts),
                         _parts=parts, _why=why)


def _groups(ops: tuple[BoundOp, ...]) -> tuple[tuple[int, ...], ...]:
    """Ordering groups: a run of adjacent operators that commute is one, every other operator its own."""
    groups: list[tuple[int, ...]] = []
    for i, op in enumerate(ops):
        if op.spec.operator.commutes and groups and ops[groups[-1][0]].spec.operator.commutes:
            groups[-1] = (*groups[-1], i)
        else:
            groups.append((i,))
    return tuple(groups)


def _source_parts(ops: tuple[BoundOp, ...], dialect: Dialect | None) -> tuple[dict[int, SourcePart], dict[int, str]]:
    """Each operator's share of the source query, or why it has none."""
    if dialect is None:
        return {}, {i: "the source has no query to push into" for i in range(len(ops))}
    parts: dict[int, SourcePart] = {}
    why: dict[int, str] = {}
    for i, op in enumerate(ops):
        try:
            parts[i] = op.spec.operator.sql(op, dialect)
        except NotPushable as exc:
            why[i] = str(exc)
    return parts, why

"""The transform plan of a run: operators bound to the source schema, chains, and what the source can take.

Placement: the task's operators form *ordering groups*: a run of adjacent filters (which commute)
is one group, every other operator a group of its own. A placement pushes whole groups from the
front, then any subset of the next group's filters, into the source query; only filters and
projections the source's dialect evaluates exactly (:mod:`.sqlgen`) can go. The rest of the task's
operators run as one chain in the reader threads; each destination's run as one chain in its writers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from wormhole.config import TaskSpec
from wormhole.errors import InvalidTaskConfig
from wormhole.options import Problems
from wormhole.plugins.base import PushedQuery, Schema
from wormhole.transform.chain import Chain
from wormhole.transform.operators import BoundOp, bind_task
from wormhole.transform.sqlgen import Dialect, NotPushable, SqlText, compile_sql

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
    _sql: dict[int, SqlText] = field(default_factory=dict)

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
            if self.task_ops[i].kind == "project":
                schema = self.task_ops[i].output
        return Chain("task", tuple(op for i, op in enumerate(self.task_ops) if i not in pushed), schema)

    def pushed_query(self, placement: Placement) -> PushedQuery | None:
        if not placement:
            return None
        keep = tuple(range(len(self.source)))
        wheres: list[SqlText] = []
        for i in placement:
            op = self.task_ops[i]
            if op.kind == "project":
                keep = tuple(keep[k] for k in op.detail["keep"])
            else:
                wheres.append(self._sql[i])
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
            "source_chain": {"placement": "source", "operators": [
                {"id": self.task_ops[i].id, "kind": self.task_ops[i].kind, "path": self.task_ops[i].spec.path}
                for i in placement]},
            "chains": chains,
            "not_pushable": {self.task_ops[i].id: why for i, why in _reasons(self).items()},
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


def _reasons(plan: TransformPlan) -> dict[int, str]:
    out: dict[int, str] = {}
    for i, op in enumerate(plan.task_ops):
        if i in plan.pushable:
            continue
        if plan.dialect is None:
            out[i] = "the source has no query to push into"
        elif op.kind not in ("filter", "project"):
            out[i] = f"a {op.kind} runs in wormhole"
        else:
            out[i] = f"{plan.dialect} cannot evaluate it exactly"
    return out


def build_plan(spec: TaskSpec, source: Schema, dialect: Dialect | None) -> TransformPlan:
    """Bind every operator (the task's to the source schema, each destination's to the task's output);
    InvalidTaskConfig lists every problem, each with its transform path."""
    problems = Problems()
    task_ops, destinations = bind_task(spec.transforms, {d.id: d.transforms for d in spec.destinations}, source,
                                       problems)
    if problems:
        raise InvalidTaskConfig(problems.items)
    groups: list[tuple[int, ...]] = []
    for i, op in enumerate(task_ops):
        if op.kind == "filter" and groups and task_ops[groups[-1][0]].kind == "filter":
            groups[-1] = (*groups[-1], i)
        else:
            groups.append((i,))
    sql: dict[int, SqlText] = {}
    pushable: set[int] = set()
    if dialect is not None:
        for i, op in enumerate(task_ops):
            if op.kind == "project":
                pushable.add(i)
            elif op.kind == "filter":
                try:
                    sql[i] = compile_sql(op.spec.exprs[0][1], op.typed[0], dialect)
                except NotPushable:
                    continue
                pushable.add(i)
    return TransformPlan(source=source, task_ops=task_ops, destinations=destinations, dialect=dialect,
                         mode=spec.settings.pushup, groups=tuple(groups), pushable=frozenset(pushable), _sql=sql)

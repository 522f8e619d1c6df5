"""Transform operators: parsed from the task (syntax), then bound to a schema (types), every problem at once.

A task's ``transforms`` (before the fan-out) and each destination's ``transforms`` (in its path)
are lists of one-key objects::

    {"filter": "status != 'test' AND amount > 0"}
    {"project": {"keep": ["id", "amount"]}}      or {"project": {"drop": ["note"]}}
    {"rename": {"amount": "amount_cents"}}
    {"cast": {"amount": "float"}}
    {"derive": {"total": "amount * qty"}}
    {"mask": {"columns": ["email"], "method": "hash" | "redact" | "partial", "keep": 4, "salt_env": "..."}}

The key names the operator's class in :data:`OPERATORS` (one module per kind, :mod:`.base` says
what a class holds). Each operator gets a stable id: a hash of its definition, its position and its
scope (the task, or one destination), as Flink's stable node hashes; logs, metrics and checkpoints name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wormhole.options import Problems, join_path
from wormhole.plugins.base import Schema
from wormhole.transform.operators.base import BoundOp, Operator, OpSpec, SourcePart, SparkKit, op_id
from wormhole.transform.operators.cast import Cast
from wormhole.transform.operators.derive import Derive
from wormhole.transform.operators.filter import Filter
from wormhole.transform.operators.mask import Mask
from wormhole.transform.operators.project import Project
from wormhole.transform.operators.rename import Rename

__all__ = ["KINDS", "OPERATORS", "BoundOp", "OpSpec", "Operator", "SourcePart", "SparkKit", "bind", "bind_task",
           "op_id", "parse_transforms"]

OPERATORS: dict[str, Operator] = {op.kind: op for op in (Filter(), Project(), Rename(), Cast(), Derive(), Mask())}
"""Kind -> its operator (one instance of its class), in the order messages list them."""
KINDS = tuple(OPERATORS)


def parse_transforms(raw: Any, path: str, scope: str, problems: Problems) -> tuple[OpSpec, ...]:
    """The operators of one ``transforms`` list; syntax problems go to ``problems``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.add(path, f"must be a list of operators, not {type(raw).__name__}")
        return ()
    out: list[OpSpec] = []
    for i, item in enumerate(raw):
        here = join_path(path, i)
        if not isinstance(item, dict) or len(item) != 1:
            problems.add(here, f"must be an object with one key, the operator ({', '.join(KINDS)})")
            continue
        ((kind, body),) = item.items()
        operator = OPERATORS.get(kind)
        if operator is None:
            problems.add(here, f"unknown operator {kind!r} (operators: {', '.join(KINDS)})")
            continue
        spec = operator.parse(body, join_path(here, kind), op_id(scope, i, item), problems)
        if spec is not None:
            out.append(spec)
    return tuple(out)


def bind(specs: tuple[OpSpec, ...], schema: Schema, problems: Problems) -> tuple[BoundOp, ...]:
    """Each operator checked against the schema before it; problems go to ``problems`` (all of them)."""
    out: list[BoundOp] = []
    current = schema
    for spec in specs:
        found = Problems()
        op = spec.operator.bind(spec, current, found)
        for item in found.items:
            problems.items.append(item)
        if op is None:
            return tuple(out)  # later operators' input is unknown: their problems would be noise
        out.append(op)
        current = op.output
    return tuple(out)


def bind_task(task: tuple[OpSpec, ...], destinations: Mapping[str, tuple[OpSpec, ...]], schema: Schema,
              problems: Problems) -> tuple[tuple[BoundOp, ...], dict[str, tuple[BoundOp, ...]]]:
    """The task's operators bound to the source schema, each destination's to the task's output."""
    task_ops = bind(task, schema, problems)
    after = task_ops[-1].output if task_ops else schema
    return task_ops, {dest: bind(ops, after, problems) for dest, ops in destinations.items()}

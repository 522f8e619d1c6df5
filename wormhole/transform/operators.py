"""Transform operators: parsed from the task (syntax), then bound to a schema (types), every problem at once.

A task's ``transforms`` (before the fan-out) and each destination's ``transforms`` (in its path)
are lists of one-key objects::

    {"filter": "status != 'test' AND amount > 0"}
    {"project": {"keep": ["id", "amount"]}}      or {"project": {"drop": ["note"]}}
    {"rename": {"amount": "amount_cents"}}
    {"cast": {"amount": "float"}}
    {"derive": {"total": "amount * qty"}}
    {"mask": {"columns": ["email"], "method": "hash" | "redact" | "partial", "keep": 4, "salt_env": "..."}}

Each operator gets a stable id: a hash of its definition, its position and its scope (the task,
or one destination), as Flink's stable node hashes; logs, metrics and checkpoints name it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from wormhole.options import Problems, join_path, show_value
from wormhole.plugins.base import Column, Schema
from wormhole.transform.check import CASTS, Typed, check
from wormhole.transform.expr import Expr, ExprError, parse

KINDS = ("filter", "project", "rename", "cast", "derive", "mask")
MASK_METHODS = ("hash", "redact", "partial")
DEFAULT_SALT_ENV = "WORMHOLE_MASK_SALT"
MASKABLE = frozenset({"string", "int", "date"})


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One operator as the task wrote it, with its expressions parsed."""

    kind: str
    raw: Any
    path: str
    """Where it is in the task (``destinations[1].transforms[0].filter``): every message names it."""
    op_id: str
    exprs: tuple[tuple[str, Expr], ...] = ()
    """``filter``: ("", predicate); ``derive``: (name, expression) per new column."""


def op_id(scope: str, position: int, raw: Any) -> str:
    text = json.dumps({"scope": scope, "position": position, "op": raw}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


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
        if kind not in KINDS:
            problems.add(here, f"unknown operator {kind!r} (operators: {', '.join(KINDS)})")
            continue
        spec = _parse_one(kind, body, join_path(here, kind), op_id(scope, i, item), problems)
        if spec is not None:
            out.append(spec)
    return tuple(out)


def _expr(text: Any, path: str, problems: Problems) -> Expr | None:
    try:
        return parse(text)
    except ExprError as exc:
        problems.add(path, str(exc))
        return None


def _text(value: Any) -> bool:
    """A JSON string a name or a type can be: checked before it is looked up (a list is unhashable)."""
    return isinstance(value, str) and bool(value) and "\x00" not in value


def _names(value: Any, path: str, problems: Problems) -> list[str] | None:
    if not isinstance(value, list) or not value or not all(_text(v) for v in value):
        problems.add(path, "must be a non-empty list of column names")
        return None
    return list(value)


def _parse_one(kind: str, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
    if kind == "filter":
        e = _expr(body, path, problems)
        return None if e is None else OpSpec(kind, body, path, oid, (("", e),))
    if kind == "project":
        if isinstance(body, list):
            body = {"keep": body}
        if not isinstance(body, dict) or len(body) != 1 or next(iter(body)) not in ("keep", "drop"):
            problems.add(path, 'must be {"keep": [columns]} or {"drop": [columns]}')
            return None
        ((which, names),) = body.items()
        return None if _names(names, join_path(path, which), problems) is None else OpSpec(kind, body, path, oid)
    if not isinstance(body, dict) or not body:
        problems.add(path, "must be a non-empty object")
        return None
    if kind == "rename":
        bad = [k for k, v in body.items() if not _text(v)]
        for k in bad:
            problems.add(join_path(path, k), "must be the new column name (a non-empty string)")
        return None if bad else OpSpec(kind, body, path, oid)
    if kind == "cast":
        bad = [k for k, v in body.items() if not _text(v) or v not in CASTS or v == "null"]
        for k in bad:
            problems.add(join_path(path, k), f"unknown type {show_value(body[k])} (types: int, float, decimal, "
                                             "string, bool, date, datetime)")
        return None if bad else OpSpec(kind, body, path, oid)
    if kind == "derive":
        exprs = [(name, _expr(text, join_path(path, name), problems)) for name, text in body.items()]
        if any(e is None for _, e in exprs):
            return None
        return OpSpec(kind, body, path, oid, tuple((n, e) for n, e in exprs if e is not None))
    return _parse_mask(body, path, oid, problems)


def _parse_mask(body: dict[str, Any], path: str, oid: str, problems: Problems) -> OpSpec | None:
    unknown = set(body) - {"columns", "method", "keep", "salt_env", "with"}
    for k in sorted(unknown):
        problems.add(join_path(path, k), "unknown key (mask takes columns, method, keep, salt_env, with)")
    ok = not unknown and _names(body.get("columns"), join_path(path, "columns"), problems) is not None
    method = body.get("method", "hash")
    if not isinstance(method, str) or method not in MASK_METHODS:
        problems.add(join_path(path, "method"), f"must be one of {', '.join(MASK_METHODS)}, "
                                                f"not {show_value(method)}")
        ok = False
    keep = body.get("keep", 4)
    if not isinstance(keep, int) or isinstance(keep, bool) or not 0 <= keep <= 1000:
        problems.add(join_path(path, "keep"), "must be an integer from 0 to 1000")
        ok = False
    salt_env = body.get("salt_env", DEFAULT_SALT_ENV)
    if not _text(salt_env):
        problems.add(join_path(path, "salt_env"), "must name an environment variable (a non-empty string)")
        ok = False
    elif method == "hash" and not os.environ.get(salt_env):
        problems.add(join_path(path, "salt_env"), f"the environment variable {salt_env!r} holding the hash's salt "
                                                  "is not set (a hash without a secret salt is reversible)")
        ok = False
    if not isinstance(body.get("with", "***"), str) or "\x00" in body.get("with", ""):
        problems.add(join_path(path, "with"), "must be a string without NUL characters")
        ok = False
    return OpSpec("mask", body, path, oid) if ok else None


# ---------------------------------------------------------------------------------------------
# Binding to a schema


@dataclass(frozen=True, slots=True)
class BoundOp:
    """An operator checked against its input schema: what it reads, and the schema it produces."""

    spec: OpSpec
    input: Schema
    output: Schema
    typed: tuple[Typed, ...] = ()
    """Per expression of ``spec.exprs``: its checked types."""
    detail: dict[str, Any] = field(default_factory=dict)
    """Resolved parameters: ``keep`` (project), ``names`` (rename), ``casts``, ``mask`` settings."""

    @property
    def kind(self) -> Literal["filter", "project", "rename", "cast", "derive", "mask"]:
        return self.spec.kind  # type: ignore[return-value]

    @property
    def id(self) -> str:
        return self.spec.op_id


def bind(specs: tuple[OpSpec, ...], schema: Schema, problems: Problems) -> tuple[BoundOp, ...]:
    """Each operator checked against the schema before it; problems go to ``problems`` (all of them)."""
    out: list[BoundOp] = []
    current = schema
    for spec in specs:
        found = Problems()
        op = _bind_one(spec, current, found)
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


def _column_check(names: list[str], schema: Schema, path: str, problems: Problems) -> bool:
    known = set(schema.names)
    ok = True
    for name in names:
        if name not in known:
            problems.add(path, f"unknown column {name!r} (columns: {', '.join(schema.names[:20])})")
            ok = False
    return ok


def _bind_one(spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
    types = {c.name: c.type for c in schema.columns}
    if spec.kind in ("filter", "derive"):
        typed: list[Typed] = []
        for name, e in spec.exprs:
            t = check(e, types)
            where = join_path(spec.path, name) if name else spec.path
            for p in t.problems:
                problems.add(where, p)
            if not t.problems and spec.kind == "filter" and t.type not in ("bool", "null"):
                problems.add(where, f"a filter needs a boolean condition, not a {t.type}")
            if not t.problems and spec.kind == "derive" and t.type == "null":
                problems.add(where, "is always NULL: CAST it to the column's type")
            typed.append(t)
        if problems:
            return None
        if spec.kind == "filter":
            return BoundOp(spec, schema, schema, tuple(typed))
        columns = list(schema.columns)
        for (name, _), t in zip(spec.exprs, typed, strict=True):
            new = Column(name, t.type, True)  # type: ignore[arg-type]
            at = next((i for i, c in enumerate(columns) if c.name == name), None)
            if at is None:
                columns.append(new)
            else:
                columns[at] = new
        return BoundOp(spec, schema, Schema(tuple(columns)), tuple(typed))
    body = spec.raw
    if spec.kind == "project":
        ((which, names),) = body.items()
        if not _column_check(names, schema, join_path(spec.path, which), problems):
            return None
        if which == "keep":
            keep = tuple(schema.names.index(n) for n in dict.fromkeys(names))
        else:
            keep = tuple(i for i, n in enumerate(schema.names) if n not in set(names))
        if not keep:
            problems.add(spec.path, "drops every column")
            return None
        return BoundOp(spec, schema, Schema(tuple(schema.columns[i] for i in keep)), detail={"keep": keep})
    if spec.kind == "rename":
        if not _column_check(list(body), schema, spec.path, problems):
            return None
        names = [body.get(n, n) for n in schema.names]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            problems.add(spec.path, f"would give two columns the name {dupes[0]!r}")
            return None
        renamed = tuple(replace(c, name=body.get(c.name, c.name)) for c in schema.columns)
        return BoundOp(spec, schema, Schema(renamed), detail={"names": tuple(names)})
    if spec.kind == "cast":
        if not _column_check(list(body), schema, spec.path, problems):
            return None
        casts: dict[str, tuple[str, str]] = {}
        for name, to in body.items():
            source = types[name]
            if source != to and to not in CASTS.get(source, frozenset()):
                problems.add(join_path(spec.path, name), f"cannot cast a {source} to {to}")
            casts[name] = (source, to)
        if problems:
            return None
        cast_to = tuple(Column(c.name, casts[c.name][1], True) if c.name in casts else c  # type: ignore[arg-type]
                        for c in schema.columns)
        return BoundOp(spec, schema, Schema(cast_to), detail={"casts": casts})
    return _bind_mask(spec, schema, types, problems)


def _bind_mask(spec: OpSpec, schema: Schema, types: Mapping[str, str], problems: Problems) -> BoundOp | None:
    body = spec.raw
    names = body["columns"]
    if not _column_check(names, schema, join_path(spec.path, "columns"), problems):
        return None
    for name in names:
        if types[name] not in MASKABLE:
            problems.add(join_path(spec.path, "columns"), f"cannot mask {name!r}, a {types[name]} "
                                                          f"(masks take {', '.join(sorted(MASKABLE))}; cast first)")
    method = body.get("method", "hash")
    if method != "hash" and any(types[n] != "string" for n in names):
        problems.add(join_path(spec.path, "method"), f"{method} masks strings only")
    if problems:
        return None
    salt = os.environ.get(body.get("salt_env", DEFAULT_SALT_ENV), "") if method == "hash" else ""
    columns = tuple(Column(c.name, "string", c.nullable) if c.name in names else c for c in schema.columns)
    return BoundOp(spec, schema, Schema(columns), detail={"columns": tuple(names), "method": method,
                                                          "keep": body.get("keep", 4), "salt": salt,
                                                          "with": body.get("with", "***")})


"""``{"cast": {"amount": "float"}}``: columns converted to another type (NULL where a value does not convert)."""

from __future__ import annotations

from typing import Any

from wormhole.options import Problems, join_path, show_value
from wormhole.plugins.base import Column, Schema
from wormhole.transform.arrowfn import Compiled, compile_arrow
from wormhole.transform.check import CASTS, check
from wormhole.transform.frame import Frame, Step
from wormhole.transform.operators.base import BoundOp, Operator, OpSpec, SparkKit, is_text, known_columns, object_body
from wormhole.transform.tree import Cast as CastNode
from wormhole.transform.tree import Col


def _casts(op: BoundOp) -> list[tuple[Column, Compiled, str]]:
    """Each cast column (its output column, its batch function, its source type); a column cast to its
    own type is left as it is."""
    types = {c.name: c.type for c in op.input.columns}
    out = {c.name: c for c in op.output.columns}
    found = []
    for name, (source, to) in op.detail["casts"].items():
        if source != to:
            node = CastNode(Col(name), to)
            found.append((out[name], compile_arrow(node, check(node, types)), source))
    return found


class Cast(Operator):
    kind = "cast"

    def parse(self, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
        if not object_body(body, path, problems):
            return None
        bad = [k for k, v in body.items() if not is_text(v) or v not in CASTS or v == "null"]
        for k in bad:
            problems.add(join_path(path, k), f"unknown type {show_value(body[k])} (types: int, float, decimal, "
                                             "string, bool, date, datetime)")
        return None if bad else OpSpec(self, body, path, oid)

    def bind(self, spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
        if not known_columns(list(spec.raw), schema, spec.path, problems):
            return None
        types = {c.name: c.type for c in schema.columns}
        casts: dict[str, tuple[str, str]] = {}
        for name, to in spec.raw.items():
            source = types[name]
            if source != to and to not in CASTS.get(source, frozenset()):
                problems.add(join_path(spec.path, name), f"cannot cast a {source} to {to}")
            casts[name] = (source, to)
        if problems:
            return None
        cast_to = tuple(Column(c.name, casts[c.name][1], True) if c.name in casts else c  # type: ignore[arg-type]
                        for c in schema.columns)
        return BoundOp(spec, schema, Schema(cast_to), detail={"casts": casts})

    def arrow(self, op: BoundOp) -> Step:
        fns = [(column, fn) for column, fn, _ in _casts(op)]

        def cast(f: Frame) -> None:
            for column, fn in fns:
                f.set_column(column, fn(f))
        return cast

    def target(self, op: BoundOp) -> str:
        return "python" if any(fn.target == "python" for _, fn, _ in _casts(op)) else "arrow"

    def spark(self, op: BoundOp, frame: Any, kit: SparkKit) -> Any:
        types = {c.name: c.type for c in op.input.columns}
        out: dict[str, Any] = {}
        for name, (_, to) in op.detail["casts"].items():
            node = CastNode(Col(name), to)
            out[name] = kit.expr(node, check(node, types)).cast(kit.type(to))
        return frame.withColumns(out)

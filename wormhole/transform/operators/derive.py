"""``{"derive": {"total": "amount * qty"}}``: new (or replaced) columns computed from the input row."""

from __future__ import annotations

from typing import Any

from wormhole.options import Problems, join_path
from wormhole.plugins.base import Column, Schema
from wormhole.transform.arrowfn import compile_arrow
from wormhole.transform.frame import Frame, Step
from wormhole.transform.operators.base import BoundOp, Operator, OpSpec, SparkKit, check_exprs, object_body, parse_expr


def _typed(kind: str) -> str | None:
    return "is always NULL: CAST it to the column's type" if kind == "null" else None


class Derive(Operator):
    kind = "derive"

    def parse(self, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
        if not object_body(body, path, problems):
            return None
        exprs = [(name, parse_expr(text, join_path(path, name), problems)) for name, text in body.items()]
        if any(e is None for _, e in exprs):
            return None
        return OpSpec(self, body, path, oid, tuple((n, e) for n, e in exprs if e is not None))

    def bind(self, spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
        typed = check_exprs(spec, schema, problems, _typed)
        if typed is None:
            return None
        columns = list(schema.columns)
        for (name, _), t in zip(spec.exprs, typed, strict=True):
            new = Column(name, t.type, True)  # type: ignore[arg-type]
            at = next((i for i, c in enumerate(columns) if c.name == name), None)
            if at is None:
                columns.append(new)
            else:
                columns[at] = new
        return BoundOp(spec, schema, Schema(tuple(columns)), typed)

    def arrow(self, op: BoundOp) -> Step:
        out = {c.name: c for c in op.output.columns}
        exprs = [(out[name], compile_arrow(e, t)) for (name, e), t in zip(op.spec.exprs, op.typed, strict=True)]

        def derive(f: Frame) -> None:
            values = [(column, fn(f)) for column, fn in exprs]  # every expression sees the input row
            for column, array in values:
                f.set_column(column, array)
        return derive

    def target(self, op: BoundOp) -> str:
        targets = {compile_arrow(e, t).target for (_, e), t in zip(op.spec.exprs, op.typed, strict=True)}
        return "python" if "python" in targets else "arrow"

    def spark(self, op: BoundOp, frame: Any, kit: SparkKit) -> Any:
        return frame.withColumns({name: kit.result(name, e, t) for (name, e), t in zip(op.spec.exprs, op.typed,
                                                                                     strict=True)})

"""``{"filter": "status != 'test' AND amount > 0"}``: keeps the rows whose condition is true."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from wormhole.options import Problems
from wormhole.plugins.base import Schema
from wormhole.transform.arrowfn import compile_arrow
from wormhole.transform.frame import Frame, Step
from wormhole.transform.operators.base import BoundOp, Operator, OpSpec, SourcePart, SparkKit, check_exprs, parse_expr
from wormhole.transform.sqlgen import Dialect, NotPushable, compile_filter


def _boolean(kind: str) -> str | None:
    return None if kind in ("bool", "null") else f"a filter needs a boolean condition, not a {kind}"


class Filter(Operator):
    kind = "filter"
    commutes = True

    def parse(self, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
        e = parse_expr(body, path, problems)
        return None if e is None else OpSpec(self, body, path, oid, (("", e),))

    def bind(self, spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
        typed = check_exprs(spec, schema, problems, _boolean)
        return None if typed is None else BoundOp(spec, schema, schema, typed)

    def arrow(self, op: BoundOp) -> Step:
        ((_, e),) = op.spec.exprs
        pred = compile_arrow(e, op.typed[0])

        def keep(f: Frame) -> None:
            mask = pred(f)
            mask = pa.array(mask, pa.bool_()) if isinstance(mask, list) else mask
            f.keep(mask if mask.type == pa.bool_() else mask.cast(pa.bool_()))  # NULL (a NULL predicate): none
        return keep

    def target(self, op: BoundOp) -> str:
        ((_, e),) = op.spec.exprs
        return compile_arrow(e, op.typed[0]).target

    def sql(self, op: BoundOp, dialect: Dialect) -> SourcePart:
        try:
            as_read = {c.name: c.as_read for c in op.input.columns if c.as_read is not None}
            return SourcePart(where=compile_filter(op.spec.exprs[0][1], op.typed[0], dialect, as_read))
        except NotPushable:
            raise NotPushable(f"{dialect} cannot evaluate it exactly") from None

    def spark(self, op: BoundOp, frame: Any, kit: SparkKit) -> Any:
        ((_, e),) = op.spec.exprs
        return frame.filter(kit.expr(e, op.typed[0]))

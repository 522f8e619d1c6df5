"""``{"project": {"keep": [...]}}`` or ``{"drop": [...]}`` (a bare list keeps): the columns that go on."""

from __future__ import annotations

from typing import Any

from wormhole.options import Problems, join_path
from wormhole.plugins.base import Schema
from wormhole.transform.frame import Frame, Step
from wormhole.transform.operators.base import BoundOp, Operator, OpSpec, SourcePart, SparkKit, known_columns, names_of
from wormhole.transform.sqlgen import Dialect


class Project(Operator):
    kind = "project"
    free_in_source = True

    def parse(self, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
        if isinstance(body, list):
            body = {"keep": body}
        if not isinstance(body, dict) or len(body) != 1 or next(iter(body)) not in ("keep", "drop"):
            problems.add(path, 'must be {"keep": [columns]} or {"drop": [columns]}')
            return None
        ((which, names),) = body.items()
        return None if names_of(names, join_path(path, which), problems) is None else OpSpec(self, body, path, oid)

    def bind(self, spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
        ((which, names),) = spec.raw.items()
        if not known_columns(names, schema, join_path(spec.path, which), problems):
            return None
        if which == "keep":
            keep = tuple(schema.names.index(n) for n in dict.fromkeys(names))
        else:
            keep = tuple(i for i, n in enumerate(schema.names) if n not in set(names))
        if not keep:
            problems.add(spec.path, "drops every column")
            return None
        return BoundOp(spec, schema, Schema(tuple(schema.columns[i] for i in keep)), detail={"keep": keep})

    def arrow(self, op: BoundOp) -> Step:
        keep: tuple[int, ...] = op.detail["keep"]

        def select(f: Frame) -> None:
            f.select(keep)
        return select

    def sql(self, op: BoundOp, dialect: Dialect) -> SourcePart:
        return SourcePart(keep=op.detail["keep"])

    def spark(self, op: BoundOp, frame: Any, kit: SparkKit) -> Any:
        return frame.select([kit.ref(c.name) for c in op.output.columns])

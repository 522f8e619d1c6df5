"""``{"rename": {"amount": "amount_cents"}}``: columns under new names, in the same places."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from wormhole.options import Problems, join_path
from wormhole.plugins.base import Schema
from wormhole.transform.frame import Frame, Step
from wormhole.transform.operators.base import BoundOp, Operator, OpSpec, SparkKit, is_text, known_columns, object_body


class Rename(Operator):
    kind = "rename"

    def parse(self, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
        if not object_body(body, path, problems):
            return None
        bad = [k for k, v in body.items() if not is_text(v)]
        for k in bad:
            problems.add(join_path(path, k), "must be the new column name (a non-empty string)")
        return None if bad else OpSpec(self, body, path, oid)

    def bind(self, spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
        body = spec.raw
        if not known_columns(list(body), schema, spec.path, problems):
            return None
        names = [body.get(n, n) for n in schema.names]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            problems.add(spec.path, f"would give two columns the name {dupes[0]!r}")
            return None
        renamed = tuple(replace(c, name=body.get(c.name, c.name)) for c in schema.columns)
        return BoundOp(spec, schema, Schema(renamed), detail={"names": tuple(names)})

    def arrow(self, op: BoundOp) -> Step:
        names: tuple[str, ...] = op.detail["names"]

        def rename(f: Frame) -> None:
            f.rename(names)
        return rename

    def spark(self, op: BoundOp, frame: Any, kit: SparkKit) -> Any:
        return frame.withColumnsRenamed(dict(op.spec.raw.items()))

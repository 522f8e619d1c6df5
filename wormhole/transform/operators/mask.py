"""``{"mask": {"columns": [...], "method": "hash" | "redact" | "partial", "keep": 4, "salt_env": "..."}}``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.options import Problems, join_path, show_value
from wormhole.plugins.base import Column, Schema
from wormhole.transform.frame import Frame, Step
from wormhole.transform.operators.base import BoundOp, Operator, OpSpec, SparkKit, is_text, known_columns, names_of
from wormhole.transform.pyfn import mask_hash

MASK_METHODS = ("hash", "redact", "partial")
DEFAULT_SALT_ENV = "WORMHOLE_MASK_SALT"
MASKABLE = frozenset({"string", "int", "date"})
KEYS = {"columns", "method", "keep", "salt_env", "with"}


def mask_function(method: str, salt: str, keep: int, replacement: str) -> Callable[[Any], str]:
    if method == "hash":
        return mask_hash(salt)
    if method == "redact":
        return lambda v: replacement
    # partial: the last `keep` characters stay, the rest become '*'; a value no longer than `keep`
    # is masked whole (else a short value would be shown entire).
    return lambda s: "*" * (len(s) - keep) + s[len(s) - keep:] if len(s) > keep else "*" * len(s)


def _salt_problem(salt_env: Any, method: Any) -> str | None:
    if not is_text(salt_env):
        return "must name an environment variable (a non-empty string)"
    if method == "hash" and not os.environ.get(salt_env):
        return (f"the environment variable {salt_env!r} holding the hash's salt "
                "is not set (a hash without a secret salt is reversible)")
    return None


def _problems(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, problem) for each setting but ``columns``."""
    out: list[tuple[str, str]] = []
    method = body.get("method", "hash")
    if not isinstance(method, str) or method not in MASK_METHODS:
        out.append(("method", f"must be one of {', '.join(MASK_METHODS)}, not {show_value(method)}"))
    keep = body.get("keep", 4)
    if not isinstance(keep, int) or isinstance(keep, bool) or not 0 <= keep <= 1000:
        out.append(("keep", "must be an integer from 0 to 1000"))
    salt = _salt_problem(body.get("salt_env", DEFAULT_SALT_ENV), method)
    if salt is not None:
        out.append(("salt_env", salt))
    if not isinstance(body.get("with", "***"), str) or "\x00" in body.get("with", ""):
        out.append(("with", "must be a string without NUL characters"))
    return out


class Mask(Operator):
    kind = "mask"

    def parse(self, body: Any, path: str, oid: str, problems: Problems) -> OpSpec | None:
        if not isinstance(body, dict) or not body:
            problems.add(path, "must be a non-empty object")
            return None
        unknown = set(body) - KEYS
        for k in sorted(unknown):
            problems.add(join_path(path, k), "unknown key (mask takes columns, method, keep, salt_env, with)")
        ok = not unknown and names_of(body.get("columns"), join_path(path, "columns"), problems) is not None
        found = _problems(body)
        for key, problem in found:
            problems.add(join_path(path, key), problem)
        return OpSpec(self, body, path, oid) if ok and not found else None

    def bind(self, spec: OpSpec, schema: Schema, problems: Problems) -> BoundOp | None:
        body = spec.raw
        names = body["columns"]
        if not known_columns(names, schema, join_path(spec.path, "columns"), problems):
            return None
        types = {c.name: c.type for c in schema.columns}
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

    def arrow(self, op: BoundOp) -> Step:
        d = op.detail
        out = {c.name: c for c in op.output.columns}
        columns = [out[name] for name in d["columns"]]
        fn = mask_function(d["method"], d["salt"], d["keep"], d["with"])
        vector = _ARROW_MASKS.get(d["method"])

        def mask(f: Frame) -> None:
            for column in columns:
                values = f.get(column.name)
                masked = vector(values, d) if vector is not None else \
                    pa.array([None if v is None else fn(v) for v in values.to_pylist()], pa.string())
                riding = f.carried_cells(column.name)  # a zero date's text is masked as the row path masks it
                if riding:
                    texts = masked.to_pylist()
                    for at, v in riding.items():
                        texts[at] = fn(v)
                    masked = pa.array(texts, pa.string())
                f.set_column(column, masked)
        return mask

    def target(self, op: BoundOp) -> str:
        return "arrow" if op.detail["method"] in _ARROW_MASKS else "python"  # SHA-256 has no Arrow kernel

    def spark(self, op: BoundOp, frame: Any, kit: SparkKit) -> Any:
        return frame.withColumns({name: _spark_mask(kit, kit.value(name), op.detail) for name in op.detail["columns"]})


def _redact(values: pa.Array, d: dict[str, Any]) -> pa.Array:
    return pc.if_else(pc.is_valid(values), pa.scalar(d["with"], pa.string()), pa.scalar(None, pa.string()))


def _partial(values: pa.Array, d: dict[str, Any]) -> pa.Array:
    keep = d["keep"]
    length = pc.utf8_length(values)
    longer = pc.greater(length, keep)
    stars = pc.binary_repeat("*", pc.if_else(longer, pc.subtract(length, keep), length))
    if not keep:
        return stars
    tail = pc.if_else(longer, pc.utf8_slice_codeunits(values, start=-keep), "")
    return pc.binary_join_element_wise(stars, tail, "")


_ARROW_MASKS: dict[str, Callable[[pa.Array, dict[str, Any]], pa.Array]] = {"redact": _redact, "partial": _partial}
"""The masks with an Arrow form (strings only); a hash is SHA-256 of each value, in Python."""


def _spark_mask(kit: SparkKit, c: Any, d: dict[str, Any]) -> Any:
    F = kit.F
    text = c.cast("string")
    if d["method"] == "hash":
        return F.sha2(F.concat(F.lit(d["salt"]), text), 256)
    if d["method"] == "redact":
        return F.when(c.isNull(), F.lit(None).cast("string")).otherwise(F.lit(d["with"]))
    keep = d["keep"]
    length = F.char_length(text)
    tail = F.substring(text, -keep, keep) if keep else F.lit("")
    return F.when(length > keep, F.concat(F.repeat(F.lit("*"), length - keep), tail)) \
        .otherwise(F.repeat(F.lit("*"), length))

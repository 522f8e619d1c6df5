"""Transform chains on a Spark DataFrame: each operator as Spark Columns (:mod:`wormhole.transform.spark`).

The task's chain runs on the source's DataFrame before it is persisted (once, before the fan-out);
a destination's chain on that destination's view of it. Every operator is a narrow transformation,
so each partition stays one split (durable destinations rely on it). A column the frame carries as
text (exact values, decimals from a row reader) is handed to expressions in its logical type.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from wormhole.counters import WriterCounters
from wormhole.plugins.base import Schema, Split
from wormhole.transform.chain import Chain
from wormhole.transform.check import check
from wormhole.transform.expr import Cast, Col
from wormhole.transform.operators import BoundOp
from wormhole.transform.plan import Placement, TransformPlan
from wormhole.transform.pyfn import TEXT_PATTERNS
from wormhole.transform.spark import SPARK_TYPES, column, compile_spark


def apply_chain(frame: DataFrame, chain: Chain) -> DataFrame:
    for op in chain.ops:
        frame = _apply(frame, op)
    return frame


def push_down(plan: TransformPlan | None, splits: list[Split],
              schema: Schema) -> tuple[list[Split], Schema, Placement]:
    """The splits with the task's pushed-down filters and projection (``pushdown``: the source's Spark
    read, or its row reader, evaluates them as local mode's reader does), the schema they read, and the
    placement (``()`` when nothing is pushed). Spark has no per-thread measurements: ``adaptive`` pushes
    what ``static`` does."""
    if plan is None or plan.dialect is None or plan.mode == "off":
        return splits, schema, ()
    placement = plan.widest()
    pushed = plan.pushed_query(placement)
    if pushed is None:
        return splits, schema, ()
    return ([dataclasses.replace(s, params={**s.params, "pushdown": pushed}) for s in splits],
            Schema(tuple(schema.columns[k] for k in pushed.keep)), placement)


def count_rows(frame: DataFrame, split_ids: list[str], per_split: bool) -> tuple[int, dict[str, int] | None]:
    """The frame's rows, and with ``per_split`` (when each partition is one split) each split's: what a
    destination whose chain filters is offered of each split it writes."""
    if not per_split or frame.rdd.getNumPartitions() != len(split_ids):
        return frame.count(), None
    counts = {split_ids[int(r[0])]: int(r[1]) for r in frame.groupBy(F.spark_partition_id()).count().collect()}
    return sum(counts.values()), counts


def account_filtered(counters: WriterCounters, chain: Chain | None, rows: int, split_rows: dict[str, int] | None,
                     wanted: list[str] | None) -> None:
    """What a destination's own filters dropped: the rows offered to it (every row of the source; for a
    destination written split by split, the rows of each split it wrote) minus those its writers got."""
    if chain is None or not chain.ops:
        return
    if wanted is not None:
        if split_rows is None:
            return  # not known per split: the destination reports no filtered rows
        rows = sum(split_rows.get(s, 0) for s in wanted)
    counters.filtered = rows - counters.delivered
    counters.delivered = rows


def _resolver(frame: DataFrame, op: BoundOp) -> Any:
    carried = {f.name: f.dataType for f in frame.schema.fields}
    logical = {c.name: c.type for c in op.input.columns}

    def resolve(name: str) -> Column:
        c = column(name)
        kind = logical.get(name)
        if isinstance(carried.get(name), T.StringType) and kind not in (None, "string", "json"):
            if kind in ("date", "datetime"):
                # A zero or partial date (and the year 0, which Spark would take) is NULL, as in pyfn.
                return F.when(c.rlike(f"^(?:{TEXT_PATTERNS[kind]})"), c.try_cast(SPARK_TYPES[kind]))
            return c.try_cast(SPARK_TYPES[kind])
        return c
    return resolve


def _apply(frame: DataFrame, op: BoundOp) -> DataFrame:
    resolve = _resolver(frame, op)
    kind = op.kind
    if kind == "filter":
        ((_, e),) = op.spec.exprs
        return frame.filter(compile_spark(e, op.typed[0], resolve))
    if kind == "project":
        return frame.select([column(c.name) for c in op.output.columns])
    if kind == "rename":
        return frame.withColumnsRenamed({old: new for old, new in op.spec.raw.items()})
    types = {c.name: c.type for c in op.input.columns}
    if kind == "cast":
        out: dict[str, Column] = {}
        for name, (_, to) in op.detail["casts"].items():
            node = Cast(Col(name), to)
            out[name] = compile_spark(node, check(node, types), resolve).cast(SPARK_TYPES[to])
        return frame.withColumns(out)
    if kind == "derive":
        return frame.withColumns({name: compile_spark(e, t, resolve).cast(SPARK_TYPES[t.type])
                                  for (name, e), t in zip(op.spec.exprs, op.typed, strict=True)})
    return frame.withColumns({name: _mask(resolve(name), op.detail) for name in op.detail["columns"]})


def _mask(c: Column, d: dict[str, Any]) -> Column:
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

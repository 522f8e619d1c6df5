"""How Spark mode writes each destination, decided the same way for ``wormhole plan`` and the run.

:meth:`wormhole.spark.runner.SparkExecution._write_job` takes the first way a destination allows:
its splits made durable one partition at a time (``partitions``, or ``driver`` for a store with one
writer), the store's native Spark write (``native``; the file and hive stores decline a frame with
columns carried as exact text, whose cast would fail the destination on one value), its row writers
in the executors (``partitions``), or one row writer on the driver (``driver``). The plan cannot see the
frame: the facts stage asks the source which columns it will carry as exact text
(:func:`wormhole.spark.methods.source_exact_text`), and these rules decide from the answer. Pure: no I/O,
no pyspark, no module of :mod:`wormhole.spark`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wormhole.plugins import registry
from wormhole.plugins.base import Schema

WHERE = {"native": "spark native write", "partitions": "spark partitions, a row writer each",
         "driver": "one row writer on the Spark driver"}


def read_columns(transforms: Any, schema: Schema) -> frozenset[str]:
    """The columns the source's Spark read returns: the task's pushed-down projection's, as
    :func:`wormhole.spark.transforms.push_down` places it (always the widest placement), else all."""
    if transforms is None or transforms.dialect is None or transforms.mode == "off":
        return frozenset(schema.names)
    pushed = transforms.pushed_query(transforms.widest())
    if pushed is None:
        return frozenset(schema.names)
    return frozenset(schema.columns[k].name for k in pushed.keep)


def write_method(plugin: str, options: Any, exact_text: frozenset[str] | None) -> str:
    """``native``, ``partitions`` or ``driver`` as the run will write (``native?``: the store's native
    write unless the source carries exact text, which the plan could not learn)."""
    sink = registry.sink(plugin)
    whole = sink.spark_replaces is not None and bool(sink.spark_replaces(options))
    if sink.durable is not None and not whole:  # SparkExecution._write_durable
        return "partitions" if sink.spark_partitions else "driver"
    if sink.spark_write is not None and _native_takes(plugin, options):
        if exact_text is None:
            return "native?"
        if not exact_text:
            return "native"
    return "partitions" if sink.spark_partitions else "driver"


def reads_directly(source_plugin: str, methods: Sequence[str], transforms: Any, paced: bool, enabled: bool) -> bool:
    """Whether Spark mode's one write job reads the source itself, each task its split with the store's own
    reader, in place of the store's native (JDBC) read: ``enabled`` (``[spark] direct_read``), no transforms,
    no speed limit (``paced``: the read is paced by a stage of the source's frame), a source with a native read
    to replace, and every destination written by row writers in the executors (``methods``). The batches
    then never leave the task's Python: local mode's data path, the reader's wire text included."""
    role = registry.get(source_plugin).source
    return (enabled and transforms is None and not paced and role is not None and role.spark_read is not None
            and bool(methods) and all(m == "partitions" for m in methods))


def _native_takes(plugin: str, options: Any) -> bool:
    """Whether the store's native write takes these options at all (the file store: parquet only)."""
    sink = registry.sink(plugin)
    return sink.spark_replaces is None or bool(sink.spark_replaces(options))


def describe_method(method: str) -> str:
    if method == "native?":
        return f"{WHERE['native']} (row writers when the source carries exact text)"
    return WHERE[method]

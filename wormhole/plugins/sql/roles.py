"""The roles of a SQL store's entry (``plugins/<store>/__init__.py``): what every SQL store's source and
destination can do alike, said once here; the store's entry adds what is its own (its Spark read, its
encoded rows, how it plans a load)."""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from wormhole.plugins.base import SinkRole, SourceRole
from wormhole.plugins.facets import DurableFacet, LeftoverFacet
from wormhole.plugins.sql import bounds
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.periphery import SqlWriterPeriphery
from wormhole.plugins.sql.reader_periphery import SqlReaderPeriphery


def source_role(dialect: Dialect, *, periphery: type[SqlReaderPeriphery], **own: Any) -> SourceRole[Any]:
    """A SQL store's source: incremental bounds from its dialect (:mod:`.bounds`), the task's leading filters
    ANDed to its split queries in its dialect (``pushdown``), and its servers' busy sessions, which adaptive
    push-up asks (``busy_threads``); ``own``: the rest of the role's fields."""
    return SourceRole(periphery=periphery, bounds=partial(bounds.bounds, dialect), pushdown=cast(Any, dialect.name),
                      busy_threads=periphery.busy_threads, **own)


def sink_role(*, periphery: type[SqlWriterPeriphery], writer: type[Any], **own: Any) -> SinkRole[Any]:
    """A SQL store's destination: each split committed with its marker row in one transaction (``durable``),
    staging tables and marker rows of crashed runs found and removed (``leftovers``), the rows written
    counted for ``verify`` (``add_written``); ``own``: the rest of the role's fields."""
    return SinkRole(
        periphery=periphery,
        writer=writer,
        # Three connections keep the server busy while each writer encodes its next piece; one
        # leaves the server idle half the time (make bench).
        default_concurrency=3,
        durable=DurableFacet(writer=writer, held=periphery.durable_splits, release=periphery.release),
        leftovers=LeftoverFacet(find=periphery.leftovers, clean=periphery.clean_leftovers),
        add_written=periphery.add_written,  # verify compares the table's count with the rows written
        # In Spark mode the row writers run in the executors, a split per partition, each made
        # durable with its marker row in one transaction: a retried task finds it there.
        spark_partitions=True,
        **own,
    )

"""The roles of a SQL store's entry (``plugins/<store>/__init__.py``): what every SQL store's source and
destination can do alike, said once here; the store's entry adds what is its own (its Spark read, its
encoded rows, how it plans a load)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar, cast

from wormhole.database.facet import CatalogFacet
from wormhole.plugins.base import (
    EncodedReader,
    ReadContext,
    Reader,
    Schema,
    SinkRole,
    SourceRole,
    SourceSnapshot,
    Splitter,
    WriteContext,
)
from wormhole.plugins.facets import (
    DdlFacet,
    DurableFacet,
    EncodedReadFacet,
    EncodedWriteFacet,
    LeftoverFacet,
    SnapshotFacet,
)
from wormhole.plugins.sql import bounds
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.periphery import SqlWriterPeriphery
from wormhole.plugins.sql.reader import describe_ahead
from wormhole.plugins.sql.reader_periphery import SqlReaderPeriphery
from wormhole.plugins.sql.sink_options import SinkParams

R = TypeVar("R", bound=SqlReaderPeriphery)
W = TypeVar("W", bound=SqlWriterPeriphery)
"""The store's periphery classes: the role and its facets are typed by them (mypy checks the store's own)."""


def source_role(dialect: Dialect, *, options: type, splitter: Callable[[Any, ReadContext], Splitter],
                reader: Callable[[Any, ReadContext], Reader], periphery: type[R], spark_read: str | None = None,
                encoded: EncodedReadFacet[EncodedReader] | None = None,
                catalog: CatalogFacet | None = None,
                snapshot: SnapshotFacet[SourceSnapshot] | None = None) -> SourceRole[R]:
    """A SQL store's source: incremental bounds from its dialect (:mod:`.bounds`), the task's leading filters
    ANDed to its split queries in its dialect (``pushdown``), its servers' busy sessions, which adaptive
    push-up asks (``busy_threads``), and the store's catalog of a whole database (``catalog``)."""
    return SourceRole(options=options, splitter=splitter, reader=reader, periphery=periphery, spark_read=spark_read,
                      bounds=partial(bounds.bounds, dialect), pushdown=cast(Any, dialect.name),
                      busy_threads=periphery.busy_threads, encoded=encoded,
                      catalog=None if catalog is None else dataclasses.replace(
                          catalog, describe_ahead=partial(describe_ahead, dialect)),
                      snapshot=snapshot)


def sink_role(*, options: type[SinkParams], periphery: type[W], writer: Callable[[Any, WriteContext, W, int], Any],
              method_keys: tuple[str, ...], plan_load: Callable[[Any, Schema, bool], str], targets: tuple[str, ...],
              uses_wire_text: bool = False, encoded: EncodedWriteFacet[W] | None = None,
              ddl: DdlFacet | None = None,
              upsert_params: Callable[[Sequence[str]], Mapping[str, Any]] | None = None) -> SinkRole[W]:
    """A SQL store's destination: each split committed with its marker row in one transaction (``durable``),
    staging tables and marker rows of crashed runs found and removed (``leftovers``), the rows written
    counted for ``verify`` (``add_written``); one destination at a time truncates or swaps a table
    (``single_writer_key``, :meth:`~wormhole.plugins.sql.sink_options.SinkParams.single_writer_key`)."""
    return SinkRole(
        options=options,
        periphery=periphery,
        writer=writer,
        # Three connections keep the server busy while each writer encodes its next piece; one
        # leaves the server idle half the time (make bench).
        default_concurrency=3,
        single_writer_key=options.single_writer_key,
        method_keys=method_keys,
        targets=targets,
        uses_wire_text=uses_wire_text,
        plan_load=plan_load,
        durable=DurableFacet(writer=writer, held=periphery.durable_splits, release=periphery.release,
                             held_now=periphery.durable_now),
        leftovers=LeftoverFacet(find=periphery.leftovers, clean=periphery.clean_leftovers),
        add_written=periphery.add_written,  # verify compares the table's count with the rows written
        encoded=encoded,
        ddl=ddl,
        target_rows=options.target_rows,
        delete_keys=periphery.delete_keys,
        upsert_params=upsert_params,
        count_rows=periphery.count_rows,
        # In Spark mode the row writers run in the executors, a split per partition, each made
        # durable with its marker row in one transaction: a retried task finds it there.
        spark_partitions=True,
    )

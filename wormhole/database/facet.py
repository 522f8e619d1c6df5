"""The catalog facet of a source role (``SourceRole.catalog``): how a store that can read a whole database
says which tables a task names, opens its catalog, and reads one of those tables.

A mysql, postgres or sqlite source whose params give ``tables`` parses into a :class:`DatabaseSource` (its
checked params and their :class:`~.model.TablePatterns`) in place of the single-table shape its reader
takes. The run of a database task asks the facet for the patterns, lists and describes the tables through
the opened :class:`~.model.Catalog`, and reads each table with :meth:`CatalogFacet.for_table`'s options:
the options the same source would have parsed into had it named that one table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from wormhole.database.model import Catalog, TablePatterns, TableRef
from wormhole.options import ResolvedOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseSource:
    """A source's params that name many tables (``tables``), checked: what they parse into."""

    params: Any
    """The store's options dataclass as parsed (``tables`` set; ``table``, ``query`` and the rest unset)."""
    patterns: TablePatterns
    schema_key: str | None
    """The params key that names one table's schema (mysql ``database``, postgres ``schema``; None for
    sqlite, whose only schema is ``main``)."""
    kind: Literal["database"] = "database"


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogFacet:
    """The source can read a whole database: many tables named by patterns, each read once as its own table.

    Only ``open`` is the store's own; the other two work on any :class:`DatabaseSource`."""

    open: Callable[[Any], Catalog]
    """``open(options)``: the catalog of the source's server (a connection: close it), for a
    :class:`DatabaseSource`; a failure to connect raises the store's SplitError."""
    describe_ahead: Callable[[Any, Any], int] | None = None
    """``describe_ahead(options, ctx)``: describe every table of :meth:`for_tables`' ``options`` at once into
    ``ctx.shared``, where each table run's reader finds its columns (the SQL kit's
    :func:`~wormhole.plugins.sql.reader.describe_ahead`); None: each table run describes its own."""

    @staticmethod
    def patterns(options: Any) -> TablePatterns | None:
        """The tables ``options`` name, None when they name one table or a query (not a database task)."""
        return options.patterns if isinstance(options, DatabaseSource) else None

    @staticmethod
    def for_table(options: DatabaseSource, ref: TableRef) -> Any:
        """The options that read exactly table ``ref`` of ``options``' source: its params with ``tables``
        dropped and ``table`` (and its schema key) set, resolved as parsing resolves them (mysql and postgres:
        a ``TableSource``; sqlite: its options)."""
        named: dict[str, Any] = {"tables": None, "table": ref.name}
        if options.schema_key is not None:
            named[options.schema_key] = ref.schema
        single = dataclasses.replace(options.params, **named)
        return single.resolve() if isinstance(single, ResolvedOptions) else single

    @staticmethod
    def for_tables(options: DatabaseSource, refs: Sequence[TableRef]) -> Any:
        """Options that name every table of ``refs`` at once (what a consistent snapshot of them locks or
        exports for): a SQL source's shards, one per endpoint and schema, each with its tables; a sqlite
        source's options of its first table (its snapshot is of the whole file)."""
        singles = [CatalogFacet.for_table(options, ref) for ref in refs]
        first = singles[0]
        if not hasattr(first, "shards"):
            return first
        shard_type = type(first.shards[0])  # the kit's Shard (imported by name it would be a cycle)
        grouped: dict[tuple[Any, str], list[str]] = {}
        for single in singles:
            for shard in single.shards:
                grouped.setdefault((shard.endpoint, shard.schema), []).extend(shard.tables)
        return dataclasses.replace(first, shards=tuple(shard_type(endpoint, schema, tuple(tables))
                                                       for (endpoint, schema), tables in grouped.items()))


def entry_problem(entry: str) -> str | None:
    """Why ``entry`` of ``tables`` is no pattern (None: it is one)."""
    body = entry[1:] if entry.startswith("!") else entry
    if not entry.strip():
        return "must not be empty or blank"
    if not body.strip():
        return f"{entry!r} excludes nothing: write what to exclude after the '!' ('!shop.tmp_*')"
    schema, dot, table = body.partition(".")
    if dot and not schema:
        return f"{entry!r} names no schema before the dot ('shop.*'; without a dot: the source's own)"
    if dot and not table:
        return f"{entry!r} names no table after the dot (every table of {schema!r}: '{schema}.*')"
    return None

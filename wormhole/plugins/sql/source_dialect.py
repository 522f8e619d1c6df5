"""What the SQL store kit's read side asks of a store: its :class:`SourceDialect`.

The kit (:mod:`.source_options`, :mod:`.catalog`, :mod:`.splitter`, :mod:`.bounds`, :mod:`.reader`) holds
the logic the SQL stores share: checking and resolving source params, walking shards and tables, cutting
key ranges, finding incremental bounds. What differs between stores is answered by one object per store
(``wormhole/plugins/<store>/source_dialect.py``): how a table is named in SQL and in messages, the type map
of the read side, how to connect, ask and end a session, and the SQL of the incremental bound. The write
side's members are the store's ``Dialect``; the naming rules of its params are its
:class:`~.source_options.Naming`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from wormhole.plugins.base import ReadContext
from wormhole.plugins.sql.source_options import Endpoint, Shard, SourceSettings


class SourceDialect(Protocol):
    """One SQL store's read side, as the kit sees it."""

    @property
    def name(self) -> str:
        """The plugin's name (errors carry it)."""

    @property
    def kind_types(self) -> Mapping[str, str]:
        """Each column kind (how the reader selects and parses a column) -> its logical type."""

    @property
    def driver_error(self) -> type[Exception]:
        """What the driver raises when a statement fails."""

    def quote(self, identifier: str) -> str:
        """``identifier`` quoted for this server's SQL."""

    def relation(self, shard: Shard, table: str) -> str:
        """``table`` of ``shard`` as SQL names it (``schema.table``, quoted)."""

    def table_label(self, shard: Shard, table: str) -> str:
        """How messages name ``table`` of ``shard`` (before ``in <host:port/database>``)."""

    def describe(self, exc: BaseException) -> str:
        """The server's own code and text of a failed statement."""

    def connect(self, source: SourceSettings, endpoint: Endpoint, error: type[Any], ctx: ReadContext,
                log: Any = None) -> Any:
        """A connection of a source's splitter, periphery or reader, with the source's connect settings."""

    def close(self, conn: Any) -> None:
        """End the session of ``conn`` quietly (a dead or closed one is let go)."""

    def fetch_one(self, conn: Any, sql: str, args: Sequence[Any] | None = None) -> Any:
        """The first row ``sql`` returns (None when none)."""

    def describe_table(self, conn: Any, shard: Shard, table: str) -> list[Any]:
        """The columns of ``table`` in order (the store's catalog's own column class); SplitError naming it
        when it does not exist."""

    def choose_columns(self, infos: list[Any], wanted: Sequence[str] | None, shard: Shard, table: str) -> list[Any]:
        """The columns ``wanted`` names of ``table``, in its order (all of them when None)."""

    def describe_query(self, conn: Any, endpoint: Endpoint, query: str) -> list[Any]:
        """The columns a query returns; SplitError with the server's reason when it fails."""

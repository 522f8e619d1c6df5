"""What one SQL store tells the SQL store kit: the :class:`Dialect` protocol, one object per store.

The kit (:mod:`wormhole.plugins.sql`) holds what every SQL store does the same way. Its read side: one
source-options family (:mod:`.source_options`), walking shards and tables and cutting key ranges
(:mod:`.splitter`), the incremental bounds (:mod:`.bounds`), the reader's schema (:mod:`.reader`), the catalog
of a whole database (:mod:`.tables`, which sqlite's uses too). Its write side: the destination's phases
(:mod:`.periphery`), its split markers (:mod:`.markers`), the staging table's naming and marking
(:mod:`.staging`), leftovers of earlier runs (:mod:`.leftovers`), settling a commit whose answer was lost
(:mod:`.settling`) and the writers' part of the split transactions (:mod:`.writer`). A store
supplies one ``Dialect`` object (``plugins/<store>/dialect.py``) for how its database spells and answers
these; its own package keeps only that and its driver's code (connecting, bulk loading, its staging swap).
The naming rules of a store's params are its :class:`~.source_options.Naming`.

sqlite uses none of the kit's read or write side (one file under one connection's lock): its dialect
object spells only what its own modules use, under the names this protocol gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from wormhole.plugins.base import ReadContext, StopSignal
from wormhole.plugins.sql.source_options import Endpoint, Shard, SourceSettings


class Dialect(Protocol):
    """One SQL store's spelling and driver answers, as the SQL store kit asks for them."""

    # -- both sides -------------------------------------------------------------------------------

    name: str
    """The store's plugin name: errors name it."""
    db_error: type[Exception]
    """The driver's base error class: what it raises when a statement fails."""

    def quote(self, identifier: str) -> str:
        """``identifier`` quoted for any SQL text."""
        ...

    def describe(self, exc: BaseException) -> str:
        """A driver error as one line for a message (the server's own code and text)."""
        ...

    def close_quietly(self, conn: Any) -> None:
        """Close ``conn``, ignoring a failure (a dead or closed one is let go)."""
        ...

    # -- read side (the source's kit: options, splitter, bounds, reader) --------------------------

    kind_types: Mapping[str, str]
    """Each column kind (how the reader selects and parses a column) -> its logical type."""

    def relation(self, shard: Shard, table: str) -> str:
        """``table`` of ``shard`` as SQL names it (``schema.table``, quoted)."""
        ...

    def table_label(self, shard: Shard, table: str) -> str:
        """How messages name ``table`` of ``shard`` (before ``in <host:port/database>``)."""
        ...

    def connect(self, source: SourceSettings, endpoint: Endpoint, error: type[Any], ctx: ReadContext,
                log: Any = None) -> Any:
        """A connection of a source's splitter, periphery or reader, with the source's connect settings."""
        ...

    def fetch_one(self, conn: Any, sql: str, args: Sequence[Any] | None = None) -> Any:
        """The first row ``sql`` returns (None when none)."""
        ...

    def describe_table(self, conn: Any, shard: Shard, table: str) -> list[Any]:
        """The columns of ``table`` in order (the store's catalog's own column class); SplitError naming it
        when it does not exist."""
        ...

    def describe_tables(self, conn: Any, shard: Shard, tables: Sequence[str]) -> dict[str, list[Any]]:
        """The columns of each of ``tables`` in order, asked at once; a table that does not exist is left out."""
        ...

    def choose_columns(self, infos: list[Any], wanted: Sequence[str] | None, shard: Shard, table: str) -> list[Any]:
        """The columns ``wanted`` names of ``table``, in its order (all of them when None)."""
        ...

    def describe_query(self, conn: Any, query: str) -> list[Any]:
        """The columns a query returns (the driver's error when it fails: :func:`.catalog.query_columns`)."""
        ...

    def max_and_now(self, conn: Any, shard: Shard, relation: str, info: Any, column: str) -> tuple[Any, datetime]:
        """The largest value of column ``info`` (``column`` as the task names it) in ``relation`` (a FROM
        clause with its WHERE), and the server's clock to the whole second as that column's values read (the
        driver's error when the statement fails: :mod:`.bounds` says which bound)."""
        ...

    # -- write side (the destination's kit: markers, staging, leftovers, settling, writers) -------

    open: Callable[..., Any]
    """The store's ``connect(endpoint, error, *, timeout, destination, stop, log, ...)``: a configured connection."""

    markers_ddl: str
    """``CREATE TABLE IF NOT EXISTS {table} (...)`` of the split markers table (``{table}``: its reference)."""
    markers_upgrade: str | None
    """The ALTER that gives an older version's markers table its ``taskdb`` column (None: never needed)."""
    namespace_kind: str
    """What holds a destination's tables, as its messages name it (``database``, ``schema``)."""

    def fit_name(self, table: str, suffix: str) -> str:
        """``table`` + ``suffix``, the table's name cut so the whole is a name the server keeps whole."""
        ...

    def upsert_prepared_sql(self, table: str) -> str:
        """The statement that inserts or replaces the destination's own markers row: 7 parameters
        (taskdb, task_id, state_run, destination, split_id, rows, phase)."""
        ...

    def marker_columns(self, conn: Any, namespace: str, table: str) -> set[str]:
        """The lower-case columns of the markers table ``table`` in ``namespace`` (empty: no such table)."""
        ...

    def created_meanwhile(self, exc: BaseException) -> bool:
        """Creating or upgrading the markers table failed because another run did it at the same moment."""
        ...

    def missing_namespace(self, exc: BaseException) -> bool:
        """Creating the markers table failed because the namespace itself does not exist."""
        ...

    def commented_tables(self, conn: Any, namespace: str) -> list[tuple[str, str]]:
        """``(table, comment)`` of the tables of ``namespace`` whose comment starts with ``wormhole:``."""
        ...

    def table_comment(self, conn: Any, namespace: str, name: str) -> str | None:
        """The comment of table ``name`` ('' without one), or None when there is no such table."""
        ...

    def run_text(self, conn: Any, statement: str) -> None:
        """A statement as given (a task author's SQL: no parameters), its effect committed unless the
        connection is inside a transaction the caller ends."""
        ...

    def abandon(self, conn: Any) -> None:
        """Drop ``conn`` without another word to the server (a COMMIT's answer was lost)."""
        ...

    def session_id(self, conn: Any) -> int:
        """The server's id of ``conn``'s session, known without asking the server."""
        ...

    def wait_session_ended(self, conn: Any, session: int, stop: StopSignal, wait_s: float) -> None:
        """Return once the server is done with ``session`` (asked on ``conn``); TimeoutError when not in time."""
        ...

    def is_transient(self, exc: BaseException) -> bool:
        """A lock wait, deadlock or lost connection: the step may be tried again."""
        ...

    def is_duplicate(self, exc: BaseException) -> bool:
        """A unique key violated (a split's marker already there)."""
        ...

    def commit_unknown(self, exc: BaseException, conn: Any) -> bool:
        """COMMIT failed with the connection lost while its answer was awaited: it may have committed."""
        ...

    def idle(self, conn: Any, autocommit: bool = True) -> bool:
        """``conn`` is as a new session of its settings would be (open, in ``autocommit`` or not as opened, no
        transaction nor result pending): another step may use it (:mod:`wormhole.plugins.shared`). False: never
        lent."""
        ...

    # -- end of the write side --------------------------------------------------------------------

"""A SQL source's consistent snapshot (``settings.snapshot: consistent``), what the SQL stores share.

A snapshot has one *part* per unit its store can hold an instant in (MySQL: a server, for one user; PostgreSQL:
a database, the unit an exported snapshot is imported in), opened by the store (``plugins/<store>/snapshot.py``).
The kit's readers, splitter and incremental bounds find it in their context (:func:`of`) and take their
sessions from it:

- :meth:`SqlSnapshot.reading`: a split's connection (a :class:`Lease`), inside the snapshot: a MySQL reader
  borrows one of the connections started under the lock (:class:`SnapshotPool`) and gives it back, a
  PostgreSQL reader opens its own and imports the exported snapshot into it;
- :meth:`SqlSnapshot.planning`: a session for the splitter's key ranges and the incremental bounds, inside
  the snapshot too, so a split's range and a window's end are those of the instant the rows are read at.

Parts on different servers (a sharded source) are each consistent, each at its own instant: no two servers
can be stopped at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from wormhole.errors import SnapshotError, StorageError
from wormhole.plugins.base import ReadContext, StopSignal
from wormhole.plugins.sql.dialect import Dialect
from wormhole.plugins.sql.source_options import Endpoint, SqlSource


class Lease:
    """A reader's connection for one split, inside the snapshot: never closed nor committed by the reader."""

    __slots__ = ("conn", "spoiled")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.spoiled = False

    def spoil(self) -> None:
        """The split's read ended mid-result (or the connection broke): it cannot read again."""
        self.spoiled = True


class SnapshotPart(Protocol):
    """The snapshot on one server (or database), as its store holds it."""

    @property
    def label(self) -> str:
        """Where it was taken (``host:port``, ``host:port/database``): names its position's keys beside others'."""
        ...

    @property
    def position(self) -> Mapping[str, str]: ...

    def reading(self, endpoint: Endpoint, ctx: ReadContext, log: Any) -> AbstractContextManager[Lease]: ...

    def planning(self, endpoint: Endpoint, ctx: ReadContext) -> AbstractContextManager[Any]: ...

    def close(self) -> None: ...


class SqlSnapshot:
    """A SQL source's snapshot: its parts, found by the endpoint a shard reads (``key``)."""

    def __init__(self, parts: Mapping[Hashable, SnapshotPart], key: Callable[[Endpoint], Hashable],
                 plugin: str) -> None:
        self._parts = dict(parts)
        self._key = key
        self._plugin = plugin
        self._closed = False

    @property
    def position(self) -> Mapping[str, str]:
        """One part's own position; with several, each key prefixed with its part's label."""
        parts = list(self._parts.values())
        if len(parts) == 1:
            return dict(parts[0].position)
        return {f"{p.label} {k}": v for p in parts for k, v in p.position.items()}

    def part(self, endpoint: Endpoint) -> SnapshotPart:
        found = self._parts.get(self._key(endpoint))
        if found is None or self._closed:
            why = "is closed" if self._closed else f"was not taken on {endpoint.mark}"
            raise SnapshotError(f"the consistent snapshot {why}: its readers cannot read there", plugin=self._plugin)
        return found

    def reading(self, endpoint: Endpoint, ctx: ReadContext, log: Any) -> AbstractContextManager[Lease]:
        return self.part(endpoint).reading(endpoint, ctx, log)

    def planning(self, endpoint: Endpoint, ctx: ReadContext) -> AbstractContextManager[Any]:
        return self.part(endpoint).planning(endpoint, ctx)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for part in self._parts.values():
            part.close()


def open_sql_snapshot(source: SqlSource, plugin: str, key: Callable[[Endpoint], Hashable],
                      open_part: Callable[[Endpoint], SnapshotPart]) -> SqlSnapshot:
    """A part per distinct ``key`` of the source's endpoints, each opened by ``open_part``; when one cannot be,
    those already open are closed before the error goes on (nothing stays held)."""
    parts: dict[Hashable, SnapshotPart] = {}
    try:
        for shard in source.shards:
            k = key(shard.endpoint)
            if k not in parts:
                parts[k] = open_part(shard.endpoint)
    except BaseException:
        for part in parts.values():
            part.close()
        raise
    return SqlSnapshot(parts, key, plugin)


def of(ctx: ReadContext) -> SqlSnapshot | None:
    """The run's SQL snapshot, when it reads through one."""
    snapshot = ctx.snapshot
    return snapshot if isinstance(snapshot, SqlSnapshot) else None


@contextmanager
def planning_session(dialect: Dialect, source: SqlSource, endpoint: Endpoint, error: type[StorageError],
                     ctx: ReadContext) -> Iterator[Any]:
    """A session for planning reads on ``endpoint`` (key ranges, bounds): the snapshot's, when the run reads
    through one, else a connection of its own, closed after."""
    snapshot = of(ctx)
    if snapshot is not None:
        with snapshot.planning(endpoint, ctx) as conn:
            yield conn
        return
    with source_session(dialect, source, endpoint, error, ctx) as conn:
        yield conn


@contextmanager
def source_session(dialect: Dialect, source: SqlSource, endpoint: Endpoint, error: type[StorageError],
                   ctx: ReadContext) -> Iterator[Any]:
    """A session on ``endpoint`` for a step that describes or plans (not one reading a split): in a database
    task, one a step before left idle there (``ctx.shared``), given back idle; else a connection of its own."""
    shared = ctx.shared
    key = ("source", dialect.name, endpoint)
    conn = shared.lend(key) if shared is not None else None
    if conn is None:
        conn = dialect.connect(source, endpoint, error, ctx)
    kept = False
    try:
        yield conn
        if shared is not None and dialect.idle(conn):
            shared.keep(key, conn, dialect.close_quietly)
            kept = True
    finally:
        if not kept:
            dialect.close_quietly(conn)


class SnapshotPool:
    """The reader connections a snapshot holds, each inside its transaction: a reader borrows one for a
    split and gives it back. One given back spoiled (mid-result, broken) is dropped (``drop(conn, spoiled)``):
    the snapshot reads on with the others, and fails (SnapshotError) once none is left."""

    def __init__(self, conns: list[Any], drop: Callable[[Any, bool], None], label: str, plugin: str) -> None:
        self._idle = list(conns)
        self._alive = len(conns)
        self._drop = drop
        self._label = label
        self._plugin = plugin
        self._closed = False
        self._lost = 0
        self._cond = threading.Condition()

    def borrow(self, stop: StopSignal) -> Any:
        """An idle connection, waiting for one (a stop ends the wait with SnapshotError)."""
        with self._cond:
            while not self._idle:
                if self._closed or self._alive == 0:
                    why = "is closed" if self._closed else f"lost all its {self._lost} reader connections"
                    raise SnapshotError(f"the consistent snapshot on {self._label} {why}: no other connection "
                                        f"sees its instant (run the task again for a new snapshot)",
                                        plugin=self._plugin)
                self._cond.wait(0.1)
                if stop.is_set():
                    raise SnapshotError("reading stopped while waiting for a snapshot connection",
                                        plugin=self._plugin)
            return self._idle.pop()

    def give_back(self, conn: Any, spoiled: bool, log: Any) -> None:
        with self._cond:
            if spoiled or self._closed:
                self._alive -= 1
                self._lost += spoiled
            else:
                self._idle.append(conn)
            self._cond.notify()
        if spoiled or self._closed:
            self._drop(conn, spoiled)
        if spoiled:
            log.warning("snapshot.connection_lost", resource=self._label, left=self._alive)

    def close(self) -> None:
        """Drop the idle connections; one still borrowed is dropped when it comes back."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._alive -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            self._drop(conn, False)

    @contextmanager
    def lease(self, stop: StopSignal, log: Any, prepare: Callable[[Any], None] = lambda conn: None) -> Iterator[Lease]:
        """A borrowed connection for one split (``prepare`` readies it: the split's database), given back after."""
        lease = Lease(self.borrow(stop))
        try:
            prepare(lease.conn)
            yield lease
        except BaseException:
            lease.spoil()  # whatever broke the read may have left the connection mid-statement
            raise
        finally:
            self.give_back(lease.conn, lease.spoiled, log)

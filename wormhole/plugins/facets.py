"""What a store's roles can do beyond reading or writing rows: the *facets* of :mod:`wormhole.plugins.base`'s roles.

A facet is a typed value holding the store's own functions the engine calls for one behaviour
(``SinkRole.durable`` holds the periphery's ``durable_splits`` and ``release`` and the SplitWriter class).
Having the facet is having the capability: the engine, the planner and Spark mode call through it and
never cast a store's objects to a wider Protocol nor probe them (``getattr``, ``isinstance``). A facet is
generic in the class of its role's periphery (``P``), so a type checker holds its functions to the
periphery the role builds: a facet naming another class's methods is a type error where the store builds
its role. That needs the role built in a statement of its own (``SINK = SinkRole(...)``), not inside
``Plugin(...)``, whose field type (``SinkRole[Any]``) would make ``P`` Any and let anything pass.
What is plain data (a dialect's name, a default thread count, a policy such as ``needs_spark``) stays a
plain field of the role. The roles pin the other parameters (``W``: a SplitWriter, ``R``: an
EncodedReader); this module stays below ``base`` so that ``base`` can name the facets.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from wormhole.plugins.batch import Encoding
    from wormhole.plugins.ddl import DdlDialect, DdlSession

P = TypeVar("P")
"""The class of a role's periphery: its facets' functions take that object."""
W = TypeVar("W")
"""The writers a durable destination's facet builds (the sink role says: SplitWriters)."""
R = TypeVar("R")
"""The readers an encoded source's facet builds (the source role says: EncodedReaders)."""
S = TypeVar("S")
"""The snapshots a source's snapshot facet opens (the source role says: SourceSnapshots)."""


# -- facets of a source -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedReadFacet(Generic[R]):
    """The source can send rows in a byte format of its server's, undecoded, when every destination of a
    local run takes it (:class:`~wormhole.plugins.base.Encoding`)."""

    format: str
    """The format's name (``postgres.copy_binary``): a destination loads it when it names the same."""
    reader: Callable[[Any, Any], R]
    """``reader(options, context)``: the reader class (or factory), an :class:`~wormhole.plugins.base.EncodedReader`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotFacet(Generic[S]):
    """The source can hold one consistent snapshot for a whole run (``settings.snapshot: consistent``):
    every reader connection it opens while the snapshot is in its context sees the same instant."""

    open: Callable[[Any, Any, Any], S]
    """``open(options, context, request)``: the snapshot, taken now (a
    :class:`~wormhole.plugins.base.SourceSnapshot`; ``request`` a :class:`~wormhole.plugins.base.SnapshotRequest`).
    Raises the store's ReadError when it cannot be taken (a lock not had in time), leaving nothing held."""


# -- facets of a destination --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DurableFacet(Generic[P, W]):
    """Each split is made durable with the destination's own record of it (a marker row in the split's
    transaction, a renamed part), so a crashed run resumes and a lost split is written again
    (:class:`~wormhole.plugins.base.DurablePeriphery` says what the two periphery functions promise)."""

    writer: Callable[[Any, Any, P, int], W]
    """``writer(options, context, prepared_periphery, worker_index)``, a
    :class:`~wormhole.plugins.base.SplitWriter`: the engine sends every batch of a split to one writer."""
    held: Callable[[P], Mapping[str, int]]
    """``held(periphery)`` after ``prepare``: split id -> rows of every split the destination already holds
    durably (its ``durable_splits``): the truth on resume."""
    release: Callable[[P], None]
    """``release(periphery)`` once the task's outcome is recorded: drop the destination's record of the run."""
    held_now: Callable[[P], Mapping[str, int]] | None = None
    """``held_now(periphery)``: what ``held`` says, read again from the store now. A Spark task run again asks
    it (an earlier attempt may have made its split durable after ``prepare``); None where a retried partition
    replaces what the earlier attempt wrote (a file part), so ``held`` serves."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeftoverFacet(Generic[P]):
    """The destination finds and removes what earlier runs of its task left behind (``task show``, ``task
    clean``) on an unprepared periphery (:class:`~wormhole.plugins.base.LeftoverPeriphery`)."""

    find: Callable[[P, int | None], list[str]]
    """``find(periphery, keep_run)``: the leftovers, described (its ``leftovers``)."""
    clean: Callable[[P, int | None], list[str]]
    """``clean(periphery, keep_run)``: remove them; what was removed (its ``clean_leftovers``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedWriteFacet(Generic[P]):
    """The destination's writers load batches in a byte format as they are (``Batch.encoded``) when its
    periphery says, once prepared, that the target takes the encoding."""

    format: str
    """The format's name: the source's :attr:`EncodedReadFacet.format` must be the same."""
    takes: Callable[[P, Encoding], bool]
    """``takes(periphery, encoding)``, once prepared: the target's columns declare exactly those types."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DdlFacet:
    """The destination creates a database source's tables (:mod:`wormhole.database.ddl`): its DDL words and a
    session that applies them."""

    dialect: DdlDialect
    """How the store reads its own declared types and defaults (as a source) and writes a table (as a destination)."""
    open: Callable[[Any], DdlSession]
    """``open(destination options)``: a :class:`~wormhole.database.ddl.DdlSession` on the destination."""
    session_key: Callable[[Any], Hashable] | None = None
    """``session_key(destination options)``: what a session ``open`` gives is a session of (its server and
    database), so a database task's tables on the same key share one (:mod:`wormhole.plugins.shared`); None:
    each step opens its own."""

"""Whether a run's rows travel in the source's own encoding: read once, loaded as they are everywhere.

A store whose server can send rows in a form another server of its kind loads unchanged (PostgreSQL's
binary COPY) has the facets for it (``SourceRole.encoded``, ``SinkRole.encoded``). The engine chooses that form
for a local run only when nothing in the run needs the values: no transform anywhere, and every live
destination's prepared periphery says its target declares exactly the source's column types. Then no
value is decoded or encoded between the two servers; otherwise the rows travel as values, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from wormhole.destination import Destination
from wormhole.errors import WormholeError
from wormhole.log import Logger
from wormhole.plugins.base import Encoding


class EncodingSource(Protocol):
    """What choosing asks of the read side (the ReaderManager)."""

    def encoding(self) -> Encoding | None: ...


def loads_source_form(destination: Destination, encoding: Encoding | None, *, local: bool) -> bool:
    """Whether ``destination``'s writers load the source's own form of each batch (their ``write_encoded``):
    the run's rows travel in an encoding it takes (:func:`choose_encoding`), or its store loads a mysql
    reader's wire text (``SinkRole.uses_wire_text``). Never behind its own transforms (they make new batches),
    never in Spark mode (batches come from Spark's record batches)."""
    if not local or (destination.chain is not None and destination.chain.ops):
        return False
    return (encoding is not None and destination.sink.encoded is not None) or destination.sink.uses_wire_text


def choose_encoding(readers: EncodingSource, destinations: Iterable[Destination], *, local: bool,
                    transformed: bool, log: Logger) -> Encoding | None:
    """The source's encoding when every live destination takes it as it is, else None (values)."""
    live = [d for d in destinations if d.live]
    if not local or transformed or not live:
        return None
    takers = [(d, d.sink.encoded) for d in live]
    loads = [(d, facet) for d, facet in takers if facet is not None]
    if len(loads) < len(live):  # a destination that cannot load an encoding as it is
        return None
    try:
        encoding = readers.encoding()  # None unless the source's store sends an encoding, and can for its options
    except WormholeError as exc:  # the source's catalog out of reach a moment: values; the reads retry as ever
        log.warning("engine.rows_decoded", reason=f"the source's column types could not be read: {exc}")
        return None
    if encoding is None or any(facet.format != encoding.format for _, facet in loads):
        return None
    refused = [d.id for d, facet in loads if not facet.takes(d.periphery, encoding)]
    if refused:
        log.info("engine.rows_decoded", format=encoding.format, reason="column types differ", destinations=refused)
        return None
    log.info("engine.rows_encoded", format=encoding.format, destinations=[d.id for d in live])
    return encoding

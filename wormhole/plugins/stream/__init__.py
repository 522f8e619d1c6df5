"""The stream store: a deterministic row generator (reader) and a null or printing sink (writer).

Any row's contents depend only on the spec (``seed``, ``columns``) and the row number, never on how
the rows were split (``reader``); the sink counts and drops (or prints) rows, and can be made slow or
broken for tests (``writer``); their parameters are in ``options``.
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.stream.capabilities import CAPABILITIES
from wormhole.plugins.stream.options import ColumnOption, NullWriterOptions, StreamReaderOptions
from wormhole.plugins.stream.reader import DIRTY_MARK, StreamSource, declared_schema
from wormhole.plugins.stream.writer import NullPeriphery, NullWriter

__all__ = [
    "DIRTY_MARK",
    "PLUGIN",
    "ColumnOption",
    "NullPeriphery",
    "NullWriter",
    "NullWriterOptions",
    "StreamReaderOptions",
    "StreamSource",
]

PLUGIN = Plugin(
    name="stream",
    description="deterministic row generator (reader) and null or printing sink (writer), for tests and benchmarks",
    source=SourceRole(options=StreamReaderOptions, splitter=StreamSource, reader=StreamSource,
                      periphery=StreamSource, declared_schema=declared_schema),
    sink=SinkRole(options=NullWriterOptions, periphery=NullPeriphery, writer=NullWriter),
    capabilities=CAPABILITIES,
)

"""The stream store: a deterministic row generator (reader) and a null or printing sink (writer).

Any row's contents depend only on the spec (``seed``, ``columns``) and the row number, never on how
the rows were split (``reader``; ``splitter`` cuts equal row ranges); the sink counts and drops (or
prints) rows, and can be made slow or broken for tests (``writer``); ``periphery`` holds both roles'
peripheries, ``options`` their parameters; the entry below says what the store can do.
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.stream.options import ColumnOption, NullWriterOptions, StreamReaderOptions
from wormhole.plugins.stream.periphery import NullPeriphery, StreamReaderPeriphery
from wormhole.plugins.stream.reader import DIRTY_MARK, StreamReader, declared_schema
from wormhole.plugins.stream.splitter import StreamSplitter
from wormhole.plugins.stream.writer import NullWriter

__all__ = [
    "DIRTY_MARK",
    "PLUGIN",
    "ColumnOption",
    "NullPeriphery",
    "NullWriter",
    "NullWriterOptions",
    "StreamReader",
    "StreamReaderOptions",
    "StreamReaderPeriphery",
    "StreamSplitter",
]

SOURCE = SourceRole(options=StreamReaderOptions, splitter=StreamSplitter, reader=StreamReader,
                    periphery=StreamReaderPeriphery, declared_schema=declared_schema)

SINK = SinkRole(options=NullWriterOptions, periphery=NullPeriphery, writer=NullWriter,
                spark_partitions=True)  # the null sink keeps nothing: a retried partition is counted once by Spark

PLUGIN = Plugin(
    name="stream",
    description="deterministic row generator (reader) and null or printing sink (writer), for tests and benchmarks",
    source=SOURCE,
    sink=SINK,
)

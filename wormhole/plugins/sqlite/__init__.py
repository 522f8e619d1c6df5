"""The sqlite store: a table of an SQLite file as a source (read-only) and as a transactional destination.

Reading: one split per table, typed by the declared column types. Writing: one ``BEGIN IMMEDIATE``
transaction per destination (the table is created inside it when missing), ``insert``, ``replace``
or ``upsert`` in savepointed batches, COMMIT on success and ROLLBACK otherwise. A file admits one
writing destination per task (``single_writer_key``), since the destination holds its write lock.
Missing parent directories are created; a database file the run created is removed on rollback
(with its ``-journal``/``-wal``/``-shm``), one that existed is left as it was.
"""

from __future__ import annotations

import os

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.sqlite.options import SqliteReaderOptions, SqliteWriterOptions
from wormhole.plugins.sqlite.reader import SqliteReader, SqliteReaderPeriphery, SqliteSplitter
from wormhole.plugins.sqlite.writer import SqliteWriter, SqliteWriterPeriphery

__all__ = [
    "PLUGIN",
    "SqliteReader",
    "SqliteReaderOptions",
    "SqliteReaderPeriphery",
    "SqliteSplitter",
    "SqliteWriter",
    "SqliteWriterOptions",
    "SqliteWriterPeriphery",
]


def _single_writer_key(options: SqliteWriterOptions) -> str:
    return "sqlite file " + os.path.abspath(options.path)


def _owned_path(options: SqliteWriterOptions) -> str:
    return options.path


PLUGIN = Plugin(
    name="sqlite",
    description="a table of an SQLite file: read it, or write it in one transaction (insert/replace/upsert)",
    source=SourceRole(
        options=SqliteReaderOptions,
        splitter=SqliteSplitter,
        reader=SqliteReader,
        periphery=SqliteReaderPeriphery,
    ),
    sink=SinkRole(
        options=SqliteWriterOptions,
        periphery=SqliteWriterPeriphery,
        writer=SqliteWriter,
        single_writer_key=_single_writer_key,
        owned_path=_owned_path,  # so no file destination's directory holds the database
    ),
)

"""The sqlite store: a table of an SQLite file as a source (read-only) and as a transactional destination.

Reading: one split per table, typed by the declared column types. Writing: one ``BEGIN IMMEDIATE``
transaction per destination (the table is created inside it when missing), ``insert``, ``replace``
or ``upsert`` in savepointed batches, COMMIT on success and ROLLBACK otherwise. A file admits one
writing destination per task (``single_writer_key``), since the destination holds its write lock.
Missing parent directories are created; a database file the run created is removed on rollback
(with its ``-journal``/``-wal``/``-shm``), one that existed is left as it was.

:mod:`.options` holds the parameters, :mod:`.reader` and :mod:`.writer` the roles, :mod:`.types`
the type mapping and :mod:`.connection` how files are opened.
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole
from wormhole.plugins.sqlite.options import SqliteReaderOptions, SqliteWriterOptions, owned_path, single_writer_key
from wormhole.plugins.sqlite.reader import SqliteReader, SqliteReaderPeriphery, SqliteSplitter
from wormhole.plugins.sqlite.writer import SqliteWriter, SqliteWriterPeriphery

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
        single_writer_key=single_writer_key,
        owned_path=owned_path,  # so no file destination's directory holds the database
    ),
)

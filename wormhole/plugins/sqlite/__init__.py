"""The sqlite store: a table of an SQLite file as a source (read-only) and as a transactional destination.

Reading: one split per table, typed by the declared column types. Writing: rows staged in the same
file in savepointed batches, each split committed with its marker row when it ends (so a crashed run
resumes), then one final transaction creates the table when missing and loads the staged rows with
``insert``, ``replace`` or ``upsert``; rollback drops the staging and leaves the target as it was. A file admits one
writing destination per task (``single_writer_key``), since the destination holds its write lock.
Missing parent directories are created; a database file the run created is removed on rollback
(with its ``-journal``/``-wal``/``-shm``), one that existed is left as it was.

The entry below says what the store can do (its roles' facets), :mod:`.options` holds the parameters,
:mod:`.splitter`, :mod:`.reader`, :mod:`.periphery` (both roles'), :mod:`.writer` and :mod:`.staging`
the roles, :mod:`.tables` the catalog of a whole file (``tables``), :mod:`.types` the type mapping and
:mod:`.connection` how files are opened.
"""

from __future__ import annotations

from wormhole.database.facet import CatalogFacet
from wormhole.plugins.base import Plugin, SinkRole, SourceRole, TargetRows
from wormhole.plugins.facets import DdlFacet, DurableFacet, LeftoverFacet, SnapshotFacet
from wormhole.plugins.sqlite.bounds import bounds
from wormhole.plugins.sqlite.ddl import SQLITE_DDL, open_session
from wormhole.plugins.sqlite.options import SqliteReaderOptions, SqliteWriterOptions, owned_path, single_writer_key
from wormhole.plugins.sqlite.periphery import SqliteReaderPeriphery, SqliteWriterPeriphery
from wormhole.plugins.sqlite.reader import SqliteReader
from wormhole.plugins.sqlite.snapshot import open_snapshot
from wormhole.plugins.sqlite.splitter import SqliteSplitter
from wormhole.plugins.sqlite.tables import open_catalog
from wormhole.plugins.sqlite.writer import SqliteWriter

SOURCE = SourceRole(
    options=SqliteReaderOptions,
    splitter=SqliteSplitter,
    reader=SqliteReader,
    periphery=SqliteReaderPeriphery,
    bounds=bounds,
    pushdown="sqlite",  # the reader adds the task's leading filters to its query
    catalog=CatalogFacet(open=open_catalog),  # a whole file's tables (``tables``)
    snapshot=SnapshotFacet(open=open_snapshot),  # one read transaction every split reads in, one at a time
)

# One writer: the destination holds the file's write lock. In Spark mode its rows are written on
# the driver (no spark_partitions).
def _target_rows(options: SqliteWriterOptions) -> TargetRows:
    """An insert adds to the table's rows; replace and upsert may change them (``settings.verify``)."""
    return TargetRows("added" if options.write_mode == "insert" else "merged", options.columns)


SINK = SinkRole(
    options=SqliteWriterOptions,
    periphery=SqliteWriterPeriphery,
    writer=SqliteWriter,
    single_writer_key=single_writer_key,
    owned_path=owned_path,  # so no file destination's directory holds the database
    method_keys=("write_mode",),
    targets=("path", "table"),
    # Each split's staged rows committed with its marker row.
    durable=DurableFacet(writer=SqliteWriter, held=SqliteWriterPeriphery.durable_splits,
                         release=SqliteWriterPeriphery.release),
    # Staging and marker tables of crashed runs.
    leftovers=LeftoverFacet(find=SqliteWriterPeriphery.leftovers, clean=SqliteWriterPeriphery.clean_leftovers),
    # A database task creates its tables from the source's definitions.
    ddl=DdlFacet(dialect=SQLITE_DDL, open=open_session),
    target_rows=_target_rows,
    delete_keys=SqliteWriterPeriphery.delete_keys,
    upsert_params=lambda key: {"write_mode": "upsert", "key": list(key)},
    count_rows=SqliteWriterPeriphery.count_rows,
)

PLUGIN = Plugin(
    name="sqlite",
    description="a table of an SQLite file: read it, or write it in one transaction (insert/replace/upsert)",
    source=SOURCE,
    sink=SINK,
)

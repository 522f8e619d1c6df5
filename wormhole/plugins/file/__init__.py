"""The file store: csv, jsonl and parquet files as a source (file, directory or glob) and as a destination directory.

Reading: one split per file; rows that do not convert to the column types go to the dirty sink
with ``<file>:<line>`` (parquet: ``<file>: row <n>``). Writing: one part file per writer thread (or per
split, made durable by a rename when the split ends, so a crashed run resumes) in a temporary
directory beside the target, moved into place on commit (``overwrite`` swaps the directory,
``append`` adds parts), with a ``_SUCCESS`` marker; rollback removes the temporary directory, so the
target is never half-written. Overwrite replaces only a previous wormhole output (or an empty or
missing directory) unless ``overwrite: force``; two destinations may not write the same directory or
one inside the other (``owned_path``). parquet goes through pyarrow (the ``parquet`` extra), imported
only when a task uses that format.

Modules: ``options``; ``splitter`` (the files, a split each), ``reader`` (the
dispatching reader), ``periphery`` (the files sized; the temporary directory, commit, rollback, the
record of durable splits, leftovers) and ``writer`` (part writers); per format ``csv_format``,
``jsonl_format``, ``parquet_format`` (values both ways) and ``parquet_part`` (the parquet part writer);
``convert`` (batch conversion csv and jsonl share), ``layout`` (part names, the marker, foreign
entries); ``spark`` (the Spark adapter: the native parquet write).
"""

from __future__ import annotations

from wormhole.plugins.base import Plugin, SinkRole, SourceRole, TargetRows
from wormhole.plugins.facets import DurableFacet, LeftoverFacet
from wormhole.plugins.file.layout import SUCCESS_MARKER
from wormhole.plugins.file.options import ColumnOption, FileReaderOptions, FileWriterOptions
from wormhole.plugins.file.periphery import FileReaderPeriphery, FileWriterPeriphery
from wormhole.plugins.file.reader import FileReader, declared_schema
from wormhole.plugins.file.splitter import FileSplitter, resolve_files
from wormhole.plugins.file.writer import FileWriter

__all__ = [
    "PLUGIN",
    "SUCCESS_MARKER",
    "ColumnOption",
    "FileReader",
    "FileReaderOptions",
    "FileReaderPeriphery",
    "FileSplitter",
    "FileWriter",
    "FileWriterOptions",
    "FileWriterPeriphery",
    "resolve_files",
]


def _owned_path(options: FileWriterOptions) -> str:
    return options.path


SOURCE = SourceRole(
    options=FileReaderOptions,
    splitter=FileSplitter,
    reader=FileReader,
    periphery=FileReaderPeriphery,
    declared_schema=declared_schema,  # csv and jsonl with columns
)

SINK = SinkRole(
    options=FileWriterOptions,
    periphery=FileWriterPeriphery,
    writer=FileWriter,
    owned_path=_owned_path,  # the target directory: no other destination may write in or over it
    method_keys=("format", "mode"),
    targets=("path",),
    spark_write="wormhole.plugins.file.spark:write",  # parquet; csv and jsonl keep the row writer's text
    spark_replaces=lambda options: options.format == "parquet",
    # A split's part is renamed into its final name when the split ends.
    durable=DurableFacet(writer=FileWriter, held=FileWriterPeriphery.durable_splits,
                         release=FileWriterPeriphery.release),
    # Temporary and set-aside directories of crashed runs.
    leftovers=LeftoverFacet(find=FileWriterPeriphery.leftovers, clean=FileWriterPeriphery.clean_leftovers),
    spark_partitions=True,  # a part per partition, created afresh: a retried partition replaces it
    # overwrite: the directory holds only the run's parts once committed.
    target_rows=lambda options: TargetRows("replaced" if options.mode == "overwrite" else "added"),
)

PLUGIN = Plugin(
    name="file",
    description="csv, jsonl and parquet files: read a file, directory or glob; write part files into a directory",
    source=SOURCE,
    sink=SINK,
)

"""The file store's source role: find the files, split by file, and read each through its format.

One split per file, sorted by path. The reader settles the schema (``columns``, the csv header, the
first JSON object, or the first parquet file's columns) and hands each file to its format's reader
(:mod:`~wormhole.plugins.file.csv_format`, :mod:`~wormhole.plugins.file.jsonl_format`,
:mod:`~wormhole.plugins.file.parquet_format`), which yields typed rows and the rows it rejected;
the rejected go to the dirty sink with the split's id.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial

from wormhole.errors import ReadError, SplitError, StorageError
from wormhole.plugins.base import Column, ReadContext, Row, Schema, SourceInfo, Split
from wormhole.plugins.file import csv_format, jsonl_format
from wormhole.plugins.file.convert import FormatReader
from wormhole.plugins.file.options import EXTENSIONS, FileReaderOptions
from wormhole.plugins.file.parquet_format import ParquetReader, footer_rows

PLUGIN_NAME = "file"


def resolve_files(path: str, fmt: str, error: type[StorageError]) -> list[str]:
    """Absolute paths of the regular files ``path`` names, sorted; ``error`` when there are none."""
    if os.path.isdir(path):
        ext = "." + EXTENSIONS[fmt]
        try:
            with os.scandir(path) as entries:
                found = [e.path for e in entries
                         if e.name.endswith(ext) and not e.name.startswith(("_", ".")) and e.is_file()]
        except OSError as exc:
            raise error(f"cannot list directory {path}: {exc}", plugin=PLUGIN_NAME) from exc
    elif os.path.isfile(path):
        found = [path]
    else:
        # Hadoop-style markers (_SUCCESS) and hidden files are never data, even when a glob matches.
        found = [p for p in glob.glob(path, recursive=True)
                 if not os.path.basename(p).startswith(("_", ".")) and os.path.isfile(p)]
    if not found:
        raise error(f"no {fmt} file matches {path}", plugin=PLUGIN_NAME)
    return sorted(os.path.abspath(p) for p in found)


class FileSplitter:
    """One split per file, sorted by path."""

    def __init__(self, options: FileReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def split(self, advice: int) -> list[Split]:
        files = resolve_files(self.options.path, self.options.format, SplitError)
        return [Split(id=p, resource_mark="file:" + os.path.dirname(p), params={"path": p}) for p in files]


class FileReaderPeriphery:
    """Checks that the files exist; sizes them (and counts parquet rows from the footers)."""

    def __init__(self, options: FileReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def prepare(self) -> SourceInfo:
        files = resolve_files(self.options.path, self.options.format, ReadError)
        try:
            size = sum(os.path.getsize(p) for p in files)
        except OSError as exc:
            raise ReadError(f"cannot stat {self.options.path}: {exc}", plugin=PLUGIN_NAME) from exc
        if self.options.format != "parquet":
            return SourceInfo(estimated_bytes=size)
        return SourceInfo(estimated_rows=footer_rows(files), estimated_bytes=size)


def declared_schema(options: FileReaderOptions) -> Schema | None:
    """csv and jsonl with ``columns``: those columns, known at validation; parquet's types are the file's."""
    if options.format == "parquet" or options.columns is None:
        return None
    return Schema(tuple(Column(c.name, c.type) for c in options.columns))


class FileReader:
    """Reads csv, jsonl or parquet files; one instance per reader thread."""

    def __init__(self, options: FileReaderOptions, ctx: ReadContext) -> None:
        self.options = options
        self.ctx = ctx
        self._schema: Schema | None = None
        self._format: FormatReader | None = None
        self._parquet = (ParquetReader(options, self._files, ctx.batch_rows)
                         if options.format == "parquet" else None)

    def _files(self) -> list[str]:
        return resolve_files(self.options.path, self.options.format, ReadError)

    def schema(self) -> Schema:
        if self._schema is None:
            self._schema = self._settle_schema()
        return self._schema

    def _settle_schema(self) -> Schema:
        opts = self.options
        if self._parquet is not None:
            return self._parquet.schema()
        declared = declared_schema(opts)
        if declared is not None:
            return declared
        if opts.format == "csv":
            if not opts.header:
                raise ReadError(f"{opts.path}: columns are required when header is false", plugin=PLUGIN_NAME)
            return self._infer(partial(csv_format.header_schema, delimiter=opts.delimiter))
        return self._infer(jsonl_format.first_object_schema)

    def _infer(self, from_file: Callable[[str], Schema | None]) -> Schema:
        """The schema of the first file that has one (empty files are skipped)."""
        for path in self._files():
            schema = from_file(path)
            if schema is not None:
                return schema
        raise ReadError(f"{self.options.path}: every file is empty; set columns to read it", plugin=PLUGIN_NAME)

    def _format_reader(self) -> FormatReader:
        if self._format is None:
            if self._parquet is not None:
                self._format = self._parquet
            elif self.options.format == "csv":
                self._format = csv_format.CsvReader(self.options, self.schema(), self.ctx.batch_rows)
            else:
                self._format = jsonl_format.JsonlReader(self.schema(), self.ctx.batch_rows)
        return self._format

    def read(self, split: Split) -> Iterator[Sequence[Row]]:
        self.schema()  # settled before the first batch is asked for, as the engine expects
        fmt = self._format_reader()
        return self._rows(fmt, str(split.params.get("path", split.id)), split.id)

    def _rows(self, fmt: FormatReader, path: str, split_id: str) -> Iterator[Sequence[Row]]:
        for rows, rejected in fmt.batches(path):
            if rejected:
                self.ctx.dirty.reject("source", rejected, split_id)
            if rows:
                yield rows

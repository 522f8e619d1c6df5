"""The file store's reader: each split (a file) read through its format.

The reader settles the schema (``columns``, the csv header, the
first JSON object, or the first parquet file's columns) and hands each file to its format's reader
(:mod:`~wormhole.plugins.file.csv_format`, :mod:`~wormhole.plugins.file.jsonl_format`,
:mod:`~wormhole.plugins.file.parquet_format`), which yields typed rows and the rows it rejected;
the rejected go to the dirty sink with the split's id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial

from wormhole.errors import ReadError
from wormhole.plugins.base import Batch, Column, ReadContext, Row, Schema, Split
from wormhole.plugins.file import csv_format, jsonl_format
from wormhole.plugins.file.convert import FormatReader
from wormhole.plugins.file.options import FileReaderOptions
from wormhole.plugins.file.parquet_format import ParquetReader
from wormhole.plugins.file.splitter import resolve_files

PLUGIN_NAME = "file"


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

    def read(self, split: Split) -> Iterator[Batch | Sequence[Row]]:
        self.schema()  # settled before the first batch is asked for, as the engine expects
        fmt = self._format_reader()
        return self._rows(fmt, str(split.params.get("path", split.id)), split.id)

    def _rows(self, fmt: FormatReader, path: str, split_id: str) -> Iterator[Batch | Sequence[Row]]:
        for rows, rejected in fmt.batches(path):
            if rejected:
                self.ctx.dirty.reject("source", rejected, split_id)
            if rows:
                yield rows

"""The file store's writers: one part file per writer thread, or one per split, in the periphery's
temporary directory (:mod:`~wormhole.plugins.file.periphery` holds the layout, the commit and the record
of durable splits).

Formats: csv and jsonl batches are serialised in memory (:mod:`~wormhole.plugins.file.csv_format`,
:mod:`~wormhole.plugins.file.jsonl_format`) and appended to the part in one call; parquet parts are
written by :class:`~wormhole.plugins.file.parquet_part.ParquetPart`, csv and jsonl ones by
:class:`~wormhole.plugins.file.text_part.TextPart`. A part file is always created
afresh, so a worker index that is run again (after a failure) leaves its rows once.
"""

from __future__ import annotations

import contextlib
import os

from wormhole.errors import WriteError
from wormhole.plugins.base import Batch, WriteContext, WriteResult
from wormhole.plugins.file.csv_format import CsvEncoder
from wormhole.plugins.file.jsonl_format import JsonlEncoder
from wormhole.plugins.file.layout import (
    INPROGRESS,
    SPLIT_ID_FILE,
    fsync_dir,
    split_key,
    split_part_name,
    write_durably,
)
from wormhole.plugins.file.options import (
    EXTENSIONS,
    PYARROW_MISSING,
    FileWriterOptions,
    import_pyarrow,
)
from wormhole.plugins.file.parquet_part import ParquetPart
from wormhole.plugins.file.periphery import FileWriterPeriphery
from wormhole.plugins.file.text_part import TextPart

PLUGIN_NAME = "file"


class FileWriter:
    """Writes the destination's parts for one writer thread: a plain part (``write``/``flush``), or one
    part per open split (:class:`~wormhole.plugins.base.SplitWriter`). Parts are created on first use,
    so a split writer leaves no empty plain part."""

    def __init__(self, options: FileWriterOptions, ctx: WriteContext, periphery: FileWriterPeriphery,
                 worker: int) -> None:
        self.options = options
        self.ctx = ctx
        self.worker = worker
        self.tmp_dir = periphery.tmp_dir
        self.ext = EXTENSIONS[options.format]
        self.path = os.path.join(self.tmp_dir, f"part-{worker:05d}.{self.ext}")
        self._part: TextPart | ParquetPart | None = None
        self._splits: dict[str, TextPart | ParquetPart] = {}

    def _make_part(self, path: str) -> TextPart | ParquetPart:
        schema = self.ctx.schema
        if self.options.format == "parquet":
            return ParquetPart(path, schema, self._error)
        encoder = JsonlEncoder(schema) if self.options.format == "jsonl" else CsvEncoder(self.options, schema)
        return TextPart(path, encoder, self._error)

    def _error(self, message: str) -> WriteError:
        return WriteError(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def open(self) -> None:
        # Each part is created when its first rows come; only a missing pyarrow is found now.
        if self.options.format == "parquet":
            try:
                import_pyarrow()
            except ImportError as exc:
                raise self._error(PYARROW_MISSING) from exc

    def _plain(self) -> TextPart | ParquetPart:
        if self._part is None:
            part = self._make_part(self.path)
            part.open()
            self._part = part
        return self._part

    def write(self, batch: Batch) -> WriteResult:
        return self._plain().write(batch)

    def flush(self) -> None:
        self._plain().flush()

    # -- splits ---------------------------------------------------------------------------------

    def _split_part(self, split_id: str) -> TextPart | ParquetPart:
        part = self._splits.get(split_id)
        if part is None:
            # The worker index keeps two writers that were both given the split apart.
            name = f"part-{split_key(split_id)}.w{self.worker:05d}.{self.ext}{INPROGRESS}"
            part = self._make_part(os.path.join(self.tmp_dir, name))
            part.open()
            self._splits[split_id] = part
        return part

    def write_split(self, split_id: str, batch: Batch) -> WriteResult:
        return self._split_part(split_id).write(batch)

    def end_split(self, split_id: str, rows: int) -> None:
        part = self._split_part(split_id)  # a split without rows still gets its (empty) part: its record
        del self._splits[split_id]
        try:
            part.flush()
            part.close()
        except WriteError:
            self._discard(part)
            raise
        key = split_key(split_id)
        final = os.path.join(self.tmp_dir, split_part_name(rows, key, self.ext))
        try:
            if key.startswith("h"):
                write_durably(os.path.join(self.tmp_dir, SPLIT_ID_FILE + key[1:]),
                              split_id.encode("utf-8", "surrogatepass"))
            os.rename(part.path, final)
            fsync_dir(self.tmp_dir)
        except OSError as exc:
            self._discard(part)
            raise self._error(f"cannot make split {split_id} durable as {final}: {exc}") from exc
        self.ctx.log.debug("file.split_durable", split_id=split_id, rows=rows, part=final)

    def abort_split(self, split_id: str) -> None:
        part = self._splits.pop(split_id, None)
        if part is not None:
            self._discard(part)

    @staticmethod
    def _discard(part: TextPart | ParquetPart) -> None:
        with contextlib.suppress(WriteError):
            part.close()
        with contextlib.suppress(OSError):
            os.unlink(part.path)

    def close(self) -> None:
        # Splits still open were neither ended nor aborted: their rows are not durable, so drop them.
        for split_id in list(self._splits):
            self.abort_split(split_id)
        if self._part is not None:
            self._part.close()

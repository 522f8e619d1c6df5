"""The file store's sink role: part files in a temporary directory, renamed into the target on commit.

Layout, for a target ``<parent>/<name>`` written by task T, run R::

    <parent>/.<name>.wormhole-T-R.tmp/part-00000.csv   writers (one part per worker), then _SUCCESS
    <parent>/.<name>.wormhole-T-R.old                  overwrite: the previous target, while swapping

Overwrite swaps whole directories by rename; append moves each part into the target under a name
unique to the run (``part-T-R-00000.csv``). Rollback only ever removes the temporary directory, so
the target is never half-written.

Overwrite only replaces what wormhole wrote: a missing or empty directory, or one holding nothing but
``_SUCCESS`` and part files (see :func:`~wormhole.plugins.file.layout.foreign_entries`; Spark's parts
and ``.crc`` files count too). Anything else needs ``overwrite: force``. The target is checked in
``prepare`` (before any row moves) and again in ``commit`` right before the swap, so a file put there
during the run is never deleted.

Formats: csv and jsonl batches are serialised in memory (:mod:`~wormhole.plugins.file.csv_format`,
:mod:`~wormhole.plugins.file.jsonl_format`) and appended to the part in one call; parquet parts are
written by :class:`~wormhole.plugins.file.parquet_part.ParquetPart`. A part file is always created
afresh, so a worker index that is run again (after a failure) leaves its rows once.
"""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Callable, Sequence
from typing import BinaryIO, Protocol

from wormhole.errors import CommitError, PrepareError, RollbackError, StorageError, WriteError
from wormhole.plugins.base import Rejected, Row, WriteContext, WriteResult
from wormhole.plugins.file.csv_format import CsvEncoder
from wormhole.plugins.file.jsonl_format import JsonlEncoder
from wormhole.plugins.file.layout import (
    SUCCESS_MARKER,
    create_part,
    foreign_entries,
    fsync_dir,
    remove,
    write_marker,
)
from wormhole.plugins.file.options import (
    EXTENSIONS,
    PYARROW_MISSING,
    FileWriterOptions,
    import_pyarrow,
    protected_directory,
)
from wormhole.plugins.file.parquet_part import ParquetPart

PLUGIN_NAME = "file"

SERIALISE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, RecursionError, csv.Error)
"""What a row the format cannot hold raises (UnicodeEncodeError is a ValueError)."""


class FileWriterPeriphery:
    """Owns the temporary directory of one destination and the swap into the target."""

    def __init__(self, options: FileWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        self.target = os.path.abspath(options.path)
        parent, name = os.path.split(self.target)
        self.parent = parent
        stem = f".{name}.wormhole-{ctx.task_id}-{ctx.run_id}"
        self.tmp_dir = os.path.join(parent, stem + ".tmp")
        self.old_dir = os.path.join(parent, stem + ".old")
        self._committed = False

    def _error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def prepare(self) -> None:
        if self.options.format == "parquet":
            try:
                import_pyarrow()  # fail before any row moves, not in every writer
            except ImportError as exc:
                raise self._error(PrepareError, PYARROW_MISSING) from exc
        if os.path.lexists(self.target) and not os.path.isdir(self.target):
            raise self._error(PrepareError, f"target {self.target} exists and is not a directory")
        if self.options.mode == "overwrite":
            self._check_replaceable(PrepareError)  # before anything is created or removed
        try:
            os.makedirs(self.parent, exist_ok=True)
            if os.path.lexists(self.tmp_dir):
                self.ctx.log.info("file.stale_tmp_removed", path=self.tmp_dir)  # an earlier attempt of this run
                remove(self.tmp_dir)
            os.mkdir(self.tmp_dir)
        except OSError as exc:
            raise self._error(PrepareError, f"cannot create the temporary directory {self.tmp_dir}: "
                                            f"{exc}") from exc

    def _check_replaceable(self, cls: type[StorageError]) -> None:
        """Raise ``cls`` unless overwrite may replace the target (see the module docstring)."""
        protected = protected_directory(self.options.path)  # validation refuses these; never here either
        if protected is not None:
            raise self._error(cls, f"target {self.target} is {protected}: mode overwrite never replaces it")
        if not os.path.lexists(self.target):
            return
        if not os.path.isdir(self.target):
            raise self._error(cls, f"target {self.target} exists and is not a directory")
        if self.options.overwrite == "force":
            return
        how = ('to replace it anyway, set "overwrite": "force" in this destination\'s params, '
               'or name a directory of its own')
        if os.path.islink(self.target):
            raise self._error(cls, f"target {self.target} is a symbolic link; mode overwrite replaces only a "
                                   f"directory wormhole wrote: {how}")
        try:
            foreign = foreign_entries(self.target)
        except OSError as exc:
            raise self._error(cls, f"cannot list the target {self.target}: {exc}") from exc
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise self._error(cls, f"target {self.target} is not a previous wormhole output (it holds {shown}); "
                                   f"mode overwrite replaces only a missing or empty directory or one holding "
                                   f"{SUCCESS_MARKER} and part files: {how}")

    def commit(self) -> None:
        if self._committed:
            return
        if not os.path.isdir(self.tmp_dir):
            raise self._error(CommitError, f"temporary directory {self.tmp_dir} is missing; was prepare run?")
        try:
            write_marker(self.tmp_dir)
            fsync_dir(self.tmp_dir)
        except OSError as exc:
            raise self._error(CommitError, f"cannot write {SUCCESS_MARKER} in {self.tmp_dir}: {exc}") from exc
        if self.options.mode == "overwrite":
            self._swap()
        else:
            self._append()
        self._committed = True

    def _swap(self) -> None:
        # Again, right before the swap: a file put into the target during the run is never deleted.
        self._check_replaceable(CommitError)
        moved_aside = False
        try:
            if os.path.lexists(self.target):
                remove(self.old_dir)
                os.rename(self.target, self.old_dir)
                moved_aside = True
            os.rename(self.tmp_dir, self.target)
        except OSError as exc:
            if moved_aside and not os.path.lexists(self.target):
                try:
                    os.rename(self.old_dir, self.target)
                except OSError:
                    pass  # rollback() retries the restore
            raise self._error(CommitError, f"cannot move {self.tmp_dir} to {self.target}: {exc}") from exc
        fsync_dir(self.parent)
        # The new target is in place: the old one is garbage, and failing to delete it is no failure.
        try:
            remove(self.old_dir)
        except OSError as exc:
            self.ctx.log.warning("file.old_target_left", path=self.old_dir, error=str(exc))

    def _append(self) -> None:
        prefix = f"part-{self.ctx.task_id}-{self.ctx.run_id}-"
        moved: list[tuple[str, str]] = []
        try:
            os.makedirs(self.target, exist_ok=True)
            for name in sorted(os.listdir(self.tmp_dir)):
                if not name.startswith("part-"):
                    continue
                src = os.path.join(self.tmp_dir, name)
                dst = os.path.join(self.target, prefix + name[len("part-"):])
                os.rename(src, dst)
                moved.append((src, dst))
            write_marker(self.target)
            fsync_dir(self.target)
        except OSError as exc:
            # Put the parts back, so the target holds none of this run's rows.
            for src, dst in reversed(moved):
                try:
                    os.rename(dst, src)
                except OSError:
                    pass
            raise self._error(CommitError, f"cannot move the parts of {self.tmp_dir} into {self.target}: "
                                           f"{exc}") from exc
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def rollback(self) -> None:
        if self._committed:
            return
        try:
            # A commit that died between its two renames left the previous target aside: restore it.
            if os.path.lexists(self.old_dir) and not os.path.lexists(self.target):
                os.rename(self.old_dir, self.target)
                self.ctx.log.warning("file.target_restored", target=self.target, from_path=self.old_dir)
            remove(self.tmp_dir)
        except OSError as exc:
            raise self._error(RollbackError, f"cannot remove {self.tmp_dir}: {exc}") from exc


class _Encoder(Protocol):
    def header(self) -> bytes: ...

    def encode(self, rows: Sequence[Row]) -> bytes: ...


class TextPart:
    """One csv or jsonl part file: each batch serialised in memory, then written in one call."""

    def __init__(self, path: str, encoder: _Encoder, error: Callable[[str], WriteError]) -> None:
        self.path = path
        self._encode = encoder.encode
        self._header = encoder.header
        self._error = error
        self._file: BinaryIO | None = None

    def open(self) -> None:
        try:
            self._file = create_part(self.path)
            self._file.write(self._header())
        except OSError as exc:
            raise self._error(f"cannot open {self.path}: {exc}") from exc
        except ValueError as exc:  # a column name UTF-8 cannot hold
            raise self._error(f"cannot write the csv header of {self.path}: {exc}") from exc

    def write(self, rows: Sequence[Row]) -> WriteResult:
        if self._file is None:
            raise self._error(f"{self.path} is not open")
        if not rows:
            return WriteResult(written=0)
        rejected: list[Rejected] = []
        try:
            data = self._encode(rows)
        except SERIALISE_ERRORS:
            # Some row cannot be written: serialise one by one and keep the others.
            parts: list[bytes] = []
            for row in rows:
                try:
                    parts.append(self._encode((row,)))
                except SERIALISE_ERRORS as exc:
                    rejected.append(Rejected(row, f"{type(exc).__name__}: {exc}"))
            data = b"".join(parts)
        try:
            self._file.write(data)
        except OSError as exc:
            raise self._error(f"cannot write {self.path}: {exc}") from exc
        return WriteResult(written=len(rows) - len(rejected), rejected=tuple(rejected))

    def flush(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise self._error(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        f, self._file = self._file, None
        if f is None:
            return
        try:
            f.close()
        except OSError as exc:
            raise self._error(f"cannot close {self.path}: {exc}") from exc


class FileWriter:
    """Writes one part file of the destination's temporary directory; one instance per writer thread."""

    def __init__(self, options: FileWriterOptions, ctx: WriteContext, periphery: FileWriterPeriphery,
                 worker: int) -> None:
        self.ctx = ctx
        self.path = os.path.join(periphery.tmp_dir, f"part-{worker:05d}.{EXTENSIONS[options.format]}")
        self._part = self._make_part(options)

    def _make_part(self, options: FileWriterOptions) -> TextPart | ParquetPart:
        schema = self.ctx.schema
        if options.format == "parquet":
            return ParquetPart(self.path, schema, self._error)
        encoder = JsonlEncoder(schema) if options.format == "jsonl" else CsvEncoder(options, schema)
        return TextPart(self.path, encoder, self._error)

    def _error(self, message: str) -> WriteError:
        return WriteError(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def open(self) -> None:
        self._part.open()

    def write(self, rows: Sequence[Row]) -> WriteResult:
        return self._part.write(rows)

    def flush(self) -> None:
        self._part.flush()

    def close(self) -> None:
        self._part.close()

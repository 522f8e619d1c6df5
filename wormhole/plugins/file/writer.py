"""The file store's sink role: part files in a temporary directory, renamed into the target on commit.

Layout, for a target ``<parent>/<name>`` written by task T, run R::

    <parent>/.<name>.wormhole-T-R.tmp/part-00000.csv   writers (one part per worker), then _SUCCESS
    <parent>/.<name>.wormhole-T-R.old                  overwrite: the previous target, while swapping

Overwrite swaps whole directories by rename; append moves each part into the target under a name
unique to the run (``part-T-R-00000.csv``). Rollback only ever removes the temporary directory, so
the target is never half-written.

Overwrite only replaces what wormhole wrote: a missing or empty directory, or one holding nothing but
``_SUCCESS`` and part files (see :func:`foreign_entries`; Spark's parts and ``.crc`` files count too).
Anything else needs ``overwrite: force``. The target is checked in ``prepare`` (before any row moves)
and again in ``commit`` right before the swap, so a file put there during the run is never deleted.

Formats: csv and jsonl are serialised per batch and appended to the part; parquet (through pyarrow,
imported only for that format) converts each batch column-wise to Arrow arrays, buffers them and
writes them as snappy-compressed row groups of about :data:`ROW_GROUP_ROWS` rows. A part file is always
created afresh, so a worker index that is run again (after a failure) leaves its rows once.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from datetime import date
from decimal import Decimal
from types import ModuleType
from typing import Any, BinaryIO

from wormhole.errors import CommitError, PrepareError, RollbackError, WriteError
from wormhole.plugins.base import Rejected, Row, Schema, WriteContext, WriteResult
from wormhole.plugins.file.options import (
    EXTENSIONS,
    PYARROW_MISSING,
    FileWriterOptions,
    import_pyarrow,
    protected_directory,
)

PLUGIN_NAME = "file"
SUCCESS_MARKER = "_SUCCESS"

SERIALISE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError, RecursionError, csv.Error)
"""What a row the format cannot hold raises (UnicodeEncodeError is a ValueError)."""

ARROW_ERRORS = (ValueError, TypeError, ArithmeticError, RecursionError, NotImplementedError)
"""What converting a value pyarrow's type cannot hold raises: ArrowInvalid is a ValueError,
ArrowTypeError a TypeError, ArrowNotImplementedError a NotImplementedError; OverflowError (an int
beyond int64), UnicodeEncodeError (a lone surrogate)."""

ROW_GROUP_ROWS = 128 * 1024
"""parquet: buffered batches are written as one row group once they hold this many rows. Readers
(Spark included) prefer a few large row groups to one per batch; the bound keeps a writer's memory small."""


def _fsync_dir(path: str) -> None:
    # Make renames and new entries durable; some filesystems refuse O_RDONLY fsync on dirs.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    """Remove a directory tree, a file or a symlink (never following the link)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _create_part(path: str) -> BinaryIO:
    # A new file, never an old one truncated: when a worker index runs again after a failure, a
    # writer of the failed attempt that is still closing writes into the unlinked old file, never
    # into this one, so the rerun's part holds its rows exactly once.
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return open(path, "wb")


_PART = r"part-[0-9]+(?:-[0-9A-Za-z]+)*(?:\.snappy)?\.(?:csv|jsonl|parquet)"
OWN_NAME = re.compile(rf"_SUCCESS|\._SUCCESS\.crc|{_PART}|\.{_PART}\.crc")
"""Names wormhole leaves in a target: the marker, the parts of local mode (``part-00000.csv``) and of
append (``part-7-1-00000.csv``), Spark's parts (``part-00000-<uuid>-c000.snappy.parquet``) and the
checksum files Spark's local filesystem writes beside them (``.part-...parquet.crc``, ``._SUCCESS.crc``)."""


def foreign_entries(directory: str) -> list[str]:
    """The entries of ``directory`` that are not a previous wormhole output, sorted; [] when it may
    be replaced: it is empty, or it holds ``_SUCCESS`` and otherwise only regular files named as
    wormhole names its parts (:data:`OWN_NAME`). Without ``_SUCCESS`` every entry is foreign."""
    with os.scandir(directory) as it:
        entries = list(it)
    if not entries:
        return []
    marked = any(e.name == SUCCESS_MARKER and e.is_file(follow_symlinks=False) for e in entries)
    return sorted(e.name for e in entries
                  if not (marked and OWN_NAME.fullmatch(e.name) and e.is_file(follow_symlinks=False)))


def _write_marker(directory: str) -> None:
    with open(os.path.join(directory, SUCCESS_MARKER), "wb") as f:
        f.flush()
        os.fsync(f.fileno())


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

    def _error(self, cls: type[Exception], message: str) -> Exception:
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
            _remove(self.tmp_dir)  # stale, from an earlier attempt of this very run
            os.mkdir(self.tmp_dir)
        except OSError as exc:
            raise self._error(PrepareError, f"cannot create the temporary directory {self.tmp_dir}: "
                                            f"{exc}") from exc

    def _check_replaceable(self, cls: type[Exception]) -> None:
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
            _write_marker(self.tmp_dir)
            _fsync_dir(self.tmp_dir)
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
                _remove(self.old_dir)
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
        _fsync_dir(self.parent)
        # The new target is in place: the old one is garbage, and failing to delete it is no failure.
        try:
            _remove(self.old_dir)
        except OSError:
            pass

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
            _write_marker(self.target)
            _fsync_dir(self.target)
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
            _remove(self.tmp_dir)
        except OSError as exc:
            raise self._error(RollbackError, f"cannot remove {self.tmp_dir}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Value formatting


def _csv_bool(v: Any) -> Any:
    return v if v is None else ("true" if v else "false")


def _csv_bytes(v: Any) -> Any:
    return v if v is None else base64.b64encode(v).decode("ascii")


def _csv_json(v: Any) -> Any:
    return v if v is None else json.dumps(v, ensure_ascii=False)


_CSV_FORMAT: dict[str, Callable[[Any], Any]] = {"bool": _csv_bool, "bytes": _csv_bytes, "json": _csv_json}
"""Only these types need formatting: the csv module writes str() of the rest, which is already
the wanted text (ints, repr of floats, Decimal, date.isoformat, datetime.isoformat(" "))."""


def _json_default(v: Any) -> Any:
    if isinstance(v, date):  # datetime too
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(v).decode("ascii")
    raise TypeError(f"cannot write a value of type {type(v).__name__} as JSON")


class FileWriter:
    """Writes one part file; serialises each batch in memory, then writes it in one call.

    parquet parts are handled by a :class:`ParquetPart`, which this writer hands every call to.
    """

    def __init__(self, options: FileWriterOptions, ctx: WriteContext, periphery: FileWriterPeriphery,
                 worker: int) -> None:
        self.options = options
        self.ctx = ctx
        self.path = os.path.join(periphery.tmp_dir, f"part-{worker:05d}.{EXTENSIONS[options.format]}")
        self._file: BinaryIO | None = None
        self._names = ctx.schema.names
        self._parquet = ParquetPart(self.path, ctx.schema, self._error) if options.format == "parquet" else None
        # Fast path: with the default null text and no bool/bytes/json column, batches go to the
        # csv module untouched (it writes None as an empty field).
        fns = [(i, _csv_column_fn(c.type, options.null)) for i, c in enumerate(ctx.schema.columns)]
        self._csv_fns = [(i, fn) for i, fn in fns if fn is not None]
        # check_circular=False saves ~10% per row; a self-referencing value still fails (RecursionError).
        self._encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                             check_circular=False, default=_json_default).encode

    def _error(self, message: str) -> WriteError:
        return WriteError(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def open(self) -> None:
        if self._parquet is not None:
            return self._parquet.open()
        try:
            self._file = _create_part(self.path)
            if self.options.format == "csv" and self.options.header:
                self._file.write(self._csv_text([self._names]).encode("utf-8"))
        except OSError as exc:
            raise self._error(f"cannot open {self.path}: {exc}") from exc
        except ValueError as exc:
            raise self._error(f"cannot write the csv header of {self.path}: {exc}") from exc

    # -- serialising ----------------------------------------------------------------------------

    def _csv_text(self, rows: Sequence[Sequence[Any]]) -> str:
        buf = io.StringIO()
        csv.writer(buf, delimiter=self.options.delimiter, lineterminator="\n").writerows(rows)
        return buf.getvalue()

    def _csv_format(self, rows: Sequence[Row]) -> Sequence[Sequence[Any]]:
        if not self._csv_fns:
            return rows
        cols: list[Sequence[Any]] = list(zip(*rows, strict=True))
        for i, fn in self._csv_fns:
            cols[i] = fn(cols[i])
        return list(zip(*cols, strict=True))

    def _serialise(self, rows: Sequence[Row]) -> bytes:
        if self.options.format == "csv":
            return self._csv_text(self._csv_format(rows)).encode("utf-8")
        names = self._names
        encode = self._encode_json
        lines = [encode(dict(zip(names, r, strict=True))) for r in rows]
        lines.append("")
        return "\n".join(lines).encode("utf-8")

    def write(self, rows: Sequence[Row]) -> WriteResult:
        if self._parquet is not None:
            return self._parquet.write(rows)
        if self._file is None:
            raise self._error(f"{self.path} is not open")
        if not rows:
            return WriteResult(written=0)
        rejected: list[Rejected] = []
        try:
            data = self._serialise(rows)
        except SERIALISE_ERRORS:
            # Some row cannot be written: serialise one by one and keep the others.
            parts: list[bytes] = []
            for row in rows:
                try:
                    parts.append(self._serialise((row,)))
                except SERIALISE_ERRORS as exc:
                    rejected.append(Rejected(row, f"{type(exc).__name__}: {exc}"))
            data = b"".join(parts)
        try:
            self._file.write(data)
        except OSError as exc:
            raise self._error(f"cannot write {self.path}: {exc}") from exc
        return WriteResult(written=len(rows) - len(rejected), rejected=tuple(rejected))

    def flush(self) -> None:
        if self._parquet is not None:
            return self._parquet.flush()
        if self._file is None:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise self._error(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        if self._parquet is not None:
            return self._parquet.close()
        f, self._file = self._file, None
        if f is None:
            return
        try:
            f.close()
        except OSError as exc:
            raise self._error(f"cannot close {self.path}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# parquet


def arrow_types(pa: ModuleType) -> dict[str, Any]:
    """Logical type -> Arrow type of a parquet column: the contract Spark-written parquet shares."""
    return {
        "int": pa.int64(),
        "float": pa.float64(),
        "decimal": pa.decimal128(38, 18),
        "string": pa.string(),
        "bytes": pa.binary(),
        "bool": pa.bool_(),
        "date": pa.date32(),
        "datetime": pa.timestamp("us"),  # naive; pyarrow converts an aware value to UTC first
        "json": pa.string(),
    }


def _int_value(v: Any) -> Any:
    # pyarrow truncates a float or Decimal to int64 without a word (1.5 -> 1): only whole numbers pass.
    if v is None or type(v) is int or isinstance(v, bool):
        return v  # pyarrow itself refuses a bool
    n = int(v)
    if n != v:
        raise ValueError(f"{v!r} is not an integer")
    return n


def _int_column(col: Sequence[Any]) -> Sequence[Any]:
    if set(map(type, col)) <= {int, type(None)}:
        return col
    return [_int_value(v) for v in col]


def json_text(v: Any) -> Any:
    """A json value as parquet (and Spark) hold it: its JSON text; a str is taken as text already."""
    return v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False, allow_nan=False)


def _json_column(col: Sequence[Any]) -> Sequence[Any]:
    return [json_text(v) for v in col]


_ARROW_PREPARE: dict[str, Callable[[Sequence[Any]], Sequence[Any]]] = {"int": _int_column, "json": _json_column}
"""Columns that need Python work before ``pa.array``; pyarrow takes the others' values as they are."""


class ParquetPart:
    """One parquet part file: batches become Arrow tables, buffered into row groups of ROW_GROUP_ROWS.

    ``open`` creates the file afresh; ``flush`` writes the buffered rows as a row group and syncs;
    ``close`` writes what is left and the footer (nothing more after a failed write).
    """

    def __init__(self, path: str, schema: Schema, error: Callable[[str], WriteError]) -> None:
        self.path = path
        self._columns = schema.columns
        self._error = error
        self._pa: Any = None
        self._arrow_schema: Any = None
        self._file: BinaryIO | None = None
        self._writer: Any = None
        self._pending: list[Any] = []
        self._pending_rows = 0
        self._failed = False

    def open(self) -> None:
        try:
            pa, pq = import_pyarrow()
        except ImportError as exc:
            raise self._error(PYARROW_MISSING) from exc
        self._pa = pa
        types = arrow_types(pa)
        self._arrow_schema = pa.schema([pa.field(c.name, types[c.type], nullable=c.nullable)
                                        for c in self._columns])
        try:
            self._file = _create_part(self.path)
            self._writer = pq.ParquetWriter(self._file, self._arrow_schema, compression="snappy")
        except (OSError, pa.ArrowException) as exc:
            raise self._error(f"cannot open {self.path}: {exc}") from exc

    # -- converting -----------------------------------------------------------------------------

    def _array(self, i: int, col: Sequence[Any]) -> Any:
        column = self._columns[i]
        prepare = _ARROW_PREPARE.get(column.type)
        arr = self._pa.array(prepare(col) if prepare else col, type=self._arrow_schema.field(i).type)
        if arr.null_count and not column.nullable:
            raise ValueError("NULL in a column that is not nullable")
        return arr

    def _table(self, rows: Sequence[Row]) -> Any:
        cols = list(zip(*rows, strict=True))
        return self._pa.Table.from_arrays([self._array(i, col) for i, col in enumerate(cols)],
                                          schema=self._arrow_schema)

    def _convert(self, rows: Sequence[Row]) -> tuple[Any, list[Rejected]]:
        try:
            return self._table(rows), []
        except ARROW_ERRORS:
            pass  # some value does not fit its Arrow type: find the rows row by row
        good: list[Row] = []
        rejected: list[Rejected] = []
        width = len(self._columns)
        for row in rows:
            if len(row) != width:
                rejected.append(Rejected(tuple(row), f"expected {width} values, got {len(row)}"))
                continue
            for i, value in enumerate(row):
                try:
                    self._array(i, (value,))
                except ARROW_ERRORS as exc:
                    reason = f"column {self._columns[i].name}: {type(exc).__name__}: {exc}"
                    rejected.append(Rejected(tuple(row), reason))
                    break
            else:
                good.append(row)
        if not good:
            return None, rejected
        try:
            return self._table(good), rejected
        except ARROW_ERRORS as exc:  # every value converted alone; together they must too
            raise self._error(f"cannot convert a batch for {self.path}: {exc}") from exc

    # -- writing --------------------------------------------------------------------------------

    def _write_pending(self) -> None:
        if not self._pending:
            return
        pa = self._pa
        # Taken out first: after a failure the same rows are not tried again by close().
        tables, self._pending, self._pending_rows = self._pending, [], 0
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        try:
            self._writer.write_table(table, row_group_size=table.num_rows)
        except (OSError, pa.ArrowException) as exc:
            self._failed = True
            raise self._error(f"cannot write {self.path}: {exc}") from exc

    def write(self, rows: Sequence[Row]) -> WriteResult:
        if self._writer is None:
            raise self._error(f"{self.path} is not open")
        if not rows:
            return WriteResult(written=0)
        table, rejected = self._convert(rows)
        if table is not None:
            self._pending.append(table)
            self._pending_rows += table.num_rows
            if self._pending_rows >= ROW_GROUP_ROWS:
                self._write_pending()
        return WriteResult(written=len(rows) - len(rejected), rejected=tuple(rejected))

    def flush(self) -> None:
        if self._writer is None or self._file is None:
            return
        self._write_pending()
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            self._failed = True
            raise self._error(f"cannot flush {self.path}: {exc}") from exc

    def close(self) -> None:
        writer, f = self._writer, self._file
        if f is None:
            return
        pa = self._pa
        try:
            if writer is not None and not self._failed:
                try:
                    self._write_pending()
                    writer.close()  # the footer: without it the file is no parquet file
                    writer = None
                    f.flush()
                    os.fsync(f.fileno())
                    f.close()
                except (OSError, pa.ArrowException) as exc:
                    self._failed = True
                    raise self._error(f"cannot close {self.path}: {exc}") from exc
        finally:
            self._writer = self._file = None
            self._pending, self._pending_rows = [], 0
            # After a failure the part is garbage (rollback removes it): close quietly, so the first
            # error stands. pyarrow's writer must be closed too, or its finaliser writes into the file.
            if writer is not None:
                with contextlib.suppress(OSError, ValueError, pa.ArrowException):
                    writer.close()
            if not f.closed:
                with contextlib.suppress(OSError):
                    f.close()


def _csv_column_fn(ltype: str, null: str) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
    fmt = _CSV_FORMAT.get(ltype)
    if fmt is not None:
        if null:
            return lambda col: [null if v is None else fmt(v) for v in col]
        return lambda col: list(map(fmt, col))
    if null:
        # ``None in col`` is one C-level scan; most columns hold no NULL and are left as they are.
        return lambda col: [null if v is None else v for v in col] if None in col else col
    return None

"""The file store's options: what users write under ``source.params`` / ``destinations[i].params``.

Formats are csv, jsonl and parquet; parquet needs pyarrow (the ``parquet`` extra), imported only
when a task uses that format.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

from wormhole.options import Problems, join_path, opt

FileFormat = Literal["csv", "jsonl", "parquet"]

EXTENSIONS: dict[str, str] = {"csv": "csv", "jsonl": "jsonl", "parquet": "parquet"}
"""File extension per format: directory sources pick these files, writers name their parts so."""

PYARROW_MISSING = "pyarrow, a dependency of wormhole, cannot be imported: reinstall wormhole (pip install wormhole)"


def import_pyarrow() -> tuple[ModuleType, ModuleType]:
    """``pyarrow`` and ``pyarrow.parquet`` (a core dependency; ImportError with :data:`PYARROW_MISSING` for a
    broken install)."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ImportError(PYARROW_MISSING) from exc
    return pyarrow, pyarrow.parquet


def _check_csv_text(opts: FileReaderOptions | FileWriterOptions, path: str, problems: Problems) -> None:
    # The csv module needs a single-character delimiter; quotes and line ends would make the
    # output unreadable, so they are refused up front rather than producing broken files.
    if len(opts.delimiter) != 1:
        problems.add(join_path(path, "delimiter"), f"must be exactly one character, got {opts.delimiter!r}")
    elif opts.delimiter in ('"', "\r", "\n"):
        problems.add(join_path(path, "delimiter"), f"{opts.delimiter!r} cannot be a delimiter")
    if opts.delimiter and opts.delimiter in opts.null:
        problems.add(join_path(path, "null"), "must not contain the delimiter")


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnOption:
    name: str = opt(nonempty=True)
    """Column name (unique)."""
    type: Literal["int", "float", "decimal", "string", "bytes", "bool", "date", "datetime", "json"] = "string"
    """Logical type the values are converted to (csv/jsonl); rows that do not convert are rejected."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileReaderOptions:
    path: str = opt(nonempty=True)
    """A file, a directory (every ``*.<format>`` file in it, not ``_``/``.`` names) or a glob."""
    format: FileFormat
    """csv, jsonl or parquet; header, delimiter and null only matter for csv."""
    header: bool = True
    """csv: the first line of every file is a header (it names the columns unless ``columns`` does)."""
    delimiter: str = ","
    """csv: the field separator, one character."""
    null: str = "\\N"
    """csv: the field text that means NULL (``\\N``, as MySQL and DataX write it, so '' and NULL stay
    apart); an empty field is NULL too where it can be no value (numbers, dates, bool, json)."""
    columns: tuple[ColumnOption, ...] | None = opt(None, min_items=1)
    """Names and types of the columns; default: the csv header (all strings) or the first JSON object.
    parquet: the columns to read, in this order; their types come from the file, not from here."""

    def check(self, path: str, problems: Problems) -> None:
        _check_csv_text(self, path, problems)
        if self.columns is not None:
            names = [c.name for c in self.columns]
            if len(set(names)) != len(names):
                problems.add(join_path(path, "columns"), "column names must be unique")


@dataclass(frozen=True, slots=True, kw_only=True)
class FileWriterOptions:
    path: str = opt(nonempty=True)
    """The target directory; part files are written beside it and renamed into place on commit."""
    format: FileFormat
    """csv, jsonl or parquet (snappy); header, delimiter and null only matter for csv."""
    mode: Literal["overwrite", "append"] = "overwrite"
    """``overwrite`` replaces the directory on commit; ``append`` adds this run's parts to it."""
    overwrite: Literal["own", "force"] = "own"
    """mode overwrite: ``own`` replaces only a directory that is missing, empty or holds a previous
    wormhole output (``_SUCCESS`` and part files, nothing else); ``force`` replaces any directory."""
    header: bool = True
    """csv: write a header line with the column names first in every part."""
    delimiter: str = ","
    """csv: the field separator, one character."""
    null: str = "\\N"
    """csv: the field text written for NULL (``\\N``, as MySQL and DataX write it; ``""`` writes NULL and
    '' alike, and reads both back as NULL)."""

    def check(self, path: str, problems: Problems) -> None:
        _check_csv_text(self, path, problems)
        if self.mode == "append" and self.overwrite == "force":
            problems.add(join_path(path, "overwrite"), "'force' only applies to mode 'overwrite'")
        if self.mode == "overwrite":
            reason = protected_directory(self.path)
            if reason is not None:
                problems.add(join_path(path, "path"),
                             f"mode overwrite would replace it and everything in it, even with overwrite 'force': "
                             f"name a directory of its own, e.g. 'out/data'; it is {reason}")


def protected_directory(path: str) -> str | None:
    """Why a file destination may never replace ``path`` (mode overwrite), or None.

    Known without looking inside: the filesystem root, the working directory, the home directory and
    any directory holding one of them. Relative paths resolve against the working directory.
    """
    try:
        target = os.path.realpath(path)
        places = [("the working directory", os.getcwd())]
    except OSError:  # the working directory was deleted: prepare reports what it finds
        return None
    if os.path.dirname(target) == target:
        return "the filesystem root"
    home = os.path.expanduser("~")
    if os.path.isabs(home):
        places.append(("the home directory", home))
    for what, place in places:
        place = os.path.realpath(place)
        if target == place:
            return f"{what} ({place})"
        if place.startswith(target.rstrip(os.sep) + os.sep):
            return f"a directory holding {what} ({place})"
    return None

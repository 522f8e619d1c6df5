"""What a file destination leaves on disk: part files, the ``_SUCCESS`` marker, and how they are made.

A target written by wormhole holds ``_SUCCESS`` and part files (see :data:`OWN_NAME`); anything
else is foreign, and mode overwrite replaces only a directory without foreign entries unless
``overwrite: force``. Parts are always created afresh and renames are made durable with a
directory fsync.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import BinaryIO

SUCCESS_MARKER = "_SUCCESS"

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


def fsync_dir(path: str) -> None:
    """Make renames and new entries in ``path`` durable (best effort)."""
    # Some filesystems refuse O_RDONLY fsync on directories: then there is nothing more to do.
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


def remove(path: str) -> None:
    """Remove a directory tree, a file or a symlink (never following the link)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def create_part(path: str) -> BinaryIO:
    """A new part file at ``path``, never an old one truncated."""
    # When a worker index runs again after a failure, a writer of the failed attempt that is still
    # closing writes into the unlinked old file, never into this one, so the rerun's part holds its
    # rows exactly once.
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return open(path, "wb")


def write_marker(directory: str) -> None:
    with open(os.path.join(directory, SUCCESS_MARKER), "wb") as f:
        f.flush()
        os.fsync(f.fileno())

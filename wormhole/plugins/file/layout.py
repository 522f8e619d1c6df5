"""What a file destination leaves on disk: part files, the ``_SUCCESS`` marker, and how they are made.

A target written by wormhole holds ``_SUCCESS`` and part files (see :data:`OWN_NAME`); anything
else is foreign, and mode overwrite replaces only a directory without foreign entries unless
``overwrite: force``. Parts are always created afresh and renames are made durable with a
directory fsync.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
from typing import BinaryIO

SUCCESS_MARKER = "_SUCCESS"

RUN_MARKER = "_WORMHOLE"
"""The file in a temporary directory that says wormhole made it (task and run), so leftovers are
recognised by name and content, never by name alone."""

SPLIT_ID_FILE = "_wh_split-"
"""Prefix of the file naming the split of a part whose id is too long for the part's own name."""

_PART = r"part-[0-9]+(?:-[0-9A-Za-z]+)*(?:\.snappy)?\.(?:csv|jsonl|parquet)"
_SPLIT_PART = r"part-[0-9]+-[0-9A-Za-z_-]+\.(?:csv|jsonl|parquet)"
OWN_NAME = re.compile(rf"_SUCCESS|\._SUCCESS\.crc|{_PART}|\.{_PART}\.crc|{_SPLIT_PART}|"
                      rf"{RUN_MARKER}|{SPLIT_ID_FILE}[0-9a-f]{{64}}")
"""Names wormhole leaves in a target: the marker, the parts of local mode (``part-00000.csv``), of
splits (``part-<rows>-<split key>.csv``) and of append (``part-7-1-00000.csv``), Spark's parts
(``part-00000-<uuid>-c000.snappy.parquet``) and the checksum files Spark's local filesystem writes
beside them (``.part-...parquet.crc``, ``._SUCCESS.crc``); the run marker and split-id files a commit
that crashed after its swap may leave."""


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


# -- split parts ------------------------------------------------------------------------------------

INPROGRESS = ".inprogress"
"""Suffix of a split's part while it is written: never durable, deleted on resume."""

_MAX_KEY = 150
"""Longest encoded split id kept in a part's name (names are at most 255 bytes)."""

_SPLIT_NAME = re.compile(r"part-([0-9]+)-([bh][0-9A-Za-z_-]*)\.(?:csv|jsonl|parquet)")


def split_key(split_id: str) -> str:
    """The split id as a file name fragment: ``b`` + urlsafe base64 (reversible), or ``h`` + its
    sha256 when that would be too long (the id then lives in a ``_wh_split-<sha>`` file)."""
    raw = split_id.encode("utf-8", "surrogatepass")
    encoded = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    if len(encoded) <= _MAX_KEY:
        return "b" + encoded
    return "h" + hashlib.sha256(raw).hexdigest()


def split_part_name(rows: int, key: str, ext: str) -> str:
    """The final name of a durable split's part: its row count and split key."""
    return f"part-{rows}-{key}.{ext}"


def parse_split_part(directory: str, name: str) -> tuple[str, int] | None:
    """``(split id, rows)`` of a durable split part named ``name`` in ``directory``, else None."""
    m = _SPLIT_NAME.fullmatch(name)
    if m is None:
        return None
    rows, key = int(m.group(1)), m.group(2)
    try:
        if key[0] == "b":
            body = key[1:]
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        else:
            with open(os.path.join(directory, SPLIT_ID_FILE + key[1:]), "rb") as f:
                raw = f.read()
        return raw.decode("utf-8", "surrogatepass"), rows
    except (ValueError, OSError):
        return None  # not a name wormhole made (or its id file is gone): not a durable split


def write_durably(path: str, data: bytes) -> None:
    """A small file written and synced (its directory is synced by the caller)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())

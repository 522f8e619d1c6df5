"""The file store's peripheries: the source's files sized at prepare; the destination's temporary
directory, renamed into the target on commit.

Layout, for a target ``<parent>/<name>`` written by task T whose state run is R (``ctx.state_run``:
the run id, or the crashed run's a resumed run continues), from the task database whose id is D
(``ctx.taskdb_id``; every name below that has ``T-R`` has ``T-R-D``: task ids repeat across task
databases, so without D two deployments would take each other's directories and parts for their own)::

    <parent>/.<name>.wormhole-T-R.tmp/_WORMHOLE          the marker: task and run (leftovers need it)
    <parent>/.<name>.wormhole-T-R.tmp/part-00000.csv     plain writers: one part per worker
    <parent>/.<name>.wormhole-T-R.tmp/part-<n>-<key>.csv split writers: one part per split, <n> rows
    <parent>/.<name>.wormhole-T-R.old                    overwrite: the previous target, while swapping

A split's part is written as ``<part>.inprogress`` and renamed to its final name by ``end_split``
after an fsync: the renamed part is the destination's record that the split is done, so a resumed
run keeps the parts it finds and deletes the in-progress ones (``durable_splits``). The split key is
the split id in urlsafe base64, or its sha256 with the id in a ``_wh_split-<sha>`` file when too long.

Overwrite swaps whole directories by rename; append moves each part that holds rows into the target under a
name unique to the state run (``part-T-R-00000.csv``; a resumed run counts the parts a crashed append
already moved as durable). Rollback only ever removes the temporary directory, so the target is never
half-written. A fresh run removes what other runs of its task left for this target (``clean_leftovers``).

Overwrite only replaces what wormhole wrote: a missing or empty directory, or one holding nothing but
``_SUCCESS`` and part files (see :func:`~wormhole.plugins.file.layout.foreign_entries`; Spark's parts
and ``.crc`` files count too). Anything else needs ``overwrite: force``. The target is checked in
``prepare`` (before any row moves) and again in ``commit`` right before the swap, so a file put there
during the run is never deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Mapping

from wormhole.errors import CommitError, PrepareError, ReadError, RollbackError, StorageError
from wormhole.plugins.base import ReadContext, SourceInfo, WriteContext
from wormhole.plugins.file.layout import (
    INPROGRESS,
    RUN_MARKER,
    SPLIT_ID_FILE,
    SUCCESS_MARKER,
    foreign_entries,
    fsync_dir,
    parse_split_part,
    remove,
    write_durably,
    write_marker,
)
from wormhole.plugins.file.options import (
    PYARROW_MISSING,
    FileReaderOptions,
    FileWriterOptions,
    import_pyarrow,
    protected_directory,
)
from wormhole.plugins.file.parquet_format import footer_rows
from wormhole.plugins.file.splitter import resolve_files

PLUGIN_NAME = "file"


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


_HASHED_PART = re.compile(r"part-[0-9]+-h([0-9a-f]{64})\.[a-z]+")


class FileWriterPeriphery:
    """Owns the temporary directory of one destination and the swap into the target."""

    def __init__(self, options: FileWriterOptions, ctx: WriteContext) -> None:
        self.options = options
        self.ctx = ctx
        self.target = os.path.abspath(options.path)
        parent, name = os.path.split(self.target)
        self.parent = parent
        self._name = name
        stem = f".{name}.wormhole-{ctx.task_id}-{ctx.state_run}{self._db}"
        self.tmp_dir = os.path.join(parent, stem + ".tmp")
        self.old_dir = os.path.join(parent, stem + ".old")
        self._committed = False
        self._durable: dict[str, int] = {}
        self._committed_before = False
        """Resuming: the crashed run had swapped its output in (its outcome was not recorded)."""

    @property
    def _db(self) -> str:
        """``-<task database id>`` in the names of what this run keeps: task ids repeat across task databases."""
        return f"-{self.ctx.taskdb_id}" if self.ctx.taskdb_id else ""

    def _error(self, cls: type[StorageError], message: str) -> StorageError:
        return cls(message, destination=self.ctx.destination, plugin=PLUGIN_NAME)

    def prepare(self) -> None:
        if self.options.format == "parquet":
            try:
                import_pyarrow()  # fail before any row moves, not in every writer
            except ImportError as exc:
                raise self._error(PrepareError, PYARROW_MISSING) from exc
        # Other runs' leftovers go (a resumed run keeps its own state run's). Before the target is
        # checked: cleaning restores a target a crashed swap set aside.
        try:
            self.clean_leftovers(self.ctx.state_run)
        except OSError as exc:
            raise self._error(PrepareError, f"cannot remove what earlier runs left beside {self.target}: "
                                            f"{exc}") from exc
        if os.path.lexists(self.target) and not os.path.isdir(self.target):
            raise self._error(PrepareError, f"target {self.target} exists and is not a directory")
        if self.options.mode == "overwrite" and self.ctx.resuming and self._is_ours(self.target, self.ctx.state_run):
            # The target carries the crashed run's marker: its commit swapped the output in already.
            self._committed_before = True
            self._durable = self._parts_in(self.target)
            self.ctx.log.info("file.committed_before", path=self.target, durable_splits=len(self._durable))
            return
        if self.options.mode == "overwrite":
            self._check_replaceable(PrepareError)  # before anything is created or removed
        try:
            os.makedirs(self.parent, exist_ok=True)
            if self.ctx.resuming and self._is_ours(self.tmp_dir):
                self._durable = self._resume()
                return
            if os.path.lexists(self.tmp_dir):
                self.ctx.log.info("file.stale_tmp_removed", path=self.tmp_dir)  # an earlier attempt of this run
                remove(self.tmp_dir)
            os.mkdir(self.tmp_dir)
            marker = {"task_id": self.ctx.task_id, "state_run": self.ctx.state_run,
                      "destination": self.ctx.destination, "taskdb": self.ctx.taskdb_id}
            write_durably(os.path.join(self.tmp_dir, RUN_MARKER), json.dumps(marker).encode())
            fsync_dir(self.tmp_dir)
            fsync_dir(self.parent)
            if self.ctx.resuming and self.options.mode == "append":
                self._durable = self._appended()  # a crashed append moved some parts before the tmp dir went
        except OSError as exc:
            raise self._error(PrepareError, f"cannot create the temporary directory {self.tmp_dir}: "
                                            f"{exc}") from exc

    def _resume(self) -> dict[str, int]:
        """The crashed run's durable parts (in-progress ones are deleted: they will be written again)."""
        durable = self._appended() if self.options.mode == "append" else {}
        for name in sorted(os.listdir(self.tmp_dir)):
            if name.endswith(INPROGRESS):
                os.unlink(os.path.join(self.tmp_dir, name))
                continue
            found = parse_split_part(self.tmp_dir, name)
            if found is not None:
                durable[found[0]] = found[1]
        fsync_dir(self.tmp_dir)
        self.ctx.log.info("file.resumed", path=self.tmp_dir, durable_splits=len(durable))
        return durable

    def _parts_in(self, directory: str) -> dict[str, int]:
        found = (parse_split_part(directory, name) for name in sorted(os.listdir(directory)))
        return dict(f for f in found if f is not None)

    def _appended(self) -> dict[str, int]:
        """Split parts of this state run already moved into the target by a crashed append."""
        prefix = self._append_prefix()
        if not os.path.isdir(self.target):
            return {}
        durable: dict[str, int] = {}
        for name in os.listdir(self.target):
            if name.startswith(prefix):
                found = parse_split_part(self.target, "part-" + name[len(prefix):])
                if found is not None:
                    durable[found[0]] = found[1]
        return durable

    def durable_splits(self) -> Mapping[str, int]:
        return dict(self._durable)

    # -- leftovers ------------------------------------------------------------------------------

    def _is_ours(self, directory: str, run: int | None = None) -> bool:
        """``directory`` carries the marker of this task (and of ``run`` and this destination, when given)."""
        try:
            with open(os.path.join(directory, RUN_MARKER), "rb") as f:
                marker = json.loads(f.read())
            return (isinstance(marker, dict) and marker.get("task_id") == self.ctx.task_id
                    and marker.get("taskdb", "") == self.ctx.taskdb_id
                    and (run is None or (marker.get("state_run") == run
                                         and marker.get("destination") == self.ctx.destination)))
        except (OSError, ValueError):
            return False

    def _leftover_runs(self, keep_run: int | None) -> list[tuple[int, str, str]]:
        """``(run, kind, path)`` of the other runs' temporary directories (with our marker) and
        ``.old`` directories (by name: they hold a previous target, not ours to mark)."""
        pattern = re.compile(re.escape(f".{self._name}.wormhole-{self.ctx.task_id}-") + r"([0-9]+)"
                             + re.escape(self._db) + r"\.(tmp|old)")
        try:
            names = sorted(os.listdir(self.parent))
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            m = pattern.fullmatch(name)
            if m is None or int(m.group(1)) == keep_run:
                continue
            run, kind, path = int(m.group(1)), m.group(2), os.path.join(self.parent, name)
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            if kind == "tmp" and not self._is_ours(path, run):
                continue
            found.append((run, kind, path))
        return found

    @staticmethod
    def _describe(run: int, kind: str, path: str) -> str:
        what = "temporary directory" if kind == "tmp" else "previous target set aside"
        return f"directory {path} ({what} of run {run})"

    def leftovers(self, keep_run: int | None) -> list[str]:
        return [self._describe(*found) for found in self._leftover_runs(keep_run)]

    def clean_leftovers(self, keep_run: int | None) -> list[str]:
        removed = []
        for run, kind, path in self._leftover_runs(keep_run):
            if kind == "old" and not os.path.lexists(self.target):
                # A commit died between its renames: this is the previous target, so put it back.
                os.rename(path, self.target)
                self.ctx.log.warning("file.target_restored", target=self.target, from_path=path)
                removed.append(f"directory {path} (previous target set aside by run {run}, restored)")
                continue
            remove(path)
            self.ctx.log.info("file.leftover_removed", path=path, run=run)
            removed.append(self._describe(run, kind, path))
        if removed:
            fsync_dir(self.parent)
        return removed

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
        if self._committed_before:
            self._remove_old()  # the crashed commit may have left the previous target aside
            self._committed = True
            return
        if not os.path.isdir(self.tmp_dir):
            raise self._error(CommitError, f"temporary directory {self.tmp_dir} is missing; was prepare run?")
        try:
            open_parts = [n for n in os.listdir(self.tmp_dir) if n.endswith(INPROGRESS)]
        except OSError as exc:
            raise self._error(CommitError, f"cannot list {self.tmp_dir}: {exc}") from exc
        if open_parts:
            # A split neither ended nor aborted: committing would drop or half-write its rows.
            raise self._error(CommitError, f"{len(open_parts)} split part(s) in {self.tmp_dir} are still being "
                                           f"written ({open_parts[0]}, ...)")
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
        # The new target is in place, with the run marker: a crash before the task's outcome is recorded
        # is resumed as committed. release() removes the marker.
        self._remove_old()

    def _remove_old(self) -> None:
        # The old target is garbage once the new one is in place: failing to delete it is no failure.
        try:
            remove(self.old_dir)
        except OSError as exc:
            self.ctx.log.warning("file.old_target_left", path=self.old_dir, error=str(exc))

    def release(self) -> None:
        """The task's outcome is recorded: the run's own files in an overwritten target are not needed any
        more (layout.OWN_NAME admits them, so failing to delete them is harmless)."""
        if self.options.mode != "overwrite" or not self._is_ours(self.target, self.ctx.state_run):
            return
        with contextlib.suppress(OSError):
            for name in os.listdir(self.target):
                if name.startswith(SPLIT_ID_FILE):
                    os.unlink(os.path.join(self.target, name))
            os.unlink(os.path.join(self.target, RUN_MARKER))  # last: it says the rest is ours
            fsync_dir(self.target)

    def _append_prefix(self) -> str:
        return f"part-{self.ctx.task_id}-{self.ctx.state_run}{self._db}-"

    def _append(self) -> None:
        prefix = self._append_prefix()
        moved: list[tuple[str, str]] = []
        try:
            os.makedirs(self.target, exist_ok=True)
            for name in sorted(os.listdir(self.tmp_dir)):
                if not name.startswith("part-"):
                    continue
                found = parse_split_part(self.tmp_dir, name)
                if found is not None and found[1] == 0:
                    continue  # a split without rows: no empty file in the target (its record goes with the tmp dir)
                src = os.path.join(self.tmp_dir, name)
                dst = os.path.join(self.target, prefix + name[len("part-"):])
                hashed = _HASHED_PART.fullmatch(name)
                if hashed is not None:
                    # The id of a hashed split key goes along, so a resumed append still reads it.
                    id_file = SPLIT_ID_FILE + hashed.group(1)
                    if os.path.exists(os.path.join(self.tmp_dir, id_file)):
                        shutil.copyfile(os.path.join(self.tmp_dir, id_file), os.path.join(self.target, id_file))
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
        if self._committed_before:
            self._committed = True
            raise self._error(RollbackError, f"not rolled back: run {self.ctx.state_run} swapped its output into "
                                             f"{self.target} before it crashed")
        try:
            # A commit that died between its two renames left the previous target aside: restore it.
            if os.path.lexists(self.old_dir) and not os.path.lexists(self.target):
                os.rename(self.old_dir, self.target)
                self.ctx.log.warning("file.target_restored", target=self.target, from_path=self.old_dir)
            remove(self.tmp_dir)
        except OSError as exc:
            raise self._error(RollbackError, f"cannot remove {self.tmp_dir}: {exc}") from exc

"""The file store's splitter: one split per file of the path (a file, a directory or a glob), sorted.

:func:`resolve_files` is the one place files are found: the splitter, the periphery and the reader all
ask it, so they see the same files."""

from __future__ import annotations

import glob
import os

from wormhole.errors import SplitError, StorageError
from wormhole.plugins.base import ReadContext, Split
from wormhole.plugins.file.options import EXTENSIONS, FileReaderOptions

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

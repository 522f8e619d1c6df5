"""The sqlite store's splitter: the table (or its ``where`` selection) is one split, its schema checked
before anything is written."""

from __future__ import annotations

import os

from wormhole.errors import SplitError
from wormhole.plugins.base import ReadContext, Split
from wormhole.plugins.sqlite.connection import connect_readonly
from wormhole.plugins.sqlite.options import SqliteReaderOptions
from wormhole.plugins.sqlite.reader import resolve_schema


class SqliteSplitter:
    """The whole table (or the ``where`` selection) is one split: SQLite has a single reader file."""

    def __init__(self, options: SqliteReaderOptions, ctx: ReadContext) -> None:
        self.options = options

    def split(self, advice: int) -> list[Split]:
        conn = connect_readonly(self.options.path, SplitError)
        try:
            resolve_schema(conn, self.options, SplitError)  # fail here, before anything is written
        finally:
            conn.close()
        return [Split(id=f"sqlite:{self.options.table}",
                      resource_mark="sqlite:" + os.path.abspath(self.options.path))]

"""One batch on its way through a chain (:mod:`.chain`): row-wise until an operator needs columns.

Each operator's Python form (:meth:`wormhole.transform.operators.base.Operator.python`) is a
:data:`Step` that changes the frame in place: keeps rows, selects, renames or sets columns.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from itertools import compress
from typing import Any

from wormhole.plugins.base import Row


class Frame:
    """One batch on its way through a chain: row-wise until an operator needs columns."""

    __slots__ = ("cache", "cols", "index", "n", "names", "rows")

    def __init__(self, names: Sequence[str], rows: Sequence[Row]) -> None:
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.rows: Sequence[Row] | None = rows
        self.cols: list[list[Any]] | None = None
        self.cache: dict[int, list[Any]] = {}
        self.n = len(rows)

    def get(self, name: str) -> list[Any]:
        i = self.index[name]
        if self.cols is not None:
            return self.cols[i]
        found = self.cache.get(i)
        if found is None:
            assert self.rows is not None
            found = self.cache[i] = [r[i] for r in self.rows]
        return found

    def columns(self) -> list[list[Any]]:
        if self.cols is None:
            assert self.rows is not None
            self.cols = [list(c) for c in zip(*self.rows, strict=True)] if self.rows else [[] for _ in self.names]
            self.rows = None
            self.cache = {}
        return self.cols

    def keep(self, mask: list[Any]) -> None:
        flags = [m is True for m in mask]
        if self.cols is not None:
            self.cols = [list(compress(c, flags)) for c in self.cols]
        else:
            assert self.rows is not None
            self.rows = list(compress(self.rows, flags))
            self.cache = {}
        self.n = sum(flags)

    def select(self, keep: tuple[int, ...]) -> None:
        names = [self.names[i] for i in keep]
        if self.cols is not None:
            self.cols = [self.cols[i] for i in keep]
        else:
            assert self.rows is not None
            if len(keep) == 1:
                only = keep[0]
                self.rows = [(r[only],) for r in self.rows]
            else:
                self.rows = list(map(operator.itemgetter(*keep), self.rows))
            self.cache = {}
        self.rename(names)

    def rename(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}

    def set_column(self, name: str, values: list[Any]) -> None:
        cols = self.columns()
        at = self.index.get(name)
        if at is None:
            cols.append(values)
            self.rename([*self.names, name])
        else:
            cols[at] = values

    def map_column(self, name: str, fn: Callable[[Any], Any]) -> None:
        """Column ``name`` replaced by ``fn`` of each value; NULL stays NULL."""
        self.set_column(name, [None if v is None else fn(v) for v in self.get(name)])

    def to_rows(self) -> list[Row]:
        if self.cols is None:
            assert self.rows is not None
            return self.rows if isinstance(self.rows, list) else list(self.rows)
        return list(zip(*self.cols, strict=True)) if self.cols else [() for _ in range(self.n)]


Step = Callable[[Frame], None]
"""An operator's Python form: one batch's frame, changed in place."""

"""A side's rows as a whole (:mod:`wormhole.verify.diff`'s readers, for other uses than comparing two sides): its
digest (``settings.verify``'s read back, :mod:`wormhole.verify.inrun`) and the values of some of its keys
(``verify --repair``, :mod:`wormhole.verify.repair`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from wormhole.errors import InvalidTaskConfig
from wormhole.plugins.arrow_form import rows_from_arrow
from wormhole.plugins.base import Split
from wormhole.verify.checksum import Digest, JsonNull, row_hashes
from wormhole.verify.diff import Side, _context, _each_split, _hashed, _Rejections, _schema_and_splits


def side_digest(side: Side, columns: Sequence[str], logical: Mapping[str, str], json_null: JsonNull, *,
                readers: int = 4, batch_rows: int = 10_000, stop: threading.Event | None = None,
                count_only: bool = False) -> Digest:
    """The :class:`Digest` of every row of ``side`` over ``columns`` (each read as its ``logical`` type), or
    only the count (``count_only``: the total stays 0). Raises InvalidTaskConfig for a column the side lacks
    or cannot hold as its type, ValueError for rows its reader could not decode, the store's own errors when
    it cannot be read."""
    dirty = _Rejections()
    ctx = _context(side, stop or threading.Event(), dirty, batch_rows)
    schema, splits = _schema_and_splits(side, ctx, readers)
    have = {c.name.lower(): c.name for c in schema.columns}
    lacking = [c for c in columns if c.lower() not in have]
    if lacking:
        raise InvalidTaskConfig([f"the {side.label} ({side.shown}) has no column {', '.join(lacking)} "
                                 f"(it has {', '.join(have.values()) or 'none'})"])
    names = [have[c.lower()] for c in columns]
    types = {have[c.lower()]: kind for c, kind in logical.items() if c.lower() in have}

    def work(batch: pa.RecordBatch) -> Digest:
        if count_only:
            return Digest(batch.num_rows, 0)
        return Digest.of(_hashed(side, batch, names, types, json_null))

    total = Digest.empty()
    for split in _each_split(side, ctx, schema, splits, readers, work):
        for part in split:
            total += part
    if dirty.count:
        raise ValueError(f"{dirty.count} row(s) of the {side.label} ({side.shown}) could not be decoded (the "
                         f"first: {dirty.first})")
    return total


def key_values(side: Side, key: Sequence[str], logical: Mapping[str, str], json_null: JsonNull,
               wanted: np.ndarray, *, readers: int = 4, batch_rows: int = 10_000,
               splits: Sequence[Split] | None = None) -> list[tuple[Any, ...]]:
    """The values of ``key`` (as the side's reader gives them) of the side's rows whose key hash is in
    ``wanted``, each key once."""
    wanted = np.unique(wanted)
    ctx = _context(side, threading.Event(), _Rejections(), batch_rows)
    schema, cut = _schema_and_splits(side, ctx, readers, splits)

    def work(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
        mask = np.isin(row_hashes(batch, key, logical=logical, json_null=json_null), wanted)
        if not mask.any():
            return []
        names = [batch.schema.names[_index(batch.schema.names, k)] for k in key]
        return list(rows_from_arrow(batch.filter(pa.array(mask)).select(names)))

    found = {row for split in _each_split(side, ctx, schema, cut, readers, work) for part in split for row in part}
    return sorted(found, key=repr)


def key_hashes(side: Side, key: Sequence[str], logical: Mapping[str, str], json_null: JsonNull, *,
               readers: int = 4, batch_rows: int = 10_000, stop: threading.Event | None = None) -> np.ndarray:
    """The key hash of every row of ``side`` (as :func:`~wormhole.verify.diff.compare` makes them), sorted."""
    ctx = _context(side, stop or threading.Event(), _Rejections(), batch_rows)
    schema, cut = _schema_and_splits(side, ctx, readers)
    have = {c.name.lower(): c.name for c in schema.columns}
    names = [have.get(k.lower(), k) for k in key]
    types = {have.get(k.lower(), k): kind for k, kind in logical.items()}
    parts = [part for split in _each_split(side, ctx, schema, cut, readers,
                                           lambda b: _hashed(side, b, names, types, json_null)) for part in split]
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.uint64)


def _index(names: Sequence[str], name: str) -> int:
    exact = [i for i, n in enumerate(names) if n == name]
    return exact[0] if exact else next(i for i, n in enumerate(names) if n.casefold() == name.casefold())

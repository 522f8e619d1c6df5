"""How the mysql writer encodes a piece of a batch (:mod:`.arrow_load`): a LOAD DATA payload or the rows' SQL
literal lists, wire text for the columns that take it (:mod:`.passthrough`). Every MySQL destination of a
run encodes a piece alike, so it is kept in the batch's memo, under a key naming what it depends on. A column
whose target column may not hold its values exactly is checked as it is encoded
(:class:`~wormhole.plugins.sql.narrowing.Narrowing`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import pyarrow as pa

from wormhole.plugins.base import Schema, batch_memo
from wormhole.plugins.batch import Batch
from wormhole.plugins.mysql.arrow_load import arrow_payload, sql_rows
from wormhole.plugins.sql import VALUE_ERRORS
from wormhole.plugins.sql.narrowing import Narrowing

Encoded: TypeAlias = "pa.Buffer | list[str]"
"""A LOAD DATA payload (an Arrow buffer of its bytes) or the rows as SQL value lists."""

_UNENCODABLE = object()
"""Memo marker: this piece has a value that cannot be encoded (each destination then goes row by row)."""


class PieceEncoder:
    """Encodes pieces of batches for one writer (``method``: ``load_data`` or ``insert``)."""

    def __init__(self, schema: Schema, method: str, wire: Sequence[bool] = (),
                 targets: Sequence[Narrowing | None] = ()) -> None:
        self.method = method
        self.wire = tuple(wire) or (False,) * len(schema)
        """Which columns may take their fields from the batch's wire text (:func:`.passthrough.wire_columns`)."""
        self.targets = tuple(targets) or (None,) * len(schema)
        """What each column's target narrows (:class:`~wormhole.plugins.sql.narrowing.Narrowing`), None: nothing."""
        self.columns = tuple((c.type, c.unsigned, c.precision, c.scale) for c in schema.columns)
        """What an encoded piece depends on besides its values and :attr:`targets` (memo keys name them)."""

    def wire_text(self, wire: Sequence[pa.Array | None] | None) -> tuple[pa.Array | None, ...] | None:
        """Of a batch's wire text, that of each column this writer loads from it (None for the others), or None."""
        if wire is None or not any(self.wire) or self.method != "load_data":
            return None
        used = tuple(w if take else None for w, take in zip(wire, self.wire, strict=True))
        return used if any(w is not None for w in used) else None

    def encode(self, rows: Batch, start: int, size: int,
               wire: Sequence[pa.Array | None] | None = None) -> Encoded | None:
        """Rows ``start`` to ``start + size`` of the batch, encoded (from ``wire`` text where given);
        None when some value cannot be (a float infinity, a lone surrogate): the piece is then written
        row by row."""
        memo = batch_memo(rows)
        from_wire = None if wire is None else tuple(w is not None for w in wire)
        key = ("mysql", self.method, self.columns, self.targets, from_wire, start, size)
        found = memo.get(key)
        if found is not None:
            return found if found is not _UNENCODABLE else None
        encoded: Any
        try:
            piece = rows.arrow_form.slice(start, size)
            if self.method != "load_data":
                encoded = sql_rows(piece, self.targets)
            else:
                encoded = arrow_payload(piece, None if wire is None else [None if w is None else w.slice(start, size)
                                                                         for w in wire], self.targets)
        except (pa.ArrowException, *VALUE_ERRORS):
            encoded = None  # some value cannot be written: the row-by-row pass finds which
        memo[key] = _UNENCODABLE if encoded is None else encoded
        return encoded

"""How the mysql writer encodes a piece of a batch: LOAD DATA text from Arrow columns, else from tuples.

A batch that came as Arrow columns (a columnar reader's, a chain's), with no decimal column of free
scale, is encoded by :func:`.arrow_load.arrow_payload`, a slice per piece, with no Python per value. A batch of
tuples is encoded by the row encoder (:func:`.types.load_payload`), as before: converting it to Arrow
first and encoding that was at most 1.16x quicker on the bench table's rows (``python -m
benchmarks.mysql_encode``, 0.88x to 1.16x on a loaded machine), no quicker end to end, and it held
every batch in both forms (peak RSS about 90 MiB higher with three destinations). Multi-row INSERT
statements are built from tuples.

Columns whose target declares the source's own type take their fields from the batch's wire text
(:mod:`.passthrough`), when the batch carries it for them.

Every MySQL destination of a run encodes a piece alike, so the result is kept in the batch's memo
under a key naming what it depends on (method, columns, which from wire text, piece) and built once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import pyarrow as pa

from wormhole.plugins.arrow_text import own_text_arrow
from wormhole.plugins.base import Schema, batch_memo
from wormhole.plugins.batch import Batch, arrow_schema, rows_of
from wormhole.plugins.mysql.arrow_load import arrow_payload
from wormhole.plugins.mysql.types import load_payload, sql_values
from wormhole.plugins.sql import VALUE_ERRORS

Encoded: TypeAlias = "bytes | pa.Buffer | list[str]"
"""A LOAD DATA payload (bytes, or an Arrow buffer of them) or the rows as SQL value lists."""

_UNENCODABLE = object()
"""Memo marker: this piece has a value that cannot be encoded (each destination then goes row by row)."""


class PieceEncoder:
    """Encodes pieces of batches for one writer (``method``: ``load_data`` or ``insert``)."""

    def __init__(self, schema: Schema, method: str, wire: Sequence[bool] = ()) -> None:
        self.method = method
        self.wire = tuple(wire) or (False,) * len(schema)
        """Which columns may take their fields from the batch's wire text (:func:`.passthrough.wire_columns`)."""
        self.schema = schema
        self.types = [c.type for c in schema.columns]
        self._arrow_schema: pa.Schema | None = None
        self.columns = tuple((c.type, c.unsigned, c.precision, c.scale) for c in schema.columns)
        """What an encoded piece depends on besides its values (memo keys name it)."""

    def form(self, rows: Batch) -> pa.RecordBatch | None:
        """The batch's Arrow columns to encode LOAD DATA pieces from, or None to encode its tuples."""
        # Only a batch that came as Arrow (not one a destination's chain made from tuples), and without a
        # free-scale decimal: those texts are the tuples' own (arrow_text.own_text_arrow).
        batch = own_text_arrow(rows) if self.method == "load_data" and self.types else None
        if batch is None:
            return None
        if self._arrow_schema is None:
            self._arrow_schema = arrow_schema(self.schema)
        return batch if batch.schema.equals(self._arrow_schema) else None

    def wire_text(self, rows: Batch, form: pa.RecordBatch | None) -> tuple[pa.Array | None, ...] | None:
        """The batch's wire text of each column this writer loads from it (None for the others), or None."""
        wire = rows.wire if form is not None else None
        if wire is None or not any(self.wire):
            return None
        used = tuple(w if take else None for w, take in zip(wire, self.wire, strict=True))
        return used if any(w is not None for w in used) else None

    def encode(self, rows: Batch, form: pa.RecordBatch | None, start: int, size: int,
               wire: Sequence[pa.Array | None] | None = None) -> Encoded | None:
        """Rows ``start`` to ``start + size`` of the batch, encoded (from ``wire`` text where given);
        None when some value cannot be (a float infinity, a lone surrogate): the piece is then written
        row by row."""
        memo = batch_memo(rows)
        from_wire = None if wire is None else tuple(w is not None for w in wire)
        key = ("mysql", self.method, self.columns, from_wire, start, size)
        found = memo.get(key)
        if found is not None:
            return found if found is not _UNENCODABLE else None
        encoded: Any
        try:
            encoded = self._encoded(rows, form, start, size, wire)
        except VALUE_ERRORS:
            encoded = None  # some value cannot be written: the row-by-row pass finds which
        memo[key] = _UNENCODABLE if encoded is None else encoded
        return encoded

    def _encoded(self, rows: Batch, form: pa.RecordBatch | None, start: int, size: int,
                 wire: Sequence[pa.Array | None] | None) -> Encoded:
        if form is not None:
            try:
                cut = None if wire is None else [None if w is None else w.slice(start, size) for w in wire]
                return arrow_payload(form.slice(start, size), cut)
            except (pa.ArrowException, *VALUE_ERRORS):
                pass  # the row encoder decides: it raises for a value MySQL cannot hold, as before
        piece = rows_of(rows)[start:start + size]
        return load_payload(self.types, piece) if self.method == "load_data" else sql_values(self.types, piece)

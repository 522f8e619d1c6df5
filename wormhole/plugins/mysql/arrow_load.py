"""A record batch as a LOAD DATA LOCAL INFILE payload, column-wise with Arrow compute (no Python per value).

The payload is byte for byte what :func:`wormhole.plugins.mysql.types.load_payload` writes for the same
values: fields separated by tabs, rows ended by newlines, backslash escapes for LOAD DATA's default
``ESCAPED BY '\\\\'``, ``\\N`` for NULL, bytes as hex (loaded through ``UNHEX``). Each column is cast to
text by Arrow and then rewritten where Arrow's text differs from Python's:

- floats, decimals and datetimes: the text every text writer makes from Arrow
  (:mod:`wormhole.plugins.arrow_text`: ``repr``'s digits and form; plain notation; ``isoformat``, ``T``
  and no fraction when it is zero).

A column whose target declares the source's own type takes its fields from the reader's wire text
instead (:func:`wire_text`, :mod:`.passthrough`): escaped, never parsed.

The result's value buffer is the payload (no copy of the rows' text); a piece of a batch is encoded
from a slice of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.arrow_text import decimal_text, float_text, hex_text
from wormhole.plugins.sql.bulk_text import NULL, Encoders, column_fields, escaped, tab_lines, timestamp_fields

_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))
"""What :func:`wormhole.plugins.mysql.types.load_escape` replaces, in its order (backslash first)."""


def _float_text(values: pa.Array) -> pa.Array:
    """``repr`` of each value (the text every text writer makes, :func:`wormhole.plugins.arrow_text.float_text`);
    MySQL holds no infinity or NaN, so those fail here as they do in the row encoder."""
    bad = pc.invert(pc.fill_null(pc.is_finite(values), True))
    if pc.any(bad).as_py():
        raise ValueError(f"MySQL cannot store the float {pc.filter(values, bad)[0].as_py()!r}")
    return float_text(values)


_FIELDS: Encoders = {
    "string": lambda v: escaped(pc.cast(v, pa.string()), _ESCAPES),  # text and json
    "binary": lambda v: hex_text(pc.cast(v, pa.binary())),
    "float": lambda v: _float_text(pc.cast(v, pa.float64())),
    "decimal": decimal_text,  # plain notation, as every text writer
    "bool": lambda v: pc.cast(pc.cast(v, pa.uint8()), pa.string()),
    # Python's isoformat, as the row encoder writes it: 'T' between date and time, no fraction when it is zero.
    "timestamp": lambda v: timestamp_fields(v, "T"),
    "int": lambda v: pc.cast(v, pa.string()), "date": lambda v: pc.cast(v, pa.string()),
}


def column_text(values: pa.Array) -> pa.Array:
    """One column as LOAD DATA fields (strings, ``\\N`` for NULL); raises ValueError for a value MySQL
    cannot hold (a float infinity or NaN), as the row encoder does."""
    return column_fields(values, _FIELDS, "LOAD DATA")


def wire_text(wire: pa.Array, kind: pa.DataType) -> pa.Array:
    """One column's wire text (binary, as the mysql reader cut it) as LOAD DATA fields: escaped, ``\\N``
    for NULL, bytes (a binary column) as hex for UNHEX: the text itself is not parsed nor re-formatted."""
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        text = hex_text(wire)
    else:  # UTF-8 already: the typed cast of the same bytes checked it
        text = escaped(wire.view(pa.string()), _ESCAPES)
    return pc.fill_null(text, NULL)


def arrow_payload(batch: pa.RecordBatch, wire: Sequence[pa.Array | None] | None = None) -> pa.Buffer:
    """The batch as one LOAD DATA LOCAL INFILE buffer (utf-8), equal to ``load_payload`` of its rows;
    a column with ``wire`` text (:mod:`.passthrough`) takes its fields from that instead."""
    if batch.num_columns == 0:
        raise ValueError("a batch without columns has no LOAD DATA payload")
    texts = [column_text(batch.column(i)) if wire is None or wire[i] is None
             else wire_text(wire[i], batch.column(i).type) for i in range(batch.num_columns)]
    return tab_lines(texts)

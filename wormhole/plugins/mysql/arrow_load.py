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

from wormhole.plugins.arrow_text import NotExact, datetime_text, decimal_text, float_text, hex_text
from wormhole.plugins.sql.bulk_text import NULL, escaped, tab_lines

_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))
"""What :func:`wormhole.plugins.mysql.types.load_escape` replaces, in its order (backslash first)."""


def _float_text(values: pa.Array) -> pa.Array:
    """``repr`` of each value (the text every text writer makes, :func:`wormhole.plugins.arrow_text.float_text`);
    MySQL holds no infinity or NaN, so those fail here as they do in the row encoder."""
    bad = pc.invert(pc.fill_null(pc.is_finite(values), True))
    if pc.any(bad).as_py():
        raise ValueError(f"MySQL cannot store the float {pc.filter(values, bad)[0].as_py()!r}")
    return float_text(values)


def _datetime_text(values: pa.Array) -> pa.Array:
    # Python's isoformat, as the row encoder writes it: 'T' between date and time, no fraction when it is zero.
    if values.type != pa.timestamp("us"):
        values = pc.cast(values, pa.timestamp("us"))
    try:
        return datetime_text(values, "T")
    except NotExact as exc:
        raise ValueError(str(exc)) from None


def column_text(values: pa.Array) -> pa.Array:
    """One column as LOAD DATA fields (strings, ``\\N`` for NULL); raises ValueError for a value MySQL
    cannot hold (a float infinity or NaN), as the row encoder does."""
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):  # text and json
        text = escaped(pc.cast(values, pa.string()), _ESCAPES)
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        text = hex_text(pc.cast(values, pa.binary()))
    elif pa.types.is_floating(kind):
        text = _float_text(pc.cast(values, pa.float64()))
    elif pa.types.is_decimal(kind):
        text = decimal_text(values)  # plain notation, as every text writer
    elif pa.types.is_boolean(kind):
        text = pc.cast(pc.cast(values, pa.uint8()), pa.string())
    elif pa.types.is_timestamp(kind):
        text = _datetime_text(values)
    elif pa.types.is_integer(kind) or pa.types.is_date32(kind):
        text = pc.cast(values, pa.string())
    else:
        raise TypeError(f"no LOAD DATA text for Arrow type {kind}")
    return pc.fill_null(text, NULL)


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

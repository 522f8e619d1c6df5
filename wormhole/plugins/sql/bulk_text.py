"""The text of a bulk load, column-wise with Arrow compute: what MySQL's LOAD DATA and PostgreSQL's COPY
text format share (fields separated by tabs, rows ended by newlines, backslash escapes, ``\\N`` for NULL).
Each store's encoder makes its columns' fields (:mod:`wormhole.plugins.mysql.arrow_load`,
:mod:`wormhole.plugins.postgres.encoding`) and joins them here into one buffer, with no Python per value."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.arrow_text import value_offsets

NULL = "\\N"


def value_bytes(values: pa.Array) -> bytes:
    """The bytes of a string or binary array's values (its slice's only)."""
    offsets = value_offsets(values)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    data = values.buffers()[2]
    return b"" if data is None or last == first else data.slice(first, last - first).to_pybytes()


def escaped(text: pa.Array, escapes: Sequence[tuple[str, str]]) -> pa.Array:
    """``escapes`` (special character, its escape; backslash first) applied to a string column. One C search
    per special character over the column's bytes (memchr, far quicker than a pass of Arrow's substring
    kernels); only the characters present cost a replacing pass."""
    data = value_bytes(text)
    for special, escape in escapes:
        if data.find(special.encode()) >= 0:
            text = pc.replace_substring(text, special, escape)
    return text


def tab_lines(fields: Sequence[pa.Array]) -> pa.Buffer:
    """Columns of fields (strings, made for the load) as one buffer of lines: tab between fields, a
    newline after each row. The result is the joined column's value buffer (no copy of the rows' text)."""
    fields = list(fields)
    fields[-1] = pc.binary_join_element_wise(fields[-1], "\n", "")  # the row's end
    lines = pc.binary_join_element_wise(*fields, "\t") if len(fields) > 1 else fields[-1]
    offsets = value_offsets(lines)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    data = lines.buffers()[2]
    if data is None:
        return pa.py_buffer(b"")
    return data.slice(first, last - first)

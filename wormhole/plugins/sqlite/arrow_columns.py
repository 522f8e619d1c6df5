"""A batch of SQLite values as Arrow columns of the table's logical types, with the values the row
conversions (:mod:`.types`) make: each column one ``pa.array`` of the values sqlite3 returns, the text of
decimal, date and datetime columns cast by pyarrow compute (:mod:`wormhole.plugins.arrow_parse`).

SQLite keeps each value's own type whatever the column declares, so a column is taken only when its
values are all of the type its conversion expects (one C-level ``set(map(type, ...))``): a batch with a
value of another type (a text in an INTEGER column, an integer in a column with no declared type) goes to
the row conversions, which keep it as it is where the column's type holds it, or reject its row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.arrow_parse import FAILED, TEXT_CASTS, Unfit, json_texts
from wormhole.plugins.batch import Batch, arrow_schema, arrow_type
from wormhole.plugins.schema import Column, Row, Schema

_AS_IS: dict[str, type] = {"int": int, "float": float, "string": str, "bytes": bytes}
"""The types SQLite returns as the logical type's value: no conversion on the row path either."""
_NONE = type(None)


def _column(column: Column, values: Sequence[Any]) -> pa.Array:
    kinds = set(map(type, values)) - {_NONE}
    kind = column.type
    if kind in _AS_IS:
        if not kinds <= {_AS_IS[kind]}:
            raise Unfit(f"a value of another type in a {kind} column")
        return pa.array(values, arrow_type(column), from_pandas=False)
    if kind == "json" and kinds <= {str}:
        return json_texts(values)
    if kind == "bool" and kinds <= {int}:  # bound as 0/1; any other integer is no boolean (_to_bool rejects it)
        ints = pa.array(values, pa.int64())
        # not_equal keeps a NULL null and any skips it (is_in would call a NULL "not in", sending the batch to
        # tuples): only an integer other than 0 and 1 is Unfit
        if pc.any(pc.and_(pc.not_equal(ints, 0), pc.not_equal(ints, 1))).as_py():
            raise Unfit("an integer other than 0 and 1 in a bool column")
        return pc.equal(ints, 1)
    if kind == "decimal" and kinds == {int}:
        return pc.cast(pa.array(values, pa.int64()), arrow_type(column))
    if kind in TEXT_CASTS and kinds <= {str}:
        return TEXT_CASTS[kind](pa.array(values, pa.string()), column)
    raise Unfit(f"values of {sorted(k.__name__ for k in kinds)} in a {kind} column")


def arrow_batch(schema: Schema, raw: Sequence[Row]) -> Batch | None:
    """The rows as a batch of Arrow columns, or None when a column has a value the row path converts
    (or rejects) in Python: the caller converts the batch as before."""
    columns = list(zip(*raw, strict=True))
    try:
        arrays = [_column(c, values) for c, values in zip(schema.columns, columns, strict=True)]
    except (Unfit, *FAILED):
        return None
    return Batch.of_arrow(pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(schema)))

"""One batch on its way through a chain (:mod:`.chain`), as Arrow columns.

Each operator's Arrow form (:meth:`wormhole.transform.operators.base.Operator.arrow`) is a :data:`Step`
that changes the frame in place: keeps rows, selects, renames or sets columns.

A value without an Arrow form in its column (a zero date a mysql source keeps as its text, an integer
beyond 64 bits that a derive computed, a decimal finer than its column) rides beside the batch: its
cell is NULL in the columns, so expressions read it as NULL (as :mod:`.pyfn` reads a zero date), and
the value itself is put back into its row when the column leaves the chain unchanged. A batch that
carries such a value leaves as tuples, so every destination sees the value as the row path gave it
(and takes or refuses it as before); every other batch leaves as Arrow columns.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.base import Column, Row, Schema
from wormhole.plugins.batch import BadValues, Rows, arrow_from_rows, arrow_schema, arrow_type, rows_from_arrow

Carried = dict[int, Any]
"""Values without an Arrow form of one column, by row id."""


def _holds(column: Column, value: Any) -> bool:
    try:
        arrow_from_rows(Schema((column,)), [(value,)])
    except BadValues:
        return False
    return True


def arrow_input(rows: Sequence[Row], schema: Schema) -> tuple[pa.RecordBatch, dict[int, Carried]]:
    """The batch as Arrow columns of ``schema``, and the values that have none (by column index, then
    row): their cells are NULL in the batch."""
    batch = rows if isinstance(rows, Rows) else Rows(rows)
    try:
        return batch.arrow(schema), {}
    except BadValues as exc:
        bad = exc.bad
    tuples = list(batch.tuples())
    carried: dict[int, Carried] = {}
    for r in bad:
        row = list(tuples[r])
        for k, column in enumerate(schema.columns):
            if row[k] is not None and not _holds(column, row[k]):
                carried.setdefault(k, {})[r] = row[k]
                row[k] = None
        tuples[r] = tuple(row)
    return arrow_from_rows(schema, tuples), carried


def fit(values: pa.Array | list[Any], column: Column) -> tuple[pa.Array, Carried]:
    """An expression's values in the Arrow type of ``column``, and those the type cannot hold (by
    position; their cells NULL): a derived integer beyond 64 bits, a decimal finer than 18 places."""
    target = arrow_type(column)
    if isinstance(values, pa.Array):
        if values.type == target:
            return values, {}
        try:
            return values.cast(target), {}
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = values.to_pylist()
    out: list[Any] = []
    carried: Carried = {}
    kind = int if column.type == "int" else None
    for i, v in enumerate(values):
        if v is not None and not _holds(column, v):
            carried[i] = kind(v) if kind is not None else v
            v = None
        out.append(v)
    return pa.array(out, target), carried


class Frame:
    """A batch's columns by name, with the values that ride beside them (see the module's docstring)."""

    __slots__ = ("arrays", "carried", "ids", "index", "n", "names", "tokens")

    def __init__(self, names: Sequence[str], batch: pa.RecordBatch, carried: dict[int, Carried]) -> None:
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.arrays: list[pa.Array] = list(batch.columns)
        self.n = batch.num_rows
        self.tokens = list(range(len(self.names)))
        """Each column's identity: kept by filters, projections and renames, new where a column is set."""
        self.carried: dict[int, Carried] = dict(carried)
        """By token: the column's values without an Arrow form, by row id."""
        self.ids: pa.Array | None = pa.array(range(self.n), pa.int64()) if carried else None
        """Each row's id (its index in the input) once a value rides beside the batch."""

    def get(self, name: str) -> pa.Array:
        return self.arrays[self.index[name]]

    def keep(self, mask: pa.Array) -> None:
        """Keep the rows whose ``mask`` is TRUE (not FALSE, not NULL)."""
        self.arrays = [pc.filter(a, mask) for a in self.arrays]
        if self.ids is not None:
            self.ids = pc.filter(self.ids, mask)
        self.n = len(self.arrays[0]) if self.arrays else int(pc.sum(pc.fill_null(mask, False)).as_py() or 0)

    def select(self, keep: tuple[int, ...]) -> None:
        names = [self.names[i] for i in keep]
        self.arrays = [self.arrays[i] for i in keep]
        self.tokens = [self.tokens[i] for i in keep]
        self.rename(names)

    def rename(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}

    def carried_cells(self, name: str) -> dict[int, Any]:
        """Column ``name``'s values without an Arrow form, by position in the batch."""
        cells = self.carried.get(self.tokens[self.index[name]])
        if not cells or self.ids is None:
            return {}
        return {i: cells[rid] for i, rid in enumerate(self.ids.to_pylist()) if rid in cells}

    def set_column(self, column: Column, values: pa.Array | list[Any]) -> None:
        """Column ``column.name`` (new or replaced) set to ``values``, held as ``column``'s Arrow type."""
        array, carried = fit(values, column)
        token = next(_TOKENS)
        if carried:
            if self.ids is None:
                self.ids = pa.array(range(self.n), pa.int64())
            ids = self.ids.to_pylist()
            self.carried[token] = {ids[i]: v for i, v in carried.items()}
        at = self.index.get(column.name)
        if at is None:
            self.arrays.append(array)
            self.tokens.append(token)
            self.rename([*self.names, column.name])
        else:
            self.arrays[at] = array
            self.tokens[at] = token

    def output(self, schema: Schema) -> Rows:
        """The batch as ``schema`` (the chain's output): Arrow columns, or tuples when values ride beside."""
        batch = pa.RecordBatch.from_arrays(self.arrays, schema=arrow_schema(schema)) if self.arrays else \
            pa.RecordBatch.from_pydict({}, schema=arrow_schema(schema))
        riding = [(k, self.carried[t]) for k, t in enumerate(self.tokens) if self.carried.get(t)]
        if not riding or self.ids is None:
            return Rows.of_arrow(batch)
        ids = self.ids.to_pylist()
        rows = [list(r) for r in rows_from_arrow(batch)]
        for k, cells in riding:
            for i, rid in enumerate(ids):
                if rid in cells:
                    rows[i][k] = cells[rid]
        return Rows([tuple(r) for r in rows])


_TOKENS = itertools.count(1 << 32)
"""Tokens of set columns (input columns' are their indexes): unique within any frame."""

Step = Callable[[Frame], None]
"""An operator's Arrow form: one batch's frame, changed in place."""

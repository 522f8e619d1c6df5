"""One batch on its way through a chain (:mod:`.chain`), as Arrow columns.

Each operator's Arrow form (:meth:`wormhole.transform.operators.base.Operator.arrow`) is a :data:`Step`
that changes the frame in place: keeps rows, selects, renames or sets columns.

A value without an Arrow form in its column rides beside the batch and is put back into its row when
the column leaves the chain unchanged. A number (an integer beyond 64 bits, a decimal finer or wider
than its column) makes its column a wider decimal inside the chain, so expressions compute with it
exactly; any other (a zero date a mysql source keeps as its text) is NULL in the columns, so
expressions read it as NULL, as :mod:`.pyfn` reads a zero date. A derived value its column's type
cannot hold rides beside the batch too. Such values go back into their column as the chain's batch leaves:
that column leaves as an exact column (:data:`wormhole.plugins.batch.EXACT_KEY`), so every destination
sees the value as the row path gave it (and takes or refuses it as before).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from wormhole.plugins.base import Column, Row, Schema
from wormhole.plugins.batch import (
    BadValues,
    Batch,
    arrow_from_rows,
    arrow_schema,
    arrow_type,
    as_batch,
    rows_from_arrow,
    rows_of,
)

Carried = dict[int, Any]
"""Values without an Arrow form of one column, by row id."""


def _holds(column: Column, value: Any) -> bool:
    try:
        arrow_from_rows(Schema((column,)), [(value,)])
    except BadValues:
        return False
    return True


def _wider(column: Column, values: Sequence[Any]) -> pa.Array | None:
    """A number column as the narrowest decimal that holds every value exactly (an integer beyond 64
    bits, a decimal finer or wider than its column), or None when none does."""
    if column.type not in ("int", "decimal"):
        return None
    try:
        out = pa.array([v if v is None or isinstance(v, Decimal) else Decimal(v) for v in values])
    except (pa.ArrowException, TypeError, ValueError, ArithmeticError):
        return None
    return out if pa.types.is_decimal(out.type) else None


def arrow_input(rows: Batch | Collection[Row], schema: Schema) -> tuple[list[pa.Array], dict[int, Carried]]:
    """The batch as Arrow columns of ``schema``, and the values that have none in their column (by
    column index, then row). A number column that a decimal can hold whole comes wider than its
    type (expressions read its values); any other such value's cell is NULL."""
    batch = as_batch(rows, schema)
    try:
        return list(batch.arrow(schema).columns), {}
    except BadValues as exc:
        bad = exc.bad
    tuples = [list(t) for t in rows_of(batch)]
    carried: dict[int, Carried] = {}
    for r in bad:
        for k, column in enumerate(schema.columns):
            if tuples[r][k] is not None and not _holds(column, tuples[r][k]):
                carried.setdefault(k, {})[r] = tuples[r][k]
    wide = {k: _wider(schema.columns[k], [t[k] for t in tuples]) for k in carried}
    for k, cells in carried.items():
        for r in cells:
            tuples[r][k] = None
    arrays = list(arrow_from_rows(schema, [tuple(t) for t in tuples]).columns)
    for k, array in wide.items():
        if array is not None:
            arrays[k] = array
    return arrays, carried


def fit(values: pa.Array | list[Any], column: Column) -> tuple[pa.Array, Carried]:
    """Values in the Arrow type of ``column``, and those the type cannot hold (by position; their cells
    NULL): an integer beyond 64 bits, a decimal finer or wider than the column."""
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

    def __init__(self, names: Sequence[str], arrays: list[pa.Array], carried: dict[int, Carried], n: int) -> None:
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.arrays = arrays
        self.n = n
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
        """Column ``column.name`` (new or replaced) set to ``values``: an array as it is (in its type, or
        wider: :meth:`output` makes it the column's type), or Python values no Arrow type holds."""
        token = next(_TOKENS)
        array = values
        if isinstance(values, list):
            array, carried = fit(values, column)
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

    def output(self, schema: Schema) -> Batch:
        """The batch as ``schema`` (the chain's output): Arrow columns, or tuples when values ride beside."""
        arrays: list[pa.Array] = []
        riding: list[tuple[int, dict[int, Any]]] = []
        for k, (array, column) in enumerate(zip(self.arrays, schema.columns, strict=True)):
            held, cells = fit(array, column)  # a wider column back in its type, or beside it
            arrays.append(held)
            if cells:
                riding.append((k, cells))
        for k, token in enumerate(self.tokens):
            came = self.carried.get(token)
            if came and self.ids is not None:  # the values as they came (an input column, unchanged)
                riding.append((k, {i: came[rid] for i, rid in enumerate(self.ids.to_pylist()) if rid in came}))
        batch = pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(schema))
        if not any(cells for _, cells in riding):
            return Batch.of_arrow(batch)
        rows = [list(r) for r in rows_from_arrow(batch)]
        for k, cells in riding:
            for i, value in cells.items():
                rows[i][k] = value
        return Batch.of_rows([tuple(r) for r in rows], schema)


_TOKENS = itertools.count(1 << 32)
"""Tokens of set columns (input columns' are their indexes): unique within any frame."""

Step = Callable[[Frame], None]
"""An operator's Arrow form: one batch's frame, changed in place."""

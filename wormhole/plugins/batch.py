"""The unit of exchange, and the one type of the writer contract: a :class:`Batch`, an Arrow record batch.

A reader that decodes straight into columns (mysql, postgres, sqlite, files) yields :meth:`Batch.of_arrow`;
a reader of Python values yields tuples, which the exchange makes a batch of the source's schema
(:meth:`Batch.of_rows`). A value its column's Arrow type cannot hold exactly (a MySQL zero date kept as its
text, an integer beyond 64 bits, a decimal of another scale than its column's or of none declared) makes
that column an *exact column* (:data:`~wormhole.plugins.arrow_form.EXACT_KEY`: each value's text, with the
column's logical type in the field's metadata), never a second form of the batch beside it.

A writer that encodes columns (mysql's LOAD DATA encoder, parquet, COPY) asks for :meth:`Batch.arrow` (each
column in its type's Arrow form: rows an exact column holds a value of that form cannot take are named by
:class:`BadValues`), or :attr:`Batch.native_arrow` for text; a row-at-a-time store takes the tuples from
:func:`rows_of`, which decodes exact columns value for value. A source's own encoding
(:class:`EncodedRows`) and its wire text are facets of a batch that only the writers of a destination that
chose them once read (:class:`~wormhole.plugins.writing.EncodedWriter`). The exchange hands the same
immutable object to every destination, so the tuples (or a typed form) a writer asks for are made at most
once per batch (under the batch's lock) and shared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from wormhole.plugins.arrow_form import DEFAULT_DECIMAL as DEFAULT_DECIMAL
from wormhole.plugins.arrow_form import EXACT_KEY as EXACT_KEY
from wormhole.plugins.arrow_form import FREE_SCALE_KEY as FREE_SCALE_KEY
from wormhole.plugins.arrow_form import LOGICAL_KEY as LOGICAL_KEY
from wormhole.plugins.arrow_form import BadValues as BadValues
from wormhole.plugins.arrow_form import arrow_field as arrow_field
from wormhole.plugins.arrow_form import arrow_for_this_process as arrow_for_this_process
from wormhole.plugins.arrow_form import arrow_from_rows as arrow_from_rows
from wormhole.plugins.arrow_form import arrow_schema as arrow_schema
from wormhole.plugins.arrow_form import arrow_type as arrow_type
from wormhole.plugins.arrow_form import column_values as column_values
from wormhole.plugins.arrow_form import decimal_shape as decimal_shape
from wormhole.plugins.arrow_form import exact_codec as exact_codec
from wormhole.plugins.arrow_form import exact_column as exact_column
from wormhole.plugins.arrow_form import exact_field as exact_field
from wormhole.plugins.arrow_form import exact_from_rows as exact_from_rows
from wormhole.plugins.arrow_form import free_scale as free_scale
from wormhole.plugins.arrow_form import has_exact as has_exact
from wormhole.plugins.arrow_form import infer_schema as infer_schema
from wormhole.plugins.arrow_form import rows_from_arrow as rows_from_arrow
from wormhole.plugins.arrow_form import trimmed as trimmed
from wormhole.plugins.schema import Row, Schema


@dataclass(frozen=True, slots=True)
class Encoding:
    """A source's own encoding of its rows, the bytes its server sends, which a destination declaring the
    same column types loads as they are: no value is decoded or encoded on the way (``SourceRole.encoded``,
    ``SinkRole.encoded``; the engine chooses it when every destination of a run takes it)."""

    format: str
    """The byte format: ``postgres.copy_binary`` (rows of PostgreSQL's binary COPY, without its header)."""
    columns: tuple[str, ...]
    """Each column's type as the source declares it (``character varying(60)``, ``numeric(12,2)``)."""


@dataclass(frozen=True, slots=True)
class EncodedRows:
    """Rows in a source's :class:`Encoding`: one ``payload`` holding them back to back, ``ends[i]`` the
    offset just past row ``i``."""

    encoding: Encoding
    payload: bytes | bytearray
    """The rows' bytes (a reader's buffer handed on: nobody writes to it again)."""
    ends: Sequence[int]
    decode: Callable[[EncodedRows, int], Row]
    """Row ``i`` as values, by the source's own rules; only for whoever needs values (a row a destination
    refused, written to the dirty-record file with its reason)."""

    def span(self, start: int, end: int) -> memoryview:
        """The bytes of rows ``start`` to ``end``."""
        first = self.ends[start - 1] if start else 0
        return memoryview(self.payload)[first:self.ends[end - 1] if end > start else first]

    def row(self, index: int) -> Row:
        return self.decode(self, index)

    def sliced(self, start: int, end: int) -> EncodedRows:
        """Rows ``start`` to ``end`` on their own (their bytes copied)."""
        first = self.ends[start - 1] if start else 0
        return EncodedRows(self.encoding, bytes(self.span(start, end)), [e - first for e in self.ends[start:end]],
                           self.decode)


class Batch:
    """An immutable batch of rows as the exchange hands it to every destination (the same object): an
    Arrow record batch (:attr:`arrow_form`), with at most two facets of the source's own form beside it
    that only a destination which chose them once loads (:attr:`wire`, :attr:`encoded`).

    It is not a sequence of rows: a writer encodes its columns (:meth:`arrow`, :attr:`arrow_form`), or
    takes its rows from the one helper :func:`rows_of`. Values a column's Arrow type cannot hold exactly
    travel in an exact column (:data:`EXACT_KEY`), never beside the batch.

    Its memo (:func:`batch_memo`) lets writers that derive the same thing from a batch, such as two MySQL
    destinations encoding it for LOAD DATA, do that work once per batch instead of once per destination.
    Keys must name everything the derived value depends on.
    """

    __slots__ = ("_arrow", "_inferred", "_lock", "_rows", "_schema", "encoded", "memo", "num_rows", "wire")

    def __init__(self, arrow: pa.RecordBatch | None, *, wire: Sequence[pa.Array | None] | None = None,
                 encoded: EncodedRows | None = None, rows: tuple[Row, ...] | None = None,
                 schema: Schema | None = None) -> None:
        assert arrow is not None or encoded is not None, "a batch holds Arrow columns or a source's encoding"
        self._arrow = arrow
        self._rows = rows
        """The rows as tuples once made (:func:`rows_of`), or the rows the batch was made from."""
        self._schema = schema
        """The schema of an encoded batch's rows, for its Arrow form (inferred from them when None)."""
        self._inferred = False
        """The Arrow form's types were inferred from the rows (:meth:`of_rows` without a schema)."""
        self.wire: tuple[pa.Array | None, ...] | None = tuple(wire) if wire is not None else None
        """The source's own text of each column (None for a column that has none), beside the Arrow form:
        the mysql reader's wire bytes, which a mysql destination declaring the same types loads as they
        are (:mod:`wormhole.plugins.mysql.passthrough`). Only the reader's own batches carry it: a batch
        made from another (a transform's, one without some rows) holds other values, and has none."""
        self.encoded = encoded
        """The rows in the source's own encoding (:class:`EncodedRows`), when the reader sent them so (the
        engine chose it: every destination loads them as they are); their values are decoded only if asked."""
        self.num_rows: int = arrow.num_rows if arrow is not None else len(encoded.ends) if encoded is not None else 0
        self._lock = threading.Lock()
        self.memo: dict[Any, Any] = {}
        """What writers derived from the batch, by keys naming all it depends on (:func:`batch_memo`)."""

    @classmethod
    def of_rows(cls, rows: Collection[Row], schema: Schema | None = None) -> Batch:
        """A batch of rows given as Python values (a reader's, a transform's), as Arrow columns of ``schema``
        that hold every value exactly (:func:`exact_from_rows`; the schema inferred when None, for tests)."""
        rows = rows if isinstance(rows, tuple) else tuple(rows)
        form = exact_from_rows(schema if schema is not None else infer_schema(rows), rows)
        batch = cls(form, rows=rows)
        batch._inferred = schema is None
        return batch

    @classmethod
    def of_encoded(cls, encoded: EncodedRows, schema: Schema | None = None) -> Batch:
        return cls(None, encoded=encoded, schema=schema)

    @classmethod
    def of_arrow(cls, batch: pa.RecordBatch, wire: Sequence[pa.Array | None] | None = None) -> Batch:
        return cls(batch, wire=wire)

    @classmethod
    def empty(cls) -> Batch:
        """A batch of no rows and no columns (a queue's control item, a chain that kept nothing)."""
        return cls(_EMPTY)

    def sliced(self, start: int, length: int) -> Batch:
        """Rows ``start`` to ``start + length``, its wire text with them (an encoded batch's: still encoded)."""
        if self._arrow is None and self.encoded is not None:
            end = min(start + length, self.num_rows)
            return Batch.of_encoded(self.encoded.sliced(start, end), self._schema)
        wire = None if self.wire is None else [None if w is None else w.slice(start, length) for w in self.wire]
        return Batch.of_arrow(self.arrow_form.slice(start, length), wire)

    def __len__(self) -> int:
        return self.num_rows

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Batch):
            return rows_of(self) == rows_of(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by value: not hashable

    def __repr__(self) -> str:
        form = "encoded" if self._arrow is None else "arrow, exact columns" if self.exact else "arrow"
        return f"Batch({self.num_rows} rows, {form})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The lock and the memo stay behind (Spark ships batches between processes), and the source's own
        # forms too (the wire text, an encoding: for a local destination only): its Arrow columns go.
        return (Batch.of_arrow, (self.arrow_form,))

    @property
    def arrow_form(self) -> pa.RecordBatch:
        """The batch's record batch as it travels (exact columns included: :data:`EXACT_KEY`); an encoded
        batch's made from its decoded rows on first use."""
        if self._arrow is None:
            with self._lock:
                if self._arrow is None:
                    rows = self._tuples()
                    self._arrow = exact_from_rows(self._schema or infer_schema(rows), rows)
        return self._arrow

    @property
    def exact(self) -> bool:
        """Some column is an exact column (:data:`EXACT_KEY`): its Arrow type did not hold its values."""
        return self._arrow is not None and has_exact(self._arrow)

    @property
    def native_arrow(self) -> pa.RecordBatch | None:
        """The record batch when every column is in its logical type's Arrow form (no exact column): what
        writers of text encode column by column; None for an encoded batch or one with an exact column."""
        return None if self._arrow is None or self.exact else self._arrow

    def _tuples(self) -> tuple[Row, ...]:
        if self._rows is None:
            with self._lock:
                if self._rows is None:
                    if self.encoded is not None:
                        encoded = self.encoded
                        self._rows = tuple(encoded.row(i) for i in range(self.num_rows))
                    else:
                        assert self._arrow is not None
                        self._rows = rows_from_arrow(self._arrow)
        return self._rows

    def arrow(self, schema: Schema) -> pa.RecordBatch:
        """The batch as Arrow columns of ``schema``, each in its logical type's Arrow form: the record batch
        itself when it is so, else made once from its values. Raises :class:`BadValues` for rows with a value
        that form cannot hold (an exact column's); the caller refuses those rows and asks again of the rest
        (:meth:`without`)."""
        form = self.arrow_form
        if not has_exact(form) and len(form.schema) == len(schema) and not (
                (self._inferred or self.encoded is not None) and not form.schema.equals(arrow_schema(schema))):
            return form
        key = ("batch.arrow", schema)
        found = self.memo.get(key)
        if found is None:
            try:
                found = arrow_from_rows(schema, self._tuples())
            except BadValues as exc:
                found = exc
            self.memo[key] = found
        if isinstance(found, BadValues):
            raise BadValues(found.bad)
        return found

    def without(self, indexes: set[int] | dict[int, Any]) -> Batch:
        """The batch less the rows at ``indexes``."""
        keep = pa.array([i not in indexes for i in range(self.num_rows)], pa.bool_())
        return Batch.of_arrow(self.arrow_form.filter(keep))

    @property
    def encoded_nbytes(self) -> int | None:
        """The size of the encoded form, when the batch came so."""
        return None if self.encoded is None else len(self.encoded.payload)

    @property
    def nbytes(self) -> int:
        """What the batch holds: its encoding's bytes when it came so, else its Arrow buffers with the wire
        text it carries (the queue's byte bound counts them)."""
        if self._arrow is None:
            assert self.encoded is not None
            return len(self.encoded.payload)
        return self._arrow.nbytes + sum(w.nbytes for w in self.wire or () if w is not None)


_EMPTY = pa.RecordBatch.from_arrays([], schema=pa.schema([]))


def batch_memo(batch: Batch) -> dict[Any, Any]:
    """The memo ``batch`` shares between the destinations it goes to (:attr:`Batch.memo`)."""
    return batch.memo


def as_batch(rows: Batch | Collection[Row], schema: Schema | None = None) -> Batch:
    """What a reader yielded, as a batch: a :class:`Batch` as it is, rows given as tuples made one
    (:meth:`Batch.of_rows`, in ``schema``)."""
    return rows if isinstance(rows, Batch) else Batch.of_rows(rows, schema)


def rows_of(batch: Batch) -> tuple[Row, ...]:
    """The batch's rows as tuples, for a store that writes a row at a time: made once per batch (from its
    Arrow columns, exact columns decoded, or the source's encoding) and shared by every destination that asks."""
    return batch._tuples()

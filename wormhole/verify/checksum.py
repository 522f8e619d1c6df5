"""An order-independent checksum of rows over Arrow record batches, over a canonical form of each value.

The checksum of a set of rows is a :class:`Digest`: their number and the sum, modulo 2**64, of a 64-bit hash
of each row (:func:`row_hashes`, :func:`digest`). A row's hash combines its columns' hashes in column order
(swapping two columns' values changes it); a column's hash is a hash of the value's canonical form, which
depends on the value's *logical type* and not on the Arrow type that carries it, so the same rows read back
from MySQL, PostgreSQL, sqlite, parquet, csv and jsonl compare equal:

- **The logical type** of a column: the ``logical`` argument's, else the field's :data:`LOGICAL_KEY`
  metadata, else inferred from the Arrow type (integers ``int``, decimals ``decimal``, floating ``float``,
  strings ``string``, binaries ``bytes``, ``bool``, dates ``date``, timestamps ``datetime``, lists, structs
  and maps ``json``; a dictionary by its values), so plain pyarrow tables read from files compare too.
- **NULL** is one value of its own, whatever the column's type: apart from ``''``, ``0``, ``false`` and the
  JSON ``null`` (unless ``json_null="null"``, below).
- **int and decimal** are one domain, exact numbers, by their canonical text: plain notation, no ``+``, no
  leading zeros, no trailing zeros after the point, no point when nothing follows it, zero without a
  sign. ``5`` (any integer width, signed or not), ``5.0``, ``5.00`` and a ``decimal128(38,18)`` 5 are one
  value; an integer beyond 64 bits or a decimal of its own scale held as text (an exact column, a csv
  column declared ``decimal``) is the same number. NaN and infinities (PostgreSQL ``numeric``) are
  ``NaN``, ``Infinity``, ``-Infinity``. (A number whose digits fit 64 bits is hashed by its coefficient
  and places, ``-12.5`` by -125 and 1, any other by that text: one value, one hash, whichever form it
  came in.)
- **float** by its exact binary value as a double (a float32 widened exactly): one canonical NaN, and
  ``-0.0`` equal to ``0.0`` (IEEE equality; SQLite stores an integral REAL as an integer and gives ``-0.0``
  back as ``0.0``). A float is not the exact number of the same value: a DOUBLE copied into a DECIMAL
  column compares different.
- **date** by its day number (``date32`` and ``date64`` alike); a date Python cannot hold kept as text
  (MySQL's ``0000-00-00``) by that text.
- **datetime** by its microseconds since 1970-01-01, nanoseconds apart only where non-zero (a
  ``timestamp[us]`` and a ``timestamp[ns]`` of the same instant are one value; a truncated microsecond is
  not). The zone annotation is no part of the value: wormhole carries an aware value as its naive UTC
  wall clock (a PostgreSQL ``timestamptz``, a MySQL TIMESTAMP read in UTC: docs/manual/types.md), so a
  naive and a UTC-aware timestamp holding the same number are equal, and an aware value held as text
  (``2024-01-01T10:00:00+02:00``) is its UTC wall clock (08:00). A text no ISO parser takes (a zero
  datetime) by that text.
- **string** by its UTF-8 bytes (a lone surrogate passed through, as the exact columns hold it);
  ``string``, ``large_string``, ``string_view`` and dictionary-encoded strings alike.
- **bytes** by its bytes, apart from a string of the same bytes.
- **bool** apart from the integers 0 and 1.
- **json** by its canonical text: parsed (numbers exact, each by the exact-number canonical text above, so
  ``1.50`` and ``1.5`` are one number), object keys sorted, no whitespace, strings with their characters
  unescaped. A text that is no JSON is the JSON string of that text: parquet keeps a JSON string value as
  its bare text (docs/manual/types.md). ``json_null="null"`` folds the JSON ``null`` into SQL NULL, for a
  comparison with a store that has only one null (jsonl).
- **exact columns** (:data:`~wormhole.plugins.arrow_form.EXACT_KEY`) are decoded into the same canonical
  form as the typed column.
- **text given another logical type** (``logical``: a csv read without declared columns, sqlite's TEXT
  decimals and JSON) is parsed as that type: numbers (``+007.50`` is 7.5), floats (Arrow's correctly
  rounded parser), ISO dates and datetimes, bools (``true``/``false``, ``t``/``f``, ``1``/``0``, ``yes``/``no``,
  ``on``/``off``), JSON; ``bytes`` takes a text's UTF-8 bytes (csv's base64 is the reader's to decode:
  declare the column ``bytes`` there). A text that does not parse is hashed as that text, apart from
  every value that does.

A row's hash folds its columns' hashes in order (``h = mix(h + column)``, splitmix64's finaliser), so
swapping two columns' values changes it. How each column is hashed (numpy and pyarrow.compute over whole
columns; JSON, and text an Arrow kernel does not parse, value by value): :mod:`wormhole.verify.hashing`.
Digests are comparable only between the same :data:`CHECKSUM_VERSION`: a change of a canonical form or a
hash constant changes every digest and must raise it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from wormhole.plugins.arrow_form import LOGICAL_KEY, column_values, exact_codec
from wormhole.verify.canonical import JsonNull, array_hashes, python_hashes
from wormhole.verify.hashing import MASK, TAG, U64, mix

__all__ = ["CHECKSUM_VERSION", "Digest", "JsonNull", "digest", "logical_of", "row_hashes"]

CHECKSUM_VERSION = 1
"""The version of the canonical forms and hash constants: a digest stored with another compares with none."""


@dataclass(frozen=True, slots=True)
class Digest:
    """The checksum of a set of rows: their number, and the sum of their 64-bit hashes modulo 2**64.

    A sum, so the order of rows and batches does not matter and digests of parts add up to the digest of
    the whole (``a + b``). Not a xor (pt-table-checksum's ``BIT_XOR``): a xor cancels a row that is there
    twice, so a duplicated row pair would vanish from it; a sum counts every copy (and ``rows`` does too).
    """

    rows: int = 0
    total: int = 0
    """The sum of the row hashes, modulo 2**64."""

    def __add__(self, other: Digest) -> Digest:
        if not isinstance(other, Digest):
            return NotImplemented
        return Digest(self.rows + other.rows, (self.total + other.total) & MASK)

    @classmethod
    def empty(cls) -> Digest:
        """The digest of no rows."""
        return cls(0, 0)

    @classmethod
    def of(cls, hashes: U64) -> Digest:
        """The digest of rows by their hashes (:func:`row_hashes`)."""
        return cls(len(hashes), int(hashes.sum(dtype=np.uint64)) if len(hashes) else 0)

    @classmethod
    def parse(cls, text: str) -> Digest:
        """A digest from its text (:meth:`__str__`)."""
        rows, _, total = text.partition(":")
        return cls(int(rows), int(total, 16))

    def __str__(self) -> str:
        """``rows:total`` with the total in 16 hex digits (``1000:9f3a04c2e1b7d6a0``): for logs and results."""
        return f"{self.rows}:{self.total:016x}"


def logical_of(field: pa.Field) -> str:
    """A field's logical type: its :data:`LOGICAL_KEY` metadata, else inferred from its Arrow type."""
    meta = field.metadata or {}
    if LOGICAL_KEY in meta:
        return str(meta[LOGICAL_KEY].decode())
    return _inferred(field.type)


def _inferred(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return _inferred(t.value_type)
    for test, kind in _INFERENCE:
        if test(t):
            return kind
    raise TypeError(f"no logical type is known for Arrow type {t}: name one in `logical`")


_INFERENCE: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (pa.types.is_integer, "int"), (pa.types.is_decimal, "decimal"), (pa.types.is_floating, "float"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t), "string"),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
     or pa.types.is_fixed_size_binary(t), "bytes"),
    (pa.types.is_boolean, "bool"), (pa.types.is_date, "date"), (pa.types.is_timestamp, "datetime"),
    (pa.types.is_null, "string"),
    (lambda t: pa.types.is_nested(t), "json"),
)


def _column_hashes(batch: pa.RecordBatch, index: int, kind: str | None, json_null: JsonNull) -> U64:
    field = batch.schema.field(index)
    kind = kind or logical_of(field)
    codec = exact_codec(field)
    if codec == b"python":  # an exact column of pickles: its Python values
        return python_hashes(column_values(batch, index), kind, json_null)
    # An exact column of text is read as text of its logical type, as a csv's column is.
    return array_hashes(batch.column(index), kind, json_null)


def _index_of(schema: pa.Schema, name: str) -> int:
    """The position of column ``name``: its exact name, else the one column whose name is the same but
    for case (PostgreSQL folds unquoted names to lower case, MySQL's compare without case)."""
    names = schema.names
    exact = [i for i, n in enumerate(names) if n == name]
    if len(exact) == 1:
        return exact[0]
    folded = [i for i, n in enumerate(names) if n.casefold() == name.casefold()]
    if len(folded) == 1 and not exact:
        return folded[0]
    raise KeyError(f"column {name!r} is {'ambiguous' if exact or folded else 'not'} in the batch "
                   f"({', '.join(names)})")


def row_hashes(batch: pa.RecordBatch, columns: Sequence[str] | None = None, *,
               logical: Mapping[str, str] | None = None, json_null: JsonNull = "value") -> U64:
    """One 64-bit hash per row of ``batch`` (a numpy uint64 array), over the canonical form of each value.

    ``columns``: compare these columns, in this order (default: every column, in the batch's order). A
    name matches a column of that exact name, else the one column named the same but for case.
    ``logical``: logical types by column name that override the fields' (a csv read as text: ``{"price":
    "decimal", "doc": "json", "day": "date"}``). ``json_null``: ``"value"`` keeps the JSON ``null`` apart from
    SQL NULL; ``"null"`` makes it SQL NULL (a store with one null: jsonl). Raises KeyError for a column
    (in ``columns`` or ``logical``) the batch lacks, TypeError for a logical type its Arrow type cannot hold.
    """
    indexes = list(range(batch.num_columns)) if columns is None else [_index_of(batch.schema, c) for c in columns]
    kinds = {_index_of(batch.schema, name): kind for name, kind in (logical or {}).items()}
    acc = np.full(batch.num_rows, TAG["seed"], np.uint64)
    for index in indexes:
        acc += _column_hashes(batch, index, kinds.get(index), json_null)
        acc = mix(acc)
    return acc


def digest(batches: Iterable[pa.RecordBatch | pa.Table], columns: Sequence[str] | None = None, *,
           logical: Mapping[str, str] | None = None, json_null: JsonNull = "value") -> Digest:
    """The :class:`Digest` of every row of ``batches`` (tables: their batches); the arguments as
    :func:`row_hashes`'s."""
    total = Digest.empty()
    for item in batches:
        for batch in item.to_batches() if isinstance(item, pa.Table) else (item,):
            total += Digest.of(row_hashes(batch, columns, logical=logical, json_null=json_null))
    return total

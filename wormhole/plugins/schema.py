"""Rows and schemas: what every store's values are, by logical type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Row = tuple[Any, ...]
"""A row is an immutable tuple of Python values, positionally matching the source schema."""


LogicalType = Literal["int", "float", "decimal", "string", "bytes", "bool", "date", "datetime", "json"]
LOGICAL_TYPES: tuple[str, ...] = ("int", "float", "decimal", "string", "bytes", "bool", "date", "datetime", "json")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: LogicalType
    nullable: bool = True
    unsigned: bool = False
    """An int column whose values reach 2**64 - 1 (a BIGINT UNSIGNED, a parquet uint64): parquet
    writes it as uint64, Spark carries it as decimal(20,0), so no value above 2**63 - 1 is refused."""
    precision: int | None = None
    """A decimal column's declared digits (its Arrow form keeps them), None when the source declares none."""
    scale: int | None = None
    """A decimal column's declared digits after the point."""
    native: str | None = field(default=None, compare=False)
    """The source's own declaration of the column when a destination of the same store may use it (mysql:
    its COLUMN_TYPE and character set, :mod:`wormhole.plugins.mysql.passthrough`; postgres: an array's
    ``format_type``, ``integer[]``, :mod:`wormhole.plugins.postgres.ddl`); None otherwise. Not
    part of the column's identity: two columns of the same logical type are equal whatever their source."""
    as_read: str | None = field(default=None, compare=False)
    """SQL in the source's dialect for the value the reader gives, ``{0}`` standing for the quoted column,
    where the column itself means another value in that SQL (a PostgreSQL ``char(n)`` compares and
    measures without the padding the reader keeps): what a pushed-down expression computes on. None:
    the column as it is; ``""``: no SQL gives it (an expression reading the column is not pushed). Not
    part of the column's identity."""


@dataclass(frozen=True, slots=True)
class Schema:
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def __len__(self) -> int:
        return len(self.columns)

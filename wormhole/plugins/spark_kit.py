"""What a store's Spark adapter (``plugins/<store>/spark.py``) needs of Spark: part of the plugin contract.

It depends on pyspark and the contract only, never on the engine's Spark modules (``wormhole.spark``),
and is loaded on demand like the adapters. Here: the logical type <-> Spark SQL type mapping (the one
the file store's parquet writer uses in local mode: decimal(38,18), naive microsecond timestamps, JSON
as its text), the exact-text marking of columns, the row reader's plan a native read may answer with,
and the useful line of a Spark error. The run's Spark itself reaches a store through its context
(``ctx.spark``, :class:`wormhole.plugins.base.SparkAccess`), for what it does outside the data plane
(the hive catalog at prepare and commit).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from wormhole.plugins.base import Column, Schema
from wormhole.plugins.spark_errors import describe_spark_error as describe_spark_error  # the kit's, for adapters

DECIMAL = T.DecimalType(38, 18)

TO_SPARK: dict[str, T.DataType] = {
    "int": T.LongType(), "float": T.DoubleType(), "decimal": DECIMAL, "string": T.StringType(),
    "bytes": T.BinaryType(), "bool": T.BooleanType(), "date": T.DateType(), "datetime": T.TimestampNTZType(),
    "json": T.StringType(),
}

TRANSPORT_SPARK: dict[str, T.DataType] = {**TO_SPARK, "decimal": T.StringType()}
"""How rows read by a store's row reader travel in Spark: decimals as their exact text, so a row
writer gets back the value with its own scale (1.50 stays 1.50, not 1.500000000000000000); native
writes cast them to decimal(38,18) like every other writer of Parquet."""

EXACT_TEXT_TYPES = frozenset({"int", "decimal", "date", "datetime", "json"})
"""Logical types a column may travel in as its exact text (see :class:`RowReaderPlan`)."""
EXACT = "wormhole.exact_text"
"""Field metadata key of a column carried as exact text: native writes that would cast it (Parquet)
hand the frame to the row writer instead, which converts the text back exactly as local mode does."""


@dataclass(frozen=True, slots=True)
class RowReaderPlan:
    """A store's native Spark read declining a source: read it with the row reader per split.

    ``exact`` names the columns that travel as their exact text: an unsigned BIGINT beyond 64 bits,
    a DECIMAL beyond decimal(38,18), a zero date kept as text (``0000-00-00``), a JSON value as its
    JSON (a string value quoted), so nothing is lost or rejected on the way and each writer re-loads
    what local mode's would."""

    reason: str
    exact: frozenset[str] = frozenset()


UNSIGNED = T.DecimalType(20, 0)
"""An unsigned 64-bit column in Spark: what Spark reads a parquet uint64 as."""


def spark_type(column: Column) -> T.DataType:
    """The Spark type a column is written as (:data:`TO_SPARK`, an unsigned 64-bit int as decimal(20,0))."""
    return UNSIGNED if column.unsigned and column.type == "int" else TO_SPARK[column.type]


def spark_schema(schema: Schema, transport: bool = False, exact: frozenset[str] = frozenset()) -> T.StructType:
    return T.StructType([T.StructField(c.name, T.StringType(), c.nullable, {EXACT: True}) if c.name in exact
                         else T.StructField(c.name, TRANSPORT_SPARK[c.type] if transport else spark_type(c),
                                            c.nullable) for c in schema.columns])


def exact_columns(struct: T.StructType) -> frozenset[str]:
    """The columns of a frame carried as exact text."""
    return frozenset(f.name for f in struct.fields if f.metadata.get(EXACT))


_LOGICAL: tuple[tuple[tuple[type[T.DataType], ...], str], ...] = (
    ((T.ByteType, T.ShortType, T.IntegerType, T.LongType), "int"),
    ((T.FloatType, T.DoubleType), "float"),
    ((T.DecimalType,), "decimal"),
    ((T.StringType, T.VarcharType, T.CharType), "string"),
    ((T.BinaryType,), "bytes"),
    ((T.BooleanType,), "bool"),
    ((T.DateType,), "date"),
    ((T.TimestampType, T.TimestampNTZType), "datetime"),
)


def logical_type(dtype: T.DataType) -> str:
    # Arrays, maps and structs are carried as JSON values.
    return next((name for types, name in _LOGICAL if isinstance(dtype, types)), "json")


def logical_schema(struct: T.StructType) -> Schema:
    return Schema(tuple(Column(f.name, logical_type(f.dataType), f.nullable) for f in struct.fields))  # type: ignore[arg-type]


def canonical(frame: DataFrame, schema: Schema) -> DataFrame:
    """The frame with each column cast to its logical type's Spark type (what local mode writes)."""
    return frame.select([F.col(f"`{c.name}`").cast(spark_type(c)).alias(c.name) for c in schema.columns])



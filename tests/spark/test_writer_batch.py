"""What a row writer in the executors gets of a partition's record batch (``writer_batch``): the columns
Spark carries in another Arrow form (a narrower integer, a timestamp's exact text) cast to the column's
own form, value for value, and a batch whose text Arrow does not parse (a zero date) as rows, its text kept.
No SparkSession: the record batches are what Spark hands a ``mapInArrow`` function."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from wormhole.plugins.base import Column, Schema
from wormhole.plugins.batch import arrow_schema, rows_of
from wormhole.spark.types import writer_batch

pytestmark = pytest.mark.spark

SCHEMA = Schema((Column("id", "int", False), Column("k", "int"), Column("amount", "decimal", precision=12, scale=2),
                 Column("created", "datetime"), Column("name", "string")))


def spark_batch(created: list[str | None]) -> pa.RecordBatch:
    """As Spark hands a JDBC read of MySQL: INT as int32, TINYINT as int8, DATETIME as its exact text."""
    n = len(created)
    return pa.RecordBatch.from_arrays([
        pa.array(range(n), pa.int64()), pa.array([7] * (n - 1) + [None], pa.int32()),
        pa.array([Decimal("1.50")] * n, pa.decimal128(12, 2)), pa.array(created, pa.string()),
        pa.array(["é'\t\\"] * n, pa.string())], names=SCHEMA.names)


def test_columns_cast_to_their_own_form() -> None:
    batch = writer_batch(SCHEMA, spark_batch(["2024-01-01 12:34:56.789", "1000-01-01 00:00:00.000", None]))
    arrow = batch.arrow(SCHEMA)
    assert arrow.schema.equals(arrow_schema(SCHEMA))
    assert rows_of(batch) == (
        (0, 7, Decimal("1.50"), dt.datetime(2024, 1, 1, 12, 34, 56, 789000), "é'\t\\"),
        (1, 7, Decimal("1.50"), dt.datetime(1000, 1, 1), "é'\t\\"),
        (2, None, Decimal("1.50"), None, "é'\t\\"))


def test_text_arrow_does_not_parse_keeps_the_rows_path() -> None:
    batch = writer_batch(SCHEMA, spark_batch(["0000-00-00 00:00:00.000", "2024-01-01 00:00:00.000"]))
    assert [r[3] for r in rows_of(batch)] == ["0000-00-00 00:00:00.000", dt.datetime(2024, 1, 1)]

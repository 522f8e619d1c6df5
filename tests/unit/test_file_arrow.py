"""The file store writes batches of Arrow columns column-wise, to the byte what it writes of their rows;
its parquet reader yields Arrow batches of the values the row path read.

Each case writes the same values twice through a real destination (prepare, writer, commit): once as an
Arrow batch (as the stream store and the columnar readers hand them over), once as the tuples the batch
makes; the files must be identical, the Arrow batch never turned into tuples, and a row the format
cannot hold rejected with the reason the row path gives.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.plugin_helpers import SCHEMA as EVERY_TYPE
from tests.plugin_helpers import ListDirtySink, read_ctx, run_destination, tuples_of
from wormhole.plugins.base import Batch, Column, Row, Schema, WriteResult
from wormhole.plugins.batch import arrow_from_rows, arrow_schema, rows_from_arrow
from wormhole.plugins.file import PLUGIN, FileReader, FileReaderOptions, FileSplitter, FileWriterOptions
from wormhole.plugins.values import JSON_NULL

ROWS: list[Row] = [
    (1, 0.1, Decimal("1.10"), "héllo 😀 wörld", bytes(range(256)), True, dt.date(2024, 2, 29),
     dt.datetime(2024, 2, 29, 23, 59, 58, 123456), {"k": ["😀", 1, 2.5, None, True]}),
    (2, None, None, None, None, None, None, None, None),
    (3, -1e300, Decimal("-12345678901234567890.000000001"), 'a,b;"c"\nnext\rline\ttab \\N', b"\x00", False,
     dt.date(1, 1, 1), dt.datetime(1970, 1, 1), [1, "x"]),
    (-2**63, 5e-324, Decimal("0"), "𝄞 ∑ 🧪 \x00 \x1f ctl", b"", True, dt.date(9999, 12, 31),
     dt.datetime(9999, 12, 31, 23, 59, 59, 999999), JSON_NULL),
    (2**62, 3.0, Decimal("-0.5"), "", b"\xff\xfe", False, dt.date(2000, 1, 1),
     dt.datetime(2000, 1, 1, 0, 0, 0, 1), "just a string"),
    (6, 1e16, Decimal("0.000000000000000001"), '"', b"=", True, dt.date(999, 1, 2), dt.datetime(1, 1, 1), 0),
    (7, -0.0, Decimal("99999999999999999999.999999999999999999"), "x" * 300, b"+/", False, dt.date(1970, 1, 1),
     dt.datetime(2020, 5, 6, 7, 8, 9), {"f": 1e300, "s": "é\n\"q\""}),
    (8, 1e-05, Decimal("-7"), ",", b"a", None, None, None, {}),
    (9, 123456789.125, Decimal("12.5"), "\n", b"b", True, dt.date(2020, 1, 1), dt.datetime(2020, 1, 1), []),
]

SCHEMA = Schema(tuple(Column(c.name, c.type, precision=38, scale=18) if c.type == "decimal" else c
                      for c in EVERY_TYPE.columns))
"""Every logical type, the decimal with a declared scale: a decimal without one is written from tuples
(its Arrow form pads every value to scale 18; tests/unit/test_batch.py)."""


def write(tmp_path: Path, name: str, rows: Any, schema: Schema = SCHEMA, **params: Any) -> tuple[WriteResult, bytes]:
    options = FileWriterOptions(path=str(tmp_path / name), **params)
    [result] = run_destination(PLUGIN.sink, options, [rows], schema=schema)
    parts = sorted((tmp_path / name).glob("part-*"))
    return result, b"".join(p.read_bytes() for p in parts)


def both(tmp_path: Path, rows: list[Row], schema: Schema = SCHEMA, **params: Any) -> tuple[
        tuple[WriteResult, bytes], tuple[WriteResult, bytes], Batch]:
    batch = Batch.of_arrow(arrow_from_rows(schema, rows))
    as_rows = list(rows_from_arrow(batch.arrow_form))
    columnar = write(tmp_path, "arrow", batch, schema, **params)
    row_wise = write(tmp_path, "rows", as_rows, schema, **params)
    return columnar, row_wise, batch


@pytest.mark.parametrize("params", [
    {"format": "csv"}, {"format": "csv", "delimiter": ";", "null": ""}, {"format": "csv", "delimiter": "\t"},
    {"format": "csv", "delimiter": "e", "null": "NULL", "header": False}, {"format": "csv", "delimiter": "0"},
    {"format": "jsonl"}, {"format": "parquet"},
], ids=lambda p: "-".join(f"{v!s}" for v in p.values()))
def test_an_arrow_batch_is_written_column_wise_as_its_rows_are(tmp_path: Path, params: dict[str, Any]) -> None:
    (result, data), (want_result, want), batch = both(tmp_path, ROWS, **params)
    assert (result.written, result.rejected) == (want_result.written, want_result.rejected) == (len(ROWS), ())
    assert data == want
    assert not batch._rows, "the Arrow batch was turned into tuples"


def test_a_one_column_csv_writes_an_empty_field_as_the_csv_module_does(tmp_path: Path) -> None:
    schema = Schema((Column("s", "string"),))
    rows: list[Row] = [("",), (None,), ("x",), (" ",)]
    for null in ("", "\\N"):
        (_, data), (_, want), batch = both(tmp_path / null.strip("\\") / "x", rows, schema, format="csv", null=null)
        assert data == want
        assert not batch._rows


def test_decimals_keep_the_declared_scale(tmp_path: Path) -> None:
    schema = Schema((Column("id", "int"), Column("d", "decimal", precision=12, scale=2)))
    rows: list[Row] = [(1, Decimal("-123.45")), (2, Decimal("0.00")), (3, Decimal("10000000.00")), (4, None)]
    (_, data), (_, want), _ = both(tmp_path, rows, schema, format="csv")
    assert data == want == b"id,d\n1,-123.45\n2,0.00\n3,10000000.00\n4,\\N\n"
    (_, data), (_, want), _ = both(tmp_path / "j", rows, schema, format="jsonl")
    assert data == want
    assert data.splitlines()[0] == b'{"id":1,"d":"-123.45"}'


def test_a_float_jsonl_cannot_hold_is_rejected_with_the_row_paths_reason(tmp_path: Path) -> None:
    schema = Schema((Column("id", "int"), Column("f", "float")))
    rows: list[Row] = [(1, 1.5), (2, float("nan")), (3, float("inf")), (4, None)]
    (result, data), (want_result, want), _ = both(tmp_path, rows, schema, format="jsonl")
    assert data == want == b'{"id":1,"f":1.5}\n{"id":4,"f":null}\n'
    assert [(r.row[0], r.reason) for r in result.rejected] == [(r.row[0], r.reason) for r in want_result.rejected]
    assert [r.row[0] for r in result.rejected] == [2, 3]
    assert all("Out of range float values are not JSON compliant" in r.reason for r in result.rejected)


def test_parquet_rejects_a_null_in_a_column_that_is_not_nullable_row_by_row(tmp_path: Path) -> None:
    schema = Schema((Column("id", "int", nullable=False), Column("s", "string")))
    rows: list[Row] = [(1, "a"), (None, "b"), (3, None)]
    batch = Batch.of_arrow(arrow_from_rows(Schema((Column("id", "int"), Column("s", "string"))), rows))
    result, _ = write(tmp_path, "arrow", batch, schema, format="parquet")
    assert result.written == 2
    assert [(r.row, r.reason) for r in result.rejected] == [
        ((None, "b"), "column id: ValueError: NULL in a column that is not nullable")]


# ---------------------------------------------------------------------------------------------
# The parquet reader yields Arrow batches


def _read_batches(path: Path, sink: ListDirtySink | None = None, **params: Any) -> tuple[FileReader, list[Any]]:
    options = FileReaderOptions(path=str(path), format="parquet", **params)
    ctx = read_ctx(sink, batch_rows=2)
    reader = FileReader(options, ctx)
    reader.schema()
    return reader, [b for split in FileSplitter(options, ctx).split(1) for b in reader.read(split)]


def test_parquet_files_are_read_as_arrow_batches_of_the_same_values(tmp_path: Path) -> None:
    paris = "Europe/Paris"
    pq.write_table(pa.table({
        "i8": pa.array([-128, None, 3], pa.int8()),
        "u64": pa.array([2**64 - 1, 0, 1], pa.uint64()),
        "f16": pa.array([1.5, None, 2.0], pa.float16()),
        "f32": pa.array([0.25, -1.0, 0.1], pa.float32()),
        "d": pa.array([Decimal("1.50"), None, Decimal("-0.01")], pa.decimal128(10, 2)),
        "d256": pa.array([Decimal("1.5"), None, Decimal(0)], pa.decimal256(50, 10)),
        "ls": pa.array(["é", None, ""], pa.large_string()),
        "fb": pa.array([b"ab", b"cd", b"\x00\xff"], pa.binary(2)),
        "d64": pa.array([dt.date(2024, 1, 2), None, dt.date(1, 1, 1)], pa.date64()),
        "ts_ns": pa.array([1_700_000_000_123_456_789, None, 0], pa.timestamp("ns")),
        "ts_tz": pa.array([dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC), None, None], pa.timestamp("us", tz=paris)),
        "tm": pa.array([dt.time(1, 2, 3, 4), None, dt.time(0)], pa.time64("us")),
        "dict": pa.array(["red", "blue", "red"]).dictionary_encode(),
    }), tmp_path / "a.parquet", coerce_timestamps=None, allow_truncated_timestamps=False)
    reader, batches = _read_batches(tmp_path)
    assert [len(b) for b in batches] == [2, 1]
    assert all(isinstance(b, Batch) and b.native_arrow is not None for b in batches)
    assert all(b.arrow_form.schema == arrow_schema(reader.schema()) for b in batches)
    assert [c.precision for c in reader.schema().columns if c.type == "decimal"] == [10, 50]
    rows = [row for b in batches for row in tuples_of(b)]
    assert rows == [
        (-128, 2**64 - 1, 1.5, 0.25, Decimal("1.50"), Decimal("1.5000000000"), "é", b"ab", dt.date(2024, 1, 2),
         dt.datetime(2023, 11, 14, 22, 13, 20, 123456), dt.datetime(2024, 6, 1, 12), "01:02:03.000004", "red"),
        (None, 0, None, -1.0, None, None, None, b"cd", None, None, None, None, "blue"),
        (3, 1, 2.0, 0.10000000149011612, Decimal("-0.01"), Decimal("0E-10"), "", b"\x00\xff", dt.date(1, 1, 1),
         dt.datetime(1970, 1, 1), None, "00:00:00.000000", "red"),
    ]
    assert [str(r[4]) for r in rows] == ["1.50", "None", "-0.01"]  # the file's scale, as the row path read it


def test_a_parquet_batch_python_cannot_hold_is_read_row_by_row_and_its_bad_rows_rejected(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [1, 2, 3], "day": pa.array([0, 3_000_000, 1], pa.date32())}), tmp_path / "a.parquet")
    sink = ListDirtySink()
    _, batches = _read_batches(tmp_path, sink)
    assert [type(b).__name__ for b in batches] == ["list", "Batch"]  # the batch holding year 10183, the other
    assert [row for b in batches for row in tuples_of(b)] == [(1, dt.date(1970, 1, 1)), (3, dt.date(1970, 1, 2))]
    assert [r.row[0] for r in sink.rows] == [2]
    assert sink.rows[0].reason.startswith(f"{tmp_path / 'a.parquet'}: row 2: column day: ")


def test_parquet_to_csv_writes_what_the_row_path_wrote(tmp_path: Path) -> None:
    """A file read as Arrow and written as csv: the text of the values the row path read, to the byte."""
    pq.write_table(pa.table({"id": [1, 2], "d": pa.array([Decimal("1.50"), Decimal(0)], pa.decimal128(10, 2)),
                             "f": pa.array([0.1, None], pa.float32())}), tmp_path / "a.parquet")
    _, batches = _read_batches(tmp_path)
    schema = Schema((Column("id", "int"), Column("d", "decimal", precision=10, scale=2), Column("f", "float")))
    _, data = write(tmp_path, "out", batches[0], schema, format="csv")
    assert data == b"id,d,f\n1,1.50,0.10000000149011612\n2,0.00,\\N\n"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_batch_of_tuples_another_destination_made_arrow_is_written_from_its_tuples(tmp_path: Path,
                                                                                     fmt: str) -> None:
    """The Arrow form a destination makes of tuples takes the column's decimal scale: 1.5 would become
    1.500000000000000000. Only a batch born Arrow is encoded from its columns."""
    schema = Schema((Column("id", "int"), Column("d", "decimal"), Column("doc", "json")))
    rows: list[Row] = [(1, Decimal("1.5"), "text"), (2, Decimal("-0.10"), {"a": 1})]
    batch = Batch.of_rows(rows, schema)
    batch.arrow(schema)  # another destination asked for columns first
    _, data = write(tmp_path, "shared", batch, schema, format=fmt)
    _, want = write(tmp_path, "rows", rows, schema, format=fmt)
    assert data == want
    if fmt == "csv":
        assert data == b'id,d,doc\n1,1.5,"""text"""\n2,-0.10,"{""a"": 1}"\n'

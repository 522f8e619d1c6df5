"""The file store's parquet format: real part files written and read through pyarrow, no mocks."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import structlog

import tests.plugin_helpers as helpers
from tests.plugin_helpers import (
    DIRTY,
    SCHEMA,
    ListDirtySink,
    read_ctx,
    run_destination,
    tiny_tmpfs,
    tuples_of,
    write_ctx,
)
from wormhole.config import EngineConf, PathsConf
from wormhole.engine import Engine
from wormhole.errors import PrepareError, ReadError, WriteError
from wormhole.plugins.base import Column, ReadContext, Row, Schema
from wormhole.plugins.batch import BadValues, Batch, as_batch
from wormhole.plugins.file import (
    PLUGIN,
    ColumnOption,
    FileReader,
    FileReaderOptions,
    FileWriter,
    FileWriterOptions,
    FileWriterPeriphery,
)
from wormhole.plugins.file.periphery import FileReaderPeriphery
from wormhole.plugins.file.splitter import FileSplitter
from wormhole.plugins.stream import ColumnOption as StreamColumn
from wormhole.plugins.stream import StreamReader, StreamReaderOptions, StreamSplitter
from wormhole.task_spec import TaskSpec

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

REPO = Path(__file__).resolve().parents[2]
PLUS_TWO = dt.timezone(dt.timedelta(hours=2))
BIG_DECIMAL = Decimal("12345678901234567890.123456789012345678")

ROWS: list[Row] = [
    (1, 0.1, BIG_DECIMAL, "héllo 😀 wörld", bytes(range(256)), True, dt.date(2024, 2, 29),
     dt.datetime(2024, 2, 29, 23, 59, 58, 123456), {"k": ["😀", 1, 2.5, None, True]}),
    (2, None, None, None, None, None, None, None, None),
    (-3, -1e300, -BIG_DECIMAL, 'a,b;"c"\nnext line', b"\x00", False, dt.date(1, 1, 1),
     dt.datetime(2020, 1, 1, 12, 0, tzinfo=PLUS_TWO), [1, "x", {"deep": "🧪"}]),
    (None, 5e-324, Decimal("-0.000000000000000001"), "𝄞 ∑ 🧪", b"", True, dt.date(9999, 12, 31),
     dt.datetime(1970, 1, 1), {}),
    (2**63 - 1, float("-inf"), Decimal(0), "", b"\xff\xfe", False, dt.date(2000, 1, 1),
     dt.datetime(9999, 12, 31, 23, 59, 59, 999999), "already a string"),
    (-(2**63), 3.0, Decimal("99999999999999999999.999999999999999999"), "plain", b"bytes", None,
     dt.date(1970, 1, 1), dt.datetime(2024, 7, 1, 0, 30, tzinfo=dt.UTC), 42),
]
"""One column of every logical type (tests.plugin_helpers.SCHEMA), NULLs and extremes included."""


def expected(row: Row) -> Row:
    """What a row reads back as: an aware datetime as naive UTC, json as its JSON text."""
    ts, doc = row[7], row[8]
    if ts is not None and ts.tzinfo is not None:
        ts = ts.astimezone(dt.UTC).replace(tzinfo=None)
    if doc is not None and not isinstance(doc, str):
        doc = json.dumps(doc, ensure_ascii=False, allow_nan=False)
    return (*row[:7], ts, doc)


def write_rows(options: Any, parts: Sequence[Sequence[Row]], **kwargs: Any) -> list[Any]:
    return run_destination(PLUGIN.sink, options, parts, **kwargs)


def read_all(options: Any, sink: ListDirtySink | None = None, batch_rows: int = 1000) -> list[Row]:
    return helpers.read_all(PLUGIN.source, options, sink, batch_rows)


def writer_options(target: Path, **kwargs: Any) -> FileWriterOptions:
    return FileWriterOptions(path=str(target), format="parquet", **kwargs)


def open_writer(target: Path, schema: Schema) -> tuple[FileWriterPeriphery, FileWriter]:
    """A prepared parquet destination at ``target`` of one writer thread, and its open writer 0."""
    options = writer_options(target)
    ctx = write_ctx(schema, concurrency=1)
    periphery = FileWriterPeriphery(options, ctx)
    periphery.prepare()
    writer = FileWriter(options, ctx, periphery, 0)
    writer.open()
    return periphery, writer


def reader_options(path: Path | str, **kwargs: Any) -> FileReaderOptions:
    return FileReaderOptions(path=str(path), format="parquet", **kwargs)


# ---------------------------------------------------------------------------------------------
# Writing


def test_options_accept_parquet_with_the_csv_defaults() -> None:
    opts, problems = helpers.parse(FileWriterOptions, {"path": "out", "format": "parquet"})
    assert not problems.items and opts.format == "parquet"
    opts, problems = helpers.parse(FileReaderOptions, {"path": "in", "format": "parquet",
                                                       "columns": [{"name": "a"}]})
    assert not problems.items and opts.format == "parquet"


def test_round_trip_of_every_type_with_two_workers(tmp_path: Path) -> None:
    target = tmp_path / "out"
    results = write_rows(writer_options(target), [ROWS[:3], ROWS[3:]])
    assert [(r.written, r.rejected) for r in results] == [(3, ()), (3, ())]
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.parquet", "part-00001.parquet"]
    assert os.listdir(tmp_path) == ["out"]  # no temporary or .old directory left behind

    reader = FileReader(reader_options(target), read_ctx())
    assert reader.schema() == Schema(tuple(  # a decimal keeps the file's precision and scale
        Column(c.name, "decimal", precision=38, scale=18) if c.type == "decimal" else
        Column(c.name, "string" if c.type == "json" else c.type) for c in SCHEMA.columns))
    back = read_all(reader_options(target))
    assert len(back) == len(ROWS)
    for got, row in zip(back, ROWS, strict=True):
        for value, want, column in zip(got, expected(row), SCHEMA.columns, strict=True):
            assert value == want, column.name
            assert type(value) is type(want), column.name
    # json comes back as the text the writer stored, not as the value
    assert back[0][8] == '{"k": ["😀", 1, 2.5, null, true]}'
    assert back[4][8] == "already a string"
    assert back[5][8] == "42"
    assert back[2][7] == dt.datetime(2020, 1, 1, 10, 0)  # 12:00+02:00 as naive UTC


def test_parts_use_the_contract_arrow_types_and_snappy(tmp_path: Path) -> None:
    target = tmp_path / "out"
    nullable = Schema((*SCHEMA.columns[1:], Column("id", "int", nullable=False)))
    write_rows(writer_options(target), [[(*r[1:], i) for i, r in enumerate(ROWS)]], schema=nullable)
    part = target / "part-00000.parquet"
    assert pq.read_schema(part).remove_metadata() == pa.schema([
        pa.field("f", pa.float64()), pa.field("dec", pa.decimal128(38, 18)), pa.field("s", pa.string()),
        pa.field("raw", pa.binary()), pa.field("flag", pa.bool_()), pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us")), pa.field("doc", pa.string()),
        pa.field("id", pa.int64(), nullable=False),
    ])
    meta = pq.read_metadata(part)
    assert meta.num_rows == len(ROWS)
    assert meta.row_group(0).column(0).compression == "SNAPPY"


@pytest.mark.parametrize(("column", "bad", "reason"), [
    (0, 2**70, "column id: OverflowError"),
    (0, -(2**63) - 1, "column id: OverflowError"),
    (0, 1.5, "column id: ValueError: 1.5 is not an integer"),
    (0, True, "column id: ArrowTypeError"),
    (2, Decimal("1" * 30), "column dec: ArrowInvalid"),
    (2, Decimal("0.1234567890123456789"), "column dec: ArrowInvalid"),
    (2, Decimal("NaN"), "column dec: ArrowInvalid"),
    (3, "bad " + DIRTY, "column s: UnicodeEncodeError"),
    (3, 17, "column s: ArrowTypeError"),
    (8, {"x": float("nan")}, "column doc: ValueError: Out of range float values are not JSON compliant"),
    (8, {"x": {1, 2}}, "column doc: TypeError: Object of type set is not JSON serializable"),
])
def test_only_the_bad_row_is_rejected(tmp_path: Path, column: int, bad: Any, reason: str) -> None:
    day, ts = dt.date(2024, 1, 1), dt.datetime(2024, 1, 1)
    rows = [(i, float(i), Decimal(i), f"row {i}", b"x", True, day, ts, [i]) for i in range(6)]
    bad_row = list(rows[3])
    bad_row[column] = bad
    rows[3] = tuple(bad_row)
    (result,) = write_rows(writer_options(tmp_path / "out"), [rows])
    assert result.written == 5
    assert [r.row for r in result.rejected] == [rows[3]]
    assert result.rejected[0].reason.startswith(reason), result.rejected[0].reason
    back = read_all(reader_options(tmp_path / "out"))
    assert back == [expected(r) for r in rows[:3] + rows[4:]]


def test_a_null_in_a_column_that_is_not_nullable_is_rejected(tmp_path: Path) -> None:
    schema = Schema((Column("id", "int", nullable=False), Column("s", "string")))
    rows = [(1, "a"), (None, "b"), (3, None)]
    (result,) = write_rows(writer_options(tmp_path / "out"), [rows], schema=schema)
    assert result.written == 2
    assert [(r.row, r.reason) for r in result.rejected] == [
        ((None, "b"), "column id: ValueError: NULL in a column that is not nullable")]
    assert read_all(reader_options(tmp_path / "out")) == [(1, "a"), (3, None)]


def test_a_row_of_the_wrong_width_makes_no_batch() -> None:
    """A batch is Arrow columns of its schema: rows of another width have none, and are named."""
    schema = Schema((Column("id", "int"), Column("s", "string")))
    with pytest.raises(BadValues) as caught:
        as_batch([(1, "a"), (2,), (3, "c")], schema)
    assert caught.value.bad == {1: "expected 2 values, got 1"}


def test_many_batches_make_few_row_groups(tmp_path: Path) -> None:
    periphery, writer = open_writer(tmp_path / "out", Schema((Column("id", "int"), Column("s", "string"))))
    try:
        for start in range(0, 300_000, 10_000):
            result = writer.write(Batch.of_rows([(i, f"v{i}") for i in range(start, start + 10_000)]))
            assert (result.written, result.rejected) == (10_000, ())
        writer.flush()
    finally:
        writer.close()
    periphery.commit()
    meta = pq.read_metadata(tmp_path / "out" / "part-00000.parquet")
    assert meta.num_rows == 300_000
    assert meta.num_row_groups == 3  # every 14 batches (>= 128 Ki rows), then the rest at flush
    assert [r[0] for r in read_all(reader_options(tmp_path / "out"))] == list(range(300_000))


@pytest.mark.parametrize("stale_closes_last", [False, True])
def test_a_rerun_worker_leaves_its_rows_once(tmp_path: Path, stale_closes_last: bool) -> None:
    """Worker 0 fails part-way and runs again: its part holds each row once, never the failed attempt's."""
    options = writer_options(tmp_path / "out")
    ctx = write_ctx(SCHEMA, concurrency=1)
    periphery = FileWriterPeriphery(options, ctx)
    periphery.prepare()
    failed = FileWriter(options, ctx, periphery, 0)
    failed.open()
    assert failed.write(Batch.of_rows(ROWS[:2])).written == 2
    failed.flush()  # its rows are on disk when it "fails"
    assert failed.write(Batch.of_rows(ROWS[2:4])).written == 2
    if not stale_closes_last:
        failed.close()
    rerun = FileWriter(options, ctx, periphery, 0)
    rerun.open()
    try:
        assert rerun.write(as_batch(ROWS)).written == len(ROWS)
        rerun.flush()
    finally:
        rerun.close()
    if stale_closes_last:
        failed.close()  # the failed attempt's writer finishing late must not touch the new part
    periphery.commit()
    periphery.release()
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS", "part-00000.parquet"]
    assert read_all(reader_options(tmp_path / "out")) == [expected(r) for r in ROWS]


def test_rollback_leaves_the_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "out"
    write_rows(writer_options(target), [ROWS[:2]], run_id=1)
    before = {name: (target / name).read_bytes() for name in os.listdir(target)}
    write_rows(writer_options(target), [ROWS, ROWS], run_id=2, commit=False)
    assert os.listdir(tmp_path) == ["out"]
    assert {name: (target / name).read_bytes() for name in os.listdir(target)} == before
    write_rows(writer_options(tmp_path / "new"), [ROWS], commit=False)
    assert os.listdir(tmp_path) == ["out"]


def test_overwrite_replaces_the_target(tmp_path: Path) -> None:
    target = tmp_path / "out"
    write_rows(writer_options(target), [ROWS, ROWS], run_id=1)
    write_rows(writer_options(target), [ROWS[:1]], run_id=2)
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.parquet"]
    assert os.listdir(tmp_path) == ["out"]
    assert read_all(reader_options(target)) == [expected(ROWS[0])]


def test_overwrite_replaces_an_appended_output_but_not_a_foreign_parquet_file(tmp_path: Path) -> None:
    target = tmp_path / "out"
    write_rows(writer_options(target, mode="append"), [ROWS[:2]], run_id=1)
    write_rows(writer_options(target, mode="append"), [ROWS[2:]], run_id=2)
    write_rows(writer_options(target), [ROWS[:1]], run_id=3)  # overwrite: all of it was wormhole's
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.parquet"]
    pq.write_table(pa.table({"x": [1]}), target / "curated.parquet")  # someone else's file
    periphery = FileWriterPeriphery(writer_options(target), write_ctx(SCHEMA, run_id=4))
    with pytest.raises(PrepareError, match=rf"{re.escape(str(target))} is not a previous wormhole output "
                                           rf"\(it holds curated\.parquet\)"):
        periphery.prepare()
    periphery.rollback()
    assert sorted(os.listdir(target)) == ["_SUCCESS", "curated.parquet", "part-00000.parquet"]
    assert os.listdir(tmp_path) == ["out"]


def test_append_adds_parts_from_each_run(tmp_path: Path) -> None:
    target = tmp_path / "out"
    options = writer_options(target, mode="append")
    write_rows(options, [ROWS[:2], ROWS[2:3]], run_id=1)
    write_rows(options, [ROWS[3:]], run_id=2)
    write_rows(options, [ROWS], run_id=3, commit=False)
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-7-1-00000.parquet", "part-7-1-00001.parquet",
                                          "part-7-2-00000.parquet"]
    assert os.listdir(tmp_path) == ["out"]
    assert read_all(reader_options(target)) == [expected(r) for r in ROWS]


def test_a_full_disk_raises_write_error_not_dirty_rows(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        periphery, writer = open_writer(mnt / "out", Schema((Column("id", "int"), Column("s", "string"))))
        batch = [(i, os.urandom(100).hex()) for i in range(1000)]  # incompressible
        with pytest.raises(WriteError, match="No space left"):
            for _ in range(100):
                result = writer.write(as_batch(batch))
                assert result.rejected == ()
                writer.flush()
        writer.close()  # after the failure: closes quietly, no second error
        periphery.rollback()
        assert os.listdir(mnt) == []


# ---------------------------------------------------------------------------------------------
# Reading files written by others


def write_parquet(path: Path, columns: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def test_arrow_types_map_to_logical_types(tmp_path: Path) -> None:
    paris = "Europe/Paris"
    table = pa.table({
        "i8": pa.array([-128, None], pa.int8()),
        "u64": pa.array([2**64 - 1, 0], pa.uint64()),
        "f16": pa.array([1.5, None], pa.float16()),
        "f32": pa.array([0.25, -1.0], pa.float32()),
        "d256": pa.array([Decimal("1.5"), None], pa.decimal256(50, 10)),
        "ls": pa.array(["é", None], pa.large_string()),
        "lb": pa.array([b"\x00", None], pa.large_binary()),
        "fb": pa.array([b"ab", b"cd"], pa.binary(2)),
        "d64": pa.array([dt.date(2024, 1, 2), None], pa.date64()),
        "ts_ns": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns")),
        "ts_ms": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 5000), None], pa.timestamp("ms")),
        "ts_tz": pa.array([dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC), None], pa.timestamp("us", tz=paris)),
        "tm": pa.array([dt.time(1, 2, 3, 4), None], pa.time64("us")),
        "lst": pa.array([[1, 2], None], pa.list_(pa.int64())),
        "st": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "mp": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
        "dict": pa.array(["red", "blue"]).dictionary_encode(),
    })
    pq.write_table(table, tmp_path / "a.parquet", coerce_timestamps=None, allow_truncated_timestamps=False)
    schema = FileReader(reader_options(tmp_path / "a.parquet"), read_ctx()).schema()
    assert [(c.name, c.type) for c in schema.columns] == [
        ("i8", "int"), ("u64", "int"), ("f16", "float"), ("f32", "float"), ("d256", "decimal"),
        ("ls", "string"), ("lb", "bytes"), ("fb", "bytes"), ("d64", "date"), ("ts_ns", "datetime"),
        ("ts_ms", "datetime"), ("ts_tz", "datetime"), ("tm", "string"), ("lst", "json"), ("st", "json"),
        ("mp", "json"), ("dict", "string"),
    ]
    assert read_all(reader_options(tmp_path)) == [
        (-128, 2**64 - 1, 1.5, 0.25, Decimal("1.5000000000"), "é", b"\x00", b"ab", dt.date(2024, 1, 2),
         dt.datetime(2023, 11, 14, 22, 13, 20, 123456), dt.datetime(2024, 1, 1, 0, 0, 0, 5000),
         dt.datetime(2024, 6, 1, 12), "01:02:03.000004", [1, 2], {"a": 1, "b": "x"}, [("k", 1)], "red"),
        (None, 0, None, -1.0, None, None, None, b"cd", None, None, None, None, None, None, None, None, "blue"),
    ]


def test_a_directory_reads_one_split_per_parquet_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for name, ids in [("b.parquet", [3, 4, 5]), ("a.parquet", [1, 2]), ("c.parquet", [])]:
        write_parquet(data / name, {"id": pa.array(ids, pa.int64()),
                                    "s": pa.array([f"s{i}" for i in ids], pa.string())})
    # A column of Arrow type null (every value NULL, as pandas writes one) fits any type.
    write_parquet(data / "d.parquet", {"id": pa.array([6], pa.int64()), "s": pa.array([None])})
    for name in ["_SUCCESS", "_part.parquet", ".hidden.parquet", "d.csv"]:
        (data / name).write_bytes(b"not parquet")
    ctx = read_ctx()
    splits = FileSplitter(reader_options(data), ctx).split(8)
    files = [str(data / n) for n in ("a.parquet", "b.parquet", "c.parquet", "d.parquet")]
    assert [s.id for s in splits] == files
    assert {s.resource_mark for s in splits} == {f"file:{data}"}
    rows = [(i, f"s{i}") for i in range(1, 6)] + [(6, None)]
    assert read_all(reader_options(data)) == rows
    assert read_all(reader_options(data / "*.parquet")) == rows
    assert read_all(reader_options(data / "b.parquet")) == rows[2:5]
    info = FileReaderPeriphery(reader_options(data), ctx).prepare()
    assert info.estimated_rows == 6
    assert info.estimated_bytes == sum(os.path.getsize(p) for p in files)


def test_columns_pick_and_order_the_columns(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", {"id": [1, 2], "s": ["x", "y"], "f": [0.5, 1.5]})
    # A later file may differ in the columns not read, and in their order.
    write_parquet(tmp_path / "b.parquet", {"f": [2.5], "extra": [True], "id": [3]})
    columns = (ColumnOption(name="f", type="string"), ColumnOption(name="id"))  # types come from the file
    options = reader_options(tmp_path, columns=columns)
    assert FileReader(options, read_ctx()).schema() == Schema((Column("f", "float"), Column("id", "int")))
    assert read_all(options) == [(0.5, 1), (1.5, 2), (2.5, 3)]


def test_a_missing_column_is_a_read_error_naming_file_and_column(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", {"id": [1], "s": ["x"]})
    options = reader_options(tmp_path, columns=(ColumnOption(name="id"), ColumnOption(name="nope")))
    with pytest.raises(ReadError, match=re.escape(f"{tmp_path / 'a.parquet'}: no column 'nope'")):
        FileReader(options, read_ctx()).schema()


@pytest.mark.parametrize("second", [
    {"id": [3], "s": [4]},                        # s: string -> int
    {"id": [3]},                                  # s missing
    {"id": [3], "s": ["z"], "extra": [1.0]},      # one column more
])
def test_a_file_with_other_columns_is_a_read_error_naming_both_files(tmp_path: Path,
                                                                     second: dict[str, Any]) -> None:
    write_parquet(tmp_path / "a.parquet", {"id": [1, 2], "s": ["x", "y"]})
    write_parquet(tmp_path / "b.parquet", second)
    with pytest.raises(ReadError) as info:
        read_all(reader_options(tmp_path))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'b.parquet'}: its columns (")
    assert f"differ from those of the first file {tmp_path / 'a.parquet'} (id int, s string)" in message


def test_values_python_cannot_hold_go_to_the_dirty_sink(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    write_parquet(path, {"id": [1, 2, 3, 4],
                         "ts": pa.array([0, 10**15, 86_400, -(10**15)], pa.timestamp("s"))})
    sink = ListDirtySink()
    rows = read_all(reader_options(path), sink)
    assert rows == [(1, dt.datetime(1970, 1, 1)), (3, dt.datetime(1970, 1, 2))]
    assert [origin for origin, _, _ in sink.calls] == ["source"]
    # parquet has no seconds unit: the file holds milliseconds, and the dirty row Arrow's text of them
    assert [r.row for r in sink.rows] == [(2, f"<value out of range: {10**18}>"),
                                          (4, f"<value out of range: {-(10**18)}>")]
    assert sink.rows[0].reason.startswith(f"{path}: row 2: column ts: ")
    assert sink.rows[1].reason.startswith(f"{path}: row 4: column ts: ")


def test_batches_respect_batch_rows(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", {"n": list(range(2500))})
    options = reader_options(tmp_path)
    ctx = read_ctx(batch_rows=1000)
    (split,) = FileSplitter(options, ctx).split(1)
    batches = list(FileReader(options, ctx).read(split))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    assert [r[0] for b in batches for r in tuples_of(b)] == list(range(2500))


def test_a_file_that_is_not_parquet_is_a_read_error(tmp_path: Path) -> None:
    (tmp_path / "a.parquet").write_bytes(b"PAR1 but not really")
    with pytest.raises(ReadError, match=re.escape(str(tmp_path / "a.parquet"))):
        FileReader(reader_options(tmp_path), read_ctx()).schema()
    with pytest.raises(ReadError, match=re.escape(str(tmp_path / "a.parquet"))):
        FileReaderPeriphery(reader_options(tmp_path), read_ctx()).prepare()



# ---------------------------------------------------------------------------------------------
# A whole task


def test_a_stream_task_to_a_parquet_destination(tmp_path: Path) -> None:
    columns = [{"name": c.name, "type": c.type} for c in SCHEMA.columns]
    rows = 30_000
    spec = TaskSpec.from_mapping({
        "source": {"plugin": "stream", "params": {"rows": rows, "splits": 3, "seed": 11, "columns": columns}},
        "destinations": [{"id": "pq", "plugin": "file", "concurrency": 2,
                          "params": {"path": str(tmp_path / "out"), "format": "parquet"}}],
    })
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    result = Engine(conf, spec, task_id=1, run_id=1, log=structlog.get_logger()).run()
    assert result.exit_code == 0, result.error
    assert result.result["destinations"]["pq"]["rows_written"] == rows
    # One part per split (each made durable on its own), whichever of the two writers wrote it.
    parts = sorted(p for p in os.listdir(tmp_path / "out") if p != "_SUCCESS")
    assert len(parts) == 3 and all(p.startswith("part-10000-") and p.endswith(".parquet") for p in parts), parts
    # id is not nullable in the generator's schema: the parquet column is required
    assert not pq.read_schema(tmp_path / "out" / parts[0]).field("id").nullable

    stream = StreamReaderOptions(rows=rows, splits=3, seed=11, columns=tuple(StreamColumn(**c) for c in columns))
    ctx = ReadContext(task_id=0, run_id=0, batch_rows=4096, dirty=ListDirtySink())
    source = StreamReader(stream, ctx)
    generated = [expected(r) for s in StreamSplitter(stream, ctx).split(1)
                 for b in source.read(s) for r in tuples_of(b)]
    back = read_all(reader_options(tmp_path / "out"))
    assert sorted(back, key=lambda r: r[0]) == generated


def test_a_uint64_column_is_read_and_written_as_uint64(tmp_path: Path) -> None:
    """Issue 23: an unsigned 64-bit column keeps its type and its values above 2**63 - 1 (int64 refused them)."""
    (tmp_path / "src").mkdir()
    values = [18446744073709551615, 9223372036854775808, 0, None]
    pq.write_table(pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "u": pa.array(values, pa.uint64())}),
                   tmp_path / "src" / "a.parquet")
    spec = TaskSpec.from_mapping({
        "source": {"plugin": "file", "params": {"path": str(tmp_path / "src"), "format": "parquet"}},
        "destinations": [{"id": "pq", "plugin": "file", "params": {"path": str(tmp_path / "out"), "format": "parquet"}},
                         {"id": "renamed", "plugin": "file", "transforms": [{"rename": {"u": "v"}}],
                          "params": {"path": str(tmp_path / "renamed"), "format": "parquet"}}],
    })
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    result = Engine(conf, spec, task_id=1, run_id=1, log=structlog.get_logger()).run()
    assert result.exit_code == 0, result.result
    for out, name in (("out", "u"), ("renamed", "v")):
        table = pq.read_table(str(tmp_path / out)).sort_by("id")
        assert str(table.schema.field(name).type) == "uint64", out
        assert table.column(name).to_pylist() == values

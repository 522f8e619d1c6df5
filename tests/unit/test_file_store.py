"""Tests of the file store (csv, jsonl): options, reading, and the writer's temp-dir/commit/rollback cycle."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import tests.plugin_helpers as helpers
from tests.plugin_helpers import (
    DIRTY,
    NULL_ROW,
    SCHEMA,
    WIDE_ROW,
    ListDirtySink,
    parse,
    read_ctx,
    run_destination,
    tiny_tmpfs,
    tuples_of,
    write_ctx,
)
from wormhole.errors import CommitError, PrepareError, ReadError, SplitError, WriteError
from wormhole.plugins import registry
from wormhole.plugins.base import Column, Row, Schema
from wormhole.plugins.batch import as_batch
from wormhole.plugins.file import (
    PLUGIN,
    ColumnOption,
    FileReader,
    FileReaderOptions,
    FileReaderPeriphery,
    FileSplitter,
    FileWriter,
    FileWriterOptions,
    FileWriterPeriphery,
)

COLUMNS = tuple(ColumnOption(name=c.name, type=c.type) for c in SCHEMA.columns)

ROWS: list[Row] = [
    WIDE_ROW,
    NULL_ROW,
    (3, -1e300, Decimal("-12345678901234567890.000000001"), 'a,b;"c"\nnext line', b"\x00", False,
     dt.date(1, 1, 1), dt.datetime(2020, 1, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))), [1, "x"]),
    (None, 5e-324, Decimal("0"), "𝄞 ∑ 🧪", b"bytes", True, dt.date(9999, 12, 31),
     dt.datetime(1970, 1, 1), {}),
    (2**62, 3.0, Decimal("-0.5"), "plain", b"\xff\xfe", False, dt.date(2000, 1, 1),
     dt.datetime(2000, 1, 1, 0, 0, 0, 1), "just a string"),
]


def write_rows(options: Any, parts: Sequence[Sequence[Row]], **kwargs: Any) -> list[Any]:
    return run_destination(PLUGIN.sink, options, parts, **kwargs)


def read_all(options: Any, sink: ListDirtySink | None = None, batch_rows: int = 1000) -> list[Row]:
    return helpers.read_all(PLUGIN.source, options, sink, batch_rows)


# ---------------------------------------------------------------------------------------------
# Options


def test_plugin_is_registered() -> None:
    assert registry.get("file") is PLUGIN
    assert PLUGIN.source is not None and PLUGIN.source.options is FileReaderOptions
    assert PLUGIN.sink is not None and PLUGIN.sink.options is FileWriterOptions


def test_reader_options_parse_with_typed_columns() -> None:
    opts, problems = parse(FileReaderOptions, {
        "path": "/data/*.csv", "format": "csv", "header": False, "delimiter": ";", "null": "\\N",
        "columns": [{"name": "id", "type": "int"}, {"name": "name"}],
    })
    assert not problems.items
    assert opts.columns == (ColumnOption(name="id", type="int"), ColumnOption(name="name", type="string"))
    assert (opts.header, opts.delimiter, opts.null) == (False, ";", "\\N")


@pytest.mark.parametrize(("cls", "raw", "expected"), [
    (FileReaderOptions, {"path": "x", "format": "csv", "colour": 1}, "colour: unknown key"),
    (FileReaderOptions, {"path": "x", "format": "csv", "header": "yes"}, "header: expected a boolean"),
    (FileReaderOptions, {"format": "csv"}, "path: required key is missing"),
    (FileReaderOptions, {"path": "x", "format": "xml"}, "format: expected one of"),
    (FileReaderOptions, {"path": "x", "format": "csv", "delimiter": ";;"}, "delimiter: must be exactly one"),
    (FileReaderOptions, {"path": "x", "format": "csv", "delimiter": ""}, "delimiter: must be exactly one"),
    (FileReaderOptions, {"path": "x", "format": "csv", "columns": [{"name": "a", "type": "money"}]},
     "columns[0].type: expected one of"),
    (FileReaderOptions, {"path": "x", "format": "csv", "columns": [{"name": "a"}, {"name": "a"}]},
     "columns: column names must be unique"),
    (FileWriterOptions, {"path": "x", "format": "csv", "mode": "merge"}, "mode: expected one of"),
    (FileWriterOptions, {"path": "x", "format": "csv", "delimiter": '"'}, "delimiter: '\"' cannot be"),
    (FileWriterOptions, {"path": "", "format": "jsonl"}, "path: must not be empty"),
    (FileWriterOptions, {"path": "x"}, "format: required key is missing"),
])
def test_option_problems_name_the_key(cls: type, raw: dict[str, Any], expected: str) -> None:
    _, problems = parse(cls, raw)
    assert any(p.startswith("destinations[0].params." + expected) for p in problems.items), problems.items


# ---------------------------------------------------------------------------------------------
# Writer: round trips and dirty rows


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_round_trip_with_two_workers(tmp_path: Path, fmt: str) -> None:
    target = tmp_path / "out"
    options = FileWriterOptions(path=str(target), format=fmt)
    results = write_rows(options, [ROWS[:3], ROWS[3:]])
    assert [(r.written, r.rejected) for r in results] == [(3, ()), (2, ())]
    assert sorted(os.listdir(target)) == ["_SUCCESS", f"part-00000.{fmt}", f"part-00001.{fmt}"]
    assert os.listdir(tmp_path) == ["out"]  # no temporary or .old directory left behind
    back = read_all(FileReaderOptions(path=str(target), format=fmt, columns=COLUMNS))
    assert back == ROWS


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_only_the_unencodable_row_is_rejected(tmp_path: Path, fmt: str) -> None:
    day, ts = dt.date(2024, 1, 1), dt.datetime(2024, 1, 1)
    rows = [(i, float(i), Decimal(i), f"row {i}", b"x", True, day, ts, [i]) for i in range(6)]
    rows[3] = (3, 3.0, Decimal(3), "bad " + DIRTY, b"x", True, day, ts, [3])
    options = FileWriterOptions(path=str(tmp_path / "out"), format=fmt)
    (result,) = write_rows(options, [rows])
    assert result.written == 5
    assert [r.row for r in result.rejected] == [rows[3]]
    assert "surrogates not allowed" in result.rejected[0].reason
    back = read_all(FileReaderOptions(path=str(tmp_path / "out"), format=fmt, columns=COLUMNS))
    assert back == rows[:3] + rows[4:]


def test_jsonl_rejects_nan_and_infinity(tmp_path: Path) -> None:
    schema = Schema((Column("id", "int"), Column("x", "float")))
    rows = [(1, 1.5), (2, float("nan")), (3, float("inf")), (4, -2.0)]
    options = FileWriterOptions(path=str(tmp_path / "out"), format="jsonl")
    (result,) = write_rows(options, [rows], schema=schema)
    assert result.written == 2
    assert [r.row[0] for r in result.rejected] == [2, 3]
    assert all("JSON compliant" in r.reason for r in result.rejected)
    lines = (tmp_path / "out" / "part-00000.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines == ['{"id":1,"x":1.5}', '{"id":4,"x":-2.0}']


def test_csv_formats_values_and_null_text(tmp_path: Path) -> None:
    schema = Schema((Column("id", "int"), Column("s", "string"), Column("ok", "bool"), Column("b", "bytes"),
                     Column("ts", "datetime"), Column("f", "float")))
    rows = [(1, "", True, b"\x01", dt.datetime(2024, 5, 6, 7, 8, 9), 0.1), (2, None, None, None, None, None)]
    options = FileWriterOptions(path=str(tmp_path / "out"), format="csv", delimiter=";", null="\\N")
    write_rows(options, [rows], schema=schema)
    text = (tmp_path / "out" / "part-00000.csv").read_text(encoding="utf-8")
    assert text == "id;s;ok;b;ts;f\n1;;true;AQ==;2024-05-06 07:08:09;0.1\n2;\\N;\\N;\\N;\\N;\\N\n"
    columns = tuple(ColumnOption(name=c.name, type=c.type) for c in schema.columns)
    back = read_all(FileReaderOptions(path=str(tmp_path / "out"), format="csv", delimiter=";", null="\\N",
                                      columns=columns))
    assert back == rows  # with a null text, the empty string and NULL stay apart


def test_csv_without_header(tmp_path: Path) -> None:
    schema = Schema((Column("id", "int"), Column("s", "string")))
    write_rows(FileWriterOptions(path=str(tmp_path / "out"), format="csv", header=False), [[(1, "a")]],
               schema=schema)
    assert (tmp_path / "out" / "part-00000.csv").read_text(encoding="utf-8") == "1,a\n"


# ---------------------------------------------------------------------------------------------
# Writer: commit, rollback, modes


def test_rollback_leaves_no_target_and_no_temp(tmp_path: Path) -> None:
    options = FileWriterOptions(path=str(tmp_path / "out"), format="csv")
    write_rows(options, [ROWS, ROWS], commit=False)
    assert os.listdir(tmp_path) == []


def test_rollback_leaves_an_existing_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "part-00000.csv").write_text("id\n1\n", encoding="utf-8")
    (target / "_SUCCESS").touch()
    write_rows(FileWriterOptions(path=str(target), format="csv"), [ROWS], commit=False)
    assert os.listdir(tmp_path) == ["out"]
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.csv"]
    assert (target / "part-00000.csv").read_text(encoding="utf-8") == "id\n1\n"


def test_rollback_is_idempotent_and_safe_without_prepare(tmp_path: Path) -> None:
    periphery = FileWriterPeriphery(FileWriterOptions(path=str(tmp_path / "out"), format="csv"),
                                    write_ctx(SCHEMA))
    periphery.rollback()
    periphery.prepare()
    assert os.listdir(tmp_path) == [".out.wormhole-7-1.tmp"]
    periphery.rollback()
    periphery.rollback()
    assert os.listdir(tmp_path) == []


def test_prepare_replaces_a_stale_temp_dir(tmp_path: Path) -> None:
    stale = tmp_path / ".out.wormhole-7-1.tmp"
    stale.mkdir()
    (stale / "part-00009.csv").write_text("junk", encoding="utf-8")
    write_rows(FileWriterOptions(path=str(tmp_path / "out"), format="csv"), [ROWS[:1]])
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS", "part-00000.csv"]


def test_prepare_refuses_a_target_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_text("not a directory", encoding="utf-8")
    periphery = FileWriterPeriphery(FileWriterOptions(path=str(target), format="csv"), write_ctx(SCHEMA))
    with pytest.raises(PrepareError, match=re.escape(str(target))):
        periphery.prepare()
    assert target.read_text(encoding="utf-8") == "not a directory"


def test_prepare_creates_the_parent(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out"
    write_rows(FileWriterOptions(path=str(target), format="jsonl"), [ROWS[:2]])
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.jsonl"]


def test_overwrite_replaces_the_target(tmp_path: Path) -> None:
    target = tmp_path / "out"
    write_rows(FileWriterOptions(path=str(target), format="csv"), [ROWS[:1], ROWS[1:2], ROWS[2:3]], run_id=4)
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.csv", "part-00001.csv", "part-00002.csv"]
    write_rows(FileWriterOptions(path=str(target), format="csv"), [ROWS[:2], ROWS[2:]], run_id=5)
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.csv", "part-00001.csv"]
    assert os.listdir(tmp_path) == ["out"]
    assert read_all(FileReaderOptions(path=str(target), format="csv", columns=COLUMNS)) == ROWS


# ---------------------------------------------------------------------------------------------
# Writer: what overwrite may replace


def fill(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_text(f"{name}\n", encoding="utf-8")
    return directory


SPARK_PARTS = ("_SUCCESS", "._SUCCESS.crc", "part-00000-4b1b5119-5691-4192-bcd9-af1b288aa466-c000.snappy.parquet",
               ".part-00000-4b1b5119-5691-4192-bcd9-af1b288aa466-c000.snappy.parquet.crc")


@pytest.mark.parametrize("names", [
    (),
    ("_SUCCESS",),
    ("_SUCCESS", "part-00000.csv", "part-00001.jsonl", "part-00002.parquet"),
    ("_SUCCESS", "part-7-1-00000.csv", "part-7-2-00000.csv", "part-9-12-00031.parquet"),
    SPARK_PARTS,
    ("_SUCCESS", "part-3-1-00000-4b1b5119-5691-4192-bcd9-af1b288aa466-c000.snappy.parquet"),
], ids=["empty", "marker-only", "local-parts", "append-parts", "spark-parts", "spark-appended"])
def test_overwrite_replaces_a_previous_wormhole_output(tmp_path: Path, names: tuple[str, ...]) -> None:
    target = fill(tmp_path / "out", *names)
    write_rows(FileWriterOptions(path=str(target), format="csv"), [ROWS[:2]])
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.csv"]
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize(("names", "named"), [
    (("notes.txt",), "notes.txt"),
    (("_SUCCESS", "part-00000.csv", "notes.txt"), "notes.txt"),
    (("part-00000.csv", "part-00001.csv"), "part-00000.csv, part-00001.csv"),  # no _SUCCESS: not ours
    (("_SUCCESS", "part-00000.csv.bak"), "part-00000.csv.bak"),
    (("_SUCCESS", "part-00000.txt"), "part-00000.txt"),
    (("_SUCCESS", ".git"), ".git"),
    (("_SUCCESS", "a", "b", "c", "d", "e", "f", "g"), "a, b, c, d, e and 2 more"),
], ids=["unrelated", "one-stray-file", "no-marker", "backup-name", "other-extension", "hidden", "many"])
def test_overwrite_refuses_a_directory_wormhole_did_not_write(tmp_path: Path, names: tuple[str, ...],
                                                              named: str) -> None:
    target = fill(tmp_path / "out", *names)
    periphery = FileWriterPeriphery(FileWriterOptions(path=str(target), format="csv"), write_ctx(SCHEMA))
    with pytest.raises(PrepareError) as info:
        periphery.prepare()
    message = str(info.value)
    assert str(target) in message and named in message and '"overwrite": "force"' in message
    periphery.rollback()
    assert sorted(os.listdir(target)) == sorted(names)
    assert os.listdir(tmp_path) == ["out"]  # not even a temporary directory was made


def test_overwrite_refuses_a_subdirectory_or_a_symlink_in_the_target(tmp_path: Path) -> None:
    target = fill(tmp_path / "out", "_SUCCESS")
    (target / "part-00000.csv").mkdir()  # a directory with a part file's name is no part file
    (target / "part-00000.csv" / "keep").write_text("x", encoding="utf-8")
    with pytest.raises(PrepareError, match=r"holds part-00000\.csv\)"):
        FileWriterPeriphery(FileWriterOptions(path=str(target), format="csv"), write_ctx(SCHEMA)).prepare()
    other = fill(tmp_path / "elsewhere", "precious.csv")
    linked = fill(tmp_path / "linked", "_SUCCESS")
    (linked / "part-00001.csv").symlink_to(other / "precious.csv")
    with pytest.raises(PrepareError, match=r"holds part-00001\.csv"):
        FileWriterPeriphery(FileWriterOptions(path=str(linked), format="csv"), write_ctx(SCHEMA)).prepare()


def test_overwrite_refuses_a_symlinked_target_unless_forced(tmp_path: Path) -> None:
    real = fill(tmp_path / "real", "_SUCCESS", "part-00000.csv")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(PrepareError, match=f"{re.escape(str(link))} is a symbolic link"):
        FileWriterPeriphery(FileWriterOptions(path=str(link), format="csv"), write_ctx(SCHEMA)).prepare()
    assert sorted(os.listdir(real)) == ["_SUCCESS", "part-00000.csv"]


def test_overwrite_force_replaces_any_directory(tmp_path: Path) -> None:
    target = fill(tmp_path / "out", "notes.txt", "part-00000.csv")
    (target / "sub").mkdir()
    write_rows(FileWriterOptions(path=str(target), format="csv", overwrite="force"), [ROWS[:2]])
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.csv"]
    assert os.listdir(tmp_path) == ["out"]
    assert read_all(FileReaderOptions(path=str(target), format="csv", columns=COLUMNS)) == ROWS[:2]


def test_overwrite_force_still_refuses_a_regular_file(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_text("keep", encoding="utf-8")
    periphery = FileWriterPeriphery(FileWriterOptions(path=str(target), format="csv", overwrite="force"),
                                    write_ctx(SCHEMA))
    with pytest.raises(PrepareError, match="is not a directory"):
        periphery.prepare()
    assert target.read_text(encoding="utf-8") == "keep"


def test_commit_checks_the_target_again_and_keeps_a_file_added_during_the_run(tmp_path: Path) -> None:
    target = fill(tmp_path / "out", "_SUCCESS", "part-00000.csv")
    options = FileWriterOptions(path=str(target), format="csv")
    ctx = write_ctx(SCHEMA, concurrency=1)
    periphery = FileWriterPeriphery(options, ctx)
    periphery.prepare()  # a previous output: fine
    writer = FileWriter(options, ctx, periphery, 0)
    writer.open()
    writer.write(as_batch(ROWS))
    writer.flush()
    writer.close()
    (target / "report.xlsx").write_text("someone's work", encoding="utf-8")
    with pytest.raises(CommitError, match=rf"{re.escape(str(target))} is not a previous wormhole output "
                                          rf"\(it holds report\.xlsx\)"):
        periphery.commit()
    periphery.rollback()
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-00000.csv", "report.xlsx"]
    assert (target / "part-00000.csv").read_text(encoding="utf-8") == "part-00000.csv\n"
    assert os.listdir(tmp_path) == ["out"]


def test_append_adds_to_any_directory(tmp_path: Path) -> None:
    target = fill(tmp_path / "out", "notes.txt")
    write_rows(FileWriterOptions(path=str(target), format="csv", mode="append"), [ROWS[:2]])
    assert sorted(os.listdir(target)) == ["_SUCCESS", "notes.txt", "part-7-1-00000.csv"]


@pytest.mark.parametrize("path", [".", "./", "/", "..", "sub/..", os.getcwd(), os.path.expanduser("~")],
                         ids=["dot", "dot-slash", "root", "parent", "sub-parent", "cwd", "home"])
@pytest.mark.parametrize("overwrite", ["own", "force"])
def test_overwrite_of_the_root_cwd_or_home_is_a_validation_error(path: str, overwrite: str) -> None:
    _, problems = parse(FileWriterOptions, {"path": path, "format": "csv", "overwrite": overwrite})
    (problem,) = problems.items
    assert problem.startswith("destinations[0].params.path: ")
    assert "mode overwrite would replace it" in problem
    _, problems = parse(FileWriterOptions, {"path": path, "format": "csv", "mode": "append"})
    assert problems.items == []  # appending adds files and deletes nothing


def test_prepare_refuses_the_working_directory_even_when_validation_was_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = fill(tmp_path / "work")  # empty, so the contents check alone would let it go
    monkeypatch.chdir(work)
    periphery = FileWriterPeriphery(FileWriterOptions(path=".", format="csv", overwrite="force"), write_ctx(SCHEMA))
    with pytest.raises(PrepareError, match="the working directory"):
        periphery.prepare()
    assert os.listdir(tmp_path) == ["work"]


def test_overwrite_options_parse() -> None:
    opts, problems = parse(FileWriterOptions, {"path": "out/x", "format": "csv"})
    assert (problems.items, opts.mode, opts.overwrite) == ([], "overwrite", "own")
    opts, problems = parse(FileWriterOptions, {"path": "out/x", "format": "csv", "overwrite": "force"})
    assert (problems.items, opts.overwrite) == ([], "force")
    _, problems = parse(FileWriterOptions, {"path": "out/x", "format": "csv", "overwrite": "yes"})
    assert problems.items[0].startswith("destinations[0].params.overwrite: expected one of 'own', 'force'")
    _, problems = parse(FileWriterOptions, {"path": "out/x", "format": "csv", "mode": "append",
                                            "overwrite": "force"})
    assert problems.items == ["destinations[0].params.overwrite: 'force' only applies to mode 'overwrite'"]


def test_append_adds_parts_from_each_run(tmp_path: Path) -> None:
    target = tmp_path / "out"
    options = FileWriterOptions(path=str(target), format="jsonl", mode="append")
    write_rows(options, [ROWS[:2], ROWS[2:3]], run_id=1)
    write_rows(options, [ROWS[3:]], run_id=2)
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-7-1-00000.jsonl", "part-7-1-00001.jsonl",
                                          "part-7-2-00000.jsonl"]
    assert os.listdir(tmp_path) == ["out"]
    assert read_all(FileReaderOptions(path=str(target), format="jsonl", columns=COLUMNS)) == ROWS


def test_append_rollback_keeps_earlier_runs(tmp_path: Path) -> None:
    target = tmp_path / "out"
    options = FileWriterOptions(path=str(target), format="csv", mode="append")
    write_rows(options, [ROWS[:2]], run_id=1)
    write_rows(options, [ROWS[2:]], run_id=2, commit=False)
    assert sorted(os.listdir(target)) == ["_SUCCESS", "part-7-1-00000.csv"]
    assert read_all(FileReaderOptions(path=str(target), format="csv", columns=COLUMNS)) == ROWS[:2]


def test_rollback_restores_a_target_left_aside_by_a_crashed_commit(tmp_path: Path) -> None:
    # The state a commit leaves when it dies between "target -> .old" and "tmp -> target".
    (tmp_path / ".out.wormhole-7-1.tmp").mkdir()
    old = tmp_path / ".out.wormhole-7-1.old"
    old.mkdir()
    (old / "part-old.csv").write_text("id\n1\n", encoding="utf-8")
    options = FileWriterOptions(path=str(tmp_path / "out"), format="csv")
    FileWriterPeriphery(options, write_ctx(SCHEMA)).rollback()
    assert os.listdir(tmp_path) == ["out"]
    assert os.listdir(tmp_path / "out") == ["part-old.csv"]


def test_commit_is_idempotent_and_rollback_after_commit_keeps_the_target(tmp_path: Path) -> None:
    options = FileWriterOptions(path=str(tmp_path / "out"), format="csv")
    helpers.call_phases(FileWriterPeriphery(options, write_ctx(SCHEMA)), "prepare", "commit", "commit", "rollback",
                        "release")
    assert os.listdir(tmp_path / "out") == ["_SUCCESS"]


def test_a_full_disk_raises_write_error_not_dirty_rows(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        schema = Schema((Column("id", "int"), Column("s", "string")))
        options = FileWriterOptions(path=str(mnt / "out"), format="csv")
        ctx = write_ctx(schema, concurrency=1)
        periphery = FileWriterPeriphery(options, ctx)
        periphery.prepare()
        writer = FileWriter(options, ctx, periphery, 0)
        writer.open()
        batch = [(i, "x" * 200) for i in range(1000)]
        with pytest.raises(WriteError, match="No space left"):
            for _ in range(100):
                result = writer.write(as_batch(batch))
                assert result.rejected == ()
                writer.flush()
        writer.close()
        periphery.rollback()
        assert os.listdir(mnt) == []


# ---------------------------------------------------------------------------------------------
# Reader


def test_csv_header_gives_string_columns(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,name\n1,ann\n2,\n3,\\N\n", encoding="utf-8")
    options = FileReaderOptions(path=str(tmp_path / "a.csv"), format="csv")
    reader = FileReader(options, read_ctx())
    assert reader.schema() == Schema((Column("id", "string"), Column("name", "string")))
    # The default null text is \N: an empty string field is '', not NULL (issue 23).
    assert read_all(options) == [("1", "ann"), ("2", ""), ("3", None)]
    old_style = FileReaderOptions(path=str(tmp_path / "a.csv"), format="csv", null="")
    assert read_all(old_style) == [("1", "ann"), ("2", None), ("3", "\\N")]


def test_csv_columns_type_the_values_and_skip_the_header(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("\ufeffa,b,c,d\n1,2.5,true,2024-01-02\n,,0,\n", encoding="utf-8")
    columns = (ColumnOption(name="id", type="int"), ColumnOption(name="x", type="float"),
               ColumnOption(name="ok", type="bool"), ColumnOption(name="day", type="date"))
    assert read_all(FileReaderOptions(path=str(tmp_path / "a.csv"), format="csv", columns=columns)) == [
        (1, 2.5, True, dt.date(2024, 1, 2)), (None, None, False, None)]


def test_csv_without_header_needs_columns(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("1,2\n", encoding="utf-8")
    reader = FileReader(FileReaderOptions(path=str(tmp_path), format="csv", header=False), read_ctx())
    with pytest.raises(ReadError, match="columns are required"):
        reader.schema()
    columns = (ColumnOption(name="a", type="int"), ColumnOption(name="b", type="int"))
    options = FileReaderOptions(path=str(tmp_path), format="csv", header=False, columns=columns)
    assert read_all(options) == [(1, 2)]


def test_csv_bad_rows_go_to_the_dirty_sink_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text('id,note,day\n1,"two\nlines",2024-01-01\n2,x,not-a-date\n3,y\n\n'
                    '4,z,2024-01-04\nq,w,2024-01-05\n', encoding="utf-8")
    columns = (ColumnOption(name="id", type="int"), ColumnOption(name="note"),
               ColumnOption(name="day", type="date"))
    sink = ListDirtySink()
    rows = read_all(FileReaderOptions(path=str(path), format="csv", columns=columns), sink)
    assert rows == [(1, "two\nlines", dt.date(2024, 1, 1)), (4, "z", dt.date(2024, 1, 4))]
    assert [origin for origin, _, _ in sink.calls] == ["source"]
    assert sink.calls[0][2] == str(path)
    assert [r.row for r in sink.rows] == [("2", "x", "not-a-date"), ("3", "y"), ("q", "w", "2024-01-05")]
    reasons = [r.reason for r in sink.rows]
    assert reasons[0].startswith(f"{path}:4: column day: ")
    assert reasons[1] == f"{path}:5: expected 3 fields, got 2"
    assert reasons[2].startswith(f"{path}:8: column id: ")


def test_csv_batches_respect_batch_rows(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("n\n" + "".join(f"{i}\n" for i in range(2500)), encoding="utf-8")
    columns = (ColumnOption(name="n", type="int"),)
    options = FileReaderOptions(path=str(tmp_path), format="csv", columns=columns)
    ctx = read_ctx(batch_rows=1000)
    (split,) = FileSplitter(options, ctx).split(1)
    batches = list(FileReader(options, ctx).read(split))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    assert [r[0] for b in batches for r in tuples_of(b)] == list(range(2500))


def test_jsonl_schema_is_inferred_from_the_first_object(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('\n{"id": 1, "x": 1.5, "ok": true, "s": "é", "doc": {"a": 1}, "n": null}\n'
                    '{"id": 2, "s": "b", "n": "later"}\n', encoding="utf-8")
    options = FileReaderOptions(path=str(path), format="jsonl")
    assert FileReader(options, read_ctx()).schema() == Schema((
        Column("id", "int"), Column("x", "float"), Column("ok", "bool"), Column("s", "string"),
        Column("doc", "json"), Column("n", "string")))
    assert read_all(options) == [(1, 1.5, True, "é", {"a": 1}, None), (2, None, None, "b", None, "later")]


def test_jsonl_bad_lines_go_to_the_dirty_sink(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1, "day": "2024-01-01", "raw": "AQ=="}\n{"id": 2,\n[1, 2]\n'
                    '{"id": "x", "day": "2024-01-03"}\n{"id": 5, "day": "nope"}\n{"id": 6}\n',
                    encoding="utf-8")
    columns = (ColumnOption(name="id", type="int"), ColumnOption(name="day", type="date"),
               ColumnOption(name="raw", type="bytes"))
    sink = ListDirtySink()
    rows = read_all(FileReaderOptions(path=str(path), format="jsonl", columns=columns), sink)
    assert rows == [(1, dt.date(2024, 1, 1), b"\x01"), (6, None, None)]
    reasons = [r.reason for r in sink.rows]
    assert reasons[0].startswith(f"{path}:2: malformed JSON")
    assert reasons[1] == f"{path}:3: expected a JSON object, got an array"
    assert reasons[2].startswith(f"{path}:4: column id: ")
    assert reasons[3].startswith(f"{path}:5: column day: ")
    assert sink.rows[3].row == (5, "nope", None)


def test_jsonl_reads_every_logical_type_from_json_text(tmp_path: Path) -> None:
    line = {"id": 1, "f": 2, "dec": "1.50", "s": "x", "raw": base64.b64encode(b"\x00").decode(),
            "flag": False, "day": "2024-01-01", "ts": "2024-01-01T10:00:00+00:00", "doc": [1]}
    (tmp_path / "a.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert read_all(FileReaderOptions(path=str(tmp_path), format="jsonl", columns=COLUMNS)) == [
        (1, 2.0, Decimal("1.50"), "x", b"\x00", False, dt.date(2024, 1, 1),
         dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC), [1])]


def test_directory_and_glob_splits(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    for name in ["b.csv", "a.csv", "_SUCCESS", ".hidden.csv", "_part.csv", "c.txt", "sub/d.csv"]:
        (data / name).write_text("x\n1\n", encoding="utf-8")
    ctx = read_ctx()
    splits = FileSplitter(FileReaderOptions(path=str(data), format="csv"), ctx).split(8)
    assert [s.id for s in splits] == [str(data / "a.csv"), str(data / "b.csv")]
    assert {s.resource_mark for s in splits} == {f"file:{data}"}
    splits = FileSplitter(FileReaderOptions(path=str(data / "**" / "*.csv"), format="csv"), ctx).split(8)
    assert [s.id for s in splits] == [str(data / "a.csv"), str(data / "b.csv"), str(data / "sub" / "d.csv")]
    info = FileReaderPeriphery(FileReaderOptions(path=str(data), format="csv"), ctx).prepare()
    assert info.estimated_bytes == 8


def test_missing_path_is_a_split_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope" / "*.csv")
    with pytest.raises(SplitError, match="nope"):
        FileSplitter(FileReaderOptions(path=missing, format="csv"), read_ctx()).split(1)
    with pytest.raises(ReadError, match="nope"):
        FileReader(FileReaderOptions(path=missing, format="csv"), read_ctx()).schema()


def test_unreadable_files_are_read_errors(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_bytes(b"x\n\xff\xfe\n")
    options = FileReaderOptions(path=str(tmp_path), format="csv")
    with pytest.raises(ReadError, match=r"a\.csv"):
        read_all(options)
    ctx = read_ctx()
    (split,) = FileSplitter(options, ctx).split(1)
    os.remove(tmp_path / "a.csv")
    typed = FileReaderOptions(path=str(tmp_path), format="csv", columns=(ColumnOption(name="x"),))
    reader = FileReader(typed, ctx)
    with pytest.raises(ReadError, match=r"a\.csv"):
        list(reader.read(split))


def test_text_formats_write_decimals_plainly_and_json_null_apart_from_null() -> None:
    """Issue 23: no exponent (0E-18 was written), negative zero as zero; JSON null is not SQL NULL."""
    from wormhole.plugins.file.csv_format import CsvEncoder
    from wormhole.plugins.file.jsonl_format import JsonlEncoder
    from wormhole.plugins.file.options import FileWriterOptions
    from wormhole.plugins.values import JSON_NULL

    schema = Schema((Column("d", "decimal"), Column("j", "json"), Column("s", "string")))
    rows = [(Decimal("-0E-18"), JSON_NULL, ""), (Decimal("1E-30"), None, None), (Decimal("-1.50"), {"a": None}, "x"),
            (None, [1], "y")]
    csv_text = CsvEncoder(FileWriterOptions(path="x", format="csv"), schema).encode(rows).decode()
    assert csv_text.splitlines() == ["0.000000000000000000,null,", "0.000000000000000000000000000001,\\N,\\N",
                                     '-1.50,"{""a"": null}",x', "\\N,[1],y"]
    jsonl = JsonlEncoder(schema).encode(rows).decode().splitlines()
    assert [json.loads(line)["d"] for line in jsonl] == ["0.000000000000000000", "0.000000000000000000000000000001",
                                                         "-1.50", None]

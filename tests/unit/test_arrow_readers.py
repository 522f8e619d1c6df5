"""The sqlite, csv and jsonl readers yield Arrow batches holding the values their tuple path gave: the same
types and texts (a decimal's scale, a json value, an int beyond int64), the same rows rejected with the
same reasons; a batch Arrow cannot hold as the tuple path gave it goes as tuples."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.plugin_helpers import ListDirtySink, read_ctx, tuples_of
from wormhole.plugins.base import Batch
from wormhole.plugins.file import csv_format
from wormhole.plugins.file.convert import BatchConverter
from wormhole.plugins.file.csv_format import CsvReader
from wormhole.plugins.file.options import ColumnOption, FileReaderOptions
from wormhole.plugins.file.reader import FileReader
from wormhole.plugins.file.splitter import FileSplitter
from wormhole.plugins.sqlite import SqliteReaderOptions
from wormhole.plugins.sqlite import reader as sqlite_reader
from wormhole.plugins.sqlite.reader import SqliteReader
from wormhole.plugins.sqlite.splitter import SqliteSplitter


def typed(batches: list[Any]) -> list[tuple[tuple[str, str], ...]]:
    """Every value with its type and repr: Decimal('1.50') == Decimal('1.5'), but a writer writes each its way."""
    return [tuple((type(v).__name__, repr(v)) for v in row) for batch in batches for row in tuples_of(batch)]


def forms(batches: list[Any]) -> list[str]:
    return ["arrow" if isinstance(b, Batch) and b.native_arrow is not None else "tuples" for b in batches]


def rejections(sink: ListDirtySink) -> list[tuple[Any, str]]:
    return [(r.row, r.reason) for r in sink.rows]


# ---------------------------------------------------------------------------------------------
# sqlite

SQLITE_TABLE = ("CREATE TABLE t (i INTEGER, f REAL, s TEXT, b BLOB, d DECIMAL TEXT, flag BOOLEAN, day DATE, "
                "ts DATETIME, doc JSON TEXT)")
CLEAN = [
    (9223372036854775807, 1.5, "héllo 😀", b"\x00\xff", "12345678901234567890.123456789012345678", 1,
     "2024-02-29", "2024-02-29 23:59:59.000001", '{"a": [1, null], "b": "é"}'),
    (-9223372036854775808, -0.0, "", b"", "-0.25", 0, "0001-01-01", "9999-12-31T23:59:59", "null"),
    (None, None, None, None, None, None, None, None, None),
    (0, 1e300, "x", b"y", "100", 1, "2000-01-01", "2000-01-01", '"text"'),
]


def _sqlite(tmp_path: Path, rows: list[tuple[Any, ...]]) -> Path:
    path = tmp_path / "in.db"
    conn = sqlite3.connect(path)
    conn.execute(SQLITE_TABLE)
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    return path


def _read_sqlite(path: Path, batch_rows: int) -> tuple[list[Any], ListDirtySink]:
    sink = ListDirtySink()
    options = SqliteReaderOptions(path=str(path), table="t")
    ctx = read_ctx(sink, batch_rows)
    reader = SqliteReader(options, ctx)
    (split,) = SqliteSplitter(options, ctx).split(1)
    return list(reader.read(split)), sink


def _both(path: Path, batch_rows: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    batches, sink = _read_sqlite(path, batch_rows)
    with monkeypatch.context() as m:
        m.setattr(sqlite_reader, "arrow_batch", lambda schema, raw: None)
        old, old_sink = _read_sqlite(path, batch_rows)
    return batches, sink, old, old_sink


def test_sqlite_reads_arrow_batches_of_the_values_the_tuple_path_gave(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    batches, sink, old, old_sink = _both(_sqlite(tmp_path, CLEAN), 2, monkeypatch)
    assert forms(batches) == ["arrow", "arrow"]
    assert forms(old) == ["tuples", "tuples"]
    assert typed(batches) == typed(old)
    assert typed(batches)[1][4] == ("Decimal", "Decimal('-0.25')")
    assert not sink.rows and not old_sink.rows


def test_sqlite_a_batch_arrow_cannot_hold_goes_as_tuples_and_bad_rows_are_rejected_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean = (0, 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01", "[]")
    awkward = [
        (1, 2.0, "a", b"", "1.50", 1, "2024-01-01", "2024-01-01", "[]"),  # a decimal's own scale: tuples
        clean,
        ("three", 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01", "[]"),  # a text in INTEGER: rejected
        (4, 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01 10:00:00+02:00", "[]"),  # aware: tuples
        (5, 2.0, "a", b"", "1.5", 1, "2024-02-30", "2024-01-01", "[]"),  # no such day: rejected
        clean,
        (7, 2.0, "a", b"", "1.5", 1, "2024-01-01", "2024-01-01", "{bad"),  # not JSON: rejected
        clean,
        (9, 2.0, "a", b"", "1.5", 7, "2024-01-01", "2024-01-01", "[]"),  # BOOLEAN holds 0 and 1 only: rejected
        clean,
    ]
    batches, sink, old, old_sink = _both(_sqlite(tmp_path, awkward), 2, monkeypatch)
    assert typed(batches) == typed(old)
    assert rejections(sink) == rejections(old_sink)
    assert [r for r, _ in rejections(sink)] == [awkward[2], awkward[4], awkward[6], awkward[8]]
    assert typed(batches)[0][4] == ("Decimal", "Decimal('1.50')")
    assert forms(batches) == ["tuples", "tuples", "arrow", "arrow", "arrow"]


# ---------------------------------------------------------------------------------------------
# csv and jsonl

COLUMNS = (("id", "int"), ("f", "float"), ("dec", "decimal"), ("s", "string"), ("raw", "bytes"),
           ("flag", "bool"), ("day", "date"), ("ts", "datetime"), ("doc", "json"))


def _read_file(path: Path, fmt: str, batch_rows: int, **params: Any) -> tuple[list[Any], ListDirtySink]:
    sink = ListDirtySink()
    columns = tuple(ColumnOption(name=n, type=t) for n, t in COLUMNS)  # type: ignore[arg-type]
    options = FileReaderOptions(path=str(path), format=fmt, columns=columns, **params)  # type: ignore[arg-type]
    ctx = read_ctx(sink, batch_rows)
    reader = FileReader(options, ctx)
    reader.schema()
    return [b for split in FileSplitter(options, ctx).split(1) for b in reader.read(split)], sink


def _both_files(path: Path, fmt: str, batch_rows: int, monkeypatch: pytest.MonkeyPatch,
                **params: Any) -> tuple[Any, ...]:
    batches, sink = _read_file(path, fmt, batch_rows, **params)
    with monkeypatch.context() as m:
        m.setattr(BatchConverter, "_arrow", lambda self, raw: None)
        m.setattr(CsvReader, "_chunks", lambda self, f, path: self._python(f, 0, 0, path, self._header))
        old, old_sink = _read_file(path, fmt, batch_rows, **params)
    assert forms(old) == ["tuples"] * len(old)
    return batches, sink, old, old_sink


CSV_CLEAN = (
    "id,f,dec,s,raw,flag,day,ts,doc\n"
    '9223372036854775807,1.5,12345678901234567890.123456789012345678,"héllo, 😀",AP8=,TRUE,2024-02-29,'
    '2024-02-29 23:59:59.000001,"{""a"": [1, null]}"\n'
    "-9223372036854775808,-0.0,-0.25,,,0,0001-01-01,9999-12-31T23:59:59,null\n"
    "\\N,\\N,\\N,\\N,\\N,\\N,\\N,\\N,\\N\n"
    ",,,\"\",,,,,\n"
    '0,1e300,100,"two\nlines",eQ==,false,2000-01-01,2000-01-01,"""text"""\n'
    "1,.5,0.5,x,,1,2000-01-02,2000-01-02 10:00,[]\n"
)


def _clean_file_as_arrow(path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Read ``text`` written at ``path`` both ways: every batch Arrow, each value the tuple path's, nothing
    rejected. The batches' typed values."""
    path.write_text(text, encoding="utf-8")
    batches, sink, old, old_sink = _both_files(path, path.suffix[1:], 2, monkeypatch)
    assert forms(batches) == ["arrow", "arrow", "arrow"]
    assert typed(batches) == typed(old)
    assert not sink.rows and not old_sink.rows
    return typed(batches)


def test_csv_reads_arrow_batches_of_the_values_the_tuple_path_gave(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    values = _clean_file_as_arrow(tmp_path / "in.csv", CSV_CLEAN, monkeypatch)
    assert values[3][3] == ("str", "''") and values[2][3] == ("NoneType", "None")


CSV_AWKWARD = (
    "id,f,dec,s,raw,flag,day,ts,doc\n"
    "1,2,1.50,a,,true,2024-01-01,2024-01-01,[]\n"  # a decimal's own scale: tuples
    "99999999999999999999,2,1.5,a,,true,2024-01-01,2024-01-01,[]\n"  # beyond int64: tuples
    "+3, 2 ,1.5,a,,' True',20240101,2024-01-01T10,[]\n"  # Python reads them: column by column
    "4,2,1.5,a,,true,2024-01-01,2024-01-01,[]\n"
    "5,2,1.5,a,,true,2024-02-30,2024-01-01,[]\n"  # no such day: rejected
    "6,2,1.5,a,,true,2024-01-01,2024-01-01,[]\n"
    "7,2,1.5,a,,true,2024-01-01,2024-01-01,{bad\n"  # not JSON: rejected
    "8,2,1.5,a\n"  # too few fields: rejected
    "9,2,1.5,a,,true,2024-01-01,2024-01-01 10:00:00+02:00,[]\n"  # aware: tuples
    "10,2,1.5,a,,true,2024-01-01,2024-01-01,[]\n"
)


def test_csv_awkward_values_and_bad_rows_come_out_as_the_tuple_path_gave(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.csv"
    path.write_text(CSV_AWKWARD.replace("' True'", " True"), encoding="utf-8")
    batches, sink, old, old_sink = _both_files(path, "csv", 2, monkeypatch)
    assert typed(batches) == typed(old)
    assert rejections(sink) == rejections(old_sink)
    assert [reason.split(": ")[0][-2:] for _, reason in rejections(sink)] == [":6", ":8", ":9"]
    assert forms(batches) == ["tuples", "arrow", "arrow", "tuples"]
    assert typed(batches)[0][2] == ("Decimal", "Decimal('1.50')")
    assert typed(batches)[1][0] == ("int", "99999999999999999999")
    assert typed(batches)[2][:2] == (("int", "3"), ("float", "2.0"))


JSONL_CLEAN = "\n".join([
    '{"id": 9223372036854775807, "f": 1.5, "dec": "12345678901234567890.123456789012345678", "s": "héllo 😀",'
    ' "raw": "AP8=", "flag": true, "day": "2024-02-29", "ts": "2024-02-29 23:59:59.000001", "doc": {"a": [1, null]}}',
    '{"id": -9223372036854775808, "f": -0.0, "dec": "-0.25", "s": "", "raw": "", "flag": false,'
    ' "day": "0001-01-01", "ts": "9999-12-31T23:59:59", "doc": "text"}',
    '{"id": null, "f": null, "dec": null, "s": null, "raw": null, "flag": null, "day": null, "ts": null, "doc": null}',
    '{}',
    '{"id": "5", "f": "1e300", "dec": "100", "s": "x", "flag": "1", "day": "2000-01-01",'
    ' "ts": "2000-01-01", "doc": 1.5}',
    '{"id": 6, "f": 2.5, "dec": "0.5", "flag": "FALSE", "doc": [], "extra": 1}',
]) + "\n"


def test_jsonl_reads_arrow_batches_of_the_values_the_tuple_path_gave(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    values = _clean_file_as_arrow(tmp_path / "in.jsonl", JSONL_CLEAN, monkeypatch)
    assert values[1][8] == ("str", "'text'") and values[2][8] == ("NoneType", "None")


JSONL_AWKWARD = "\n".join([
    '{"id": 1, "dec": 1.5}',  # Decimal('1.5') from the number's text: Arrow holds it ('1.50' would keep its scale)
    '{"id": 4.0, "f": 4, "s": 5, "flag": 1}',  # coerced in Python, column by column
    '{"id": 2, "dec": "1.50"}',  # a decimal's own scale: tuples
    '{"id": 99999999999999999999}',  # beyond int64: tuples
    '{"id": 5, "day": "2024-02-30"}',  # no such day: rejected
    '{"id": 6}',
    'not json',  # rejected
    '[1]',  # not an object: rejected
    '',
    '{"id": true}',  # a boolean is no int: rejected
    '{"id": 11, "doc": NaN}',  # JSON text Arrow cannot hold as the value (NaN): tuples
    '{"id": 12, "ts": "2024-01-01T10:00:00Z"}',  # aware: tuples
]) + "\n"


def test_jsonl_awkward_values_and_bad_rows_come_out_as_the_tuple_path_gave(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(JSONL_AWKWARD, encoding="utf-8")
    batches, sink, old, old_sink = _both_files(path, "jsonl", 2, monkeypatch)
    assert typed(batches) == typed(old)
    assert rejections(sink) == rejections(old_sink)
    assert sorted(reason.split(": ")[0].rsplit(":", 1)[1] for _, reason in rejections(sink)) == ["10", "5", "7", "8"]
    assert forms(batches) == ["arrow", "tuples", "arrow", "tuples"]
    assert typed(batches)[2][2] == ("Decimal", "Decimal('1.50')")
    assert typed(batches)[1][:4] == (("int", "4"), ("float", "4.0"), ("NoneType", "None"), ("str", "'5'"))


def test_csv_lines_without_quotes_are_parsed_by_arrow_until_a_quote_then_by_the_csv_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.csv"
    lines = ["id,f,dec,s,raw,flag,day,ts,doc",
             "1,1.5,2.25,héllo 😀,AP8=,true,2024-02-29,2024-02-29 23:59:59.5,{}",
             "",  # a blank line is no row
             "2,\\N,,,,,,,null",
             "3,x,1,a,,true,2024-01-01,2024-01-01,[]",  # not a float: rejected, line 5
             "4,1,1,a,,true,2024-01-01,2024-01-01",  # too few fields: rejected, line 6
             '5,1,1,"quoted, spanning',
             'two lines",,true,2024-01-01,2024-01-01,[]',
             "6,1,1,a,,true,2024-01-01,2024-01-01,[]"]
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8") + b"\r\n")
    batches, sink, old, old_sink = _both_files(path, "csv", 2, monkeypatch)
    assert typed(batches) == typed(old)
    assert rejections(sink) == rejections(old_sink)
    assert [reason.split(": ")[0].rsplit(":", 1)[1] for _, reason in rejections(sink)] == ["5", "6"]
    assert forms(batches) == ["arrow", "arrow", "arrow", "arrow"]  # bad rows rejected, the rest Arrow
    assert typed(batches)[2][3] == ("str", "'quoted, spanning\\r\\ntwo lines'")


def test_csv_whole_quoted_fields_on_one_line_are_parsed_by_arrow_as_the_csv_module_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.csv"
    path.write_text("id,f,dec,s,raw,flag,day,ts,doc\n"
                    '1,1,1,"a, b",,true,2024-01-01,2024-01-01,"{""k"": ""v""}"\n'
                    '2,1,1,"say ""hi""",,true,2024-01-01,2024-01-01,[]\n'
                    '3,1,1,"",,true,2024-01-01,2024-01-01,[]\n'
                    '4,1,1,"",,true,2024-01-01,2024-01-01,[]\n'
                    '5,1,1,a"b,,true,2024-01-01,2024-01-01,[]\n'  # a quote inside a field: the csv module's
                    '6,1,1,"ab"c,,true,2024-01-01,2024-01-01,[]\n', encoding="utf-8")
    parsed: list[int] = []
    real = csv_format.pa_csv.read_csv
    monkeypatch.setattr(csv_format.pa_csv, "read_csv", lambda *a, **k: parsed.append(1) or real(*a, **k))
    batches, sink, old, _ = _both_files(path, "csv", 2, monkeypatch)
    assert typed(batches) == typed(old)
    assert [row[3][1] for row in typed(batches)] == ["'a, b'", "'say \"hi\"'", "''", "''", "'a\"b'", "'abc'"]
    assert len(parsed) == 2, "the first two chunks were not parsed by pyarrow"
    assert forms(batches) == ["arrow"] * 3 and not sink.rows


def test_jsonl_a_line_json_loads_reads_by_its_bom_is_read_as_before(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": 1, "s": "bom"}\n{"id": 2, "s": "\\u00e9"}\n{"id": 3}\r\n{"id": 4}')
    batches, sink, old, _ = _both_files(path, "jsonl", 2, monkeypatch)
    assert typed(batches) == typed(old)
    assert [(row[0][1], row[3][1]) for row in typed(batches)] == [("1", "'bom'"), ("2", "'é'"), ("3", "None"),
                                                                  ("4", "None")]
    assert forms(batches) == ["arrow", "arrow"] and not sink.rows

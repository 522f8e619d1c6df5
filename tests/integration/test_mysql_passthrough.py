"""MySQL to MySQL without decoding (issue 28 item 5): columns whose target declares the source's type are
loaded from the reader's wire text, the others from the typed Arrow form; the plan says which."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Workspace, log_events
from tests.integration.test_mysql_store import rows_of, run_sql, source_params
from tests.mysql_types_table import TYPE_COLUMNS, fill_types_table

pytestmark = pytest.mark.mysql

TYPED = {"fl", "bt", "b1"}
"""FLOAT (selected as DOUBLE) and BIT: never from wire text."""


def _fill_types(url: str, *targets: str) -> None:
    fill_types_table(url, *targets, strict=True, then=[
        # a second copy of the rows without zero dates, so some batches carry wire text for every date column
        "INSERT INTO src SELECT id + 10, ti, tu, si, su, mi, mu, i, iu, bi, bu, dec65, d2, fl, db, c, vc, "
        "tx, mt, bn, vb, bl, '2024-02-29', dtm, dt0, ts, tm, yr, js, en, st, bt, b1 FROM src WHERE id < 4",
        "UPDATE src SET dtm = '2000-01-01 00:00:00.5', dt0 = '2000-01-01 00:00:00' WHERE id = 13"])


def _same_rows(url: str, a: str, b: str) -> None:
    want, got = rows_of(url, a), rows_of(url, b)
    assert len(want) == len(got) == 7
    for w, g in zip(want, got, strict=True):
        for name, x, y in zip(TYPE_COLUMNS, w, g, strict=True):
            assert x == y and type(x) is type(y), (b, w[0], name, x, y)
    exact = {t: run_sql(url, f"SELECT id, CAST(CAST(fl AS DOUBLE) AS CHAR), HEX(bl), HEX(bt) FROM {t} ORDER BY id")
             for t in (a, b)}
    assert exact[a] == exact[b]


def _wire_columns(stderr: str) -> set[str]:
    return {c for e in log_events(stderr) if e.get("event") == "writer.load_from_wire" for c in e["columns"]}


def _load_of(stderr: str, dest: str) -> str:
    (plan,) = [e for e in log_events(stderr) if e.get("event") == "plan.made"]
    return next(d["load"] for d in plan["destinations"] if d["id"] == dest)


def test_every_awkward_type_passes_through_beside_a_jsonl_destination(ws: Workspace, mysql_db: str,
                                                                        tmp_path: Path) -> None:
    _fill_types(mysql_db, "wired", "typed")
    run_sql(mysql_db, "ALTER TABLE typed MODIFY i BIGINT")  # one column of another type: that column typed
    source = {"plugin": "mysql", "params": source_params(mysql_db, table="src", split_pk="id")}

    def mysql_dest(table: str) -> dict[str, Any]:
        return {"id": table, "plugin": "mysql", "params": source_params(mysql_db, table=table, method="load_data",
                                                                         load="staging", verify="count")}

    spec = {"source": source, "destinations": [
        mysql_dest("wired"), mysql_dest("typed"),
        {"id": "j", "plugin": "file", "params": {"path": str(tmp_path / "fanout"), "format": "jsonl"}}]}
    proc = ws.run("--task-id", str(ws.submit(spec)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _same_rows(mysql_db, "src", "wired")
    _same_rows(mysql_db, "src", "typed")
    # Every column but FLOAT and BIT went from wire text in some batch (the zero dates' batch had none for them)
    assert _wire_columns(proc.stderr) == set(TYPE_COLUMNS) - TYPED
    assert _load_of(proc.stderr, "wired") == "LOAD DATA from wire text (30 of 33 columns; Arrow for fl, bt, b1)"
    assert _load_of(proc.stderr, "typed") == "LOAD DATA from wire text (29 of 33 columns; Arrow for i, fl, bt, b1)"
    # The jsonl destination beside them got the typed rows, as a run without a mysql destination writes them
    alone = {"source": source, "destinations": [
        {"id": "j", "plugin": "file", "params": {"path": str(tmp_path / "alone"), "format": "jsonl"}}]}
    assert ws.run("--task-id", str(ws.submit(alone))).returncode == 0

    def lines(root: Path) -> list[Any]:
        return sorted((json.loads(line) for f in root.rglob("*.jsonl") for line in f.read_text().splitlines()),
                      key=lambda r: r["id"])

    assert lines(tmp_path / "fanout") == lines(tmp_path / "alone") and len(lines(tmp_path / "alone")) == 7


def test_a_dirty_row_in_a_passthrough_load_is_rejected_alone_with_its_reason(ws: Workspace, mysql_db: str) -> None:
    ddl = "CREATE TABLE {} (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2), at DATETIME(3))"
    run_sql(mysql_db, ddl.format("src"), ddl.format("dst"),
            "INSERT INTO src VALUES (1, 'a\\tb', 1.50, '2020-01-01 00:00:00.001'), (2, 'dup', -2.00, NULL), "
            "(3, NULL, NULL, '2021-02-03 04:05:06'), (4, 'd\\\\e', 0.01, '2022-01-01 00:00:00')",
            "INSERT INTO dst VALUES (2, 'already here', 9, NULL)")
    spec = {"source": {"plugin": "mysql", "params": source_params(mysql_db, table="src")},
            "settings": {"error_limit": {"record": 5}},
            "destinations": [{"id": "dst", "plugin": "mysql",
                              "params": source_params(mysql_db, table="dst", method="load_data")}]}
    proc = ws.run("--task-id", str(ws.submit(spec)))
    assert _wire_columns(proc.stderr) == {"id", "name", "amount", "at"}
    result = ws.show(1)["result"]
    assert result["destinations"]["dst"]["rows_written"] == 3, proc.stderr[-3000:]
    with (ws.root / result["dirty_file"]).open(encoding="utf-8") as f:
        (dirty,) = [json.loads(line) for line in f]
    assert dirty["origin"] == "dst" and dirty["row"][0] == 2 and "Duplicate entry '2'" in dirty["reason"]
    source = rows_of(mysql_db, "src")
    assert rows_of(mysql_db, "dst") == [source[0], (2, "already here", 9, None), *source[2:]]


def test_plan_names_each_destination_s_load(ws: Workspace, mysql_db: str, tmp_path: Path) -> None:
    ddl = "CREATE TABLE {} (id INT PRIMARY KEY, name VARCHAR(20), score FLOAT)"
    run_sql(mysql_db, ddl.format("src"), ddl.format("same"), "CREATE TABLE other (id BIGINT, name TEXT, score FLOAT)")
    dests = [{"id": "same", "plugin": "mysql", "params": source_params(mysql_db, table="same", method="load_data")},
             {"id": "other", "plugin": "mysql", "params": source_params(mysql_db, table="other")},
             {"id": "ins", "plugin": "mysql", "params": source_params(mysql_db, table="same", method="insert")},
             {"id": "j", "plugin": "file", "params": {"path": str(tmp_path / "j"), "format": "jsonl"}}]
    spec = {"source": {"plugin": "mysql", "params": source_params(mysql_db, table="src")}, "destinations": dests}
    path = tmp_path / "task.json"
    path.write_text(json.dumps(spec))
    text = ws.run("plan", str(path), check=True).stdout
    assert "    load: LOAD DATA from wire text (2 of 3 columns; Arrow for score)" in text
    assert "    load: LOAD DATA from Arrow" in text and "    load: INSERT" in text
    planned = {d["id"]: d["load"] for d in json.loads(ws.run("plan", str(path), "--json", check=True).stdout)
               ["destinations"]}
    assert planned == {"same": "LOAD DATA from wire text (2 of 3 columns; Arrow for score)",
                       "other": "LOAD DATA from Arrow", "ins": "INSERT", "j": None}
    # A destination whose own transforms make its rows loads them from Arrow
    dests[0]["transforms"] = [{"filter": "id > 1"}]
    path.write_text(json.dumps(spec))
    planned = {d["id"]: d["load"] for d in json.loads(ws.run("plan", str(path), "--json", check=True).stdout)
               ["destinations"]}
    assert planned["same"] == "LOAD DATA from Arrow (the rows are not the reader's own: transforms, or Spark)"


def test_the_reader_keeps_wire_text_only_when_asked_and_only_as_the_value_s_text(mysql_db: str) -> None:
    from dataclasses import replace

    from tests.integration.test_mysql_store import PLUGIN, reader_options
    from tests.plugin_helpers import read_ctx

    run_sql(mysql_db, "CREATE TABLE src (id INT PRIMARY KEY, name VARCHAR(20), fl FLOAT, bt BIT(10), "
                      "rejected_here DATE)",
            "INSERT INTO src VALUES (1, 'a\\tb', 1.5, 5, '2020-01-01'), (2, NULL, NULL, NULL, '0000-00-00')")
    assert PLUGIN.source is not None
    options = reader_options(mysql_db, table="src", zero_dates="reject")

    def first_batch(keep: bool) -> Any:
        ctx = replace(read_ctx(batch_rows=10), keep_wire=keep)
        reader = PLUGIN.source.reader(options, ctx)  # type: ignore[union-attr]
        reader.schema()
        (split,) = PLUGIN.source.splitter(options, ctx).split(1)  # type: ignore[union-attr]
        (batch,) = list(reader.read(split))
        return batch

    assert first_batch(False).wire is None  # no destination may load it: not kept
    wire = first_batch(True).wire
    # The zero date's row was rejected by the reader: the wire text lost it too; FLOAT and BIT have none
    assert [None if w is None else w.to_pylist() for w in wire] == [[b"1"], [b"a\tb"], None, None, None]

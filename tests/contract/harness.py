"""Store harnesses for the contract suite: how to point a store at a fresh location and look inside it.

A harness knows, for one store: the JSON-level params of a destination at its location and of a
source reading it back, how to read what the location holds *without* wormhole's reader (the
files, the database), which row the store must refuse, and the store's documented deviations from
an exact round trip. The suite (:mod:`tests.contract.suite`) does the rest through the registry.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

from tests.plugin_helpers import DIRTY, SCHEMA, read_all, run_destination
from wormhole.options import Problems, parse_options
from wormhole.plugins import registry
from wormhole.plugins.base import Row, SinkRole, SourceRole
from wormhole.plugins.values import plain_decimal

ROWS: tuple[Row, ...] = (
    (1, 1.5, Decimal("12345.678900"), "héllo ✓ 😀 𝄞 中文", b"\x00\x01\xff", True, date(2024, 2, 29),
     datetime(2024, 1, 2, 3, 4, 5, 123456), {"a": [1, 2.5, "x😀"], "b": None, "c": {"d": True}}),
    (2, -0.1, Decimal("-0.01"), 'tab\there, "dq" \'sq\' back\\slash \\N\nnew line\r\ncrlf', bytes(range(256)), False,
     date(1970, 1, 1), datetime(1970, 1, 1), []),
    (3, None, None, None, None, None, None, None, None),
    (9_007_199_254_740_993, 1e300, Decimal("99999999999999999999.999999999999999999"), " padded ", b"\t\n\\N",
     True, date(9999, 12, 31), datetime(9999, 12, 31, 23, 59, 59, 999999), {"big": 12345678901234567890, "s": "é"}),
    (-9_223_372_036_854_775_808, 0.0, Decimal("0.000000000000000001"), "x" * 150 + "😀", b"", False,
     date(1000, 1, 1), datetime(1000, 1, 1, 0, 0, 0, 1), "just a string"),
    (6, -1.7976931348623157e308, Decimal("-0.10"), "", b"\x80", True, date(2000, 1, 1),
     datetime(2000, 1, 1, 12, 0), 0),
)
"""Every logical type (SCHEMA's columns), with NULLs and edge values."""


def row(i: int) -> Row:
    """An ordinary row with id ``i`` (every type, no edge values)."""
    return (i, i / 4, Decimal(i).scaleb(-2), f"row-{i}-é", bytes([i % 256]), i % 2 == 0,
            date(2020, 1, 1 + i % 28), datetime(2020, 1, 1, i % 24, 0, 0, i), {"i": i})


def ids(rows: Sequence[Row]) -> list[int]:
    return sorted(r[0] for r in rows)


@dataclass(frozen=True, slots=True)
class Deviation:
    """A documented way the store does not give a value back exactly as written."""

    column: str
    documented: str
    """What the documentation says (README section), so the test states the deviation."""
    expect: Callable[[Any], Any]
    """The value read back for a non-NULL written value."""


def scale18(v: Decimal) -> Decimal:
    return v.quantize(Decimal(1).scaleb(-18), context=Context(prec=60))


def json_text(v: Any) -> str:
    """A json value as parquet and Hive keep it: its JSON text, a str taken as text already."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def parse(role_options: type, raw: dict[str, Any], path: str) -> Any:
    problems = Problems()
    options = parse_options(role_options, raw, path, problems)
    assert not problems, problems.items
    return options


class StoreHarness:
    """One store at one fresh location. Subclasses fill in the location-specific parts."""

    plugin: str = ""
    keeps_rows: bool = True
    """False for a store that discards what it takes (the null sink): nothing to read back."""
    replaces_target: bool = False
    """Commit replaces the target's rows (file overwrite, mysql staging) rather than adding to them."""
    refused: Row | None = None
    """A row the store must refuse; None declares that the store accepts every row."""
    deviations: tuple[Deviation, ...] = ()
    known_defects: Mapping[str, str] = {}
    """Test name -> reason: a real defect the suite found (the case is a strict xfail)."""

    @property
    def sink(self) -> SinkRole:
        role = registry.get(self.plugin).sink
        assert role is not None
        return role

    @property
    def source(self) -> SourceRole | None:
        return registry.get(self.plugin).source

    def sink_params(self) -> dict[str, Any]:
        raise NotImplementedError

    def source_params(self) -> dict[str, Any]:
        """Params of a source reading what the destination committed."""
        raise NotImplementedError

    def sink_options(self) -> Any:
        return parse(self.sink.options, self.sink_params(), "destinations[0].params")

    def source_options(self, raw: dict[str, Any]) -> Any:
        assert self.source is not None
        return parse(self.source.options, raw, "source.params")

    def commit_rows(self, parts: Sequence[Sequence[Row]], run_id: int) -> None:
        results = run_destination(self.sink, self.sink_options(), parts, run_id=run_id)
        assert sum(r.written for r in results) == sum(map(len, parts))

    def prepare_source(self, parts: Sequence[Sequence[Row]]) -> dict[str, Any]:
        """Put ``parts`` where the source reads them (one writer each); the source's params."""
        self.commit_rows(parts, run_id=1)
        return self.source_params()

    def read_rows(self, raw: dict[str, Any]) -> list[Row]:
        """Every row the store's own source role reads."""
        assert self.source is not None
        return read_all(self.source, self.source_options(raw))

    def expected(self, written: Row) -> Row:
        changes = {SCHEMA.names.index(d.column): d.expect for d in self.deviations}
        return tuple(v if v is None or i not in changes else changes[i](v) for i, v in enumerate(written))

    def snapshot(self) -> Any:
        """Everything a user could see at the location, read without wormhole."""
        raise NotImplementedError

    def visible_ids(self) -> list[int]:
        """The ids of the rows a reader of the target sees now, sorted, read without wormhole."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class StreamHarness(StoreHarness):
    """The generator source and the null sink: rows go nowhere, so there is nothing to look at."""

    plugin = "stream"
    keeps_rows = False
    refused = None  # the null sink takes any row, a lone surrogate included (README: "a null sink")

    def sink_params(self) -> dict[str, Any]:
        return {}

    def prepare_source(self, parts: Sequence[Sequence[Row]]) -> dict[str, Any]:
        n = sum(map(len, parts))
        assert ids([r for p in parts for r in p]) == list(range(n)), "the generator's ids are 0..rows-1"
        return {"rows": n, "splits": len(parts) + 1,
                "columns": [{"name": c.name, "type": c.type} for c in SCHEMA.columns]}

    def snapshot(self) -> Any:
        return None

    def visible_ids(self) -> list[int]:
        return []


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root``: files with their bytes, directories as None."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


def _csv_ids(path: Path) -> list[int]:
    with path.open(encoding="utf-8", newline="") as f:
        return [int(r[0]) for r in list(csv.reader(f))[1:]]


def _jsonl_ids(path: Path) -> list[int]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line]


def _parquet_ids(path: Path) -> list[int]:
    import pyarrow.parquet as pq

    return list(pq.read_table(path, columns=["id"]).column("id").to_pylist())


FILE_IDS: dict[str, Callable[[Path], list[int]]] = {"csv": _csv_ids, "jsonl": _jsonl_ids, "parquet": _parquet_ids}

FILE_DEVIATIONS: dict[str, tuple[Deviation, ...]] = {
    "csv": (),  # NULL is \\N by default: '' and b'' read back as themselves (issue 23)
    "jsonl": (),
    "parquet": (
        Deviation("dec", "parquet: decimal `decimal128(38, 18)`", scale18),
        Deviation("doc", "parquet: json columns come back as the stored text (a str is kept as is)", json_text),
    ),
}


class SqlStagingHarness(StoreHarness):
    """A SQL store's table the user created, loaded with ``load: staging``: commit swaps the loaded table in."""

    replaces_target = True
    refused = (90, 0.5, Decimal(1), "y" * 201, b"", True, date(2020, 1, 1), datetime(2020, 1, 1), None)
    """Too long for the table's string column of 200 characters: the server refuses it (mysql's strict
    session: 1406 Data too long; PostgreSQL: 22001 value too long)."""


class FileHarness(StoreHarness):
    """A file destination directory ``<root>/out`` in one format; overwrite mode (the default)."""

    plugin = "file"
    replaces_target = True
    refused = (90, 0.5, Decimal(1), f"lone surrogate {DIRTY}", b"", True, date(2020, 1, 1), datetime(2020, 1, 1),
               None)  # cannot be encoded as UTF-8

    def __init__(self, root: Path, fmt: str) -> None:
        self.root = root
        self.format = fmt
        self.target = root / "out"
        self.deviations = FILE_DEVIATIONS[fmt]

    def sink_params(self) -> dict[str, Any]:
        return {"path": str(self.target), "format": self.format}

    def source_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"path": str(self.target), "format": self.format}
        if self.format != "parquet":  # parquet files carry their types
            params["columns"] = [{"name": c.name, "type": c.type} for c in SCHEMA.columns]
        return params

    def snapshot(self) -> Any:
        return tree(self.root)

    def visible_ids(self) -> list[int]:
        if not self.target.is_dir():
            return []
        found = [p for p in self.target.iterdir()
                 if p.suffix == f".{self.format}" and not p.name.startswith(("_", "."))]
        return sorted(i for p in found for i in FILE_IDS[self.format](p))


class SqliteHarness(StoreHarness):
    """Table ``t`` of ``<root>/out.sqlite``, created by the destination (``create`` defaults to true)."""

    plugin = "sqlite"
    refused = FileHarness.refused  # sqlite3 cannot bind a str that is not valid UTF-8
    deviations = (
        Deviation("dec", "sqlite: decimal columns of a created table are TEXT (plain notation), read back as "
                         "strings", plain_decimal),
        Deviation("doc", "sqlite: json columns of a created table are TEXT (the JSON text), read back as strings",
                  lambda v: json.dumps(v, ensure_ascii=False)),
    )

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "out.sqlite"

    def sink_params(self) -> dict[str, Any]:
        return {"path": str(self.path), "table": "t"}

    def source_params(self) -> dict[str, Any]:
        return {"path": str(self.path), "table": "t"}

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        if not self.path.exists():
            return []
        conn = sqlite3.connect(self.path.as_uri() + "?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    def _has_table(self) -> bool:
        return bool(self._query("SELECT 1 FROM sqlite_master WHERE name = 't'"))

    def snapshot(self) -> Any:
        files = sorted(os.listdir(self.root))
        schema = self._query("SELECT type, name, sql FROM sqlite_master ORDER BY name")
        rows = self._query("SELECT * FROM t ORDER BY id") if self._has_table() else []
        return files, schema, rows

    def visible_ids(self) -> list[int]:
        return sorted(r[0] for r in self._query("SELECT id FROM t")) if self._has_table() else []

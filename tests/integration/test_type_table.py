"""The type round-trip table in local mode (README "Type round trip"): every awkward MySQL type to
every store and back, compared exactly; the README's table is what this test measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mysql_helpers import Databases, Server
from tests.mysql_types_table import check_readme_table, measure_roundtrip, roundtrip_markdown
from wormhole.config import EngineConf, PathsConf

pytestmark = pytest.mark.mysql


@pytest.mark.timeout(300)
def test_type_round_trip_table_local(dbs: Databases, server: Server, tmp_path: Path) -> None:
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    outcomes = measure_roundtrip(conf, "local", server, dbs, tmp_path)
    # What issue 23 fixed holds in every store that can hold the type at all.
    for store in ("mysql", "csv", "jsonl", "parquet", "sqlite"):
        assert outcomes[store]["fl"] == "exact", (store, outcomes[store]["fl"])
        assert outcomes[store]["es"] == "exact", (store, outcomes[store]["es"])
    for store in ("mysql", "csv", "jsonl", "parquet"):
        assert outcomes[store]["bu"] == "exact", (store, outcomes[store]["bu"])
    for store in ("mysql", "csv", "sqlite"):  # parquet keeps a JSON string value as its bare text
        assert outcomes[store]["js"] == "exact", (store, outcomes[store]["js"])
    assert "null rejected" not in outcomes["parquet"]["js"] and "null ->" not in outcomes["parquet"]["js"]
    assert outcomes["mysql"] == dict.fromkeys(outcomes["mysql"], "exact"), outcomes["mysql"]
    check_readme_table("local", roundtrip_markdown(outcomes))

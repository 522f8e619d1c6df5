"""The type round-trip table in local mode (docs/manual/types.md, "Type round trip"): every awkward MySQL type to
every store and back, compared exactly; the manual's table is what this test measured."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.mysql_helpers import Databases, Server, execute, q
from tests.mysql_types_table import (
    POSTGRES_INEXACT,
    ROUNDTRIP_COLUMNS,
    ROUNDTRIP_STORES,
    check_manual_table,
    measure_roundtrip,
    roundtrip_markdown,
)
from tests.pg_helpers import Schemas, pg_execute, pg_schemas
from tests.spark_helpers import run_task
from wormhole.config import EngineConf, PathsConf

pytestmark = pytest.mark.mysql

__all__ = ["pg_schemas"]  # the fixture, used by name


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_type_round_trip_table_local(dbs: Databases, server: Server, pg_schemas: Schemas, tmp_path: Path) -> None:
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    pg = (pg_schemas.server, pg_schemas.create("types"))
    outcomes = measure_roundtrip(conf, "local", server, dbs, tmp_path, (*ROUNDTRIP_STORES, "postgres"), pg)
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
    # postgres, in the types create_table chooses for the MySQL columns, keeps every value exactly but zero
    # dates and jsonb's key order.
    assert outcomes["postgres"] == {c: POSTGRES_INEXACT.get(c, "exact") for c in ROUNDTRIP_COLUMNS}
    created = dict(pg_execute(pg_schemas.conn, "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                              "WHERE attrelid = %s::regclass AND attnum > 0", (f"{pg[1]}.copy",)))
    assert created == {"id": "integer", "fl": "real", "db": "double precision", "dec": "numeric(65,30)",
                       "d18": "numeric(38,18)", "bu": "numeric(20,0)", "bt": "bigint", "b64": "numeric(20,0)",
                       "zd": "date", "tm": "text",
                       "js": "jsonb", "bn": "bytea", "u8": "character varying(40)", "es": "character varying(10)"}
    check_manual_table("local", roundtrip_markdown(outcomes))


def test_a_query_source_carries_float_and_unsigned_bigint_exactly(dbs: Databases, server: Server,
                                                                   tmp_path: Path) -> None:
    """A query's result says FLOAT and UNSIGNED in its metadata: read as the table's columns are."""
    admin = server.connect()
    db = dbs.create("query")
    execute(admin, f"CREATE TABLE {q(db)}.t (id INT PRIMARY KEY, fl FLOAT, bu BIGINT UNSIGNED)")
    execute(admin, f"INSERT INTO {q(db)}.t VALUES (1, 16777216, 18446744073709551615), (2, 1.1, NULL)")
    admin.close()
    conf = EngineConf(paths=PathsConf(dirty_dir=str(tmp_path / "dirty")))
    params = server.params(db, query="SELECT id, fl, bu FROM t")
    result, _ = run_task(conf, {"source": {"plugin": "mysql", "params": params}, "destinations": [
        {"id": "p", "plugin": "file", "params": {"path": str(tmp_path / "p"), "format": "parquet"}}]})
    assert result.exit_code == 0, result.result
    table = pq.read_table(str(tmp_path / "p")).sort_by("id")
    assert str(table.schema.field("bu").type) == "uint64"
    assert table.column("bu").to_pylist() == [18446744073709551615, None]
    assert table.column("fl").to_pylist() == [16777216.0, 1.100000023841858]

"""The store contract (tests/contract/suite.py) for hive, on the test run's one SparkSession.

The destination runs as in local mode: the file store's parquet writer stages the rows, commit
INSERTs them into the table. The table is read back through the source role's native Spark read
(hive is read by Spark only) and, independently, with ``spark.table``.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

# The suite's asserts live outside test modules: have pytest explain their failures all the same.
pytest.register_assert_rewrite("tests.contract.suite", "tests.contract.harness")

from tests.contract.harness import Deviation, FileHarness, StoreHarness, json_text, scale18  # noqa: E402
from tests.contract.suite import StoreContract  # noqa: E402
from tests.plugin_helpers import read_ctx  # noqa: E402
from wormhole.config import EngineConf  # noqa: E402
from wormhole.plugins.base import Row  # noqa: E402

pytestmark = pytest.mark.spark

DATABASE = "wh_contract"


class HiveHarness(StoreHarness):
    """A table ``wh_contract.t_<uuid>`` the destination creates (``create: true``), appended to."""

    plugin = "hive"
    refused = FileHarness.refused  # staged as parquet: a lone surrogate cannot be encoded as UTF-8
    deviations = (
        Deviation("dec", "hive: a created table's decimal column is DECIMAL(38,18)", scale18),
        Deviation("doc", "hive: json is a STRING column holding the JSON text (a str kept as is)", json_text),
    )

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.name = f"t_{uuid.uuid4().hex[:8]}"
        self.table = f"{DATABASE}.{self.name}"
        if not spark.catalog.databaseExists(DATABASE):
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")

    def sink_params(self) -> dict[str, Any]:
        return {"table": self.table, "create": True}

    def source_params(self) -> dict[str, Any]:
        return {"table": self.table}

    def read_rows(self, raw: dict[str, Any]) -> list[Row]:
        # Hive is read by Spark only: the source role's native read, as the Spark runner calls it.
        source = self.source
        assert source is not None and source.spark_read is not None
        options = self.source_options(raw)
        ctx = read_ctx()
        schema = source.reader(options, ctx).schema()
        splits = source.splitter(options, ctx).split(4)
        module, _, name = source.spark_read.partition(":")
        frame = getattr(importlib.import_module(module), name)(self.spark, options, splits, schema)
        return self._rows(frame)

    def _rows(self, frame: Any) -> list[Row]:
        # A Hive TIMESTAMP is zoned: read as naive UTC, as the runner hands it to row writers.
        cols = [f"CAST(`{f.name}` AS TIMESTAMP_NTZ) AS `{f.name}`" if f.dataType.typeName() == "timestamp"
                else f"`{f.name}`" for f in frame.schema.fields]
        rows = frame.selectExpr(*cols).collect()
        return [tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in rows]

    def _exists(self) -> bool:
        return bool(self.spark.catalog.tableExists(self.table))

    def snapshot(self) -> Any:
        tables = sorted(t.name for t in self.spark.catalog.listTables(DATABASE) if t.name == self.name)
        rows = sorted(self._rows(self.spark.table(self.table)), key=lambda r: r[0]) if self._exists() else []
        return tables, rows

    def visible_ids(self) -> list[int]:
        if not self._exists():
            return []
        return sorted(r[0] for r in self.spark.table(self.table).select("id").collect())

    def close(self) -> None:
        self.spark.sql(f"DROP TABLE IF EXISTS {self.table}")


class TestHiveContract(StoreContract):
    @pytest.fixture
    def store(self, spark_conf: EngineConf, spark_session: Any) -> Iterator[StoreHarness]:
        harness = HiveHarness(spark_session)
        yield harness
        harness.close()

"""One SparkSession for the whole test run (``local[2,3]``: two cores, and up to three attempts per task,
so Spark really retries a failed partition as a cluster would; plain ``local[2]`` never retries)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from wormhole.config import EngineConf, MonitorConf, PathsConf, SparkConf

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark_conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineConf]:
    root = tmp_path_factory.mktemp("spark")
    conf = EngineConf(
        monitor=MonitorConf(interval_s=0.05, report_every=40),
        paths=PathsConf(dirty_dir=str(root / "dirty")),
        spark=SparkConf(master="local[2,3]", warehouse_dir=str(root / "warehouse"),
                        metastore_dir=str(root / "metastore"),
                        conf={"spark.sql.shuffle.partitions": 4, "spark.driver.memory": "2g"}),
    )
    from wormhole import spark
    from wormhole.spark.session import get_session, stop_session

    spark.configure(conf.spark)
    get_session(conf.spark)
    yield conf
    stop_session()


@pytest.fixture
def spark_session(spark_conf: EngineConf) -> Any:
    from wormhole.spark.session import get_session

    return get_session(spark_conf.spark)

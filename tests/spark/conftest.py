"""One SparkSession for the whole test run (``local[2,3]``: two cores, and up to three attempts per task,
so Spark really retries a failed partition as a cluster would; plain ``local[2]`` never retries).

A test interrupted inside a JVM call (pytest-timeout) can leave that session's gateway answering out of
turn; every later test of the worker would then fail with ``Py4JError ... does not exist in the JVM``.
Before each test the session is asked two cheap questions, and a session that cannot answer is replaced
by a new one (in a new JVM): one slow test costs one failure, not every test after it."""

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
    from tests.plugin_helpers import SPARK
    from wormhole.spark import RunSpark
    from wormhole.spark.session import get_session, stop_session

    SPARK.append(RunSpark(conf.spark))  # the contexts the store tests build give it
    get_session(conf.spark)
    yield conf
    SPARK.clear()
    stop_session()


@pytest.fixture(autouse=True)
def _answering_session(spark_conf: EngineConf) -> None:
    from tests.spark_helpers import answering_session

    answering_session(spark_conf)


@pytest.fixture
def spark_session(spark_conf: EngineConf) -> Any:
    from wormhole.spark.session import get_session

    return get_session(spark_conf.spark)

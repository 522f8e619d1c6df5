"""Spark execution mode. Its modules import pyspark (this one does not), as do the stores' Spark
adapters (``wormhole.plugins.<store>.spark``), loaded only on demand.

``configure`` records the ``[spark]`` configuration of the running engine, so stores that need the
session outside the data plane (the Hive catalog at prepare and commit) build the same one.
"""

from __future__ import annotations

import importlib.util

from wormhole.config import SparkConf

_conf: SparkConf | None = None
_origin: dict[str, str] = {}


def configure(conf: SparkConf, origin: dict[str, str] | None = None) -> None:
    """``origin``: where the master came from and which engine.toml was read
    (:meth:`wormhole.spark.config.SparkChoice.describe`), for the log."""
    global _conf, _origin
    _conf = conf
    _origin = dict(origin or {})


def current_origin() -> dict[str, str]:
    return dict(_origin)


def current_conf() -> SparkConf:
    return _conf if _conf is not None else SparkConf()


def available() -> bool:
    """Whether pyspark can be imported here (the ``spark`` extra is installed)."""
    return importlib.util.find_spec("pyspark") is not None


def spark_session():  # type: ignore[no-untyped-def]
    """The process's SparkSession under the configured ``[spark]`` settings (built on first use)."""
    from wormhole.spark.session import get_session

    return get_session(current_conf())

"""Spark execution mode. Its modules import pyspark (this one does not), as do the stores' Spark
adapters (``wormhole.plugins.<store>.spark``) and their kit (:mod:`wormhole.plugins.spark_kit`),
loaded only on demand.

:class:`RunSpark` is a run's Spark as the engine hands it to the stores in their contexts
(``ctx.spark``): stores that need the session outside the data plane (the Hive catalog at prepare and
commit) build the one of the run's ``[spark]`` settings, and no setting is process-wide.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wormhole.config import SparkConf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def available() -> bool:
    """Whether pyspark can be imported here (the ``spark`` extra is installed)."""
    return importlib.util.find_spec("pyspark") is not None


@dataclass(frozen=True, slots=True)
class RunSpark:
    """A run's Spark (:class:`wormhole.plugins.spark_kit.SparkAccess`): its ``[spark]`` settings, and the
    process's session under them, built on first use (a run that never asks starts no JVM)."""

    conf: SparkConf

    @property
    def metastore_dir(self) -> str:
        return self.conf.metastore_dir

    def session(self) -> SparkSession:
        from wormhole.spark.session import get_session

        return get_session(self.conf)

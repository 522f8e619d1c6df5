"""Which engine runs a task's partitions: local threads or Spark (``settings.engine``, ``spark.auto_rows``).

Pure: the plan asks it, and so does the facts stage (:func:`wormhole.source_facts.spark_facts`), to learn
whether the plan will need what only Spark mode asks of the source; the same answers give the same choice.
"""

from __future__ import annotations

from typing import Literal

from wormhole.config import EngineConf
from wormhole.plugins import registry
from wormhole.plugins.base import SourceInfo
from wormhole.task_spec import TaskSpec

EngineName = Literal["local", "spark"]


def choose_engine(spec: TaskSpec, conf: EngineConf, info: SourceInfo | None,
                  spark_installed: bool) -> tuple[EngineName, str]:
    """Where the partitions run, and why (logged and stored in the result). ``spark_installed``: whether
    pyspark can be imported (the facts stage asked)."""
    setting = spec.settings.engine
    if setting != "auto":
        return setting, f"settings.engine is {setting!r}"
    if spec.settings.snapshot == "consistent":
        return "local", "settings.snapshot is 'consistent': its readers share this process's connections"
    needs = [f"source {spec.source.plugin!r}"] if registry.source(spec.source.plugin).spark_only else []
    needs += [f"destination {d.id!r} ({d.plugin})" for d in spec.destinations
              if registry.sink(d.plugin).needs_spark]
    if needs:
        return "spark", f"{', '.join(needs)} needs Spark"
    threshold = conf.spark.auto_rows
    estimate = info.estimated_rows if info is not None else None
    if estimate is None:
        return "local", "the source gave no row estimate"
    if estimate <= threshold:
        return "local", f"estimated {estimate} rows <= spark.auto_rows {threshold}"
    if not spark_installed:
        return "local", f"estimated {estimate} rows > spark.auto_rows {threshold}, but pyspark is not installed"
    return "spark", f"estimated {estimate} rows > spark.auto_rows {threshold}"

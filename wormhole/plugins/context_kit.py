"""What a store's contexts (:class:`~wormhole.plugins.base.ReadContext`, ``WriteContext``) carry from the run
besides plain values, and how a context travels to a Spark executor.
"""

from __future__ import annotations

from typing import Any, Protocol


class StopSignal(Protocol):
    """Set when the task is stopping (a ``threading.Event``): long waits end at once on it."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def context_reduce(ctx: Any) -> tuple[Any, ...]:
    # Contexts travel to Spark executors: the logger, the stop signal, the run's Spark, its snapshot and what the
    # table runs share stay behind
    # (the driver's alone) and are rebuilt there from the plain keys. __reduce__, not __getstate__: Python
    # 3.11 before 3.11.4 replaces a frozen slots dataclass's own __getstate__ with its generated one.
    state = {name: getattr(ctx, name) for name in ctx.__slots__
             if name not in ("log", "stop", "spark", "snapshot", "shared")}
    return (_rebuild_context, (type(ctx), state))


def _rebuild_context(cls: type[Any], state: dict[str, Any]) -> Any:
    from wormhole.log import ensure_configured

    ensure_configured()  # an executor's worker: its events are JSON lines on stderr too
    return cls(**state)


class SparkAccess(Protocol):
    """The run's Spark, as the engine gives it in a store's context (``ctx.spark``; None when the
    context is an executor's): what a store needs of Spark outside the data plane (the hive catalog
    at prepare and commit), under the run's ``[spark]`` settings. Its Spark adapter's types and
    helpers are :mod:`wormhole.plugins.spark_kit`."""

    @property
    def metastore_dir(self) -> str:
        """The embedded Hive metastore's directory (``spark.metastore_dir``)."""
        ...

    def session(self) -> Any:
        """The process's SparkSession under the run's settings, built on first use."""
        ...

"""Which Spark master and settings a run uses, and where each came from (no pyspark import).

Precedence, most specific first:

1. the command line: ``--spark-master`` (``wormhole run``, ``wormhole --task-id``, ``wormhole plan``);
2. the task: ``settings.spark.master`` and ``settings.spark.conf``;
3. the environment: ``WORMHOLE_SPARK_MASTER``;
4. engine.toml's ``[spark]`` (the file :func:`wormhole.config.engine_conf_path` finds);
5. the built-in default, ``local[*]``.

The command line beats the task because it is what the person running it asked for now (trying a
task on ``local[2]`` before the cluster); the task beats the environment and engine.toml because a
task that needs a cluster (its size, its memory) says so where it is reviewed. ``settings.spark.conf``
is merged over ``[spark.conf]`` key by key.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from wormhole import config
from wormhole.config import SparkConf
from wormhole.task_spec import TaskSparkSpec

ENV_MASTER = "WORMHOLE_SPARK_MASTER"
DEFAULT_MASTER = SparkConf().master

_cli_master: str | None = None


def set_cli_master(master: str | None) -> None:
    """``--spark-master`` of this process's command line (a process runs one command)."""
    global _cli_master
    _cli_master = master


@dataclass(frozen=True, slots=True)
class SparkChoice:
    conf: SparkConf
    """engine.toml's ``[spark]`` with the master and settings the precedence chose."""
    master_from: str
    """Where the master came from (``--spark-master``, ``settings.spark.master``, ...)."""
    conf_file: str
    """The engine.toml read, or ``built-in defaults``."""

    def describe(self) -> dict[str, str]:
        return {"master": self.conf.master, "master_from": self.master_from, "conf_file": self.conf_file}


def choose(engine: SparkConf, task: TaskSparkSpec | None, *, cli_master: str | None = None,
           environ: dict[str, str] | None = None, conf_file: Path | None = None) -> SparkChoice:
    """The Spark configuration of a run (the precedence of this module's docstring). ``cli_master``,
    ``environ`` and ``conf_file`` default to this process's: ``--spark-master``, ``os.environ`` and the
    engine.toml :meth:`~wormhole.config.EngineConf.load` read."""
    env = os.environ if environ is None else environ
    cli = cli_master if cli_master is not None else _cli_master
    path = conf_file if conf_file is not None else config.loaded_from
    shown = str(path) if path is not None else "built-in defaults"
    if engine.master == _file_master(path):
        engine_origin = f"[spark] master of {shown}"
    elif engine.master != DEFAULT_MASTER:  # an EngineConf made in code (a test, an embedding program)
        engine_origin = "[spark] master of the engine configuration"
    else:
        engine_origin = f"the default ({DEFAULT_MASTER})"
    layers = ((cli, "--spark-master"), (task.master if task is not None else None, "settings.spark.master"),
              (env.get(ENV_MASTER) or None, ENV_MASTER), (engine.master, engine_origin))
    master, origin = next((m, o) for m, o in layers if m)
    settings = {**engine.conf, **(task.conf if task is not None else {})}
    chosen = dataclasses.replace(engine, master=master, conf=settings)
    return SparkChoice(chosen, origin, shown)


def _file_master(path: Path | None) -> str | None:
    """The master engine.toml names itself (a file that leaves it out takes the next layer's)."""
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return _master_of(path, stat.st_mtime_ns, stat.st_size) if path.is_file() else None


@functools.lru_cache(maxsize=8)
def _master_of(path: Path, mtime_ns: int, size: int) -> str | None:
    """:func:`_file_master` of the file as it is (its time and size): a database task's table runs each
    choose, and the file is parsed once."""
    try:
        spark = tomllib.loads(path.read_text(encoding="utf-8")).get("spark", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    master = spark.get("master") if isinstance(spark, dict) else None
    return master if isinstance(master, str) and master else None


def is_local(master: str) -> bool:
    """A master whose executors run in the driver's process (they see its files and its Python)."""
    return master == "local" or master.startswith("local[")

"""Which Spark master a run uses (--spark-master > settings.spark > WORMHOLE_SPARK_MASTER > engine.toml >
local[*]) and which engine.toml a process reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wormhole import config, task_spec
from wormhole.config import EngineConf, SparkConf, engine_conf_path
from wormhole.errors import ConfigError, InvalidTaskConfig
from wormhole.spark.config import ENV_MASTER, choose
from wormhole.task_spec import TaskSparkSpec


def toml(tmp_path: Path, master: str | None) -> Path:
    path = tmp_path / "engine.toml"
    path.write_text("[spark]\n" + (f'master = "{master}"\n' if master else 'app_name = "x"\n'))
    return path


def test_the_precedence(tmp_path: Path) -> None:
    path = toml(tmp_path, "spark://file:7077")
    engine = SparkConf(master="spark://file:7077", conf={"spark.a": 1, "spark.b": 2})
    task = TaskSparkSpec(master="spark://task:7077", conf={"spark.b": 3})
    env = {ENV_MASTER: "spark://env:7077"}
    full = choose(engine, task, cli_master="local[2]", environ=env, conf_file=path)
    assert (full.conf.master, full.master_from) == ("local[2]", "--spark-master")
    assert full.conf.conf == {"spark.a": 1, "spark.b": 3}  # the task's settings over engine.toml's, key by key
    assert choose(engine, task, environ=env, conf_file=path).master_from == "settings.spark.master"
    by_env = choose(engine, None, environ=env, conf_file=path)
    assert (by_env.conf.master, by_env.master_from) == ("spark://env:7077", ENV_MASTER)
    by_file = choose(engine, None, environ={}, conf_file=path)
    assert (by_file.conf.master, by_file.master_from) == ("spark://file:7077", f"[spark] master of {path}")
    default = choose(SparkConf(), None, environ={}, conf_file=toml(tmp_path, None))
    assert (default.conf.master, default.master_from) == ("local[*]", "the default (local[*])")
    assert default.describe()["conf_file"] == str(tmp_path / "engine.toml")


def test_the_task_setting_is_validated() -> None:
    with pytest.raises(InvalidTaskConfig, match=r"settings\.spark\.conf\.executor\.memory"):
        task_spec.TaskSpec.from_mapping({"source": {"plugin": "stream", "params": {"rows": 1}},
                                      "destinations": [{"id": "n", "plugin": "file", "params": {"path": "/tmp/x"}}],
                                      "settings": {"spark": {"conf": {"executor.memory": "1g"}}}})


def test_which_engine_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = tmp_path / "named"
    with pytest.raises(ConfigError, match="does not exist"):  # a named conf that is missing is an error
        EngineConf.load(named)
    monkeypatch.chdir(tmp_path)
    # No ./conf here: the checkout's conf/ next to the package, never silently the defaults.
    assert engine_conf_path(None) == (config.CHECKOUT_CONF / "engine.toml").resolve()
    EngineConf.load(None)
    assert config.loaded_from == (config.CHECKOUT_CONF / "engine.toml").resolve()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "engine.toml").write_text('[spark]\nmaster = "local[3]"\n')
    assert engine_conf_path(None) == (tmp_path / "conf" / "engine.toml").resolve()
    assert EngineConf.load(None).spark.master == "local[3]"
    assert os.fspath(engine_conf_path(str(named))) == str(named / "engine.toml")


def test_plan_shows_the_master_its_origin_the_conf_and_the_spark_methods(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from tests.conftest import make_workspace

    ws = make_workspace(tmp_path)
    ws.write_conf(spark={"master": "spark://from-file:7077"})
    task = tmp_path / "task.json"
    task.write_text(json.dumps({
        "source": {"plugin": "stream", "params": {"rows": 10, "columns": [{"name": "id", "type": "int"}]}},
        "destinations": [{"id": "pq", "plugin": "file", "params": {"path": str(tmp_path / "pq"), "format": "parquet"}},
                         {"id": "csv", "plugin": "file", "params": {"path": str(tmp_path / "csv"), "format": "csv"}},
                         {"id": "lite", "plugin": "sqlite", "params": {"path": str(tmp_path / "t.db"), "table": "t",
                                                                       "create": True}}],
        "settings": {"engine": "spark", "spark": {"master": "spark://from-task:7077"}}}))
    shown = ws.run_here("plan", str(task), check=True).stdout
    assert "spark master:   spark://from-task:7077 (from settings.spark.master)" in shown
    assert f"conf:           {(tmp_path / 'conf' / 'engine.toml').resolve()}" in shown
    assert "pq (file): 1 writer(s), spark native write; format=parquet" in shown
    assert "csv (file): 1 writer(s), spark partitions, a row writer each; format=csv" in shown
    assert "lite (sqlite): 1 writer(s), one row writer on the Spark driver" in shown
    made = json.loads(ws.run_here("plan", "--json", "--spark-master", "local[3]", str(task), check=True).stdout)
    assert made["spark"] == {"master": "local[3]", "master_from": "--spark-master",
                             "conf_file": str((tmp_path / "conf" / "engine.toml").resolve())}
    # The next invocation starts from its own command line: the task's master again.
    again = json.loads(ws.run_here("plan", "--json", str(task), check=True).stdout)
    assert again["spark"]["master_from"] == "settings.spark.master"


def test_the_terminal_says_which_master_the_session_starts_on() -> None:
    from wormhole.progress import TerminalLog

    shown = TerminalLog()({"event": "spark.session_starting", "level": "info", "master": "spark://m1:7077",
                           "jvm_log": "/srv/var/spark/jvm.log"}, lambda e: str(e))
    assert shown == "starting Spark session on spark://m1:7077 (JVM output: /srv/var/spark/jvm.log)"


def test_the_driver_jvm_compiles_later_unless_the_user_sets_its_options(tmp_path: Path) -> None:
    from wormhole.spark.session import JIT_OPTIONS, builder_settings

    dirs = {"warehouse_dir": str(tmp_path / "w"), "metastore_dir": str(tmp_path / "m")}
    ours = builder_settings(SparkConf(master="local[2]", **dirs))["spark.driver.extraJavaOptions"]
    assert JIT_OPTIONS in ours.split(" ") and "-Duser.timezone=UTC" in ours
    theirs = SparkConf(master="local[2]", conf={"spark.driver.extraJavaOptions": "-Xss4m"}, **dirs)
    assert builder_settings(theirs)["spark.driver.extraJavaOptions"] == "-Xss4m"
